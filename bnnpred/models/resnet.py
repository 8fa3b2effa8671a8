"""PreActResNet-18 (He et al. 2016, identity mappings) in its CIFAR layout, with a configurable activation: the
Variational Laplace paper's softplus network (notes-001 §3.1 and the defaults of §6 items 2 and 7).

A 3x3 stem convolution with ``width`` channels; four stages of two pre-activation basic blocks (BN - act - conv3x3 -
BN - act - conv3x3, plus the shortcut) with widths ``width x (1, 2, 4, 8)`` and strides 1, 2, 2, 2, a 1x1 projection
shortcut where the shape changes; global average pooling and a linear classifier (the common CIFAR implementation,
without a final BN - act). P = 11,171,146 for 3 x 32 x 32 inputs and 10 classes (11,169,994 with one input channel).
Batch norm's affine parameters are part of θ like every other parameter (the notes suggest keeping them as point
estimates; here they are variational under VL / VI).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from bnnpred.errors import BnnpredError
from bnnpred.models.mlp import activation


@dataclass
class PreActResNetConfig:
    name: str = "preact_resnet18"
    width: int = 64
    activation: str = "softplus"


class PreActBlock(nn.Module):
    def __init__(self, in_channels: int, channels: int, stride: int, act: type[nn.Module]):
        super().__init__()
        self.bn1, self.act1 = nn.BatchNorm2d(in_channels), act()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride=stride, padding=1, bias=False)
        self.bn2, self.act2 = nn.BatchNorm2d(channels), act()
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.shortcut = (nn.Conv2d(in_channels, channels, 1, stride=stride, bias=False)
                         if stride != 1 or in_channels != channels else None)

    def forward(self, x: Tensor) -> Tensor:
        out = self.act1(self.bn1(x))
        skip = x if self.shortcut is None else self.shortcut(out)
        out = self.conv1(out)
        return self.conv2(self.act2(self.bn2(out))) + skip


def build_preact_resnet18(cfg: PreActResNetConfig, input_shape: tuple[int, ...], out_features: int) -> nn.Sequential:
    """``[B, C, H, W] -> [B, out_features]``."""
    if len(input_shape) != 3:
        raise BnnpredError(f"model=preact_resnet18 needs image inputs [C, H, W], got shape {input_shape}")
    act = activation(cfg.activation)
    layers: list[nn.Module] = [nn.Conv2d(input_shape[0], cfg.width, 3, padding=1, bias=False)]
    channels = cfg.width
    for stage, stride in enumerate((1, 2, 2, 2)):
        width = cfg.width * 2**stage
        layers += [PreActBlock(channels, width, stride, act), PreActBlock(width, width, 1, act)]
        channels = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, out_features)]
    return nn.Sequential(*layers)
