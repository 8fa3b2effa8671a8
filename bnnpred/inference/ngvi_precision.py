r"""The NGVI precision update ``Π ← (1 − γ) Π + γ (Δ + Ĝ)`` (notes-000 §4.3) in three representations.

- ``DiagPrecision``: the diagonal ``[P]`` (VOGN).
- ``DensePrecision``: ``Π`` ``[P, P]`` and its Cholesky factor, refactorised every step (``O(P³)``); the
  curvature added one triangle at a time (``?syrk``, :mod:`bnnpred.curvature.syrk`), in the factor's dtype.
- ``LowRankPrecision``: ``Π = diag(d) + Σ_j w_j A_jᵀ A_j`` with the batch factors ``A_j`` ``[k, P]`` of the last
  steps (``Ĝ_j = A_jᵀA_j``, rank ``k ≤ N·K·S``) and their weights ``w_j = γ_j Π_{i>j} (1 − γ_i)``. ``Δ`` and the
  initial ``I / init_var`` are diagonal, so ``d ← (1 − γ) d + γ δ`` carries them exactly. A factor whose weight
  falls below ``2⁻⁵³`` of the newest one changes no entry of ``Π`` in float64 and is dropped, so at ``γ = 1`` the
  rank is ``k`` and at ``γ = 0.999`` about ``6k``. The posterior is the Woodbury ``LowRankDiagPosterior``: solves,
  draws and log-determinants cost ``O(P L²)`` for rank ``L``, nothing ``P x P`` is formed. When ``L`` would exceed
  ``P / 4`` (small γ: ``Π`` keeps ``1/γ`` steps of curvature) the state becomes dense, exactly.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import torch
from torch import Tensor

from bnnpred.curvature.ggn import Structure
from bnnpred.curvature.syrk import mirror_lower_, syrk_lower_
from bnnpred.posteriors import DiagPosterior, FullPosterior, LowRankDiagPosterior, Posterior

NEGLIGIBLE_WEIGHT = 2.0**-53  # relative to the newest factor's weight


class PrecisionState(ABC):
    @abstractmethod
    def update(self, gamma: float, delta: Tensor, curv: Tensor, scale: float) -> PrecisionState:
        """``(1 − γ) Π + γ (Δ + scale · Ĝ)`` with ``curv`` the factor ``A`` of ``Ĝ = AᵀA`` (full) or ``diag Ĝ``."""

    @abstractmethod
    def posterior(self, mean: Tensor) -> Posterior:
        """``N(mean, Π⁻¹)``."""

    def state(self) -> dict:
        """The tensors and numbers that rebuild this state with :func:`precision_from_state` (a checkpoint)."""
        return {"kind": type(self).__name__, **vars(self)}


@dataclass
class DiagPrecision(PrecisionState):
    precision: Tensor  # [P]

    def update(self, gamma: float, delta: Tensor, curv: Tensor, scale: float) -> DiagPrecision:
        return DiagPrecision(torch.lerp(self.precision, scale * curv + delta, gamma))

    def posterior(self, mean: Tensor) -> Posterior:
        return DiagPosterior(mean, self.precision)


@dataclass
class DensePrecision(PrecisionState):
    precision: Tensor  # [P, P]

    def update(self, gamma: float, delta: Tensor, curv: Tensor, scale: float) -> DensePrecision:
        new = self.precision * (1 - gamma)
        scaled = curv * (gamma * scale) ** 0.5
        if scaled.dtype == new.dtype:
            syrk_lower_(new, scaled)  # one triangle of γ·scale·AᵀA: half a general product
        else:  # a float32 factor in a float64 run (glm_refine's jacobian_dtype): the product in float32
            new += syrk_lower_(scaled.new_zeros(new.shape), scaled)
        new.diagonal().add_(gamma * delta)
        return DensePrecision(mirror_lower_(new))

    def posterior(self, mean: Tensor) -> Posterior:
        return FullPosterior(mean, self.precision)


@dataclass
class LowRankPrecision(PrecisionState):
    d: Tensor  # [P]
    weights: list[float] = field(default_factory=list)
    factors: list[Tensor] = field(default_factory=list)  # each [k_j, P]

    @property
    def rank(self) -> int:
        return sum(len(A) for A in self.factors)

    def update(self, gamma: float, delta: Tensor, curv: Tensor, scale: float) -> PrecisionState:
        weights = [w * (1 - gamma) for w in self.weights] + [gamma * scale]
        kept = [j for j, w in enumerate(weights) if w >= NEGLIGIBLE_WEIGHT * weights[-1]]
        factors = [*self.factors, curv.to(self.d.dtype)]
        new = LowRankPrecision(torch.lerp(self.d, delta, gamma), [weights[j] for j in kept],
                               [factors[j] for j in kept])
        return new if new.rank <= len(self.d) // 4 else new.dense()

    def U(self) -> Tensor:
        """``U`` ``[P, L]`` with ``U Uᵀ = Σ_j w_j A_jᵀ A_j``."""
        if not self.factors:
            return self.d.new_zeros(len(self.d), 0)
        return torch.cat([w**0.5 * A for w, A in zip(self.weights, self.factors, strict=True)]).T

    def dense(self) -> DensePrecision:
        precision = torch.diag(self.d)
        for w, A in zip(self.weights, self.factors, strict=True):
            precision.addmm_(A.T, A, alpha=w)
        return DensePrecision(precision)

    def posterior(self, mean: Tensor) -> Posterior:
        return LowRankDiagPosterior(mean, self.U(), self.d)


def precision_from_state(state: dict) -> PrecisionState:
    """The precision state saved by :meth:`PrecisionState.state`."""
    kinds = {cls.__name__: cls for cls in (DiagPrecision, DensePrecision, LowRankPrecision)}
    fields = dict(state)
    return kinds[fields.pop("kind")](**fields)


def initial_precision(structure: Structure, delta: Tensor, init_var: float, woodbury: bool,
                      start: Posterior | None = None) -> PrecisionState:
    """The state of ``Π₀ = I / init_var`` (or of ``start``'s precision)."""
    if start is not None:
        precision = start.dense_precision() if structure is Structure.full else start.precision
        return DensePrecision(precision) if structure is Structure.full else DiagPrecision(precision)
    d = torch.full_like(delta, 1 / init_var)
    if structure is Structure.diag:
        return DiagPrecision(d)
    return LowRankPrecision(d) if woodbury else DensePrecision(torch.diag(d))
