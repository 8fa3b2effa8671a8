r"""Kronecker-factored Gaussian: one block per layer weight (``B ⊗ A``) or bias (dense), with the prior added
through the factors' eigendecompositions (notes-004 §2.3).

With ``B = U_B diag(b) U_Bᵀ`` and ``A = U_A diag(a) U_Aᵀ`` a weight block's precision is
``(U_B ⊗ U_A) diag(λ) (U_B ⊗ U_A)ᵀ`` with

- exact prior (Grosse & Martens 2016; the paper's methods): ``λ_ij = b_i a_j + δ``, i.e. ``B ⊗ A + δ I``;
- dampened (Ritter et al. 2018 baseline): ``λ_ij = (b_i + √δ)(a_j + √δ)``, i.e. ``(B + √δ I) ⊗ (A + √δ I)``,
  whose cross terms ``√δ (b_i + a_j)`` shrink the covariance.

A dense bias block ``D`` gets ``D + δ I`` either way. Everything works in the eigenbases: for a block of ``θ``
reshaped to ``[out, in]``, ``Π^{-1/2} z = U_B (Z / √λ) U_Aᵀ``, ``log det Π = Σ log λ`` and ``J Σ Jᵀ`` projects
``J`` onto ``U_B ⊗ U_A`` once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from bnnpred.curvature.kron import KronBlock, LayerJacobian, is_uniform
from bnnpred.errors import BnnpredError
from bnnpred.posteriors.base import Posterior


@dataclass
class _Eigen:
    """One block in its eigenbasis: ``U_B`` ``[out, out]``, ``U_A`` ``[in, in]`` (or ``None`` for a dense block, whose
    eigenvectors are ``U_B``) and the precision's eigenvalues ``λ`` ``[out, in]`` (``[size, 1]`` for a dense block)."""

    start: int
    stop: int
    U_B: Tensor
    U_A: Tensor | None
    eig: Tensor

    def rotate_in(self, V: Tensor) -> Tensor:
        """``V`` ``[..., size]`` in the eigenbasis, ``[..., out, in]``."""
        V = V.reshape(*V.shape[:-1], *self.eig.shape)
        out = torch.einsum("oq,...oi->...qi", self.U_B, V)
        return out if self.U_A is None else out @ self.U_A

    def rotate_out(self, V: Tensor) -> Tensor:
        """The inverse of :meth:`rotate_in`, flattened back to ``[..., size]``."""
        out = torch.einsum("oq,...qi->...oi", self.U_B, V)
        out = out if self.U_A is None else out @ self.U_A.T
        return out.reshape(*out.shape[:-2], -1)


def _eigh(factor: Tensor) -> tuple[Tensor, Tensor]:
    """Eigenvalues and eigenvectors of a symmetric factor, computed in float64: float32 ``eigh`` fails to converge on
    the many repeated zero eigenvalues of factors with dead units (3c3d at large δ)."""
    values, vectors = torch.linalg.eigh(factor.double())
    return values.to(factor.dtype), vectors.to(factor.dtype)


def _eigen(block: KronBlock, delta: float, dampen: bool) -> _Eigen:
    if block.dense is not None:
        values, vectors = _eigh(block.dense)
        return _Eigen(block.start, block.stop, vectors, None, (values.clamp_min(0) + delta).unsqueeze(1))
    b, U_B = _eigh(block.B)
    a, U_A = _eigh(block.A)
    b, a = b.clamp_min(0), a.clamp_min(0)
    eig = torch.outer(b + delta**0.5, a + delta**0.5) if dampen else torch.outer(b, a) + delta
    return _Eigen(block.start, block.stop, U_B, U_A, eig)


def block_delta(prior_precision: Tensor, block: KronBlock) -> float:
    """The prior precision of a block, which must be one value (a per-parameter prior does not factorise)."""
    values = prior_precision[block.start : block.stop]
    if not is_uniform(values):
        raise BnnpredError("structure=kron needs one prior precision per weight or bias tensor (the prior must "
                           "factorise); use prior.groups=shared, layer or tensor")
    return float(values[0])


class KronPosterior(Posterior):
    def __init__(self, mean: Tensor, blocks: list[KronBlock], prior_precision: Tensor, dampen: bool = False):
        self.mean, self.blocks, self.prior_precision, self.dampen = mean, blocks, prior_precision, dampen
        self.eigen = [_eigen(b, block_delta(prior_precision, b), dampen) for b in blocks]

    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        z = self._normal(n, generator)
        parts = [e.rotate_out(e.rotate_in(z[:, e.start : e.stop]) * e.eig.rsqrt()) for e in self.eigen]
        return self.mean + torch.cat(parts, dim=1)

    def logdet_precision(self) -> Tensor:
        return sum(e.eig.log().sum() for e in self.eigen)

    def quad(self, d: Tensor) -> Tensor:
        return sum((e.eig * e.rotate_in(d[e.start : e.stop]).square()).sum() for e in self.eigen)

    def cov_mv(self, v: Tensor) -> Tensor:
        return torch.cat([e.rotate_out(e.rotate_in(v[e.start : e.stop]) / e.eig) for e in self.eigen])

    def functional_cov(self, J: Tensor) -> Tensor:
        """``J Σ Jᵀ`` ``[B, C, C]`` = ``Σ_blocks Σ_{q,j} J̃_{cqj} J̃_{dqj} / λ_{qj}`` with ``J̃`` the rotated Jacobian."""
        total = J.new_zeros(J.shape[0], J.shape[1], J.shape[1])
        for e in self.eigen:
            rotated = e.rotate_in(J[..., e.start : e.stop])  # [B, C, out, in]
            total += torch.einsum("bcqi,bdqi->bcd", rotated / e.eig, rotated)
        return total

    def functional_cov_from_layers(self, factors: list[LayerJacobian]) -> Tensor:
        """``J Σ Jᵀ`` ``[B, C, C]`` from each layer's Jacobian factors (:func:`~bnnpred.curvature.kron.
        layer_output_gradients`), without forming ``J``: for a weight block ``∂f_c/∂W = Σ_t g_{c,t} a_tᵀ`` is
        rotated into the eigenbasis as ``Σ_t (U_Bᵀ g_{c,t})(U_Aᵀ a_t)ᵀ``; a bias block takes ``U_Bᵀ Σ_t g_{c,t}``."""
        eigen = iter(self.eigen)
        total = None
        for layer in factors:
            weight = next(eigen)
            g = torch.einsum("oq,bcot->bcqt", weight.U_B, layer.g)
            a = torch.einsum("bit,ij->bjt", layer.a, weight.U_A)
            if a.shape[-1] == 1:  # a linear layer: the rotated Jacobian is the outer product g̃_c ã ᵀ
                scaled = g[..., 0] * (a[..., 0].square() @ (1 / weight.eig).T)[:, None, :]  # [B, C, out]
                part = scaled @ g[..., 0].mT
            else:
                rotated = torch.einsum("bcqt,bjt->bcqj", g, a)
                part = torch.einsum("bcqj,bdqj->bcd", rotated / weight.eig, rotated)
            if layer.has_bias:
                bias = next(eigen)
                r = torch.einsum("oq,bcot->bcq", bias.U_B, layer.g)
                part = part + torch.einsum("bcq,bdq->bcd", r / bias.eig[:, 0], r)
            total = part if total is None else total + part
        return total

    def marginal_variance(self) -> Tensor:
        parts = []
        for e in self.eigen:
            var = e.U_B.square() @ (1 / e.eig)
            parts.append((var if e.U_A is None else var @ e.U_A.square().T).reshape(-1))
        return torch.cat(parts)

    def dense_precision(self) -> Tensor:
        P = self.mean.numel()
        out = self.mean.new_zeros(P, P)
        for e in self.eigen:
            U = e.U_B if e.U_A is None else torch.kron(e.U_B, e.U_A)
            out[e.start : e.stop, e.start : e.stop] = (U * e.eig.reshape(-1)) @ U.T
        return out

    def state(self) -> dict[str, Any]:
        return {"structure": "kron", "mean": self.mean, "prior_precision": self.prior_precision, "dampen": self.dampen,
                "blocks": [{"start": b.start, "stop": b.stop, "B": b.B, "A": b.A, "dense": b.dense}
                           for b in self.blocks]}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> KronPosterior:
        mean = state["mean"]
        blocks = [KronBlock(**{k: v.to(mean) if torch.is_tensor(v) else v for k, v in b.items()})
                  for b in state["blocks"]]
        return cls(mean, blocks, state["prior_precision"], state["dampen"])
