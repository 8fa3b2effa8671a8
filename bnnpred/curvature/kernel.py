r"""The GLM's kernel ``k(x, x') = J(x) S₀ J(x')ᵀ`` (notes-004 eq. 14, an empirical NTK at θ*) between input sets,
without ``[N, C, P]`` Jacobians.

A linear layer's Jacobian is ``∂f_c/∂W = g_c aᵀ``, ``∂f_c/∂b = g_c`` (:func:`~bnnpred.curvature.kron.
layer_output_gradients`), so with prior variances ``s_W`` on its weight and ``s_b`` on its bias the layer adds
``(s_W aᵀa' + s_b) g_cᵀ g'_d`` to the kernel: O(in + C²·out) per pair of inputs instead of O(C²·in·out). A
convolution's Jacobian ``Σ_t g_{c,t} a_tᵀ`` is formed per layer (C times the layer's parameters per input: 3c3d's
convolutions hold 168k of its 892k parameters, so M = 3200 training points keep about 5·10⁹ numbers, a GPU's
memory); a network with other parameters (batch norm, ...) falls back to its whole Jacobian. With ``per_class``
only same-class pairs enter (``k_c(x, x') = J_c(x) S₀ J_c(x')ᵀ``, the block-diagonal multi-class kernel of the
reference implementation, notes-004 §6 item 7): the kernel products cost 1/C, while the conditioning still
factorises the dense ``MC x MC`` matrix.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.jacobians import DEFAULT_CHUNK_ELEMS, iter_jacobians
from bnnpred.curvature.kron import Layer, LayerJacobian, is_uniform, iter_layer_gradients, supported_layers
from bnnpred.errors import BnnpredError


@dataclass
class Factored:
    """A linear layer: inputs ``a`` ``[B, in]``, output gradients ``g`` ``[B, C, out]``, prior variances."""

    a: Tensor
    g: Tensor
    s_w: float
    s_b: float


@dataclass
class Dense:
    """Explicit Jacobian columns ``J`` ``[B, C, Q]`` with their prior variances ``s`` ``[Q]``."""

    J: Tensor
    s: Tensor


Features = list[Factored | Dense]


def _layers_or_none(model: FlatModel) -> list[Layer] | None:
    try:
        return supported_layers(model)
    except BnnpredError:
        return None


def _layer_features(layer: Layer, factor: LayerJacobian, prior_cov: Tensor) -> Factored | Dense:
    s_w = prior_cov[layer.weight.start : layer.weight.stop]
    s_b = prior_cov[layer.bias.start : layer.bias.stop] if layer.bias is not None else prior_cov[:0]
    a, g = factor.a, factor.g  # [B, I, T], [B, C, out, T]
    if a.shape[-1] == 1 and is_uniform(s_w) and is_uniform(s_b):
        return Factored(a[..., 0], g[..., 0], float(s_w[0]), float(s_b[0]) if s_b.numel() else 0.0)
    J_w = torch.einsum("bcot,bit->bcoi", g, a).reshape(*g.shape[:2], -1)  # θ order: W [out, in·k·k] row-major
    J = torch.cat([J_w, g.sum(-1)], dim=-1) if factor.has_bias else J_w
    return Dense(J, torch.cat([s_w, s_b]))


def iter_features(model: FlatModel, theta: Tensor, X: Tensor, prior_cov: Tensor,
                  max_elems: int = DEFAULT_CHUNK_ELEMS) -> Iterator[tuple[slice, Tensor, Features]]:
    """``(rows, f, features)`` over bounded chunks of ``X``: outputs ``f`` ``[b, C]`` and the kernel features under
    the prior variances ``S₀`` ``[P]``."""
    layers = _layers_or_none(model)
    if layers is None:
        for rows, f, J in iter_jacobians(model, theta, X, max_elems):
            yield rows, f, [Dense(J, prior_cov)]
        return
    for rows, f, factors in iter_layer_gradients(model, theta, X, layers, max_elems):
        yield rows, f, [_layer_features(layer, factor, prior_cov)
                        for layer, factor in zip(layers, factors, strict=True)]


def concat(chunks: list[Features]) -> Features:
    """Features of consecutive chunks as one set. Each chunk's part is released as it is copied in (``chunks``'
    entries become None), so that the join holds the features once, beside one chunk's part: joining them all at
    once held them twice (3c3d's M = 1600 training points: 2 x 10.8 GB)."""
    out: Features = []
    for layer, first in enumerate(chunks[0]):
        joined = {name: torch.empty((sum(len(getattr(chunk[layer], name)) for chunk in chunks), *t.shape[1:]),
                                    dtype=t.dtype, device=t.device)
                  for name, t in vars(first).items() if _per_input(t)}
        start = 0
        for chunk in chunks:
            part, chunk[layer] = chunk[layer], None
            rows = slice(start, start + len(getattr(part, next(iter(joined)))))
            for name, whole in joined.items():
                whole[rows] = getattr(part, name)
            start = rows.stop
            del part
        out.append(replace(first, **joined))
        del first
    return out


def _per_input(value: object) -> bool:
    """Whether a field of :class:`Factored` or :class:`Dense` holds one row per input (not a prior variance)."""
    return isinstance(value, Tensor) and value.dim() > 1


def n_numbers(feats: Features) -> int:
    """The numbers ``feats`` hold in their per-input arrays (inputs, output gradients, Jacobian columns)."""
    return sum(t.numel() for u in feats for t in vars(u).values() if _per_input(t))


def cross_kernel(f1: Features, f2: Features, per_class: bool = False) -> Tensor:
    """``K(X1, X2)`` ``[B1, C, B2, C]`` = ``J(X1) S₀ J(X2)ᵀ``."""
    spec = "bcq,dcq->bcd" if per_class else "bcq,dpq->bcdp"
    total = None
    for u, v in zip(f1, f2, strict=True):
        if isinstance(u, Factored):
            w = u.s_w * (u.a @ v.a.T) + u.s_b  # [B1, B2]
            part = torch.einsum(spec, u.g, v.g) * (w[:, None, :] if per_class else w[:, None, :, None])
        else:
            part = _dense_products(u, v, per_class)
        total = part if total is None else total + part
    if per_class:
        eye = torch.eye(total.shape[1], dtype=total.dtype, device=total.device)
        return total[..., None] * eye[None, :, None, :]
    return total


def _dense_products(u: Dense, v: Dense, per_class: bool) -> Tensor:
    """One layer's ``J₁ S₀ J₂ᵀ`` from Jacobian columns ``[B1, C, Q]`` and ``[B2, C, Q]``: ``[B1, C, B2]`` per class,
    else ``[B1, C, B2, C]``, as matrix products on views of the features; only a class's (per class) or a row
    block's columns of ``J₁`` are scaled into a copy. An ``einsum`` scaled all of ``J₁`` into a copy and, per class,
    made contiguous copies of both sides: up to three copies of the layer's columns at once (bench/README.md, the
    GP's peak memory)."""
    B1, C, Q = u.J.shape
    if per_class:
        out = torch.empty(C, B1, v.J.shape[0], dtype=u.J.dtype, device=u.J.device)
        for c in range(C):
            torch.matmul(u.J[:, c] * u.s, v.J[:, c].T, out=out[c])
        return out.permute(1, 0, 2)
    left, right = u.J.reshape(B1 * C, Q), v.J.reshape(-1, Q)
    out = torch.empty(B1 * C, right.shape[0], dtype=u.J.dtype, device=u.J.device)
    block = max(1, DEFAULT_CHUNK_ELEMS // Q)
    for start in range(0, B1 * C, block):
        rows = slice(start, start + block)
        torch.matmul(left[rows] * u.s, right.T, out=out[rows])
    return out.reshape(B1, C, *v.J.shape[:2])


def self_kernel(feats: Features, per_class: bool = False) -> Tensor:
    """``K(x, x)`` ``[B, C, C]`` for every input of one set."""
    spec = "bcq,bcq->bc" if per_class else "bcq,bdq->bcd"
    total = None
    for u in feats:
        if isinstance(u, Factored):
            w = u.s_w * u.a.square().sum(-1) + u.s_b  # [B]
            part = torch.einsum(spec, u.g, u.g) * (w[:, None] if per_class else w[:, None, None])
        else:
            part = torch.einsum(spec, u.J * u.s, u.J)
        total = part if total is None else total + part
    return torch.diag_embed(total) if per_class else total
