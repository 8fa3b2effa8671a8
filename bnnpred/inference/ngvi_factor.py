r"""The NGVI estimates with the curvature as a factor: ``ĝ`` ``[P]`` and ``A`` ``[k, P]`` with ``Ĝ = AᵀA``.

``k ≤ N·K·S`` rows (notes-000 Table 4.2): OGGN ``A_i = L_i J(x_i;µ)``; VOGGN ``A_{si} = L_{si} J(x_i;θ_s) / √S``
(or the empirical Fisher's ``r_{si}ᵀ J(x_i;θ_s) / √S``); LGVA ``A_i = Λ̄_i^{1/2} J(x_i;µ)`` with
``Λ̄_i = (1/S) Σ_s Λ(f̂_s(x_i))`` — one Jacobian per point, so its rank is ``N·K`` for any S. ``LᵀL = Λ``; each
factor has as many rows per input as its ``Λ`` has rank (``C − 1`` for the softmax: ``Likelihood.hessian_root``).
The precision takes ``γ AᵀA`` without forming ``Ĝ`` (:mod:`bnnpred.inference.ngvi_precision`).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.ggn import Curvature
from bnnpred.curvature.jacobians import iter_jacobians
from bnnpred.likelihoods import Likelihood, psd_root


def sampled_gradient_and_factor(model: FlatModel, likelihood: Likelihood, thetas: Tensor, X: Tensor, y: Tensor,
                                kind: Curvature = Curvature.ggn) -> tuple[Tensor, Tensor, Tensor]:
    """At each draw ``θ_s`` ``[S, P]`` (OGGN: ``S = 1`` at the mean): ``(1/S) Σ_s Σ_i J_{si}ᵀ r_{si}`` ``[P]``, the
    factor ``A`` ``[S·N·r, P]`` (``[S·N, P]`` for ``ef``) and ``(1/S) Σ_s Σ_i log p(y_i | f(x_i; θ_s))``."""
    S, P = thetas.shape
    g, rows_out, loglik = thetas.new_zeros(P), [], thetas.new_zeros(())
    for rows, f, J in iter_jacobians(model, thetas, X):
        f, J = f.flatten(0, 1), J.flatten(0, 1)  # [S·B, C], [S·B, C, P], draw-major
        targets = y[rows].repeat(S, *[1] * (y.dim() - 1))
        r = likelihood.residual(f, targets)
        g += torch.einsum("bc,bcp->p", r, J)
        factor = likelihood.hessian_root(f) @ J if kind is Curvature.ggn \
            else torch.einsum("bc,bcp->bp", r, J)
        rows_out.append(factor.reshape(-1, P))
        loglik += likelihood.log_prob(f, targets).sum()
    return g / S, torch.cat(rows_out) / math.sqrt(S), loglik / S


def linearised_gradient_and_factor(model: FlatModel, likelihood: Likelihood, theta: Tensor, shifts: Tensor,
                                   X: Tensor, y: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """LGVA at the mean ``θ`` ``[P]`` with draws ``θ + shifts`` ``[S, P]`` inside the linearised network
    ``f̂_s = f + J shifts_s``: ``ĝ``, ``A = Λ̄^{1/2} J`` ``[N·r, P]`` and the average log-likelihood."""
    S, P = shifts.shape
    dtype = theta.dtype  # J may be stored in float32 (glm_refine's jacobian_dtype): products in J's dtype, sums in θ's
    g, rows_out, loglik = theta.new_zeros(P), [], theta.new_zeros(())
    for rows, f, J in iter_jacobians(model, theta, X):
        f_hat = f.to(dtype) + torch.einsum("bcp,sp->sbc", J, shifts.to(J.dtype)).to(dtype)  # [S, B, C]
        targets = y[rows]
        r = torch.stack([likelihood.residual(fs, targets) for fs in f_hat]).mean(0)
        g += torch.einsum("bc,bcp->p", r.to(J.dtype), J).to(dtype)
        roots = torch.stack([likelihood.hessian_sqrt(fs) for fs in f_hat])  # [S, B, C, C]
        root = psd_root((roots.mT @ roots).mean(0))  # [B, r, C] with rootᵀ root = Λ̄, r its rank (C − 1: softmax)
        rows_out.append((root.to(J.dtype) @ J).reshape(-1, P))  # in J's dtype: the precision's product in it
        loglik += sum(likelihood.log_prob(fs, targets).sum() for fs in f_hat) / S
    return g, torch.cat(rows_out), loglik
