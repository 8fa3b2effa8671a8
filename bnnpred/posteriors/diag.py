"""Diagonal Gaussian stored by its precision vector ``π`` ``[P]``."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from bnnpred.curvature.kron import LayerJacobian
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

    def functional_cov_from_layers(self, factors: list[LayerJacobian]) -> Tensor:
        """``J Σ Jᵀ`` ``[B, C, C]`` from each layer's Jacobian factors (:func:`~bnnpred.curvature.kron.
        layer_output_gradients`), without forming ``J``: for a weight ``∂f_c/∂W_oi = Σ_t g_{c,o,t} a_{i,t}``, so
        ``Σ_{o,i} σ²_oi ∂f_c/∂W_oi ∂f_d/∂W_oi``; a linear layer (``T = 1``) needs only ``Σ_o g_co g_do (σ² a²)_o``,
        a bias ``Σ_o σ²_o G_co G_do`` with ``G = Σ_t g``."""
        variance = 1 / self.precision
        total = None
        for layer in factors:
            out, size = layer.g.shape[2], layer.g.shape[2] * layer.a.shape[1]
            var = variance[layer.start : layer.start + size].reshape(out, -1)  # [out, in]
            if layer.a.shape[-1] == 1:
                g = layer.g[..., 0]  # [B, C, out]
                part = (g * (layer.a[..., 0].square() @ var.T)[:, None, :]) @ g.mT
            else:
                M = torch.einsum("bcot,bit->bcoi", layer.g, layer.a)
                part = torch.einsum("bcoi,bdoi->bcd", M * var, M)
            if layer.has_bias:
                G = layer.g.sum(-1)  # [B, C, out]
                part = part + (G * variance[layer.start + size : layer.start + size + out]) @ G.mT
            total = part if total is None else total + part
        return total

    def marginal_variance(self) -> Tensor:
        return 1 / self.precision

    def dense_precision(self) -> Tensor:
        return torch.diag(self.precision)

    def state(self) -> dict[str, Any]:
        return {"structure": "diag", "mean": self.mean, "precision": self.precision}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> DiagPosterior:
        return cls(state["mean"], state["precision"])
