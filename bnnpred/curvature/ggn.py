r"""Generalized Gauss-Newton and empirical Fisher, full or diagonal (notes-000 eq. 2.25, notes-004 eq. 7).

``GGN = Σ_i J_iᵀ Λ_i J_i`` with ``Λ_i = -∇²_f log p(y_i|f_i)``; written as ``Σ_i A_iᵀ A_i`` with
``A_i = R_i J_i`` and ``R_iᵀ R_i = Λ_i``. Full matrices are accumulated one triangle at a time (``?syrk``,
:mod:`bnnpred.curvature.syrk`: ``B·r·P²`` flops per chunk of ``B`` examples, half a general product) and mirrored
once at the end. ``R_i`` has only as many rows ``r`` as ``Λ_i`` has rank: the likelihood's square root ``L_i``
``[C, C]`` is replaced by the top-``r`` eigen-factor of ``L_iᵀ L_i`` when ``Λ_i`` is singular (the softmax's
``Λ = diag(p) − ppᵀ`` has rank ``C − 1``: ``1/C`` of the flops saved). The GGN's diagonal of a network made of
``Linear`` / ``Conv2d`` layers comes from the layers' factors without Jacobians
(:func:`bnnpred.curvature.kron.layer_diag_ggn`). The empirical Fisher is ``Σ_i g_i g_iᵀ`` with ``g_i = J_iᵀ r_i``
(eq. 2.23).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

import torch
from torch import Tensor

from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.jacobians import DEFAULT_CHUNK_ELEMS, iter_jacobians
from bnnpred.curvature.kron import jacobian_layers, layer_diag_ggn
from bnnpred.curvature.syrk import mirror_lower_, syrk_lower_
from bnnpred.likelihoods import Likelihood


class Curvature(str, Enum):
    ggn = "ggn"
    ef = "ef"  # empirical Fisher


class Structure(str, Enum):
    full = "full"
    diag = "diag"
    kron = "kron"  # per-layer Kronecker factors (curvature.kron); Laplace-GGN only


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
        max_elems: bound on ``B·C·P`` per Jacobian chunk (the diagonal from the layers' factors: on the factors
            and a convolution's per-example gradients, :func:`~bnnpred.curvature.kron.iter_layer_gradients`).

    Returns:
        The curvature and ``Σ_i log p(y_i | f(x_i; θ))`` (a scalar tensor).
    """
    layers = jacobian_layers(model) if isinstance(model, FlatModel) and theta.dim() == 1 else None
    if structure is Structure.diag and kind is Curvature.ggn and layers is not None:
        from_layers = layer_diag_ggn(model, likelihood, theta, X, y, layers, max_elems)
        if from_layers is not None:
            return from_layers
    P = theta.numel()
    G = theta.new_zeros((P, P) if structure is Structure.full else (P,))
    loglik = theta.new_zeros(())
    for rows, f, J in iter_jacobians(model, theta, X, max_elems):
        _accumulate(G, _curvature_factor(likelihood, f, J, y[rows], kind).reshape(-1, P), structure)
        loglik += likelihood.log_prob(f, y[rows]).sum()
    return _finish(G), loglik


Outputs = Callable[[Tensor, Tensor], Tensor]


def gradient_and_ggn(
    model: FlatModel,
    likelihood: Likelihood,
    theta: Tensor,
    X: Tensor,
    y: Tensor,
    *,
    structure: Structure = Structure.full,
    outputs: Outputs | None = None,
    kind: Curvature = Curvature.ggn,
    max_elems: int = DEFAULT_CHUNK_ELEMS,
) -> tuple[Tensor, Tensor, Tensor]:
    r"""Gradient and GGN of the log-likelihood with Jacobians at ``θ`` and residuals / ``Λ`` at outputs ``f̂``.

    ``ĝ = (1/S) Σ_s Σ_i J_iᵀ r(y_i, f̂_si)`` and ``Ĝ = (1/S) Σ_s Σ_i J_iᵀ Λ(f̂_si) J_i`` (notes-000 Thm 4.1,
    Table 4.2): ``f̂ = f(x; θ)`` by default (OGGN, and VOGGN at a sample), or ``outputs(f, J)`` ``[S, B, C]``,
    e.g. the linearised network at posterior samples (LGVA). ``kind=ef`` gives the empirical Fisher
    ``Σ_i g_i g_iᵀ`` with ``g_i = J_iᵀ r_i`` instead of the GGN (SLANG's EF baselines, notes-002 §2.11).

    Jacobians held in a lower precision than ``θ`` (a :class:`~bnnpred.curvature.functional.LinearizedModel` with
    float32 ``J*`` in a float64 run) give the curvature's products in their precision, accumulated over the chunks
    there and returned in ``θ``'s; ``outputs`` and the gradient get the Jacobians in ``θ``'s precision.

    Returns:
        ``ĝ`` ``[P]``, ``Ĝ`` (``[P, P]`` or its diagonal ``[P]``) and ``(1/S) Σ_s Σ_i log p(y_i | f̂_si)``.
    """
    P = theta.numel()
    g = theta.new_zeros(P)
    G: Tensor | None = None  # in the Jacobians' dtype
    loglik = theta.new_zeros(())
    S = 1
    for rows, f, J in iter_jacobians(model, theta, X, max_elems):
        G = J.new_zeros((P, P) if structure is Structure.full else (P,)) if G is None else G
        J_theta = J.to(theta.dtype)  # J itself unless held in a lower precision
        evaluations = f.unsqueeze(0) if outputs is None else outputs(f, J_theta)
        S = len(evaluations)
        for f_hat in evaluations:
            loglik += _add_chunk(g, G, likelihood, f_hat, J_theta, y[rows], structure, kind, products=J)
    G = theta.new_zeros((P, P) if structure is Structure.full else (P,)) if G is None else _finish(G).to(theta.dtype)
    return g / S, G.div_(S), loglik / S


def sampled_gradient_and_ggn(
    model: FlatModel,
    likelihood: Likelihood,
    thetas: Tensor,
    X: Tensor,
    y: Tensor,
    *,
    structure: Structure = Structure.full,
    kind: Curvature = Curvature.ggn,
    max_elems: int = DEFAULT_CHUNK_ELEMS,
) -> tuple[Tensor, Tensor, Tensor]:
    r"""The average of :func:`gradient_and_ggn` at each of the draws ``θ_s`` ``[S, P]`` (VOGGN's estimates,
    notes-000 eq. 4.7): ``(1/S) Σ_s Σ_i J_{si}ᵀ r_{si}``, ``(1/S) Σ_s Σ_i J_{si}ᵀ Λ_{si} J_{si}`` (or the empirical
    Fisher) and ``(1/S) Σ_s Σ_i log p(y_i | f(x_i; θ_s))``. Each chunk's ``S`` Jacobians come from one ``vmap``
    and are accumulated as ``S·B`` rows."""
    S, P = thetas.shape
    g = thetas.new_zeros(P)
    G = thetas.new_zeros((P, P) if structure is Structure.full else (P,))
    loglik = thetas.new_zeros(())
    for rows, f, J in iter_jacobians(model, thetas, X, max_elems):
        targets = y[rows].repeat(S, *[1] * (y.dim() - 1))  # [S·B, ...], draw-major like f.flatten(0, 1)
        loglik += _add_chunk(g, G, likelihood, f.flatten(0, 1), J.flatten(0, 1), targets, structure, kind)
    return g / S, _finish(G).div_(S), loglik / S


def _add_chunk(g: Tensor, G: Tensor, likelihood: Likelihood, f: Tensor, J: Tensor, y: Tensor, structure: Structure,
               kind: Curvature, products: Tensor | None = None) -> Tensor:
    """``g += Σ_b J_bᵀ r_b`` and ``G +=`` the chunk's curvature (its products from ``products``, the same Jacobians
    in ``G``'s precision; default ``J``), in place; returns ``Σ_b log p(y_b | f_b)``."""
    g += torch.einsum("bc,bcp->p", likelihood.residual(f, y), J)
    factor = _curvature_factor(likelihood, f, J if products is None else products, y, kind)
    _accumulate(G, factor.reshape(-1, g.numel()), structure)
    return likelihood.log_prob(f, y).sum()


def _accumulate(G: Tensor, A: Tensor, structure: Structure) -> None:
    """``G += AᵀA`` (full: its lower triangle, see :func:`_finish`) or its diagonal, for ``A`` ``[K, P]``."""
    if structure is Structure.full:
        syrk_lower_(G, A)
    else:
        G += A.square().sum(0)


def _finish(G: Tensor) -> Tensor:
    """The accumulated curvature made whole: a full matrix's lower triangle mirrored onto its upper one."""
    return mirror_lower_(G) if G.dim() == 2 else G


def _curvature_factor(likelihood: Likelihood, f: Tensor, J: Tensor, y: Tensor, kind: Curvature) -> Tensor:
    """``A`` with ``Σ AᵀA`` the curvature of this chunk: ``R J`` ``[B, r, P]`` or ``rᵀJ`` ``[B, 1, P]``."""
    if kind is Curvature.ggn:
        return likelihood.hessian_root(f).to(J.dtype) @ J
    r = likelihood.residual(f, y).to(J.dtype)  # [B, C]
    return torch.einsum("bc,bcp->bp", r, J).unsqueeze(1)
