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

import torch
import torch.nn.functional as F
from torch import Tensor

from bnnpred.errors import BnnpredError
from bnnpred.inference.base import Fit, Problem, batches, steps_per_epoch, training_length
from bnnpred.inference.checkpoint import Checkpoints
from bnnpred.inference.contract import Budget, HealthObjective, Method
from bnnpred.inference.map import Schedule, lr_scheduler
from bnnpred.posteriors import DiagPosterior
from bnnpred.progress import progress


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
    the KL, the mean ``log σ − log s`` of each parameter tensor, and ``problem.monitor(µ)`` if given.
    """
    cfg.validate()
    N = len(problem.X)
    mu = problem.theta0.detach().clone().requires_grad_(True)
    rho = initial_rho(problem.prior_precision, cfg).detach().requires_grad_(cfg.fixed_sigma2 is None)
    groups = [{"params": [mu]}] + ([{"params": [rho], "lr": cfg.lr * cfg.rho_lr_factor}] if rho.requires_grad else [])
    optimizer = torch.optim.Adam(groups, lr=cfg.lr)
    steps, log_every = training_length(N, cfg.batch_size, cfg.steps, cfg.epochs, cfg.log_every)
    per_epoch = steps_per_epoch(N, cfg.batch_size)
    scheduler = lr_scheduler(optimizer, cfg.schedule, steps, per_epoch)
    trace: list[dict[str, float]] = []
    window: list[float] = []
    checkpoints, done = Checkpoints(problem, cfg.name, cfg), 0
    if (state := checkpoints.load()) is not None:  # resume where a killed run left off
        with torch.no_grad():
            mu.copy_(state["mu"])
            rho.copy_(state["rho"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        problem.generator.set_state(state["generator"])
        problem.model.load_buffers(state["buffers"])
        trace, window, done = state["trace"], state["window"], state["step"]
    rows_stream = batches(N, cfg.batch_size, problem.generator)
    for step in progress(range(done + 1, steps + 1), steps - done, cfg.name, problem.progress):
        optimizer.zero_grad(set_to_none=True)
        sigma = sigma_of(rho, cfg)
        kl = kl_to_prior(mu, sigma, problem.prior_precision)
        with problem.model.training():
            loss = -expected_loglik(problem, mu, sigma, next(rows_stream)) + cfg.kl_weight * kl / N
            if not math.isfinite(loss.item()):
                raise BnnpredError(f"{cfg.name} loss became {loss.item()} at step {step}; lower inference.lr")
            loss.backward()
        optimizer.step()
        scheduler.step()
        window.append(-loss.item())
        if step % log_every == 0 or step == steps:
            epoch = step / per_epoch
            trace.append(trace_row(problem, cfg, step, epoch, sum(window) / len(window), kl, mu, rho))
            window = []
        if checkpoints.due(at_boundary=step % per_epoch == 0, last_step=step == steps):
            checkpoints.save({"step": step, "mu": mu.detach(), "rho": rho.detach(), "window": window,
                              "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                              "generator": problem.generator.get_state(), "buffers": problem.model.buffer_state(),
                              "trace": trace})
    mu, sigma = mu.detach(), sigma_of(rho.detach(), cfg)
    timing = checkpoints.clock.timing(steps / per_epoch)
    info = {"steps": steps, "elbo_per_example": trace[-1]["elbo"], "kl": trace[-1]["kl"]}
    return Fit(theta=mu, posterior=DiagPosterior(mu, 1.0 / sigma.square()), info=info, trace=trace, timing=timing)


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
