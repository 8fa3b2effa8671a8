"""What several notes files' checks compute alike, written once: the Table 2.1 likelihoods with their
``torch.distributions`` laws, a seeded MLP, autograd Jacobians, the closed-form ``Λ`` and the dense GGN built from
them (the independent references), the library's Laplace-GGN at a given ``θ``, and the identities that more than
one checklist asks for (GGN = Hessian on a linear model, GLM = GP covariance, the linearised model's evidence).

Every function is float64 and deterministic; those that build a network leave the global RNG state as it was.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import torch
from torch import Tensor, distributions

from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.ggn import Curvature, Structure, curvature
from bnnpred.errors import BnnpredError
from bnnpred.inference import Fit, Problem
from bnnpred.inference.laplace_ggn import laplace_at
from bnnpred.likelihoods import Bernoulli, Categorical, Gaussian, Likelihood, Poisson
from bnnpred.models.mlp import MLPConfig, build_mlp
from bnnpred.predictive import Context, glm_latent, gp_condition, gp_latent

DTYPE = torch.float64


# ---------------------------------------------------------------------------------------------------------------
# Likelihoods and their reference laws (notes-000 Table 2.1)


@dataclass(frozen=True)
class Case:
    """A Table 2.1 likelihood: the library's class, the same law from ``torch.distributions`` for outputs ``f``
    ``[B, C]`` (the independent reference), and its number of outputs ``C``."""

    likelihood: Likelihood
    law: Callable[[Tensor], distributions.Distribution]
    outputs: int


def gaussian_case(sigma2: float) -> Case:
    """The Gaussian likelihood with noise variance ``sigma2`` and its ``torch.distributions.Normal`` law."""
    return Case(Gaussian(sigma2), lambda f: distributions.Normal(f[..., 0], math.sqrt(sigma2)), 1)


def table_2_1() -> dict[str, Case]:
    """The likelihoods of notes-000 Table 2.1 by name."""
    return {
        "Gaussian σ²=0.1": gaussian_case(0.1),
        "Gaussian σ²=1": gaussian_case(1.0),
        "Bernoulli": Case(Bernoulli(), lambda f: distributions.Bernoulli(logits=f[..., 0]), 1),
        "categorical K=3": Case(Categorical(), lambda f: distributions.Categorical(logits=f), 3),
        "Poisson": Case(Poisson(), lambda f: distributions.Poisson(f[..., 0].exp()), 1),
    }


def reference_loglik(case: Case, f: Tensor, y: Tensor) -> Tensor:
    """``log p(y_i | f_i)`` ``[B]`` from ``torch.distributions`` for outputs ``[B, C]`` and targets ``[B]``."""
    law = case.law(f)
    return law.log_prob(y.long() if isinstance(law, distributions.Categorical) else y.to(f.dtype))


def closed_form_lambda(likelihood: Gaussian | Bernoulli | Categorical, f: Tensor) -> Tensor:
    """``Λ_n = −∂² log p(y_n | f_n) / ∂f_n²`` ``[N, C, C]`` for outputs ``[N, C]`` in closed form (notes-000 Table
    2.1, notes-004 §2.3): ``1/σ²`` (Gaussian), ``p(1 − p)`` (Bernoulli), ``diag(p) − ppᵀ`` (softmax)."""
    if isinstance(likelihood, Gaussian):
        return torch.full_like(f, 1 / likelihood.sigma2).unsqueeze(2)
    if isinstance(likelihood, Bernoulli):
        p = torch.sigmoid(f)
        return (p * (1 - p)).unsqueeze(2)
    p = torch.softmax(f, dim=1)
    return torch.diag_embed(p) - p.unsqueeze(2) * p.unsqueeze(1)


# ---------------------------------------------------------------------------------------------------------------
# Networks, Jacobians and the dense GGN


def seeded_mlp(inputs: int, outputs: int, depth: int, width: int, seed: int, activation: str = "tanh") -> FlatModel:
    """A float64 MLP ``inputs → [width] x depth → outputs`` with PyTorch's default initialisation of a linear layer,
    ``U(−1/√fan_in, 1/√fan_in)`` for weights and biases, drawn in float64 from ``seed`` (the same numbers whatever
    the default dtype; the global RNG, which the module's own initialisation uses, is restored)."""
    with torch.random.fork_rng(devices=[]):
        module = build_mlp(MLPConfig(depth=depth, width=width, activation=activation), (inputs,), outputs).to(DTYPE)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in (m for m in module.modules() if isinstance(m, torch.nn.Linear)):
            for param in layer.parameters():
                bound = layer.in_features**-0.5
                param.copy_(torch.rand(param.shape, generator=gen, dtype=DTYPE) * 2 * bound - bound)
    return FlatModel(module)


def reference_jacobians(model: FlatModel, theta: Tensor, X: Tensor) -> tuple[Tensor, Tensor]:
    """Outputs ``[N, C]`` and Jacobians ``J = ∂f/∂θ`` ``[N, C, P]`` by one ``jacrev`` of the whole batch (no library
    Jacobian code)."""
    with torch.no_grad():
        f = model(theta, X)
    return f, torch.func.jacrev(lambda t: model(t, X))(theta)


def output_jacobian(model: FlatModel, theta: Tensor, X: Tensor) -> tuple[Tensor, Tensor]:
    """A single-output network's ``f(X; θ)`` ``[N]`` and ``J`` ``[N, P]`` (:func:`reference_jacobians`)."""
    f, J = reference_jacobians(model, theta, X)
    return f[:, 0], J[:, 0]


def dense_ggn(J: Tensor, lam: Tensor) -> Tensor:
    """``Σ_n J_nᵀ Λ_n J_n`` ``[P, P]`` from Jacobians ``[N, C, P]`` and ``Λ`` ``[N, C, C]`` (notes-000 eq. 2.25,
    notes-003 eq. 2.4.4), as one product of the stacked ``J`` ``[NC, P]`` with the stacked ``Λ_n J_n``."""
    P = J.shape[-1]
    return J.reshape(-1, P).T @ (lam @ J).reshape(-1, P)


# ---------------------------------------------------------------------------------------------------------------
# The library's Laplace-GGN and the identities several checklists ask for


def laplace_ggn(problem: Problem, theta: Tensor) -> Fit:
    """The library's full Laplace-GGN posterior at ``θ`` ``[P]`` as given (no MAP search; notes-003 eq. 2.4.5,
    notes-004 eq. 12)."""
    return laplace_at(problem, Fit(theta=theta, posterior=None), Structure.full, Curvature.ggn)


def ggn_and_hessian(model: FlatModel, case: Case, theta: Tensor, X: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    """The library's ``−Σ_n J_nᵀ Λ_n J_n`` (:func:`~bnnpred.curvature.ggn.curvature`) and the autograd Hessian of
    ``Σ_n log p(y_n | f(x_n; θ))`` (:func:`reference_loglik`) at ``θ`` ``[P]`` for inputs ``[N, D]`` and targets
    ``[N]``, both ``[P, P]``: equal when ``f`` is linear in ``θ`` (notes-000 eqs. 2.24-2.25, notes-004 item 1)."""
    ggn, _ = curvature(model, case.likelihood, theta, X, y)
    exact = torch.func.hessian(lambda t: reference_loglik(case, model(t, X), y).sum())(theta)
    return -ggn, exact


def gp_covariance(ctx: Context, X: Tensor) -> Tensor:
    """The GP form ``K** − K*X (K_XX + Λ⁻¹)⁻¹ K_X*`` ``[T, C, C]`` at inputs ``[T, D]`` from
    :func:`~bnnpred.predictive.gp_latent` conditioned on all N training points (notes-000 eq. 3.13, notes-003
    Thm 3.2.1, notes-004 eq. 15 with M = N)."""
    return gp_latent(ctx, X, gp_condition(ctx, torch.arange(len(ctx.X_train))))[1]


def glm_and_gp_covariances(ctx: Context, X: Tensor) -> tuple[Tensor, Tensor]:
    """GLM = GP (notes-000 Thm 3.2, notes-003 Thm 3.1.1 / 3.2.1): the weight-space ``J*ΣJ*ᵀ`` of
    :func:`~bnnpred.predictive.glm_latent` and :func:`gp_covariance` at inputs ``[T, D]``, both ``[T, C, C]``."""
    return glm_latent(ctx, X)[1], gp_covariance(ctx, X)


def gaussian_evidence(f: Tensor, J: Tensor, theta: Tensor, y: Tensor, sigma2: float, delta: float) -> float:
    """The exact log evidence of the Gaussian model linearised at ``θ*`` with prior ``N(0, δ⁻¹I)``,
    ``log N(ỹ | 0, δ⁻¹JJᵀ + σ²I)`` with ``ỹ = Jθ* + (y − f)`` (notes-000 §5.2, notes-003 Thm 3.5.1), for outputs
    ``f`` ``[N]``, Jacobians ``[N, P]``, ``θ*`` ``[P]`` and targets ``[N]``; dense."""
    targets = J @ theta + (y - f)
    kernel = J @ J.T / delta + sigma2 * torch.eye(len(J), dtype=J.dtype)
    return float(distributions.MultivariateNormal(torch.zeros_like(targets), kernel).log_prob(targets))


ConfigT = TypeVar("ConfigT")


def experiment_dataset_config(experiment: str, schema: type[ConfigT]) -> ConfigT:
    """The ``dataset`` node of ``experiment=<experiment>`` at the default seed 0 as its config dataclass, which
    must be a ``schema``."""
    from bnnpred.app.compose import compose
    from bnnpred.app.run_setup import typed

    dataset = typed(compose([f"experiment={experiment}"])).dataset
    if not isinstance(dataset, schema):
        raise BnnpredError(f"experiment={experiment} loads a {type(dataset).__name__}, not a {schema.__name__}")
    return dataset
