r"""SLANG: natural-gradient Gaussian VI with a low-rank-plus-diagonal precision ``U Uᵀ + diag(d)`` (Mishkin et al.
2018; notes-002 §2.3-2.9, following the reference implementation's order of operations and the notes' errata).

One step at ``θ_s ~ q`` (S draws) on a minibatch of M examples, with per-example log-likelihood gradients
``g_{is}`` (as layer factors for MLPs, else ``torch.func.vmap(grad)``: :mod:`bnnpred.inference.gradient_rows`),
``ĝ = −(N/MS) Σ g_{is}`` and ``G = √(N/MS) [g_{is}]`` (one row each, so ``GᵀG`` is the N/M-scaled empirical
Fisher):

1. ``U ← top-L eigen-factor of (1−β) U Uᵀ + β GᵀG`` (``fast_eig``; exact from the smaller of the ``(L + MS)²`` and
   ``P²`` Gram matrices, or randomised as in the reference for large ``MS``);
2. ``d ← (1−β) d + β λ + Δ`` with ``Δ = diag[(1−β) U Uᵀ + β GᵀG − U_new U_newᵀ]`` clamped at 0, so the
   precision's diagonal equals the full-rank update's (notes-002 §2.8);
3. ``m ← γ m + (1−γ) ĝ`` with bias correction (momentum on the likelihood gradient only), then
   ``µ ← µ − α (U Uᵀ + diag d)⁻¹ (m̂ + λ ⊙ µ)`` by Woodbury with the new precision.

Step sizes decay as ``α₀ / (1 + t^ω)`` (``ω = 0``: constant). With ``L = P`` the update is the full-Gaussian
empirical-Fisher (VOGN) update.

``update=online_eig`` is the paper's ablation SLANG-OnlineEig (notes-002 §2.10, App. B eqs. 17-19): steps 1-2 become
``U ← (1−β) U + β Q_L Λ_L^{1/2}`` with ``Q_L Λ_L Q_Lᵀ`` the top-L part of ``GᵀG`` alone (each new column's sign
matched to the old one's, so that averaging does not cancel an eigenvector with its negative) and
``d ← (1−β) d + β (diag GᵀG − diag Q_L Λ_L Q_Lᵀ + λ)`` (λ added, the notes' reading of eq. 19's sign slip); the
mean step is SLANG's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

import torch
from torch import Tensor, nn

from bnnpred.errors import BnnpredError
from bnnpred.inference.base import (
    Fit,
    Problem,
    decay_factor,
    posterior_trace_row,
)
from bnnpred.inference.contract import Budget, Method
from bnnpred.inference.gradient_rows import GradientRows, per_example_rows
from bnnpred.inference.loop import Length, Rows, Trainer, train
from bnnpred.models import n_params
from bnnpred.posteriors import LowRankDiagPosterior


class Update(str, Enum):
    slang = "slang"  # the eigen-factor of the combined (1−β) U Uᵀ + β GᵀG, the diagonal matched (eqs. 22-23)
    online_eig = "online_eig"  # SLANG-OnlineEig (App. B): an average of the new gradients' eigen-factors


class Eig(str, Enum):
    exact = "exact"  # eigh of the smaller Gram matrix, (L + MS)² or P²: exact, O(P (L+MS) min(P, L+MS))
    randomized = "randomized"  # subspace iteration with L + 2 vectors (the reference's fast_eig)


@dataclass
class SLANGConfig(Method):
    BUDGET = Budget(steps=("iterations",), epochs=("epochs",))

    name: str = "slang"
    rank: int = 1  # L
    lr: float = 0.05  # α₀, the mean's step
    precision_lr: float | None = None  # β₀, the precision's step; None: lr
    decay: float = 0.0  # ω in α₀ / (1 + t^ω); 0: constant step sizes
    precision_decay: float | None = None  # β's own ω (the reference's toy: α 10 → 0.1, β 0.5 → 0.05); None: decay
    momentum: float = 0.9  # γ
    n_samples: int = 1  # S
    batch_size: int | None = None  # M; None: full batch
    iterations: int = 1000
    epochs: int | None = None  # if set: this many passes of N // batch_size iterations (replaces iterations)
    init_precision: float = 1.0  # d₀ (U₀ = 0, so Σ₀ = I / d₀)
    eig: Eig = Eig.exact
    eig_iterations: int = 4  # subspace iterations of the randomised eigensolver
    update: Update = Update.slang  # the precision's update: SLANG's, or the OnlineEig ablation's
    log_every: int = 100

    def validate(self) -> None:
        for key in ("lr", "init_precision"):
            if not getattr(self, key) > 0:
                raise BnnpredError(f"inference.{key} must be positive, got {getattr(self, key)}")
        if self.precision_lr is not None and not 0 < self.precision_lr <= 1:
            raise BnnpredError(f"inference.precision_lr must be in (0, 1] or null, got {self.precision_lr}")
        for key in ("decay", "precision_decay"):
            if (getattr(self, key) or 0.0) < 0:
                raise BnnpredError(f"inference.{key} must be >= 0, got {getattr(self, key)}")
        if not 0 <= self.momentum < 1:
            raise BnnpredError(f"inference.momentum must be in [0, 1), got {self.momentum}")
        if self.n_samples < 1:
            raise BnnpredError(f"inference.n_samples (S) must be >= 1, got {self.n_samples}; e.g. "
                               "inference.n_samples=4 (notes-002's MNIST runs)")
        for key in ("rank", "iterations", "log_every", "eig_iterations"):
            if getattr(self, key) < 1:
                raise BnnpredError(f"inference.{key} must be >= 1, got {getattr(self, key)}")
        if self.batch_size is not None and self.batch_size < 1:
            raise BnnpredError(f"inference.batch_size must be >= 1 or null, got {self.batch_size}")
        if self.epochs is not None and self.epochs < 1:
            raise BnnpredError(f"inference.epochs must be >= 1 or null (use iterations), got {self.epochs}")

    def check_network(self, network: nn.Module) -> None:
        self.check_parameter_count(n_params(network))

    def check_parameter_count(self, P: int) -> None:
        """The rank cannot exceed the network's parameter count ``P``."""
        if self.rank > P:
            raise BnnpredError(f"inference.rank = {self.rank} exceeds the {P} parameters; use rank <= {P}")


@dataclass
class SLANGState:
    mean: Tensor  # [P]
    U: Tensor  # [P, L]
    d: Tensor  # [P]
    momentum: Tensor  # [P]
    t: int = 0
    posterior: LowRankDiagPosterior | None = None  # q at this state, factorised once per step
    U_gram: Tensor | None = None  # UᵀU [L, L] where known without the product (an eigen-factor's: diag Λ_L)
    U_norms: Tensor | None = None  # diag(U Uᵀ) [P] where the step that made U measured it

    def q(self) -> LowRankDiagPosterior:
        """``N(mean, (U Uᵀ + diag d)⁻¹)``: the step's factorisation when there is one."""
        return self.posterior or LowRankDiagPosterior(self.mean, self.U, self.d)


@dataclass
class StackedRows:
    r"""The rows ``W = [a Uᵀ; b G]`` ``[L + MS, P]``, never formed: ``WᵀW = a² U Uᵀ + b² GᵀG`` is the matrix SLANG
    factorises (notes-002 eq. 22 with ``a² = 1 − β``, ``b² = β``), used only through products with ``U`` ``[P, L]``
    and the gradient rows ``G`` (:mod:`bnnpred.inference.gradient_rows`: formed, or as layer factors)."""

    U: Tensor
    G: GradientRows
    a: float
    b: float
    U_gram: Tensor | None = None  # UᵀU, when known
    U_norms: Tensor | None = None  # diag(U Uᵀ), when known

    @property
    def shape(self) -> tuple[int, int]:
        return self.U.shape[1] + self.G.n_rows, self.U.shape[0]

    def row_gram(self) -> Tensor:
        """``W Wᵀ`` ``[L + MS, L + MS]``."""
        cross = self.a * self.b * self.G.times(self.U)
        U_gram = self.U.T @ self.U if self.U_gram is None else self.U_gram
        return torch.cat([torch.cat([self.a**2 * U_gram, cross.T], 1),
                          torch.cat([cross, self.b**2 * self.G.gram()], 1)])

    def column_gram(self) -> Tensor:
        """``WᵀW`` ``[P, P]``."""
        G = self.G.dense()
        return torch.addmm((self.a**2 * self.U) @ self.U.T, G.T, G, alpha=self.b**2)

    def times(self, Q: Tensor) -> Tensor:
        """``W Q`` ``[L + MS, r]`` for ``Q`` ``[P, r]``."""
        return torch.cat([self.a * (self.U.T @ Q), self.b * self.G.times(Q)])

    def transpose_times(self, V: Tensor) -> Tensor:
        """``Wᵀ V`` ``[P, r]`` for ``V`` ``[L + MS, r]``."""
        L = self.U.shape[1]
        return self.G.transpose_times(self.b * V[L:]).addmm_(self.U, V[:L], alpha=self.a)

    def column_square_norms(self) -> Tensor:
        """``diag(WᵀW)`` ``[P]``."""
        U_norms = square_row_norms(self.U) if self.U_norms is None else self.U_norms
        return self.a**2 * U_norms + self.b**2 * self.G.square_norms()


def square_row_norms(U: Tensor) -> Tensor:
    """``diag(U Uᵀ)`` ``[P]``."""
    return torch.linalg.vector_norm(U, dim=1).square()


def top_eigen_factor(W: StackedRows, rank: int) -> tuple[Tensor, Tensor]:
    """``U`` ``[P, L]`` with ``U Uᵀ`` the best rank-L approximation of ``WᵀW``, from the smaller Gram matrix: with
    ``W Wᵀ = V Λ Vᵀ`` (``K ≤ P`` rows), ``U = Wᵀ V_L`` (= ``Q_L Λ_L^{1/2}``); with ``WᵀW = Q Λ Qᵀ`` (``K > P``: many
    gradients of few parameters), ``U = Q_L Λ_L^{1/2}``. ``O(K P min(K, P))``. Returned with ``UᵀU = Λ_L``."""
    K, P = W.shape
    if K <= P:
        values, vectors = torch.linalg.eigh(W.row_gram())
        return W.transpose_times(vectors[:, -rank:].flip(-1)), top_values(values, rank).diag()
    values, vectors = torch.linalg.eigh(W.column_gram())
    top = top_values(values, rank)
    return vectors[:, -rank:].flip(-1) * top.sqrt(), top.diag()


def top_values(values: Tensor, rank: int) -> Tensor:
    """``Λ_L`` ``[L]``: the largest ``L`` of ascending eigenvalues, descending, rounding's negatives at 0."""
    return values[-rank:].flip(-1).clamp_min(0)


def randomized_eigen_factor(W: StackedRows, rank: int, iterations: int,
                            generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """The same as :func:`top_eigen_factor` by subspace iteration with ``L + 2`` vectors (notes-002 §2.4)."""
    Q = torch.rand(W.shape[1], rank + 2, generator=generator, dtype=W.U.dtype, device=W.U.device) * 2 - 1
    for _ in range(iterations):
        Q, _ = torch.linalg.qr(W.transpose_times(W.times(Q)))
    WQ = W.times(Q)
    values, vectors = torch.linalg.eigh(WQ.T @ WQ)
    top = top_values(values, rank)
    return Q @ (vectors[:, -rank:].flip(-1) * top.sqrt()), top.diag()  # Q and the vectors orthonormal: UᵀU = Λ_L


def eigen_factor(W: StackedRows, cfg: SLANGConfig, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """The top-L eigen-factor ``U`` of ``WᵀW`` ``[P, L]`` and its ``UᵀU = Λ_L`` ``[L, L]``, exact or randomised as
    ``cfg.eig`` says."""
    return (top_eigen_factor(W, cfg.rank) if cfg.eig is Eig.exact
            else randomized_eigen_factor(W, cfg.rank, cfg.eig_iterations, generator))


@dataclass
class Precision:
    """A step's new ``U Uᵀ + diag(d)``, with ``UᵀU`` where the step knows it without the product."""

    U: Tensor  # [P, L]
    d: Tensor  # [P]
    U_gram: Tensor | None = None  # UᵀU [L, L]
    U_norms: Tensor | None = None  # diag(U Uᵀ) [P]


def slang_precision(state: SLANGState, G: GradientRows, prior_precision: Tensor, beta: float, cfg: SLANGConfig,
                    generator: torch.Generator) -> Precision:
    """SLANG's new precision: the eigen-factor of ``(1−β) U Uᵀ + β GᵀG``, the diagonal matched (steps 1-2)."""
    W = StackedRows(state.U, G, (1 - beta) ** 0.5, beta**0.5, state.U_gram, state.U_norms)  # (1−β) U Uᵀ + β GᵀG
    U, U_gram = eigen_factor(W, cfg, generator)
    U_norms = square_row_norms(U)
    correction = (W.column_square_norms() - U_norms).clamp_min(0)
    return Precision(U, (1 - beta) * state.d + beta * prior_precision + correction, U_gram, U_norms)


def online_eig_precision(state: SLANGState, G: GradientRows, prior_precision: Tensor, beta: float,
                         cfg: SLANGConfig, generator: torch.Generator) -> Precision:
    """SLANG-OnlineEig's new precision (notes-002 App. B eqs. 17-19, see the module docstring): an average of
    factors, whose ``UᵀU`` is not known without the product."""
    W = StackedRows(state.U[:, :0], G, 1.0, 1.0)  # WᵀW = GᵀG
    factor, _ = eigen_factor(W, cfg, generator)
    signs = torch.where((factor * state.U).sum(0) < 0, -1.0, 1.0).to(factor.dtype)
    residual = G.square_norms() - square_row_norms(factor)
    return Precision((1 - beta) * state.U + beta * factor * signs,
                     (1 - beta) * state.d + beta * (residual.clamp_min(0) + prior_precision))


PRECISION_UPDATES = {Update.slang: slang_precision, Update.online_eig: online_eig_precision}


def slang_step(state: SLANGState, G: GradientRows, g_hat: Tensor, prior_precision: Tensor, alpha: float, beta: float,
               cfg: SLANGConfig, generator: torch.Generator) -> SLANGState:
    """One update from the scaled per-example gradient rows ``G`` ``[MS, P]`` (one row each, so ``GᵀG`` is the
    N/M-scaled empirical Fisher) and ``ĝ`` ``[P]`` (see the module docstring)."""
    new_precision = PRECISION_UPDATES[cfg.update](state, G, prior_precision, beta, cfg, generator)
    t = state.t + 1
    momentum = cfg.momentum * state.momentum + (1 - cfg.momentum) * g_hat
    direction = momentum / (1 - cfg.momentum**t) + prior_precision * state.mean
    new = LowRankDiagPosterior(state.mean, new_precision.U, new_precision.d)
    mean = state.mean - alpha * new.cov_mv(direction)
    return SLANGState(mean=mean, U=new_precision.U, d=new_precision.d, momentum=momentum, t=t,
                      posterior=new.shifted(mean), U_gram=new_precision.U_gram, U_norms=new_precision.U_norms)


def step_sizes(cfg: SLANGConfig, t: int) -> tuple[float, float]:
    """``(α_t, β_t)`` = ``(α₀ / (1 + t^ω), β₀ / (1 + t^ω_β))`` (``ω_β = ω`` unless ``precision_decay``), constant
    for ``ω = 0``."""
    beta0 = cfg.lr if cfg.precision_lr is None else cfg.precision_lr
    beta_decay = cfg.decay if cfg.precision_decay is None else cfg.precision_decay
    return cfg.lr * decay_factor(cfg.decay, t), min(1.0, beta0 * decay_factor(beta_decay, t))


def fit_slang(problem: Problem, cfg: SLANGConfig) -> Fit:
    """SLANG from ``µ = θ0``, ``U = 0``, ``d = init_precision``; trace rows (every ``log_every`` iterations, or each
    epoch) by :func:`posterior_trace_row`."""
    cfg.validate()
    cfg.check_parameter_count(problem.theta0.numel())
    length = Length.of(len(problem.X), cfg.batch_size, cfg.iterations, cfg.epochs, cfg.log_every)
    slang = SLANGStep(problem, cfg)
    trained = train(problem, "slang", cfg, slang, length)
    return Fit(theta=slang.current.mean, posterior=slang.current.q(), info={"iterations": length.steps},
               trace=trained.trace, timing=trained.timing)


class SLANGStep(Trainer):
    """SLANG's step for :func:`~bnnpred.inference.loop.train`: weight draws, then the minibatch's per-example
    gradient rows, then :func:`slang_step`; it watches the new mean's largest entry (finite while every entry is)."""

    label, watched, advice = "SLANG", "mean's largest entry", "lower inference.lr"

    def __init__(self, problem: Problem, cfg: SLANGConfig):
        self.problem, self.cfg = problem, cfg
        mean = problem.theta0.detach().clone()
        self.current = SLANGState(mean=mean, U=mean.new_zeros(mean.numel(), cfg.rank),
                                d=torch.full_like(mean, cfg.init_precision), momentum=torch.zeros_like(mean))

    def state(self) -> dict[str, Any]:
        return {k: getattr(self.current, k) for k in ("mean", "U", "d", "momentum", "t", "U_gram", "U_norms")}

    def load(self, state: dict[str, Any]) -> None:
        self.current = SLANGState(**state)

    def step(self, t: int, rows: Callable[[], Rows]) -> float:
        problem = self.problem
        thetas = self.current.q().sample(self.cfg.n_samples, problem.generator)
        batch = rows()
        grads = per_example_rows(problem, thetas, problem.X[batch], problem.y[batch])  # [MS, P], formed or factors
        scale = len(problem.X) / grads.n_rows
        g_hat = -scale * grads.column_sums()  # before the rows are scaled (formed rows are scaled in place)
        alpha, beta = step_sizes(self.cfg, t)
        self.current = slang_step(self.current, grads.scaled(scale**0.5), g_hat, problem.prior_precision, alpha, beta,
                                  self.cfg, problem.generator)
        return float(self.current.mean.abs().max())

    def row(self, t: int, epoch: float) -> dict[str, float]:
        return posterior_trace_row(self.problem, self.current.q(), t, epoch)
