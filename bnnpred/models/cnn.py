"""The thesis's MNIST 4-vs-9 CNN (notes-000 §6.4): two conv layers with ReLU and max-pooling, then three linear
layers; P = 4587 with one output. The thesis gives only P; this layout (notes-000 §8 item 16) matches it:
conv(1->3, 5x5) - ReLU - pool 2 - conv(3->8, 5x5) - ReLU - pool 2 - 128 - 25 - ReLU - 25 - ReLU - out.
``activation=softplus`` gives the small softplus CNN of the Variational Laplace experiments (notes-001 §4.3);
``pooling=avg`` with a smooth activation makes the network, and so the log joint, smooth in θ.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from torch import nn

from bnnpred.errors import BnnpredError
from bnnpred.models.mlp import activation


class Pooling(str, Enum):
    max = "max"
    avg = "avg"


POOLS = {Pooling.max: nn.MaxPool2d, Pooling.avg: nn.AvgPool2d}


@dataclass
class ThesisCNNConfig:
    name: str = "thesis_cnn"
    channels: tuple[int, int] = (3, 8)
    width: int = 25
    activation: str = "relu"  # tanh, relu, softplus, sigmoid, gelu
    pooling: Pooling = Pooling.max  # avg with a smooth activation: a log joint smooth in θ (a Gauss-Newton finish)


def build_thesis_cnn(cfg: ThesisCNNConfig, input_shape: tuple[int, ...], out_features: int) -> nn.Sequential:
    """``[B, C, H, H] -> [B, out_features]`` (28 x 28 inputs give the 8 x 4 x 4 = 128 features of the thesis)."""
    if len(input_shape) != 3:
        raise BnnpredError(f"model=thesis_cnn needs image inputs [C, H, W], got shape {input_shape}; use model=mlp")
    c1, c2 = cfg.channels
    act, pool = activation(cfg.activation), POOLS[cfg.pooling]
    side = ((input_shape[-1] - 4) // 2 - 4) // 2  # two valid 5x5 convolutions, each followed by 2x2 pooling
    return nn.Sequential(
        nn.Conv2d(input_shape[0], c1, 5), act(), pool(2),
        nn.Conv2d(c1, c2, 5), act(), pool(2),
        nn.Flatten(),
        nn.Linear(c2 * side * side, cfg.width), act(),
        nn.Linear(cfg.width, cfg.width), act(),
        nn.Linear(cfg.width, out_features),
    )
