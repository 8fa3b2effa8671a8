"""Model registry: a config dataclass and a builder per architecture."""

from __future__ import annotations

from typing import Any

from torch import nn

from bnnpred.errors import BnnpredError, unknown_choice
from bnnpred.models.cnn import ThesisCNNConfig, build_thesis_cnn
from bnnpred.models.deepobs import AllCNNCConfig, C3D3Config, build_3c3d, build_allcnnc
from bnnpred.models.mlp import ACTIVATIONS, MLPConfig, build_mlp
from bnnpred.models.resnet import PreActResNetConfig, build_preact_resnet18
from bnnpred.models.step import ScaledTanhConfig, build_scaled_tanh

MODELS = {"mlp": (MLPConfig, build_mlp), "thesis_cnn": (ThesisCNNConfig, build_thesis_cnn),
          "scaled_tanh": (ScaledTanhConfig, build_scaled_tanh),
          "preact_resnet18": (PreActResNetConfig, build_preact_resnet18), "3c3d": (C3D3Config, build_3c3d),
          "allcnnc": (AllCNNCConfig, build_allcnnc)}


def build_model(cfg: Any, input_shape: tuple[int, ...], out_features: int) -> nn.Module:
    """Build the network named ``cfg.name`` for inputs ``input_shape`` and ``out_features`` outputs."""
    if cfg.name not in MODELS:
        raise unknown_choice("model", cfg.name, MODELS)
    if getattr(cfg, "activation", None) not in (None, *ACTIVATIONS):
        raise unknown_choice("activation", cfg.activation, ACTIVATIONS)
    if getattr(cfg, "depth", 0) < 0 or getattr(cfg, "width", 1) < 1:
        raise BnnpredError(f"model depth must be >= 0 and width >= 1, got {getattr(cfg, 'depth', 0)} and {cfg.width}")
    return MODELS[cfg.name][1](cfg, input_shape, out_features)


def n_params(model: nn.Module) -> int:
    """Number of trainable parameters P."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
