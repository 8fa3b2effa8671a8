"""Diagonal Gaussian stored by its precision vector ``π`` ``[P]``."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from bnnpred.errors import BnnpredError
from bnnpred.posteriors.base import Posterior


class DiagPosterior(Posterior):
    def __init__(self, mean: Tensor, precision: Tensor):
        if not bool((precision > 0).all()):
            raise BnnpredError("diagonal posterior precision has non-positive entries; raise prior.delta")
        self.mean = mean
        self.precision = precision

    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        return self.mean + self._normal(n, generator) * self.precision.rsqrt()

    def logdet_precision(self) -> Tensor:
        return self.precision.log().sum()

    def quad(self, d: Tensor) -> Tensor:
        return (self.precision * d.square()).sum()

    def cov_mv(self, v: Tensor) -> Tensor:
        return v / self.precision

    def functional_cov(self, J: Tensor) -> Tensor:
        return (J / self.precision) @ J.mT

    def marginal_variance(self) -> Tensor:
        return 1 / self.precision

    def dense_precision(self) -> Tensor:
        return torch.diag(self.precision)

    def state(self) -> dict[str, Any]:
        return {"structure": "diag", "mean": self.mean, "precision": self.precision}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> DiagPosterior:
        return cls(state["mean"], state["precision"])
