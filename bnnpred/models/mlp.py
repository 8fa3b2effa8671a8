"""Fully connected networks (notes-000 §6.1: 5 hidden layers of 25 tanh units, P = 2676 / 2701)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from torch import nn

from bnnpred.errors import unknown_choice

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "softplus": nn.Softplus, "sigmoid": nn.Sigmoid, "gelu": nn.GELU}


def activation(name: str) -> type[nn.Module]:
    """The activation layer class called ``name`` (``model.activation``)."""
    if name not in ACTIVATIONS:
        raise unknown_choice("model.activation", name, ACTIVATIONS)
    return ACTIVATIONS[name]


@dataclass
class MLPConfig:
    name: str = "mlp"
    depth: int = 2  # number of hidden layers
    width: int = 50
    activation: str = "tanh"
    bias: bool = True
    widths: list[int] | None = None  # hidden widths, e.g. [1024, 512, 256, 128]; replaces depth x width


def build_mlp(cfg: MLPConfig, input_shape: tuple[int, ...], out_features: int) -> nn.Sequential:
    """``flatten -> in -> [width, act] x depth -> out`` with PyTorch's default initialisation."""
    layers: list[nn.Module] = [nn.Flatten()]
    fan_in = math.prod(input_shape)
    for width in cfg.widths if cfg.widths is not None else [cfg.width] * cfg.depth:
        layers += [nn.Linear(fan_in, width, bias=cfg.bias), activation(cfg.activation)()]
        fan_in = width
    layers.append(nn.Linear(fan_in, out_features, bias=cfg.bias))
    return nn.Sequential(*layers)
