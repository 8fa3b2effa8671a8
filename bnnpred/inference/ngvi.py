r"""Natural-gradient Gaussian VI with the GGN: the update OGGN, VOGGN and LGVA share (notes-000 §4.3, App. C).

With precision ``Π``, prior ``N(0, Δ⁻¹)`` and a method's estimates ``ĝ ≈ Σ_i E_q[J_iᵀ r_i]`` and
``Ĝ ≈ Σ_i E_q[J_iᵀ Λ_i J_i]`` (scaled by ``N/M`` on a minibatch of ``M``):

.. math::
    Π_{t+1} = (1-γ) Π_t + γ (Δ + Ĝ_t), \qquad µ_{t+1} = µ_t + γ Π_{t+1}^{-1} (ĝ_t - Δ µ_t)

The methods differ only in where ``ĝ`` and ``Ĝ`` are evaluated (Table 4.2); each module supplies an
``Estimator``. Full or diagonal precision (diagonal VOGGN is VOGN).

Optionally, as in VOGN (Osawa et al. 2019; the DNN2GP scripts that notes-003 §2.12 follows), the mean takes its
own step size ``ρ`` (``mean_gamma``) and a momentum ``β₁`` on the natural gradient:
``m_t = β₁ m_{t-1} + (1-β₁)(ĝ_t - Δ µ_t)``, ``µ_{t+1} = µ_t + ρ Π_{t+1}^{-1} m_t``. With ``ρ = γ`` and ``β₁ = 0``
(the defaults) this is the thesis's update above.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from bnnpred.curvature.ggn import Structure
from bnnpred.errors import BnnpredError
from bnnpred.inference.base import Fit, Problem, batches, decay_factor, posterior_trace_row, steps_per_epoch
from bnnpred.posteriors import Posterior, posterior_from_precision
from bnnpred.progress import progress


@dataclass
class NGVIConfig:
    name: str = "ngvi"
    structure: Structure = Structure.full
    gamma: float = 0.999  # step size γ ∈ (0, 1] (the thesis's β)
    # NOTE [γ warm-up]: from a random mean, full Gauss-Newton steps (γ ≈ 1) jump to the trivial θ ≈ 0 mode on
    # the thesis MLP (all outputs 0.5 on two moons). γ rises geometrically from gamma_start to gamma over the
    # first `warmup` iterations (notes-000 §8 item 6); warmup = 0 is the thesis's constant γ.
    gamma_start: float = 0.1
    warmup: int = 0
    mean_gamma: float | None = None  # ρ, the mean's step size; None: γ (the thesis)
    decay: float = 0.0  # ω: both step sizes divided by 1 + t^ω (SLANG's baselines, notes-002 §2.9); 0: none
    momentum: float = 0.0  # β₁ on the mean's natural gradient (VOGN); 0: none (the thesis)
    n_samples: int = 1  # S Monte Carlo samples per step (VOGGN, LGVA)
    init_var: float = 0.1  # Σ₀ = init_var · I
    iterations: int = 300  # at most
    tol: float = 1e-6  # stop when ‖µ_{t+1} - µ_t‖ / ‖µ_t‖ < tol
    batch_size: int | None = None  # None: full batch; else minibatches with N/M scaling
    log_every: int = 10  # ELBO estimate every this many iterations

    def validate(self) -> None:
        check_ngvi_config(self)


# (problem, q_t, X_batch, y_batch, S, generator, structure) -> (ĝ, Ĝ, estimate of Σ_batch E_q log p)
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
            raise BnnpredError(f"inference.{key} must be in (0, 1], got {getattr(cfg, key)}; the thesis uses 0.999")
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
    if cfg.batch_size is not None and cfg.batch_size < 1:
        raise BnnpredError(f"inference.batch_size must be >= 1 or null, got {cfg.batch_size}")


def run_ngvi(problem: Problem, cfg: NGVIConfig, estimate: Estimator, start: Posterior | None = None) -> Fit:
    """Iterate the common update from ``start`` (default ``N(θ0, init_var·I)``) until the mean stops moving or
    ``iterations``."""
    check_ngvi_config(cfg)
    N, delta = len(problem.X), problem.prior_precision
    P = delta.numel()
    eye_or_ones = torch.eye(P, dtype=delta.dtype, device=delta.device) if cfg.structure is Structure.full \
        else torch.ones_like(delta)
    post = start or posterior_from_precision(cfg.structure.value, problem.theta0.clone(), eye_or_ones / cfg.init_var)
    rows_stream = batches(N, cfg.batch_size, problem.generator)
    trace: list[dict[str, float]] = []
    momentum = torch.zeros_like(post.mean)
    converged, rel_change, t = False, math.inf, 0
    for t in progress(range(1, cfg.iterations + 1), cfg.iterations, cfg.name, problem.progress):
        rows = next(rows_stream)
        X, y = problem.X[rows], problem.y[rows]
        scale = N / len(X)
        g, G, _ = estimate(problem, post, X, y, cfg.n_samples, problem.generator, cfg.structure)
        gamma = step_size(cfg, t)
        new_post, momentum = _step(post, momentum, scale * g, scale * G, delta, cfg, t, gamma)
        rel_change = float((new_post.mean - post.mean).norm() / post.mean.norm().clamp_min(1e-12))
        post = new_post
        if t % cfg.log_every == 0 or t == 1:
            epoch = t / steps_per_epoch(N, cfg.batch_size)
            trace.append({**posterior_trace_row(problem, post, t, epoch), "rel_change": rel_change})
        if rel_change < cfg.tol:
            converged = True
            break
    info = {"iterations": t, "converged": float(converged), "rel_change": rel_change}
    return Fit(theta=post.mean, posterior=post, info=info, trace=trace)


def step_size(cfg: NGVIConfig, t: int) -> float:
    """``γ_t``: geometric from ``gamma_start`` to ``gamma`` over the warm-up (NOTE [γ warm-up]), then ``gamma``;
    divided by ``1 + t^ω`` with ``decay = ω > 0``."""
    if t > cfg.warmup:
        return cfg.gamma * decay_factor(cfg.decay, t)
    return cfg.gamma_start * (cfg.gamma / cfg.gamma_start) ** ((t - 1) / cfg.warmup) * decay_factor(cfg.decay, t)


def _step(post: Posterior, momentum: Tensor, g: Tensor, G: Tensor, delta: Tensor, cfg: NGVIConfig, t: int,
          gamma: float) -> tuple[Posterior, Tensor]:
    """One damped natural-gradient step and the new momentum ``[P]``; a non-finite result or lost positive
    definiteness is an error.

    ``G`` (the batch curvature, ``[P, P]`` or ``[P]``) is overwritten.
    """
    last_good = Fit(theta=post.mean, posterior=post, info={"iterations": t - 1})
    target = G.diagonal() if G.dim() == 2 else G
    target += delta  # G + Δ, in place
    precision = torch.lerp(post.precision, G, gamma)  # (1 - γ) Π + γ (G + Δ)
    if not bool(torch.isfinite(precision).all() and torch.isfinite(g).all()):
        raise DivergenceError(f"{cfg.name} diverged at iteration {t} (non-finite curvature); "
                              "lower inference.gamma", last_good)
    try:
        new = posterior_from_precision(cfg.structure.value, post.mean, precision)
    except BnnpredError as e:
        raise DivergenceError(f"{cfg.name} diverged at iteration {t}: {e}", last_good) from e
    momentum = torch.lerp(g - delta * post.mean, momentum, cfg.momentum)  # β₁ m + (1 - β₁)(ĝ - Δµ)
    mean_gamma = gamma if cfg.mean_gamma is None else cfg.mean_gamma * decay_factor(cfg.decay, t)
    mean = post.mean + mean_gamma * new.cov_mv(momentum)
    if not bool(torch.isfinite(mean).all()):
        raise DivergenceError(f"{cfg.name} diverged at iteration {t} (non-finite mean); lower inference.gamma",
                              last_good)
    return new.shifted(mean), momentum
