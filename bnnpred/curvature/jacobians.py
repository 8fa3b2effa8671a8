"""Per-example Jacobians ``J_i = ∂f(x_i; θ)/∂θ`` ``[C, P]`` (notes-000 §2): formed from the layers' factors when
every parameter belongs to a ``Linear`` / ``Conv2d`` layer (:func:`bnnpred.curvature.kron.layer_jacobians`: one
forward and ``C`` backward passes per chunk), otherwise with ``vmap(jacrev)``."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch
from torch import Tensor
from torch.func import vmap

from bnnpred.curvature.chunks import DEFAULT_CHUNK_ELEMS, chunk_size_for
from bnnpred.curvature.functional import FlatModel, LinearizedModel
from bnnpred.curvature.kron import jacobian_layers, layer_jacobians
from bnnpred.errors import BnnpredError
from bnnpred.progress import progress

__all__ = ["DEFAULT_CHUNK_ELEMS", "chunk_size_for", "iter_jacobians", "jacobians", "stacked_jacobians"]


def jacobians(model: FlatModel | LinearizedModel, theta: Tensor, X: Tensor) -> tuple[Tensor, Tensor]:
    """Outputs ``f`` ``[B, C]`` and per-example Jacobians ``J`` ``[B, C, P]`` at ``θ`` ``[P]`` for inputs ``X``
    (see each model's ``outputs_and_jacobians``)."""
    return model.outputs_and_jacobians(theta, X)


def stacked_jacobians(model: FlatModel, theta: Tensor, X: Tensor,
                      dtype: torch.dtype | None = None) -> tuple[Tensor, Tensor]:
    """All outputs ``[N, C]`` and Jacobians ``[N, C, P]`` of ``X`` at one point ``θ`` ``[P]``, computed in bounded
    chunks and held at once (the Jacobians converted chunk by chunk to ``dtype`` if given)."""
    if theta.dim() != 1:
        raise BnnpredError(f"stacked_jacobians takes one parameter vector [P], not shape {list(theta.shape)}")
    fs, Js = zip(*[(f, J.to(dtype or J.dtype)) for _, f, J in iter_jacobians(model, theta, X)], strict=True)
    return torch.cat(fs), torch.cat(Js)


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
    layers = jacobian_layers(model) if isinstance(model, FlatModel) and theta.dim() == 1 else None
    chunks = range(0, len(X), step)
    for start in progress(chunks, len(chunks), f"Jacobians of {len(X)} inputs (chunks)", bar=False):
        rows = slice(start, min(start + step, len(X)))
        formed = layer_jacobians(model, theta, X[rows], layers) if layers is not None else None
        if formed is None:
            layers = None  # the network's layers do not give its Jacobians: vmap(jacrev) for every chunk
        f, J = formed or compute(theta, X[rows])
        yield rows, f.detach(), J.detach()
