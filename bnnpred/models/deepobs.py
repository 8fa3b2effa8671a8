"""The image networks of the GLM-predictive paper (notes-004 §3.4, the reference implementation's DeepOBS models).

- ``3c3d``: conv 64@5x5 (valid) - ReLU - maxpool 3x3/2 - conv 96@3x3 (valid) - ReLU - maxpool - conv 128@3x3
  (same) - ReLU - maxpool - 512 tanh - 256 tanh - C, Xavier initialisation with zero biases; P = 895,210 on
  CIFAR-10, 892,010 on one channel. The "same" 3x3/2 pooling is padding 1 (TensorFlow pads 0/1 on even sides;
  the shapes and P agree).
- ``allcnnc``: All-CNN-C: 2 x conv96 and conv96/2, 2 x conv192 and conv192/2 (3x3, same), conv192 3x3 (valid),
  conv192 1x1, conv C 1x1, ReLU after every convolution but the last, global average pooling (6x6 on 32x32
  inputs), no dropout; P = 1,369,738 for C = 10.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from bnnpred.errors import BnnpredError


@dataclass
class C3D3Config:
    name: str = "3c3d"


@dataclass
class AllCNNCConfig:
    name: str = "allcnnc"


def _require_image(name: str, input_shape: tuple[int, ...]) -> None:
    if len(input_shape) != 3:
        raise BnnpredError(f"model={name} needs image inputs [C, H, W], got shape {input_shape}; use model=mlp")


def _pooled(side: int) -> int:
    """Side length after a 3x3 / stride-2 max-pool with padding 1."""
    return (side - 1) // 2 + 1


def build_3c3d(cfg: C3D3Config, input_shape: tuple[int, ...], out_features: int) -> nn.Sequential:
    """``[B, C, H, H] -> [B, out_features]``."""
    _require_image("3c3d", input_shape)
    side = _pooled(_pooled(_pooled(input_shape[-1] - 4) - 2))  # conv5 valid, pool, conv3 valid, pool, conv3 same, pool
    net = nn.Sequential(
        nn.Conv2d(input_shape[0], 64, 5), nn.ReLU(), nn.MaxPool2d(3, 2, padding=1),
        nn.Conv2d(64, 96, 3), nn.ReLU(), nn.MaxPool2d(3, 2, padding=1),
        nn.Conv2d(96, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2, padding=1),
        nn.Flatten(), nn.Linear(128 * side * side, 512), nn.Tanh(), nn.Linear(512, 256), nn.Tanh(),
        nn.Linear(256, out_features),
    )
    for module in net:
        if isinstance(module, (nn.Conv2d, nn.Linear)):
            nn.init.xavier_uniform_(module.weight)
            nn.init.zeros_(module.bias)
    return net


def build_allcnnc(cfg: AllCNNCConfig, input_shape: tuple[int, ...], out_features: int) -> nn.Sequential:
    """``[B, C, H, H] -> [B, out_features]``."""
    _require_image("allcnnc", input_shape)
    layers: list[nn.Module] = []
    channels = input_shape[0]
    for width, kernel, stride, padding in [(96, 3, 1, 1), (96, 3, 1, 1), (96, 3, 2, 1), (192, 3, 1, 1),
                                           (192, 3, 1, 1), (192, 3, 2, 1), (192, 3, 1, 0), (192, 1, 1, 0)]:
        layers += [nn.Conv2d(channels, width, kernel, stride=stride, padding=padding), nn.ReLU()]
        channels = width
    layers += [nn.Conv2d(channels, out_features, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    return nn.Sequential(*layers)
