r"""The Laplace-GGN marginal likelihood (notes-000 §5.2): the one formula, in weight and in function space.

At a MAP ``θ*`` with prior ``N(0, Δ⁻¹)``, ``Δ = diag(δ)``, and posterior precision ``Π = Δ + GGN``:

.. math:: \log p(D) ≈ Σ_i \log p(y_i | f(x_i;θ*)) - ½ θ*ᵀ Δ θ* + ½ \log\det Δ - ½ \log\det Π

(the MacKay evidence with the Hessian replaced by the GGN; eq. 2.10 with eqs. 3.17-3.18 at a stationary
point, where the Gaussian terms cancel against the correction).

The same evidence in function space (eqs. 3.17 + 3.19, :func:`function_space_log_marglik`) needs an
``NK x NK`` kernel instead of the ``P x P`` precision: the cheaper form when ``N·K < P``. A fit's evidence as a
function of the prior and the noise, and its maximisation, are in :mod:`bnnpred.laplace_evidence`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from bnnpred.errors import BnnpredError
from bnnpred.likelihoods import Bernoulli, Gaussian, Likelihood


def log_marglik(loglik: Tensor, theta: Tensor, prior_precision: Tensor, logdet_posterior: Tensor) -> Tensor:
    """Laplace-GGN log evidence ``[]`` (notes-000 §5.2, expanded formula).

    Args:
        loglik: ``Σ_i log p(y_i | f(x_i; θ*))``.
        theta: ``θ*`` ``[P]``.
        prior_precision: ``δ`` ``[P]``, or a grid of them ``[G, P]``.
        logdet_posterior: ``log det Π`` (``[G]`` for a grid).
    """
    return (
        loglik
        - 0.5 * (prior_precision * theta.square()).sum(-1)
        + 0.5 * prior_precision.log().sum(-1)
        - 0.5 * logdet_posterior
    )


def _pseudo_observation_model(likelihood: Likelihood, f: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``g⁻¹(f)``, ``D = ∂g⁻¹/∂f`` and the observation variance ``V`` ``[N]`` of a single-output canonical GLM:
    ``D = φ Λ`` and ``V = φ² Λ`` with the dispersion ``φ`` (``σ²`` for the Gaussian, 1 for the Bernoulli)."""
    if isinstance(likelihood, Gaussian):
        return f[:, 0], torch.ones_like(f[:, 0]), torch.full_like(f[:, 0], likelihood.sigma2)
    if isinstance(likelihood, Bernoulli):
        p = torch.sigmoid(f[:, 0])
        return p, p * (1 - p), p * (1 - p)
    raise BnnpredError("the function-space evidence covers single-output likelihoods (gaussian, bernoulli); "
                       "use inference.evidence=weight")


def function_space_log_marglik(likelihood: Likelihood, f: Tensor, J: Tensor, y: Tensor, theta: Tensor,
                               prior_precision: Tensor) -> Tensor:
    r"""Laplace-GGN log evidence in function space ``[]`` (notes-000 eqs. 3.17 + 3.19, typos corrected):

    .. math:: \log N(y \mid m, K̂ + W) + Σ_i [\log p(y_i | f_i) − \log N(y_i | g^{-1}(f_i), V_i)]

    with ``K̂ = D J Δ⁻¹ Jᵀ D``, ``W = diag(V)``, ``m = g⁻¹(f) − D J θ*`` (prior mean 0) for the pseudo-observation
    model ``y_i = g⁻¹(f_i) + D_i J_i (θ − θ*) + ε_i``, ``ε_i ~ N(0, V_i)``, whose weight-space posterior precision
    is ``Δ + Σ_i J_iᵀ Λ_i J_i``. Equals the weight-space BLR evidence (eqs. 3.17 + 3.18) at any ``θ*``, and the
    expanded formula :func:`log_marglik` at a stationary MAP. ``O(N²P + N³)``.

    Args:
        f: training outputs at ``θ*`` ``[N, 1]``; ``J``: their Jacobians ``[N, 1, P]``; ``y``: targets ``[N]``.
        theta: ``θ*`` ``[P]``; ``prior_precision``: ``δ`` ``[P]``.
    """
    mean, D, V = _pseudo_observation_model(likelihood, f)
    features = D.unsqueeze(1) * J[:, 0]  # D J [N, P]
    kernel = (features / prior_precision) @ features.T + torch.diag(V)
    m = mean - features @ theta
    y = y.to(f.dtype)
    L = torch.linalg.cholesky(kernel)
    alpha = torch.linalg.solve_triangular(L, (y - m).unsqueeze(1), upper=False)
    gp = -0.5 * alpha.square().sum() - L.diagonal().log().sum() - 0.5 * len(y) * math.log(2 * math.pi)
    gaussian = -0.5 * (torch.log(2 * math.pi * V) + (y - mean).square() / V)
    return gp + (likelihood.log_prob(f, y) - gaussian).sum()
