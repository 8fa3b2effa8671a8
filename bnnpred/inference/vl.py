r"""Variational Laplace (Unlu & Aitchison; notes-001 §2.5): mean-field Gaussian VI whose expected log-likelihood is
its second-order expansion at the mean, with the Hessian replaced by the Fisher at labels sampled from the model.

Per minibatch of ``B`` examples (notes-001 eq. 29, divided by ``B``):

.. math::
    \frac{1}{B} \mathbb{E}_q \log p(y_b \mid x_b) \approx \frac{1}{B} \sum_b \log p(y_b \mid f(x_b; µ))
        - \frac{1}{2B} \sum_λ σ_λ^2 \tilde g_λ^2,
    \qquad \tilde g = ∇_µ \sum_b \log p(\tilde y_b \mid f(x_b; µ)), \quad \tilde y_b \sim p(y \mid f(x_b; µ)),

``g̃²`` is an unbiased one-draw estimate of the minibatch's diagonal Fisher (the cross terms vanish in
expectation; not the empirical Fisher of the observed labels, notes-001 eq. 26). The regulariser contains a
gradient, so training back-propagates through it (``create_graph``); no weights are sampled. ReLU's second
derivative is zero almost everywhere, so VL needs a smooth activation (softplus, notes-001 §2.5).

``curvature=hessian`` is the ablation VL(H) (notes-001 §2.4, eq. 19): the expansion keeps the observed labels'
Hessian diagonal, ``+ ½ Σ_λ σ_λ² H_λλ``, estimated without bias by one Rademacher probe ``z ⊙ (H z)`` (a
Hessian-vector product by double back-propagation). Where ``H_λλ`` outweighs the KL's ``β / s_λ²`` it rewards
``σ_λ`` without bound: the notes' reason VL uses the Fisher, and the ablation diverges.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import partial

import torch
from torch import Tensor, nn

from bnnpred.errors import BnnpredError
from bnnpred.inference.base import Fit, Problem
from bnnpred.inference.mean_field import MeanFieldConfig, VarianceParam, train_mean_field


class VLCurvature(str, Enum):
    fisher = "fisher"  # the sampled-label Fisher: Variational Laplace (eq. 29)
    hessian = "hessian"  # the observed labels' Hessian diagonal: the ablation VL(H) (eq. 19), which diverges


@dataclass
class VLConfig(MeanFieldConfig):
    """notes-001's setting: log σ from log s − 3, β = 0.1, the log σ learning-rate multiplier 10."""

    name: str = "vl"
    variance: VarianceParam = VarianceParam.log
    kl_weight: float = 0.1
    rho_lr_factor: float = 10.0
    curvature: VLCurvature = VLCurvature.fisher

    def check_network(self, network: nn.Module) -> None:
        """The expansion's curvature term needs a second derivative, which ReLU lacks (zero almost everywhere); an
        ``nn.ReLU`` module is refused (a ``relu`` called in ``forward`` cannot be seen)."""
        if any(isinstance(module, nn.ReLU) for module in network.modules()):
            raise BnnpredError("inference=vl needs an activation with a second derivative (ReLU's is zero) and the "
                               "network uses ReLU; use a softplus network, e.g. model.activation=softplus")


def fisher_regulariser(problem: Problem, f: Tensor, mu: Tensor, sigma: Tensor) -> Tensor:
    """``½ Σ_λ σ_λ² g̃_λ²`` ``[]`` for outputs ``f = f(X; µ)`` ``[B, C]`` (differentiable in ``µ`` and ``σ``)."""
    y_tilde = problem.likelihood.sample(f.detach(), problem.generator)
    (g_tilde,) = torch.autograd.grad(problem.likelihood.log_prob(f, y_tilde).sum(), mu, create_graph=True)
    return 0.5 * (sigma.square() * g_tilde.square()).sum()


def hessian_regulariser(problem: Problem, f: Tensor, y: Tensor, mu: Tensor, sigma: Tensor) -> Tensor:
    """``−½ Σ_λ σ_λ² ĥ_λ`` ``[]`` with ``ĥ = z ⊙ (∇²_µ log p(y | f(X; µ)) z)``, ``z`` Rademacher: an unbiased estimate
    of minus VL(H)'s Hessian term (notes-001 eq. 19), differentiable in ``µ`` and ``σ``."""
    (g,) = torch.autograd.grad(problem.likelihood.log_prob(f, y).sum(), mu, create_graph=True)
    z = torch.randint(0, 2, mu.shape, generator=problem.generator, device=mu.device).to(mu.dtype) * 2 - 1
    (hz,) = torch.autograd.grad(g @ z, mu, create_graph=True)
    return -0.5 * (sigma.square() * z * hz).sum()


def laplace_loglik(problem: Problem, mu: Tensor, sigma: Tensor, rows: Tensor | slice,
                   curvature: VLCurvature = VLCurvature.fisher) -> Tensor:
    """VL's estimate of ``(1/B) Σ_b E_q log p(y_b | x_b)`` ``[]`` (notes-001 eq. 27 per example; eq. 19 for
    ``curvature=hessian``)."""
    X, y = problem.training_batch(rows)
    f = problem.model(mu, X)
    regulariser = (fisher_regulariser(problem, f, mu, sigma) if curvature is VLCurvature.fisher
                   else hessian_regulariser(problem, f, y, mu, sigma))
    return (problem.likelihood.log_prob(f, y).sum() - regulariser) / len(X)


def fit_vl(problem: Problem, cfg: VLConfig) -> Fit:
    return train_mean_field(problem, cfg, partial(laplace_loglik, curvature=cfg.curvature))
