r"""Exact Gaussian VI for models linear in θ (logistic / linear regression): the "MF Exact" and "FG Exact" references
of the SLANG paper (notes-002 §2.11), optimised by L-BFGS in float64.

For ``f(x; θ) = φ(x)ᵀθ`` (per output) and ``q = N(µ, Σ)`` every output is Gaussian, ``f_i ~ N(φ_iᵀµ, φ_iᵀΣφ_i)``,
so the expected log-likelihood is a one-dimensional integral per example, computed by Gauss-Hermite quadrature
(exact for the Gaussian likelihood; 64 nodes for the logistic). The ELBO

.. math::
    \mathcal{L}(µ, Σ) = \sum_i \mathbb{E}_{f_i} \log p(y_i \mid f_i) - \mathrm{KL}(q \,\|\, \mathcal{N}(0, Δ^{-1}))

is maximised over ``µ`` and the Cholesky factor of ``Σ`` (positive diagonal through ``exp``; ``structure=full``) or
``log σ`` (``structure=diag``). The features are the network's Jacobian, checked to be constant in θ.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bnnpred.curvature.ggn import Structure
from bnnpred.curvature.jacobians import stacked_jacobians
from bnnpred.errors import BnnpredError
from bnnpred.inference.base import Fit, Problem
from bnnpred.inference.contract import Budget, Method
from bnnpred.inference.mean_field import kl_to_prior
from bnnpred.likelihoods import Likelihood, gauss_hermite
from bnnpred.posteriors import DiagPosterior, FullPosterior


@dataclass
class ExactVIConfig(Method):
    BUDGET = Budget(steps=("max_iterations",))

    name: str = "exact_vi"
    structure: Structure = Structure.full
    quadrature_nodes: int = 64
    max_iterations: int = 2000  # L-BFGS iterations
    tolerance: float = 1e-9  # on the gradient's largest entry

    def validate(self) -> None:
        if self.structure is Structure.kron:
            raise BnnpredError("inference=exact_vi supports structure full or diag, got kron")
        for key, lowest in (("quadrature_nodes", 2), ("max_iterations", 1)):
            if getattr(self, key) < lowest:
                raise BnnpredError(f"inference.{key} must be >= {lowest}, got {getattr(self, key)}")
        if not self.tolerance > 0:
            raise BnnpredError(f"inference.tolerance must be positive, got {self.tolerance}")


def linear_features(problem: Problem) -> tuple[Tensor, Tensor]:
    """``f(X; θ0)`` ``[N, C]`` and the constant Jacobian ``Φ`` ``[N, C, P]``; a model not linear in θ is an error."""
    f0, Phi = stacked_jacobians(problem.model, problem.theta0, problem.X)
    probe = problem.theta0 + torch.randn(problem.theta0.shape, generator=torch.Generator().manual_seed(0),
                                         dtype=problem.theta0.dtype).to(problem.theta0.device)
    with torch.no_grad():
        moved = problem.model(probe, problem.X)
    tolerance = 1e3 * torch.finfo(f0.dtype).eps
    if not torch.allclose(moved, f0 + Phi @ (probe - problem.theta0), rtol=tolerance, atol=tolerance):
        raise BnnpredError("inference=exact_vi needs a model linear in θ (logistic regression: model=mlp "
                           "model.depth=0)")
    return f0 - Phi @ problem.theta0, Phi


def expected_loglik(likelihood: Likelihood, y: Tensor, mean: Tensor, variance: Tensor, nodes: int) -> Tensor:
    """``Σ_i E_{f ~ N(m_i, v_i)} log p(y_i | f)`` by Gauss-Hermite quadrature, for one-output models ``[]``."""
    f, w = gauss_hermite(mean, variance, nodes)  # [K, N], [K]
    logp = likelihood.log_prob(f.reshape(-1, 1), y.repeat(len(w))).reshape(len(w), -1)
    return (w[:, None] * logp).sum()


def fit_exact_vi(problem: Problem, cfg: ExactVIConfig) -> Fit:
    """L-BFGS on the negative ELBO from ``µ = θ0``, ``Σ = Δ⁻¹``."""
    cfg.validate()
    offset, Phi = linear_features(problem)
    if Phi.shape[1] != 1:
        raise BnnpredError("inference=exact_vi handles one-output likelihoods (Bernoulli, Gaussian, Poisson)")
    phi = Phi[:, 0, :]  # [N, P]
    delta = problem.prior_precision
    P = delta.numel()
    mu = problem.theta0.detach().clone().requires_grad_(True)
    full = cfg.structure is Structure.full
    scale = (torch.diag(-0.5 * delta.log()) if full else -0.5 * delta.log()).detach().requires_grad_(True)

    def factor() -> Tensor:  # lower Cholesky factor of Σ (full) or σ (diag)
        return torch.tril(scale, -1) + torch.diag(scale.diagonal().exp()) if full else scale.exp()

    def negative_elbo() -> Tensor:
        L = factor()
        variance = (phi @ L).square().sum(1) if full else (phi.square() * L.square()).sum(1)
        loglik = expected_loglik(problem.likelihood, problem.y, offset[:, 0] + phi @ mu, variance,
                                 cfg.quadrature_nodes)
        if full:  # KL(N(µ, LLᵀ) ‖ N(0, Δ⁻¹))
            trace = (delta[:, None] * L.square()).sum()
            kl = 0.5 * (trace + (delta * mu.square()).sum() - P - delta.log().sum()) - L.diagonal().log().sum()
        else:
            kl = kl_to_prior(mu, L, delta)
        return kl - loglik

    optimizer = torch.optim.LBFGS([mu, scale], lr=1, max_iter=cfg.max_iterations, tolerance_grad=cfg.tolerance,
                                  tolerance_change=0.0, history_size=50, line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        optimizer.zero_grad()
        loss = negative_elbo()
        loss.backward()
        return loss

    optimizer.step(closure)
    loss = negative_elbo()
    grads = torch.autograd.grad(loss, [mu, scale])
    mu_hat, L = mu.detach(), factor().detach()
    posterior = (FullPosterior(mu_hat, torch.cholesky_inverse(L)) if full
                 else DiagPosterior(mu_hat, L.square().reciprocal()))
    info = {"elbo": -float(loss.detach()), "grad_max": max(float(g.abs().max()) for g in grads),
            "grad_norm": float(torch.cat([g.reshape(-1) for g in grads]).norm())}
    return Fit(theta=mu_hat, posterior=posterior, info=info)
