"""Full-covariance Gaussian stored by the Cholesky factor of its precision, ``Π = L Lᵀ``."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from bnnpred.posteriors.base import Posterior
from bnnpred.posteriors.linalg import robust_cholesky

# J Σ Jᵀ is computed for at most this many numbers P·B·C at a time.
MAX_SOLVE_ELEMS = 2**24


class FullPosterior(Posterior):
    def __init__(self, mean: Tensor, precision: Tensor):
        self.mean = mean
        self.precision = precision
        self.chol, self.jitter = robust_cholesky(precision)

    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        """``θ = µ + L⁻ᵀ z`` so that ``Cov θ = (L Lᵀ)⁻¹``."""
        z = self._normal(n, generator)
        return self.mean + torch.linalg.solve_triangular(self.chol.mT, z.T, upper=True).T

    def logdet_precision(self) -> Tensor:
        return 2 * self.chol.diagonal().log().sum()

    def quad(self, d: Tensor) -> Tensor:
        return (self.chol.mT @ d).square().sum()

    def cov_mv(self, v: Tensor) -> Tensor:
        """``Π⁻¹ v = L⁻ᵀ (L⁻¹ v)`` by two triangular solves."""
        w = torch.linalg.solve_triangular(self.chol, v.unsqueeze(1), upper=False)
        return torch.linalg.solve_triangular(self.chol.mT, w, upper=True).squeeze(1)

    def functional_cov(self, J: Tensor) -> Tensor:
        """``J Σ Jᵀ = (L⁻¹Jᵀ)ᵀ(L⁻¹Jᵀ)``, in chunks of inputs so the solve stays bounded."""
        B, C, P = J.shape
        step = max(1, MAX_SOLVE_ELEMS // (C * P))
        return torch.cat([self._functional_cov_chunk(J[i : i + step]) for i in range(0, B, step)])

    def _functional_cov_chunk(self, J: Tensor) -> Tensor:
        B, C, P = J.shape
        X = torch.linalg.solve_triangular(self.chol, J.reshape(-1, P).T, upper=False)  # [P, B·C]
        Xb = X.T.reshape(B, C, P)
        return Xb @ Xb.mT

    def dense_precision(self) -> Tensor:
        return self.precision

    def state(self) -> dict[str, Any]:
        return {"structure": "full", "mean": self.mean, "precision": self.precision}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> FullPosterior:
        return cls(state["mean"], state["precision"])
