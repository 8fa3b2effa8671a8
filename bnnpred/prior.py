r"""The Gaussian prior ``θ ~ N(0, Δ⁻¹)``, ``Δ = diag(δ_{g(p)} · s_p)``, as one object (notes-000 §3.1, §5.2).

Each parameter ``p`` belongs to a group ``g(p)`` with its own precision ``δ_g``: one group for the whole network
(``shared``), one per layer (``layer``: a module's weight and bias together, as laplace-torch's per-layer prior),
or one per parameter tensor (``tensor``). ``s_p`` is a fixed scale: the fan-in of a weight with ``scale=fan_in``
(``s² = 1/fan_in`` at ``δ = 1``, notes-001 §6 item 1), else 1. With ``bias_delta`` the one-dimensional parameters
form one more group whose precision is fixed: selection moves the *free* groups only.

The prior is built once from the config (:meth:`Prior.from_config`) and moved by selection
(:meth:`Prior.at`, :meth:`Prior.with_free_log_delta`); its precision vector ``[P]`` is derived on demand, so the
Laplace fits keep the data curvature apart from it (:mod:`bnnpred.laplace_evidence`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any

import torch
from torch import Tensor

from bnnpred.curvature.functional import FlatModel
from bnnpred.errors import BnnpredError


class PriorScale(str, Enum):
    isotropic = "isotropic"  # Δ = δ I
    fan_in = "fan_in"  # weights δ·fan_in, biases δ: s² = 1/fan_in at δ = 1 (notes-001 §6 item 1)


class PriorGroups(str, Enum):
    shared = "shared"  # one δ for every parameter
    layer = "layer"  # one δ per layer (a module's weight and bias)
    tensor = "tensor"  # one δ per parameter tensor


@dataclass
class PriorConfig:
    delta: float = 1.0  # prior precision δ: θ ~ N(0, δ⁻¹ I); with groups, every group's starting value
    scale: PriorScale = PriorScale.isotropic
    groups: PriorGroups = PriorGroups.shared  # one δ, one per layer, or one per tensor (selected by the evidence)
    bias_delta: float | None = None  # a separate fixed precision for biases (SLANG: 1e-5 / 1e-6); None: as weights


BIAS_GROUP = "bias (fixed)"
TOP_LAYER = "(network)"  # the layer of parameters that belong to the network module itself (a bare nn.Linear)


@dataclass(frozen=True)
class Prior:
    """``N(0, diag(precision)⁻¹)`` with ``precision[p] = values[group[p]] · scale[p]``.

    Attributes:
        names: the groups' names ``[G]`` (``all``, a layer's or a tensor's name, ``bias (fixed)``).
        values: ``δ_g`` ``[G]`` (float64; kept as given, so a grid's δ = 0.1 is exactly 0.1).
        free: which groups selection moves ``[G]`` (the fixed bias group does not move).
        group: the group of each parameter ``[P]`` (int64).
        scale: the fixed scale ``s_p`` of each parameter ``[P]`` (float64).
    """

    names: tuple[str, ...]
    values: Tensor
    free: tuple[bool, ...]
    group: Tensor
    scale: Tensor

    @classmethod
    def from_config(cls, model: FlatModel, cfg: PriorConfig) -> Prior:
        """The prior of ``cfg`` over ``model``'s parameters, every free group at ``cfg.delta``."""
        if not cfg.delta > 0 or (cfg.bias_delta is not None and not cfg.bias_delta > 0):
            raise BnnpredError(f"prior precisions must be positive, got prior.delta={cfg.delta} and "
                               f"prior.bias_delta={cfg.bias_delta}")
        names: list[str] = []
        group, scale = [], []
        for name, shape, size in zip(model.names, model.shapes, model.sizes, strict=True):
            one_dim = len(shape) == 1
            key = (BIAS_GROUP if one_dim and cfg.bias_delta is not None
                   else "all" if cfg.groups is PriorGroups.shared
                   else name.rpartition(".")[0] or TOP_LAYER if cfg.groups is PriorGroups.layer else name)
            if key not in names:
                names.append(key)
            group.append(torch.full((size,), names.index(key), dtype=torch.int64))
            fan_in = math.prod(shape[1:]) if cfg.scale is PriorScale.fan_in and not one_dim else 1
            scale.append(torch.full((size,), float(fan_in), dtype=torch.float64))
        values = [cfg.bias_delta if n == BIAS_GROUP else cfg.delta for n in names]
        return cls(names=tuple(names), values=torch.tensor(values, dtype=torch.float64),
                   free=tuple(n != BIAS_GROUP for n in names), group=torch.cat(group), scale=torch.cat(scale))

    @classmethod
    def from_precision(cls, precision: Tensor) -> Prior:
        """A fixed per-parameter prior ``[P]`` (one tensor of precisions, no groups to select)."""
        if precision.dim() != 1 or not bool((precision > 0).all()):
            raise BnnpredError(f"a prior precision tensor must be positive with shape [P], got {list(precision.shape)}")
        P = precision.numel()
        return cls(names=("given",), values=torch.ones(1, dtype=torch.float64), free=(False,),
                   group=torch.zeros(P, dtype=torch.int64), scale=precision.detach().double().cpu())

    @property
    def n_free(self) -> int:
        return sum(self.free)

    def precision(self, like: Tensor | None = None) -> Tensor:
        """``Δ`` ``[P]``, in the dtype and on the device of ``like`` (float64 on the CPU without it)."""
        out = self.values[self.group] * self.scale
        return out if like is None else out.to(device=like.device, dtype=like.dtype)

    def precision_at(self, free_log_delta: Tensor, like: Tensor | None = None) -> Tensor:
        """``Δ`` ``[P]`` with the free groups at ``free_log_delta`` ``[F]``: differentiable in it (the evidence's
        gradient in log δ)."""
        values = self.values.to(free_log_delta).clone()
        values[self.free_indices()] = free_log_delta.exp()
        out = values[self.group.to(free_log_delta.device)] * self.scale.to(free_log_delta)
        return out if like is None else out.to(device=like.device, dtype=like.dtype)

    def free_indices(self) -> list[int]:
        return [i for i, f in enumerate(self.free) if f]

    def free_log_delta(self) -> Tensor:
        """``log δ`` of the free groups ``[F]`` (float64)."""
        return self.values[self.free_indices()].log()

    def at(self, delta: float) -> Prior:
        """Every free group at ``delta`` (a point of a selection grid)."""
        values = self.values.clone()
        values[self.free_indices()] = float(delta)
        return Prior(self.names, values, self.free, self.group, self.scale)

    def with_free_log_delta(self, free_log_delta: Tensor) -> Prior:
        values = self.values.clone()
        values[self.free_indices()] = free_log_delta.detach().double().cpu().exp()
        return Prior(self.names, values, self.free, self.group, self.scale)

    @property
    def delta(self) -> float:
        """The summary δ of tables: the common value of the free groups, or their geometric mean when they differ
        (the per-group values are in :meth:`deltas`)."""
        free = self.values[self.free_indices()]
        if not len(free):
            return float("nan")
        return float(free[0]) if bool((free == free[0]).all()) else math.exp(float(free.log().mean()))

    def deltas(self) -> dict[str, float]:
        """``{group name: δ_g}``."""
        return {name: float(v) for name, v in zip(self.names, self.values, strict=True)}

    def state(self) -> dict[str, Any]:
        return {"names": list(self.names), "values": self.values, "free": list(self.free), "group": self.group,
                "scale": self.scale}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Prior:
        return cls(tuple(state["names"]), state["values"], tuple(state["free"]), state["group"], state["scale"])
