"""The likelihood's Hessian ``Λ = LᵀL`` by a factor with as few rows as its rank (notes-000 eq. 2.25)."""

from __future__ import annotations

import torch
from torch import Tensor


def reduced_sqrt(L: Tensor) -> Tensor:
    """A factor ``R`` ``[B, r, C]`` with ``RᵀR = LᵀL`` for ``L`` ``[B, C, C]`` and ``r`` the largest rank of the
    ``LᵀL`` (:func:`psd_root`); ``L`` itself when they all have full rank."""
    if L.shape[-1] == 1 or len(L) == 0:
        return L
    R = psd_root(L.mT @ L)
    return L if R.shape[1] == L.shape[-1] else R


def psd_root(M: Tensor) -> Tensor:
    """``R = diag(√λ) Vᵀ`` ``[B, r, C]`` over the top ``r`` eigenpairs of the PSD ``M = V diag(λ) Vᵀ`` ``[B, C, C]``,
    so ``RᵀR = M``, with ``r`` the largest rank of the ``M`` (eigenvalues at or below ``C·ε·λ_max`` count as zero,
    a rounding-level change)."""
    C = M.shape[-1]
    lam, V = torch.linalg.eigh(M)  # ascending
    rank = int((lam > C * torch.finfo(M.dtype).eps * lam[:, -1:]).sum(-1).max()) if len(M) else C
    return (V[:, :, C - rank :] * lam[:, None, C - rank :].clamp_min(0).sqrt()).mT
