r"""Bayes-by-Backprop: mean-field Gaussian VI by the reparameterisation gradient (Blundell et al. 2015; notes-004
§2.6, the BNN-predictions reference settings; notes-anchor-vi for the KL scale).

``q(θ) = N(µ, diag σ²)`` with ``σ = softplus(ρ) + σ_min``, trained with Adam on the per-example negative ELBO

.. math::
    \mathcal{L}(µ, ρ) = -\frac{1}{B} \sum_{b} \mathbb{E}_{q}[\log p(y_b \mid f(x_b; θ))]
                        + \frac{β}{N} \mathrm{KL}(q \,\|\, \mathcal{N}(0, Δ^{-1})),

i.e. the summed ELBO (all weights, all N data points) divided by N; ``β`` is the KL temperature (1: the ELBO).
With ``local_reparam`` the pre-activations of every linear layer are sampled (Kingma et al. 2015): for inputs
``h``, ``a ~ N(h µ_Wᵀ + µ_b, h² σ_W²ᵀ + σ_b²)``, one independent draw per example; otherwise one weight sample
is shared by the minibatch.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm import tqdm

from bnnpred.curvature.functional import FlatModel
from bnnpred.errors import BnnpredError
from bnnpred.inference.base import Fit, Problem, batches
from bnnpred.inference.map import Schedule, lr_scheduler
from bnnpred.posteriors import DiagPosterior


@dataclass
class BBBConfig:
    name: str = "bbb"
    lr: float = 1e-2  # Adam; the reference uses 10x the MAP learning rate
    steps: int = 5000
    schedule: Schedule = Schedule.constant
    batch_size: int | None = None  # None: full batch
    n_samples: int = 1  # Monte Carlo samples of the expected log-likelihood per step
    init_rho: float = -7.0  # σ = softplus(ρ) + sigma_min starts near 9e-4
    sigma_min: float = 1e-6
    kl_weight: float = 1.0  # β, the KL temperature
    rho_lr_factor: float = 1.0  # learning-rate multiplier of the variance parameters ρ
    local_reparam: bool = True
    log_every: int = 100

    def validate(self) -> None:
        for key in ("lr", "rho_lr_factor", "sigma_min"):
            if not getattr(self, key) > 0:
                raise BnnpredError(f"inference.{key} must be positive, got {getattr(self, key)}")
        if self.kl_weight < 0:
            raise BnnpredError(f"inference.kl_weight must be >= 0, got {self.kl_weight}; 1 is the ELBO")
        if self.steps < 1 or self.n_samples < 1:
            raise BnnpredError("inference.steps and inference.n_samples must be >= 1")
        if self.batch_size is not None and self.batch_size < 1:
            raise BnnpredError(f"inference.batch_size must be >= 1 or null, got {self.batch_size}")


def sigma_of(rho: Tensor, sigma_min: float) -> Tensor:
    return F.softplus(rho) + sigma_min


def kl_to_prior(mu: Tensor, sigma: Tensor, prior_precision: Tensor) -> Tensor:
    """``KL(N(µ, diag σ²) ‖ N(0, diag Δ⁻¹))``, summed over all ``P`` weights ``[]``."""
    var_ratio = prior_precision * sigma.square()
    return 0.5 * (var_ratio + prior_precision * mu.square() - 1 - var_ratio.log()).sum()


def local_reparam_forward(model: FlatModel, mu: Tensor, var: Tensor, X: Tensor, generator: torch.Generator) -> Tensor:
    """One draw of the outputs ``[B, C]`` with every linear layer's pre-activations sampled per example.

    Supports networks made of ``nn.Linear`` and parameter-free layers (the MLPs); ``mu`` and ``var`` ``[P]``.
    """
    means, variances = model.unflatten(mu), model.unflatten(var)
    h = X
    for name, layer in model.module.named_children():
        if isinstance(layer, nn.Linear):
            mean = h @ means[f"{name}.weight"].T
            variance = h.square() @ variances[f"{name}.weight"].T
            if layer.bias is not None:
                mean, variance = mean + means[f"{name}.bias"], variance + variances[f"{name}.bias"]
            noise = torch.randn(mean.shape, generator=generator, dtype=mean.dtype, device=mean.device)
            h = mean + variance.sqrt() * noise
        elif not any(True for _ in layer.parameters()):
            h = layer(h)
        else:
            raise BnnpredError(f"local reparameterisation needs linear layers, found {type(layer).__name__}; "
                               "set inference.local_reparam=false")
    return h


def expected_loglik(problem: Problem, cfg: BBBConfig, mu: Tensor, sigma: Tensor, rows: Tensor | slice) -> Tensor:
    """Monte Carlo estimate of ``(1/B) Σ_b E_q log p(y_b | f(x_b; θ))`` ``[]`` with ``cfg.n_samples`` draws."""
    X, y = problem.X[rows], problem.y[rows]
    total = mu.new_zeros(())
    for _ in range(cfg.n_samples):
        if cfg.local_reparam:
            f = local_reparam_forward(problem.model, mu, sigma.square(), X, problem.generator)
        else:
            eps = torch.randn(mu.shape, generator=problem.generator, dtype=mu.dtype, device=mu.device)
            f = problem.model(mu + sigma * eps, X)
        total = total + problem.likelihood.log_prob(f, y).mean()
    return total / cfg.n_samples


def fit_bbb(problem: Problem, cfg: BBBConfig) -> Fit:
    """Adam on the per-example negative ELBO from ``µ = θ0``, ``ρ = init_rho``; a non-finite loss is an error."""
    cfg.validate()
    N = len(problem.X)
    mu = problem.theta0.detach().clone().requires_grad_(True)
    rho = torch.full_like(mu, cfg.init_rho).requires_grad_(True)
    optimizer = torch.optim.Adam([{"params": [mu]}, {"params": [rho], "lr": cfg.lr * cfg.rho_lr_factor}], lr=cfg.lr)
    scheduler = lr_scheduler(optimizer, cfg.schedule, cfg.steps)
    rows_stream = batches(N, cfg.batch_size, problem.generator)
    trace: list[dict[str, float]] = []
    show = problem.progress and sys.stderr.isatty()
    for step in tqdm(range(1, cfg.steps + 1), desc="BBB", disable=not show, leave=False):
        optimizer.zero_grad(set_to_none=True)
        sigma = sigma_of(rho, cfg.sigma_min)
        kl = kl_to_prior(mu, sigma, problem.prior_precision)
        loss = -expected_loglik(problem, cfg, mu, sigma, next(rows_stream)) + cfg.kl_weight * kl / N
        if not math.isfinite(loss.item()):
            raise BnnpredError(f"BBB loss became {loss.item()} at step {step}; lower inference.lr")
        loss.backward()
        optimizer.step()
        scheduler.step()
        if step % cfg.log_every == 0 or step == cfg.steps:
            trace.append({"step": step, "elbo": -N * loss.item(), "kl": kl.item()})
    mu, sigma = mu.detach(), sigma_of(rho.detach(), cfg.sigma_min)
    posterior = DiagPosterior(mu, 1.0 / sigma.square())
    return Fit(theta=mu, posterior=posterior, info={"steps": cfg.steps, "elbo": trace[-1]["elbo"]}, trace=trace)
