"""The GLM-predictive paper's 1-D model (notes-004 §3.1, Fig. 3): ``f(x; θ) = scale · tanh(w x + b)``, θ = (w, b)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from bnnpred.errors import BnnpredError


@dataclass
class ScaledTanhConfig:
    name: str = "scaled_tanh"
    scale: float = 5.0


class Scale(nn.Module):
    def __init__(self, factor: float):
        super().__init__()
        self.factor = factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.factor * x


def build_scaled_tanh(cfg: ScaledTanhConfig, input_shape: tuple[int, ...], out_features: int) -> nn.Sequential:
    """``[B, 1] -> [B, 1]``; the parameters are ``(w, b)`` in that order."""
    if input_shape != (1,) or out_features != 1:
        raise BnnpredError(f"model=scaled_tanh takes one input and one output, got inputs {input_shape} and "
                           f"{out_features} outputs; use a 1-D binary dataset such as dataset=step")
    return nn.Sequential(nn.Flatten(), nn.Linear(1, 1), nn.Tanh(), Scale(cfg.scale))
