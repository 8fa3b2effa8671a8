"""The likelihood's Hessian ``Λ = LᵀL`` by a factor with as few rows as its rank (notes-000 eq. 2.25)."""

from __future__ import annotations

import torch
from torch import Tensor


def reduced_sqrt(L: Tensor) -> Tensor:
    """A factor ``R`` ``[B, r, C]`` with ``RᵀR = LᵀL`` for ``L`` ``[B, C, C]`` and ``r`` the largest rank of the
    ``LᵀL`` (eigenvalues at or below ``C·ε·λ_max`` count as zero, a rounding-level change); ``L`` itself when they
    all have full rank. ``R = diag(√λ) Vᵀ`` over the top ``r`` eigenpairs of ``LᵀL = V diag(λ) Vᵀ``."""
    C = L.shape[-1]
    if C == 1 or len(L) == 0:
        return L
    lam, V = torch.linalg.eigh(L.mT @ L)  # ascending
    rank = int((lam > C * torch.finfo(L.dtype).eps * lam[:, -1:]).sum(-1).max())
    if rank == C:
        return L
    return (V[:, :, C - rank :] * lam[:, None, C - rank :].clamp_min(0).sqrt()).mT
