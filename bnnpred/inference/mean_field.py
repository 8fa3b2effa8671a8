r"""Mean-field Gaussian VI trained by Adam: what Bayes-by-Backprop and Variational Laplace share (notes-004 §2.6,
notes-001 §2.1-2.8).

``q(θ) = N(µ, diag σ²)``, prior ``N(0, Δ⁻¹)``; each step minimises a per-example negative tempered ELBO

.. math::
    \mathcal{L}(µ, σ) = -\widehat{\mathbb{E}_q \log p}(y_b \mid x_b) / B + \frac{β}{N} \mathrm{KL}(q \,\|\, p),

(notes-001 eq. 29; the summed ELBO over all weights and N points, divided by N) where each method supplies the
estimate of the expected minibatch log-likelihood: a reparameterised sample (BBB) or the second-order expansion
at the mean (VL). ``σ`` is ``softplus(ρ) + σ_min`` (notes-004's BBB, ``ρ₀ = -7``) or ``exp(log σ)`` (notes-001,
``log σ₀ = log s − 3`` with ``s`` the prior standard deviation of each weight); the variance parameters get their
own learning-rate multiplier (notes-001 §2.8), or ``σ² = fixed_sigma2`` is held fixed (notes-001 §2.7).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from bnnpred.errors import BnnpredError
from bnnpred.inference.base import Fit, Problem, steps_per_epoch
from bnnpred.inference.contract import Budget, HealthObjective, Method
from bnnpred.inference.loop import Length, Rows, Trainer, train
from bnnpred.inference.map import Schedule, lr_scheduler
from bnnpred.posteriors import DiagPosterior


class VarianceParam(str, Enum):
    softplus = "softplus"  # σ = softplus(ρ) + σ_min, ρ₀ = init_rho (notes-004 §2.6)
    log = "log"  # σ = exp(ρ), ρ₀ = log s + init_log_sigma_offset (notes-001 §2.1)


@dataclass
class MeanFieldConfig(Method):
    BUDGET = Budget(steps=("steps",), epochs=("epochs",))
    HEALTH = HealthObjective.elbo  # its mean is not meant to improve the MAP objective (contract.HealthObjective)

    name: str = "mean_field"
    lr: float = 1e-2  # Adam
    steps: int = 5000
    schedule: Schedule = Schedule.constant
    batch_size: int | None = None  # None: full batch
    kl_weight: float = 1.0  # β, the KL temperature (1: the ELBO)
    rho_lr_factor: float = 1.0  # learning-rate multiplier of the variance parameters (ρ or log σ)
    variance: VarianceParam = VarianceParam.softplus
    init_rho: float = -7.0  # softplus: σ starts near 9e-4
    init_log_sigma_offset: float = -3.0  # log: log σ₀ − log s
    sigma_min: float = 1e-6  # softplus only
    fixed_sigma2: float | None = None  # hold σ² at this value (learn µ only); None: learn σ
    log_every: int = 100  # steps per trace row
    epochs: int | None = None  # if set: this many passes over the data (replaces steps), a trace row per epoch

    def validate(self) -> None:
        check_mean_field_config(self)


def check_mean_field_config(cfg: MeanFieldConfig) -> None:
    for key in ("lr", "sigma_min"):
        if not getattr(cfg, key) > 0:
            raise BnnpredError(f"inference.{key} must be positive, got {getattr(cfg, key)}")
    if not cfg.rho_lr_factor > 0:
        raise BnnpredError("inference.rho_lr_factor (the variance parameters' learning-rate multiplier) must be "
                           f"positive, got {cfg.rho_lr_factor}; e.g. inference.rho_lr_factor=10 (notes-001 §2.8)")
    if not 0 < cfg.kl_weight <= 1:
        raise BnnpredError(f"inference.kl_weight (β) must be in (0, 1], got {cfg.kl_weight}; e.g. "
                           "inference.kl_weight=0.1 (notes-001 Table 1), 1 is the ELBO")
    if cfg.fixed_sigma2 is not None and not cfg.fixed_sigma2 > 0:
        raise BnnpredError(f"inference.fixed_sigma2 must be positive or null (learned), got {cfg.fixed_sigma2}; "
                           "e.g. inference.fixed_sigma2=0.0001")
    for key in ("steps", "log_every", "epochs"):
        value = getattr(cfg, key)
        if value is not None and value < 1:
            raise BnnpredError(f"inference.{key} must be >= 1, got {value}")
    if cfg.batch_size is not None and cfg.batch_size < 1:
        raise BnnpredError(f"inference.batch_size must be >= 1 or null, got {cfg.batch_size}")


def kl_to_prior(mu: Tensor, sigma: Tensor, prior_precision: Tensor) -> Tensor:
    """``KL(N(µ, diag σ²) ‖ N(0, diag Δ⁻¹))``, summed over all ``P`` weights ``[]`` (notes-001 eq. 11)."""
    var_ratio = prior_precision * sigma.square()
    return 0.5 * (var_ratio + prior_precision * mu.square() - 1 - var_ratio.log()).sum()


# (problem, µ, σ, rows) -> estimate of (1/B) Σ_b E_q log p(y_b | f(x_b; θ)) [], differentiable in µ and σ
ExpectedLoglik = Callable[[Problem, Tensor, Tensor, Tensor | slice], Tensor]


def initial_rho(prior_precision: Tensor, cfg: MeanFieldConfig) -> Tensor:
    """``ρ₀`` ``[P]`` for a prior precision ``Δ`` ``[P]``: ``init_rho`` (softplus) or ``log s + offset`` with
    ``s = Δ^{-1/2}`` (log)."""
    if cfg.variance is VarianceParam.softplus:
        return torch.full_like(prior_precision, cfg.init_rho)
    return -0.5 * prior_precision.log() + cfg.init_log_sigma_offset


def sigma_of(rho: Tensor, cfg: MeanFieldConfig) -> Tensor:
    if cfg.fixed_sigma2 is not None:
        return torch.full_like(rho, cfg.fixed_sigma2**0.5)
    if cfg.variance is VarianceParam.softplus:
        return F.softplus(rho) + cfg.sigma_min
    return rho.exp()


def train_mean_field(problem: Problem, cfg: MeanFieldConfig, expected_loglik: ExpectedLoglik) -> Fit:
    """Adam on the per-example negative tempered ELBO from ``µ = θ0`` and ``ρ₀``; a non-finite loss is an error.

    Trace rows (every ``log_every`` steps): step, epoch, the tempered ELBO per example averaged over those steps,
    the KL, the mean ``log σ − log s`` of each parameter tensor, and the session's monitor at ``µ`` if it has one.
    """
    cfg.validate()
    length = Length.of(len(problem.X), cfg.batch_size, cfg.steps, cfg.epochs, cfg.log_every)
    adam = MeanFieldStep(problem, cfg, expected_loglik, length.steps)
    trained = train(problem, cfg.name, cfg, adam, length)
    mu, sigma = adam.mu.detach(), sigma_of(adam.rho.detach(), cfg)
    info = {"steps": length.steps, "elbo_per_example": trained.trace[-1]["elbo"], "kl": trained.trace[-1]["kl"]}
    return Fit(theta=mu, posterior=DiagPosterior(mu, 1.0 / sigma.square()), info=info, trace=trained.trace,
               timing=trained.timing)


class MeanFieldStep(Trainer):
    """A mean-field method's step for :func:`~bnnpred.inference.loop.train`: Adam on ``(µ, ρ)``; its trace row
    averages the ELBO over the steps since the last row (``window``)."""

    watched, advice = "loss", "lower inference.lr"

    def __init__(self, problem: Problem, cfg: MeanFieldConfig, expected_loglik: ExpectedLoglik, steps: int):
        self.problem, self.cfg, self.expected_loglik, self.label = problem, cfg, expected_loglik, cfg.name
        self.mu = problem.theta0.detach().clone().requires_grad_(True)
        self.rho = initial_rho(problem.prior_precision, cfg).detach().requires_grad_(cfg.fixed_sigma2 is None)
        groups = [{"params": [self.mu]}] + (
            [{"params": [self.rho], "lr": cfg.lr * cfg.rho_lr_factor}] if self.rho.requires_grad else [])
        self.optimizer = torch.optim.Adam(groups, lr=cfg.lr)
        self.scheduler = lr_scheduler(self.optimizer, cfg.schedule, steps,
                                      steps_per_epoch(len(problem.X), cfg.batch_size))
        self.window: list[float] = []
        self.kl = torch.tensor(math.nan)

    def state(self) -> dict[str, Any]:
        return {"mu": self.mu.detach(), "rho": self.rho.detach(), "window": self.window,
                "optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()}

    def load(self, state: dict[str, Any]) -> None:
        with torch.no_grad():
            self.mu.copy_(state["mu"])
            self.rho.copy_(state["rho"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.window = state["window"]

    def step(self, t: int, rows: Callable[[], Rows]) -> float:
        problem, cfg = self.problem, self.cfg
        self.optimizer.zero_grad(set_to_none=True)
        sigma = sigma_of(self.rho, cfg)
        self.kl = kl_to_prior(self.mu, sigma, problem.prior_precision)
        with problem.model.training():
            loss = -self.expected_loglik(problem, self.mu, sigma, rows()) + cfg.kl_weight * self.kl / len(problem.X)
            if not math.isfinite(loss.item()):
                return loss.item()
            loss.backward()
        self.optimizer.step()
        self.scheduler.step()
        self.window.append(-loss.item())
        return loss.item()

    def row(self, t: int, epoch: float) -> dict[str, float]:
        row = trace_row(self.problem, self.cfg, t, epoch, sum(self.window) / len(self.window), self.kl, self.mu,
                        self.rho)
        self.window = []
        return row


def trace_row(problem: Problem, cfg: MeanFieldConfig, step: int, epoch: float, elbo: float, kl: Tensor,
              mu: Tensor, rho: Tensor) -> dict[str, float]:
    row = {"step": step, "epoch": epoch, "elbo": elbo, "kl": kl.item()}
    with torch.no_grad():
        log_ratio = sigma_of(rho, cfg).log() + 0.5 * problem.prior_precision.log()  # log σ − log s
        names = getattr(problem.model, "names", None)
        if names is not None:
            for name, part in zip(names, log_ratio.split(problem.model.sizes), strict=True):
                row[f"log_sigma_over_s/{name}"] = part.mean().item()
    return {**row, **problem.monitored(mu)}
