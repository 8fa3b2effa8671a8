r"""Laplace-GGN marginal likelihood and hyperparameter selection by gradient ascent (notes-000 §5.2).

At a MAP ``θ*`` with prior ``N(0, Δ⁻¹)``, ``Δ = diag(δ)``, and posterior precision ``Π = Δ + GGN``:

.. math:: \log p(D) ≈ Σ_i \log p(y_i | f(x_i;θ*)) - ½ θ*ᵀ Δ θ* + ½ \log\det Δ - ½ \log\det Π

(the MacKay evidence with the Hessian replaced by the GGN; eq. 2.10 with eqs. 3.17-3.18 at a stationary
point, where the Gaussian terms cancel against the correction).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor


def log_marglik(loglik: Tensor, theta: Tensor, prior_precision: Tensor, logdet_posterior: Tensor) -> Tensor:
    """Laplace-GGN log evidence ``[]`` (notes-000 §5.2, expanded formula).

    Args:
        loglik: ``Σ_i log p(y_i | f(x_i; θ*))``.
        theta: ``θ*`` ``[P]``.
        prior_precision: ``δ`` ``[P]``.
        logdet_posterior: ``log det Π``.
    """
    return (
        loglik
        - 0.5 * (prior_precision * theta.square()).sum()
        + 0.5 * prior_precision.log().sum()
        - 0.5 * logdet_posterior
    )


@dataclass
class EvidenceAtMode:
    r"""The log evidence as a function of ``(log δ, log σ²)`` with ``θ*`` and the curvature held fixed.

    For the Gaussian likelihood the GGN scales as ``σ⁻²``, so with ``λ`` the eigenvalues of the GGN at
    ``σ² = 1`` (``eigvalsh`` of the full matrix, or the diagonal itself for the diagonal posterior),
    ``log det Π = Σ_j log(δ + λ_j / σ²)``; classification likelihoods have no ``σ²``.

    Attributes:
        n: number of training points.
        sq_norm: ``‖θ*‖²``.
        spectrum: ``λ`` ``[P]``.
        sse: ``Σ_i (y_i - f_i)²`` for regression, else ``None``.
        loglik: ``Σ_i log p(y_i|f_i)`` for classification (ignored for regression).
    """

    n: int
    sq_norm: float
    spectrum: Tensor
    sse: float | None = None
    loglik: float = 0.0

    def __call__(self, log_delta: Tensor, log_sigma2: Tensor) -> Tensor:
        delta = log_delta.exp()
        P = self.spectrum.numel()
        if self.sse is None:
            loglik, curv = torch.as_tensor(self.loglik, dtype=delta.dtype), self.spectrum
        else:
            sigma2 = log_sigma2.exp()
            loglik = -0.5 * (self.n * (math.log(2 * math.pi) + log_sigma2) + self.sse / sigma2)
            curv = self.spectrum / sigma2
        return loglik - 0.5 * delta * self.sq_norm + 0.5 * P * log_delta - 0.5 * torch.log(delta + curv).sum()


def maximise_evidence(
    evidence: EvidenceAtMode, delta: float, sigma2: float | None, *, steps: int, lr: float
) -> tuple[float, float | None]:
    """Adam ascent on ``log δ`` (and ``log σ²`` for regression) from the given values; returns the new ones."""
    log_delta = torch.tensor(math.log(delta), dtype=torch.float64, requires_grad=True)
    log_sigma2 = torch.tensor(math.log(sigma2 if sigma2 is not None else 1.0), dtype=torch.float64,
                              requires_grad=sigma2 is not None)
    params = [log_delta] + ([log_sigma2] if sigma2 is not None else [])
    optimizer = torch.optim.Adam(params, lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        (-evidence(log_delta, log_sigma2)).backward()
        optimizer.step()
    return math.exp(log_delta.item()), (math.exp(log_sigma2.item()) if sigma2 is not None else None)


def evidence_at_mode(fit_theta: Tensor, posterior_precision: Tensor, prior_precision: Tensor,
                     f: Tensor, y: Tensor, loglik: float, sigma2: float | None) -> EvidenceAtMode:
    """Freeze ``θ*`` and the curvature of a Laplace fit into an ``EvidenceAtMode``.

    Args:
        fit_theta: ``θ*`` ``[P]``.
        posterior_precision: ``Π`` ``[P, P]`` or ``[P]``; the data curvature is ``Π - Δ``.
        prior_precision: ``δ`` ``[P]`` (a scalar δ: all entries equal).
        f: training outputs at ``θ*`` ``[N, C]``; ``y`` targets ``[N]``.
        loglik: ``Σ log p(y|f)``; ``sigma2``: the Gaussian noise for regression, else ``None``.
    """
    if posterior_precision.dim() == 2:
        spectrum = torch.linalg.eigvalsh(posterior_precision - prior_precision.diag())
    else:
        spectrum = posterior_precision - prior_precision
    spectrum = spectrum.clamp_min(0).double()
    sse = None if sigma2 is None else float((y - f[:, 0]).square().sum())
    return EvidenceAtMode(
        n=len(y), sq_norm=float(fit_theta.square().sum()), spectrum=spectrum * (sigma2 or 1.0),
        sse=sse, loglik=loglik,
    )
