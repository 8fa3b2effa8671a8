r"""MAP estimation with Adam (notes-000 eq. 2.2; notes-004 eq. 3), optionally finished on the full batch.

Objective (sum form): ``Σ_i log p(y_i | f(x_i; θ)) - ½ θᵀ diag(δ) θ``. Each step minimises the per-example
average ``-(1/B) Σ_{i∈batch} log p - (1/2N) θᵀ diag(δ) θ``, an unbiased rescaling with the same optimum.

With ``finish_tol`` set, L-BFGS or Newton-CG (:mod:`bnnpred.inference.map_finish`) continues on the full
batch until the gradient norm of the sum-form objective is at most ``finish_tol``: a stationary MAP, which the
Laplace evidence and the representer identity (notes-000 §5.2, Fig. 5.6) assume. ``info["grad_norm"]`` records the
final norm either way, ``info["full_batch"]`` whether the last optimiser ran on the full batch (1) or on minibatches
(0: the health check then does not expect the gradient norm to fall).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import torch
from torch import Tensor

from bnnpred.errors import BnnpredError
from bnnpred.inference.base import Fit, Problem, steps_per_epoch
from bnnpred.inference.contract import POINT_KINDS, Budget, Method
from bnnpred.inference.fit_cache import cached_fit
from bnnpred.inference.loop import Length, Rows, Trainer, train
from bnnpred.inference.map_finish import Finish, finish_to_tolerance, log_joint_grad_norm


class Schedule(str, Enum):
    constant = "constant"
    cosine = "cosine"  # anneal to zero, so the MAP ends (nearly) stationary, as the Laplace evidence assumes
    step = "step"  # ÷10 at 50 % and 75 % of the steps (notes-001 §7, the paper's ÷10 at epochs 100 and 150 of 200)
    epoch_decay = "epoch_decay"  # × 1/(⌊epoch/10⌋ + 1) (notes-004 §3.4, the image reference implementation)


@dataclass
class MapConfig:
    lr: float = 1e-3
    steps: int = 10000
    schedule: Schedule = Schedule.cosine
    batch_size: int | None = None  # None: full batch
    log_every: int = 100
    epochs: int | None = None  # if set: this many passes over the data (replaces steps), a trace row per epoch
    # Finish on the full batch until ‖∇ (Σ log p + log prior)‖ ≤ finish_tol (null: Adam only), with L-BFGS or
    # Newton-CG steps (inference.map_finish; Newton forms the [P, P] GGN: P up to a few thousand)
    finish: Finish = Finish.lbfgs
    finish_tol: float | None = None
    finish_iterations: int = 2000  # at most, iterations of the finish

    def validate(self) -> None:
        _check_map_config(self)


# The training length of a method that starts with the MAP's Adam (and no training of its own after it)
MAP_BUDGET = Budget(steps=("map.steps",), epochs=("map.epochs",))


@dataclass
class MapOnlyConfig(Method):
    """``inference=map``: the point estimate alone (only the ``map`` predictive applies)."""

    KINDS = POINT_KINDS
    BUDGET = MAP_BUDGET

    name: str = "map"
    map: MapConfig = field(default_factory=MapConfig)

    def validate(self) -> None:
        self.map.validate()


def neg_log_joint(problem: Problem, theta: Tensor, rows: Tensor | slice, augment: bool = False) -> Tensor:
    """Per-example negative log joint on a batch: ``-(1/B) Σ log p - (1/2N) θᵀΔθ`` ``[]`` (on the augmented batch
    with ``augment``)."""
    X, y = problem.training_batch(rows) if augment else (problem.X[rows], problem.y[rows])
    nll = -problem.likelihood.log_prob(problem.model(theta, X), y).mean()
    return nll + 0.5 * (problem.prior_precision * theta.square()).sum() / len(problem.X)


def train_map(problem: Problem, cfg: MapConfig) -> Fit:
    """Adam on the negative log joint from ``problem.theta0`` (or the same MAP from the session's fit cache); a NaN or
    inf loss stops with an error."""
    _check_map_config(cfg)
    return cached_fit(problem, "map", cfg, lambda: _finish(problem, cfg, _adam(problem, cfg)))


def _adam(problem: Problem, cfg: MapConfig) -> Fit:
    """Adam from ``problem.theta0``, or from its last checkpoint (saved at epoch boundaries, where the minibatch
    order of the next epoch is still to be drawn from ``problem.generator``)."""
    length = Length.of(len(problem.X), cfg.batch_size, cfg.steps, cfg.epochs, cfg.log_every)
    adam = AdamStep(problem, cfg, length.steps)
    trained = train(problem, "map", cfg, adam, length)
    theta = adam.theta.detach()
    info = {"grad_norm": log_joint_grad_norm(problem, theta), "full_batch": float(cfg.batch_size is None)}
    return Fit(theta=theta, posterior=None, info=info, trace=trained.trace, timing=trained.timing)


class AdamStep(Trainer):
    """The MAP's step for :func:`~bnnpred.inference.loop.train`: Adam on the minibatch negative log joint."""

    label, watched = "MAP", "loss"
    advice = "lower inference.map.lr or raise prior.delta"

    def __init__(self, problem: Problem, cfg: MapConfig, steps: int):
        self.problem = problem
        self.theta = problem.theta0.detach().clone().requires_grad_(True)
        self.optimizer = torch.optim.Adam([self.theta], lr=cfg.lr)
        self.scheduler = lr_scheduler(self.optimizer, cfg.schedule, steps,
                                      steps_per_epoch(len(problem.X), cfg.batch_size))
        self.loss = math.nan

    def state(self) -> dict[str, Any]:
        return {"theta": self.theta.detach(), "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict()}

    def load(self, state: dict[str, Any]) -> None:
        with torch.no_grad():
            self.theta.copy_(state["theta"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])

    def step(self, t: int, rows: Callable[[], Rows]) -> float:
        batch = rows()
        self.optimizer.zero_grad(set_to_none=True)
        with self.problem.model.training():
            loss = neg_log_joint(self.problem, self.theta, batch, augment=True)
        self.loss = loss.item()
        if math.isfinite(self.loss):
            loss.backward()
            self.optimizer.step()
            self.scheduler.step()
        return self.loss

    def row(self, t: int, epoch: float) -> dict[str, float]:
        return map_trace_row(self.problem, self.theta, t, epoch, self.loss)


def map_trace_row(problem: Problem, theta: Tensor, step: int, epoch: float, loss: float) -> dict[str, float]:
    """A MAP training-trace row: the step, the epoch, the step's minibatch negative log joint (at θ before the
    step) and the session's monitor at θ after it (the validation and test metrics, where the run has them; a
    full-batch finish comes after the last row)."""
    return {"step": step, "epoch": epoch, "loss": loss, **problem.monitored(theta)}


def _finish(problem: Problem, cfg: MapConfig, fit: Fit) -> Fit:
    """The full-batch finish of ``fit`` when ``cfg.finish_tol`` is set, else ``fit``."""
    if cfg.finish_tol is None:
        return fit
    theta, info = finish_to_tolerance(problem, fit.theta, cfg.finish, cfg.finish_tol, cfg.finish_iterations)
    return Fit(theta=theta, posterior=None, info={**fit.info, **info, "full_batch": 1.0}, trace=fit.trace,
               timing=fit.timing)


def lr_scheduler(optimizer: torch.optim.Optimizer, schedule: Schedule, steps: int,
                 per_epoch: int) -> torch.optim.lr_scheduler.LRScheduler:
    """Cosine decay to zero over ``steps``, ÷10 at half and three quarters of them, ``1/(⌊epoch/10⌋ + 1)`` with
    ``per_epoch`` steps an epoch, or a constant learning rate."""
    if schedule is Schedule.cosine:
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(1, steps))
    if schedule is Schedule.step:
        return torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[steps // 2, 3 * steps // 4], gamma=0.1)
    if schedule is Schedule.epoch_decay:
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 / (step // (10 * per_epoch) + 1))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)


def _check_map_config(cfg: MapConfig) -> None:
    if not cfg.lr > 0:
        raise BnnpredError(f"inference.map.lr must be positive, got {cfg.lr}")
    if cfg.steps < 0:
        raise BnnpredError(f"inference.map.steps must be >= 0, got {cfg.steps}")
    if cfg.epochs is not None and cfg.epochs < 1:
        raise BnnpredError(f"inference.map.epochs must be >= 1 or null (use steps), got {cfg.epochs}")
    if cfg.batch_size is not None and cfg.batch_size < 1:
        raise BnnpredError(f"inference.map.batch_size must be >= 1 or null, got {cfg.batch_size}")
    if cfg.finish_tol is not None and not cfg.finish_tol > 0:
        raise BnnpredError(f"inference.map.finish_tol must be positive or null (Adam only), got {cfg.finish_tol}; "
                           "e.g. 1e-6")
    if cfg.finish_iterations < 1:
        raise BnnpredError(f"inference.map.finish_iterations must be >= 1, got {cfg.finish_iterations}")


def fit_map(problem: Problem, cfg: MapOnlyConfig) -> Fit:
    """``inference=map``."""
    return train_map(problem, cfg.map)
