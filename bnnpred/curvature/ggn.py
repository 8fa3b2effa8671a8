r"""Generalized Gauss-Newton and empirical Fisher, full or diagonal (notes-000 eq. 2.25, notes-004 eq. 7).

``GGN = Σ_i J_iᵀ Λ_i J_i`` with ``Λ_i = -∇²_f log p(y_i|f_i)``; written as ``Σ_i A_iᵀ A_i`` with
``A_i = L_i J_i`` and ``L_iᵀ L_i = Λ_i``, so a chunk of ``B`` examples costs one ``[P, BC] x [BC, P]`` GEMM.
The empirical Fisher is ``Σ_i g_i g_iᵀ`` with ``g_i = J_iᵀ r_i`` (eq. 2.23).
"""

from __future__ import annotations

from enum import Enum

import torch
from torch import Tensor

from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.jacobians import DEFAULT_CHUNK_ELEMS, iter_jacobians
from bnnpred.likelihoods import Likelihood


class Curvature(str, Enum):
    ggn = "ggn"
    ef = "ef"  # empirical Fisher


class Structure(str, Enum):
    full = "full"
    diag = "diag"


def curvature(
    model: FlatModel,
    likelihood: Likelihood,
    theta: Tensor,
    X: Tensor,
    y: Tensor,
    *,
    kind: Curvature = Curvature.ggn,
    structure: Structure = Structure.full,
    max_elems: int = DEFAULT_CHUNK_ELEMS,
) -> tuple[Tensor, Tensor]:
    """Curvature of the negative log-likelihood at ``θ`` and the log-likelihood there.

    Args:
        model, likelihood: network and likelihood.
        theta: parameters ``[P]``.
        X, y: training inputs ``[N, ...]`` and targets ``[N]``.
        kind: ``ggn`` (``Σ JᵀΛJ``) or ``ef`` (``Σ g gᵀ``).
        structure: ``full`` gives ``[P, P]``; ``diag`` gives its diagonal ``[P]``.
        max_elems: bound on ``B·C·P`` per Jacobian chunk.

    Returns:
        The curvature and ``Σ_i log p(y_i | f(x_i; θ))`` (a scalar tensor).
    """
    P = theta.numel()
    G = theta.new_zeros((P, P) if structure is Structure.full else (P,))
    loglik = theta.new_zeros(())
    for rows, f, J in iter_jacobians(model, theta, X, max_elems):
        A = _curvature_factor(likelihood, f, J, y[rows], kind).reshape(-1, P)  # [B·C', P]
        if structure is Structure.full:
            G.addmm_(A.T, A)
        else:
            G += A.square().sum(0)
        loglik += likelihood.log_prob(f, y[rows]).sum()
    return G, loglik


def _curvature_factor(likelihood: Likelihood, f: Tensor, J: Tensor, y: Tensor, kind: Curvature) -> Tensor:
    """``A`` with ``Σ AᵀA`` the curvature of this chunk: ``L J`` ``[B, C, P]`` or ``rᵀJ`` ``[B, 1, P]``."""
    if kind is Curvature.ggn:
        return likelihood.hessian_sqrt(f) @ J
    r = likelihood.residual(f, y)  # [B, C]
    return torch.einsum("bc,bcp->bp", r, J).unsqueeze(1)
