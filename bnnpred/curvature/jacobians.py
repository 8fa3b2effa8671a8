"""Per-example Jacobians ``J_i = ∂f(x_i; θ)/∂θ`` ``[C, P]`` with ``vmap(jacrev)`` (notes-000 §2)."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor
from torch.func import jacrev, vmap

from bnnpred.curvature.functional import FlatModel, LinearizedModel

# Jacobian chunks hold at most this many numbers (B·C·P), about 128 MB in float64.
DEFAULT_CHUNK_ELEMS = 2**24


def jacobians(model: FlatModel | LinearizedModel, theta: Tensor, X: Tensor) -> tuple[Tensor, Tensor]:
    """Outputs and per-example Jacobians at ``θ``.

    Each example's Jacobian is one reverse pass per output over that example alone (``vmap`` over
    examples of ``jacrev``), so the cost is ``O(B·C·P)``, not the ``O(B²·C·P)`` of ``jacrev`` on a batch.

    Args:
        model: the network as a function of flat parameters.
        theta: parameters ``[P]``.
        X: inputs ``[B, ...]``.

    Returns:
        ``f`` ``[B, C]`` and ``J`` ``[B, C, P]``.
    """

    if isinstance(model, LinearizedModel):  # a linear model knows its Jacobians
        return model.outputs_and_jacobians(theta, X)

    def f_single(th: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
        out = model(th, x.unsqueeze(0)).squeeze(0)
        return out, out

    J, f = vmap(jacrev(f_single, has_aux=True), in_dims=(None, 0))(theta, X)
    return f, J


def chunk_size_for(n_outputs: int, n_params: int, max_elems: int = DEFAULT_CHUNK_ELEMS) -> int:
    """Number of examples per chunk so that a ``[B, C, P]`` Jacobian holds at most ``max_elems`` numbers."""
    return max(1, max_elems // (n_outputs * n_params))


def iter_jacobians(
    model: FlatModel, theta: Tensor, X: Tensor, max_elems: int = DEFAULT_CHUNK_ELEMS
) -> Iterator[tuple[slice, Tensor, Tensor]]:
    """Yield ``(rows, f, J)`` over chunks of ``X`` so that memory stays bounded by ``max_elems``."""
    if len(X) == 0:
        return
    with torch.no_grad():
        n_out = model(theta, X[:1]).shape[1]
    step = chunk_size_for(n_out, theta.numel(), max_elems)
    for start in range(0, len(X), step):
        rows = slice(start, min(start + step, len(X)))
        f, J = jacobians(model, theta, X[rows])
        yield rows, f.detach(), J.detach()
