"""Gaussian posteriors over the ``P`` network parameters, separate from the network."""

from __future__ import annotations

import copy
import math
from abc import ABC, abstractmethod
from typing import Any

import torch
from torch import Tensor

LOG_2PI = math.log(2 * math.pi)


class Posterior(ABC):
    """``q(θ) = N(mean, precision⁻¹)``; subclasses choose how the precision is stored."""

    mean: Tensor  # [P]
    jitter: float = 0.0  # relative jitter added to the precision before it could be factorised (0: none)

    @abstractmethod
    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        """``n`` draws ``[n, P]``."""

    @abstractmethod
    def logdet_precision(self) -> Tensor:
        """``log det Π`` ``[]``."""

    @abstractmethod
    def quad(self, d: Tensor) -> Tensor:
        """``dᵀ Π d`` ``[]`` for ``d`` ``[P]``."""

    @abstractmethod
    def functional_cov(self, J: Tensor) -> Tensor:
        """``J Σ Jᵀ`` ``[B, C, C]`` for Jacobians ``J`` ``[B, C, P]``."""

    @abstractmethod
    def dense_precision(self) -> Tensor:
        """``Π`` as a dense ``[P, P]`` matrix (for tests and small problems)."""

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """Tensors and settings that rebuild the posterior with ``from_state``."""

    @classmethod
    @abstractmethod
    def from_state(cls, state: dict[str, Any]) -> Posterior: ...

    @abstractmethod
    def cov_mv(self, v: Tensor) -> Tensor:
        """``Σ v = Π⁻¹ v`` ``[P]`` for ``v`` ``[P]``."""

    def shifted(self, mean: Tensor) -> Posterior:
        """The same covariance around another mean (no refactorisation)."""
        moved = copy.copy(self)
        moved.mean = mean
        return moved

    def kl_to_prior(self, prior_precision: Tensor) -> Tensor:
        """``KL(q ‖ N(0, diag(δ)⁻¹))`` ``[]`` = ½[tr(ΔΣ) + µᵀΔµ - P + log det Π - log det Δ]."""
        P = self.mean.numel()
        trace = (prior_precision * self.marginal_variance()).sum()
        quad = (prior_precision * self.mean.square()).sum()
        return 0.5 * (trace + quad - P + self.logdet_precision() - prior_precision.log().sum())

    def marginal_variance(self) -> Tensor:
        """``diag Σ`` ``[P]``."""
        P = self.mean.numel()
        eye = torch.eye(P, dtype=self.mean.dtype, device=self.mean.device).unsqueeze(1)
        return self.functional_cov(eye)[:, 0, 0]

    def log_prob(self, theta: Tensor) -> Tensor:
        """``log N(θ | mean, Π⁻¹)`` ``[]``."""
        P = self.mean.numel()
        return 0.5 * (self.logdet_precision() - P * LOG_2PI - self.quad(theta - self.mean))

    def _normal(self, n: int, generator: torch.Generator | None) -> Tensor:
        """Standard normal draws ``[n, P]`` on the posterior's device and dtype."""
        return torch.randn(
            n, self.mean.numel(), generator=generator, dtype=self.mean.dtype, device=self.mean.device
        )
