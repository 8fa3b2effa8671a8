"""Per-example Jacobians ``J_i = ∂f(x_i; θ)/∂θ`` ``[C, P]`` with ``vmap(jacrev)`` (notes-000 §2)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch
from torch import Tensor
from torch.func import vmap

from bnnpred.curvature.functional import FlatModel, LinearizedModel
from bnnpred.errors import BnnpredError

# Jacobian chunks hold at most this many numbers (B·C·P), about 128 MB in float64.
DEFAULT_CHUNK_ELEMS = 2**24


def jacobians(model: FlatModel | LinearizedModel, theta: Tensor, X: Tensor) -> tuple[Tensor, Tensor]:
    """Outputs ``f`` ``[B, C]`` and per-example Jacobians ``J`` ``[B, C, P]`` at ``θ`` ``[P]`` for inputs ``X``
    (see each model's ``outputs_and_jacobians``)."""
    return model.outputs_and_jacobians(theta, X)


def stacked_jacobians(model: FlatModel, theta: Tensor, X: Tensor) -> tuple[Tensor, Tensor]:
    """All outputs ``[N, C]`` and Jacobians ``[N, C, P]`` of ``X`` at one point ``θ`` ``[P]``, computed in bounded
    chunks and held at once."""
    if theta.dim() != 1:
        raise BnnpredError(f"stacked_jacobians takes one parameter vector [P], not shape {list(theta.shape)}")
    fs, Js = zip(*[(f, J) for _, f, J in iter_jacobians(model, theta, X)], strict=True)
    return torch.cat(fs), torch.cat(Js)


def chunk_size_for(n_outputs: int, n_params: int, max_elems: int = DEFAULT_CHUNK_ELEMS) -> int:
    """Number of examples per chunk so that a ``[B, C, P]`` Jacobian holds at most ``max_elems`` numbers."""
    return max(1, max_elems // (n_outputs * n_params))


def iter_jacobians(
    model: FlatModel | LinearizedModel, theta: Tensor, X: Tensor, max_elems: int = DEFAULT_CHUNK_ELEMS
) -> Iterator[tuple[slice, Tensor, Tensor]]:
    """Yield ``(rows, f, J)`` over chunks of ``X`` so that memory stays bounded by ``max_elems``.

    ``theta`` is one point ``[P]`` (``f`` ``[B, C]``, ``J`` ``[B, C, P]``) or ``S`` draws ``[S, P]`` (``f``
    ``[S, B, C]``, ``J`` ``[S, B, C, P]``: every draw's Jacobians of a chunk in one ``vmap``)."""
    if len(X) == 0:
        return
    draws = theta.shape[0] if theta.dim() == 2 else 1
    with torch.no_grad():
        n_out = model(theta.reshape(draws, -1)[0], X[:1]).shape[1]
    step = chunk_size_for(draws * n_out, theta.shape[-1], max_elems)
    compute = partial(jacobians, model) if theta.dim() == 1 else vmap(partial(jacobians, model), in_dims=(0, None))
    for start in range(0, len(X), step):
        rows = slice(start, min(start + step, len(X)))
        f, J = compute(theta, X[rows])
        yield rows, f.detach(), J.detach()
