r"""Symmetric rank-k updates ``G += AᵀA`` that compute one triangle only (``K·P²`` flops, half a general product).

The GGN ``Σ_i (L_i J_i)ᵀ (L_i J_i)`` is symmetric, so a general product ``AᵀA`` (``2·K·P²`` flops) does twice the
work needed. For large ``G`` on the CPU in float32 / float64 the update is BLAS ``?syrk`` (SciPy's bundled BLAS,
limited to torch's thread count); elsewhere (other devices or dtypes) a blocked lower-triangular product: block row
``i`` of ``b`` rows gets ``A[:, i]ᵀ A[:, :i+1]``, ``K·P²·(1 + 1/n)`` flops for ``n`` blocks. Mid-sized ``G``
(``BLOCKED_MIN_SIZE`` to ``BLAS_MIN_SIZE``, e.g. a convolution's Kronecker factors) get the blocked torch product
too, not SciPy's: SciPy's BLAS threads, which keep spinning for a while after each call, would compete with torch's
for the cores (measured: an MLP's Kronecker fit 10x slower on 2 cores with many small ``?syrk`` calls between
backward passes); one thread, ``K = 12,800`` rows: 48 ms against 76 ms for the general product at ``P = 576``,
11 against 16 ms at ``P = 256``. Small ``G`` get torch's general product.
Either way the upper triangle is left stale until :func:`mirror_lower_` copies the lower one over it.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import torch
from scipy.linalg import blas
from threadpoolctl import ThreadpoolController
from torch import Tensor

from bnnpred.curvature.chunks import DEFAULT_CHUNK_ELEMS

BLOCKS = 8  # row blocks of the fallback product: 1/8 extra flops, GEMMs still large
MIRROR_BLOCK = 256  # rows copied at a time by mirror_lower_ (bounded temporaries)
BLAS_MIN_SIZE = 2048  # P from which ?syrk is used on the CPU
BLOCKED_MIN_SIZE = 128  # P from which one triangle is computed at all


def syrk_lower_(G: Tensor, A: Tensor) -> Tensor:
    """``tril(G) += tril(AᵀA)`` in place for ``G`` ``[P, P]`` and ``A`` ``[K, P]``; returns ``G``.

    ``G`` must be contiguous; its strictly upper triangle is not read and is left stale (see :func:`mirror_lower_`).
    """
    if A.shape[0] == 0:
        return G
    if G.shape[0] < BLOCKED_MIN_SIZE:
        G.addmm_(A.mT, A)
    elif G.shape[0] >= BLAS_MIN_SIZE and G.device.type == "cpu" and G.dtype in (torch.float32, torch.float64) \
            and A.dtype == G.dtype and G.is_contiguous():
        _blas_syrk_lower_(G, A.detach().contiguous())
    else:
        _blocked_syrk_lower_(G, A)
    return G


def gram_lower_(G: Tensor, X: Tensor, max_elems: int = DEFAULT_CHUNK_ELEMS) -> Tensor:
    """``tril(G) += tril(Σ_n X_n X_nᵀ)`` for ``X`` ``[n, d, T]`` (the ``T`` columns of each ``X_n`` as examples, e.g.
    a convolution's positions); returns ``G`` ``[d, d]``, its upper triangle stale as with :func:`syrk_lower_`.

    Where the columns lie in memory as rows already (``X`` a view of ``[n, T, d]``, e.g. a channels-last
    convolution's gradients) they are one :func:`syrk_lower_` in place; else with at least as many columns as rows
    (``T ≥ d``) a batched product ``X_n X_nᵀ`` summed over ``n`` (chunks of at most ``max_elems`` numbers of ``[n, d,
    d]``) reads ``X`` in place; otherwise the columns are stacked (a transposed copy, ``[n·T, d]``) for one
    :func:`syrk_lower_`. Measured on 3c3d's first convolution (``d = 64``, ``T = 576``): 74 ms against 145 ms for the
    stacked copy's product."""
    n, d, T = X.shape
    if T < d or X.mT.is_contiguous():
        return syrk_lower_(G, X.mT.reshape(-1, d))
    step = max(1, max_elems // (d * d))
    for start in range(0, n, step):
        chunk = X[start : start + step]
        G += (chunk @ chunk.mT).sum(0)
    return G


def mirror_lower_(G: Tensor) -> Tensor:
    """Copy the strictly lower triangle of ``G`` ``[P, P]`` onto the upper one, in place; returns ``G``."""
    P, step = G.shape[0], MIRROR_BLOCK
    for i in range(0, P, step):
        j = min(i + step, P)
        block = G[i:j, i:j]
        block.copy_(block.tril() + block.tril(-1).mT)
        G[i:j, j:] = G[j:, i:j].mT
    return G


def _blocked_syrk_lower_(G: Tensor, A: Tensor) -> None:
    P = G.shape[0]
    step = -(-P // BLOCKS)
    for i in range(0, P, step):
        j = min(i + step, P)
        G[i:j, :j].addmm_(A[:, i:j].mT, A[:, :j])


def _blas_syrk_lower_(G: Tensor, A: Tensor) -> None:
    """``?syrk`` on NumPy views of the torch storage: the row-major lower triangle of ``G`` is the column-major
    upper triangle of ``G.numpy().T``, and the row-major ``A`` ``[K, P]`` is the column-major ``[P, K]`` matrix whose
    ``A Aᵀ`` (``trans=0``) is the wanted ``AᵀA``."""
    syrk, controller = _blas()
    g = G.numpy().T  # Fortran-ordered view [P, P]
    a = A.numpy().T  # Fortran-ordered view [P, K]
    with controller.limit(limits=torch.get_num_threads(), user_api="blas"):
        out = syrk[G.dtype](1.0, a, beta=1.0, c=g, trans=0, lower=0, overwrite_c=1)
    if not np.shares_memory(out, g):  # SciPy copied instead of updating in place
        G.copy_(torch.from_numpy(np.ascontiguousarray(out.T)))


@cache
def _blas():
    # the controller is built after SciPy's BLAS is loaded (the import above), so that it sees it
    return {torch.float32: blas.ssyrk, torch.float64: blas.dsyrk}, ThreadpoolController()
