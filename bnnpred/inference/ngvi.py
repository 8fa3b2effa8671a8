r"""Natural-gradient Gaussian VI with the GGN: the update OGGN, VOGGN and LGVA share (notes-000 §4.3, App. C).

With precision ``Π``, prior ``N(0, Δ⁻¹)`` and a method's estimates ``ĝ ≈ Σ_i E_q[J_iᵀ r_i]`` and
``Ĝ ≈ Σ_i E_q[J_iᵀ Λ_i J_i]`` (scaled by ``N/M`` on a minibatch of ``M``):

.. math::
    Π_{t+1} = (1-γ) Π_t + γ (Δ + Ĝ_t), \qquad µ_{t+1} = µ_t + γ Π_{t+1}^{-1} (ĝ_t - Δ µ_t)

The methods differ only in where ``ĝ`` and ``Ĝ`` are evaluated (Table 4.2); each module supplies an
``Estimator``. Full or diagonal precision (diagonal VOGGN is VOGN). For the full precision the estimator returns
a factor ``A`` ``[k, P]`` of ``Ĝ = AᵀA`` (``k ≤ N·K·S``), and the precision is kept as ``diag(d) + U Uᵀ`` while
its rank stays small (:mod:`bnnpred.inference.ngvi_precision`).

γ weights the *new* curvature. The thesis's "step size β = 0.999" (§5.2) is read as the weight of the *old*
precision, as in the VOGN code of the thesis author's group (``P ← βP + (1−β)(…)``), i.e. ``γ = 1 − β = 0.001``
(conf/inference/*.yaml give the evidence).

Optionally, as in VOGN (Osawa et al. 2019; the DNN2GP scripts that notes-003 §2.12 follows), the mean takes its
own step size ``ρ`` (``mean_gamma``) and a momentum ``β₁`` on the natural gradient:
``m_t = β₁ m_{t-1} + (1-β₁)(ĝ_t - Δ µ_t)``, ``µ_{t+1} = µ_t + ρ Π_{t+1}^{-1} m_t``. With ``ρ = γ`` and ``β₁ = 0``
(the defaults) this is the thesis's update above.

Convergence: a stochastic method's mean never stops moving, so a run stops when the smoothed ELBO of its trace
reaches a plateau (:func:`bnnpred.inference.plateau.plateau_reached`), or when the mean's relative change falls
below ``tol`` (deterministic OGGN), or at ``iterations``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import torch
from torch import Tensor

from bnnpred.curvature.ggn import Structure
from bnnpred.curvature.jacobians import stacked_jacobians
from bnnpred.errors import BnnpredError
from bnnpred.inference.base import (
    TRACE_DRAWS,
    Fit,
    Problem,
    decay_factor,
    posterior_trace_row,
)
from bnnpred.inference.contract import Budget, Method
from bnnpred.inference.loop import Length, Stage, Trainer
from bnnpred.inference.map import MapConfig, train_map
from bnnpred.inference.ngvi_precision import PrecisionState, initial_precision, precision_from_state
from bnnpred.inference.plateau import plateau_reached
from bnnpred.posteriors import Posterior


class PlateauOn(str, Enum):
    elbo = "elbo"  # the ELBO through the network at draws from q (VOGGN)
    glm_elbo = "glm_elbo"  # the ELBO of the GLM linearised at the mean (OGGN, LGVA: the model they fit)


class Start(str, Enum):
    init = "init"  # the network's random initialisation, shared by all methods (the thesis)
    map = "map"  # a warm start: the MAP trained from that initialisation (inference.map.*), a deviation


@dataclass
class NGVIConfig(Method):
    BUDGET = Budget(steps=("iterations", "map.steps"), epochs=("map.epochs",))  # map: the warm start (start: map)

    name: str = "ngvi"
    structure: Structure = Structure.full
    # γ ∈ (0, 1]: the weight of the new curvature, Π ← (1 − γ) Π + γ (Δ + Ĝ). The thesis's "β = 0.999" is the
    # weight of the old precision: γ = 1 − β = 0.001 (see the module docstring).
    gamma: float = 0.001
    # NOTE [γ warm-up]: γ rises geometrically from gamma_start to gamma over the first `warmup` iterations
    # (notes-000 §8 item 6); warmup = 0 is the thesis's constant γ.
    gamma_start: float = 0.1
    warmup: int = 0
    mean_gamma: float | None = None  # ρ, the mean's step size; None: γ (the thesis)
    decay: float = 0.0  # ω: both step sizes divided by 1 + t^ω (SLANG's baselines, notes-002 §2.9); 0: none
    momentum: float = 0.0  # β₁ on the mean's natural gradient (VOGN); 0: none (the thesis)
    n_samples: int = 1  # S Monte Carlo samples per step (VOGGN, LGVA)
    init_var: float = 0.1  # Σ₀ = init_var · I
    start: Start = Start.init  # the initial mean µ₀
    map: MapConfig = field(default_factory=MapConfig)  # the warm start's MAP (start: map)
    iterations: int = 300  # at most
    tol: float = 1e-6  # stop when ‖µ_{t+1} - µ_t‖ / ‖µ_t‖ < tol (0: never)
    # Stop when the ELBO of the trace, averaged over `plateau_window` trace rows, gains less than `plateau_tol`
    # nats per example on the previous window's average (null: never).
    plateau_window: int | None = None
    plateau_tol: float = 1e-3
    plateau_on: PlateauOn = PlateauOn.elbo
    # Full structure: keep Π = diag(d) + U Uᵀ (Woodbury) while rank U ≤ P / 4, else a dense P x P Cholesky;
    # both give the same update (to rounding). false: always dense.
    woodbury: bool = True
    batch_size: int | None = None  # None: full batch; else minibatches with N/M scaling
    log_every: int = 10  # ELBO estimate every this many iterations

    def validate(self) -> None:
        check_ngvi_config(self)


# (problem, q_t, X_batch, y_batch, S, generator, structure) -> (ĝ, curvature, estimate of Σ_batch E_q log p), with
# the curvature a factor A [k, P] of Ĝ = AᵀA (full) or the diagonal of Ĝ [P] (diag).
Estimator = Callable[[Problem, Posterior, Tensor, Tensor, int, torch.Generator, Structure],
                     tuple[Tensor, Tensor, Tensor]]


class DivergenceError(BnnpredError):
    """NGVI diverged; ``last_good`` holds the last finite state (a ``Fit``)."""

    def __init__(self, message: str, last_good: Fit):
        super().__init__(message)
        self.last_good = last_good


def check_ngvi_config(cfg: NGVIConfig) -> None:
    if cfg.structure is Structure.kron:
        raise BnnpredError(f"inference={cfg.name} supports structure full or diag; kron is for laplace_ggn")
    for key in ("gamma", "gamma_start"):
        if not 0 < getattr(cfg, key) <= 1:
            raise BnnpredError(f"inference.{key} must be in (0, 1], got {getattr(cfg, key)}; e.g. 0.001 "
                               "(the thesis's β = 0.999 read as γ = 1 − β)")
    if cfg.mean_gamma is not None and not cfg.mean_gamma > 0:
        raise BnnpredError(f"inference.mean_gamma must be positive or null (= gamma), got {cfg.mean_gamma}")
    if not 0 <= cfg.momentum < 1:
        raise BnnpredError(f"inference.momentum must be in [0, 1), got {cfg.momentum}; 0 is the thesis's update")
    if cfg.decay < 0:
        raise BnnpredError(f"inference.decay must be >= 0, got {cfg.decay}")
    if cfg.warmup < 0:
        raise BnnpredError(f"inference.warmup must be >= 0, got {cfg.warmup}")
    if not cfg.init_var > 0:
        raise BnnpredError(f"inference.init_var must be positive, got {cfg.init_var}; the thesis uses 0.1")
    if cfg.n_samples < 1:
        raise BnnpredError(f"inference.n_samples must be >= 1, got {cfg.n_samples}")
    if cfg.iterations < 1:
        raise BnnpredError(f"inference.iterations must be >= 1, got {cfg.iterations}")
    if cfg.plateau_window is not None and cfg.plateau_window < 1:
        raise BnnpredError(f"inference.plateau_window must be >= 1 trace rows or null (never), got "
                           f"{cfg.plateau_window}; e.g. 20")
    if not cfg.plateau_tol >= 0:
        raise BnnpredError(f"inference.plateau_tol must be >= 0 nats per example, got {cfg.plateau_tol}; e.g. 1e-3")
    if cfg.batch_size is not None and cfg.batch_size < 1:
        raise BnnpredError(f"inference.batch_size must be >= 1 or null, got {cfg.batch_size}")
    cfg.map.validate()


def run_ngvi(problem: Problem, cfg: NGVIConfig, estimate: Estimator, start: Posterior | None = None) -> Fit:
    """Iterate the common update from ``start`` (default ``N(θ0, init_var·I)``) until the smoothed ELBO reaches a
    plateau, the mean stops moving (``tol``), or ``iterations``; resumable from its checkpoints (saved at epoch
    boundaries, with the precision state, mean, momentum, trace and generator state)."""
    check_ngvi_config(cfg)
    stage = Stage(problem, cfg.name, cfg)  # keyed before the warm start moves the generator
    ngvi = NGVIStep(problem, cfg, estimate)
    if not stage.resumed:
        state = initial_precision(cfg.structure, problem.prior_precision, cfg.init_var, cfg.woodbury, start)
        warm = train_map(problem, cfg.map) if cfg.start is Start.map and start is None else None
        ngvi.start_info = {} if warm is None else {"start_map_grad_norm": warm.info["grad_norm"]}
        ngvi.precision = state
        ngvi.post = start or state.posterior((problem.theta0 if warm is None else warm.theta).clone())
        ngvi.momentum = torch.zeros_like(ngvi.post.mean)
    trained = stage.run(ngvi, Length(cfg.iterations, cfg.batch_size, cfg.log_every, first_row=True))
    info = {"iterations": trained.steps, "converged": float(ngvi.converged), "plateau": float(ngvi.plateau),
            "rel_change": ngvi.rel_change, **ngvi.start_info}
    return Fit(theta=ngvi.post.mean, posterior=ngvi.post, info=info, trace=trained.trace, timing=trained.timing)


class NGVIStep(Trainer):
    """The natural-gradient step for :class:`~bnnpred.inference.loop.Stage`: the estimator's gradient and
    curvature on a minibatch, then :func:`_step`; it stops at a plateau of the trace's ELBO or when the mean's
    relative change falls below ``tol``, and watches that change (a diverged step raises in :func:`_step`)."""

    watched, advice = "relative change of the mean", "lower inference.gamma"

    def __init__(self, problem: Problem, cfg: NGVIConfig, estimate: Estimator):
        self.problem, self.cfg, self.estimate, self.label = problem, cfg, estimate, cfg.name
        self.precision: PrecisionState | None = None
        self.post: Posterior | None = None
        self.momentum: Tensor | None = None
        self.start_info: dict[str, float] = {}
        self.rel_change, self.converged, self.plateau = math.inf, False, False

    def state(self) -> dict[str, Any]:
        return {"precision": self.precision.state(), "mean": self.post.mean, "momentum": self.momentum,
                "start_info": self.start_info, "rel_change": self.rel_change}

    def load(self, state: dict[str, Any]) -> None:
        self.precision = precision_from_state(state["precision"])
        self.post, self.momentum = self.precision.posterior(state["mean"]), state["momentum"]
        self.start_info, self.rel_change = state["start_info"], state["rel_change"]

    def step(self, t: int, rows: Callable[[], Tensor | slice]) -> float:
        problem, cfg = self.problem, self.cfg
        batch = rows()
        X, y = problem.X[batch], problem.y[batch]
        scale = len(problem.X) / len(X)
        g, curv, _ = self.estimate(problem, self.post, X, y, cfg.n_samples, problem.generator, cfg.structure)
        precision, post, self.momentum = _step(self.precision, self.post, self.momentum, scale * g, curv, scale,
                                               problem.prior_precision, cfg, t, step_size(cfg, t))
        self.rel_change = float((post.mean - self.post.mean).norm() / self.post.mean.norm().clamp_min(1e-12))
        self.precision, self.post = precision, post
        return self.rel_change

    def row(self, t: int, epoch: float) -> dict[str, float]:
        row = {**posterior_trace_row(self.problem, self.post, t, epoch), "rel_change": self.rel_change}
        if self.cfg.plateau_on is PlateauOn.glm_elbo:
            row["glm_elbo"] = glm_elbo(self.problem, self.post, t)
        return row

    def stop(self, t: int, trace: list[dict[str, float]]) -> bool:
        cfg = self.cfg
        # the plateau is tested on the rows of the log cadence (not on the last step's row, taken whatever the cadence)
        if cfg.plateau_window is not None and t > 1 and t % cfg.log_every == 0 and plateau_reached(
                [row[cfg.plateau_on.value] for row in trace[1:]], cfg.plateau_window, cfg.plateau_tol):
            self.converged = self.plateau = True
        elif self.rel_change < cfg.tol:
            self.converged = True
        return self.converged


def glm_elbo(problem: Problem, post: Posterior, step: int) -> float:
    """The ELBO per example of the GLM linearised at the mean, ``(1/N)(Σ_i E_q log p(y_i | f(x_i;µ) +
    J(x_i;µ)(θ − µ)) − KL(q ‖ p))``, with ``TRACE_DRAWS`` draws seeded by the run's seed and the step (as the
    trace's ELBO)."""
    seed = problem.generator.initial_seed() * 1_000_003 + step
    generator = torch.Generator(device=post.mean.device).manual_seed(seed % 2**63)
    f, J = stacked_jacobians(problem.model, post.mean, problem.X)
    shifts = post.sample(TRACE_DRAWS, generator) - post.mean
    with torch.no_grad():
        loglik = sum(problem.likelihood.log_prob(f + J @ shift, problem.y).sum() for shift in shifts) / TRACE_DRAWS
        return float(loglik - post.kl_to_prior(problem.prior_precision)) / len(problem.X)


def step_size(cfg: NGVIConfig, t: int) -> float:
    """``γ_t``: geometric from ``gamma_start`` to ``gamma`` over the warm-up (NOTE [γ warm-up]), then ``gamma``;
    divided by ``1 + t^ω`` with ``decay = ω > 0``."""
    if t > cfg.warmup:
        return cfg.gamma * decay_factor(cfg.decay, t)
    return cfg.gamma_start * (cfg.gamma / cfg.gamma_start) ** ((t - 1) / cfg.warmup) * decay_factor(cfg.decay, t)


def _step(state: PrecisionState, post: Posterior, momentum: Tensor, g: Tensor, curv: Tensor, scale: float,
          delta: Tensor, cfg: NGVIConfig, t: int, gamma: float) -> tuple[PrecisionState, Posterior, Tensor]:
    """One damped natural-gradient step: the new precision state, posterior and momentum ``[P]``; a non-finite
    result or lost positive definiteness is an error. ``curv`` is ``A`` ``[k, P]`` (full) or ``diag Ĝ`` ``[P]``
    of the batch, before the ``N/M`` ``scale``."""
    last_good = Fit(theta=post.mean, posterior=post, info={"iterations": t - 1})
    if not bool(torch.isfinite(curv).all() and torch.isfinite(g).all()):
        raise DivergenceError(f"{cfg.name} diverged at iteration {t} (non-finite curvature); "
                              "lower inference.gamma", last_good)
    new_state = state.update(gamma, delta, curv, scale)  # (1 - γ) Π + γ (Δ + scale · Ĝ)
    try:
        new = new_state.posterior(post.mean)
    except BnnpredError as e:
        raise DivergenceError(f"{cfg.name} diverged at iteration {t}: {e}", last_good) from e
    momentum = torch.lerp(g - delta * post.mean, momentum, cfg.momentum)  # β₁ m + (1 - β₁)(ĝ - Δµ)
    mean_gamma = gamma if cfg.mean_gamma is None else cfg.mean_gamma * decay_factor(cfg.decay, t)
    mean = post.mean + mean_gamma * new.cov_mv(momentum)
    if not bool(torch.isfinite(mean).all()):
        raise DivergenceError(f"{cfg.name} diverged at iteration {t} (non-finite mean); lower inference.gamma",
                              last_good)
    return new_state, new.shifted(mean), momentum
