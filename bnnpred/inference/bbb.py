r"""Bayes-by-Backprop: mean-field Gaussian VI by the reparameterisation gradient (Blundell et al. 2015; notes-004
§2.6, the BNN-predictions reference settings; notes-001 §2.2, the "VI" baseline; notes-anchor-vi for the KL scale).

The expected log-likelihood of :mod:`bnnpred.inference.mean_field`'s objective is estimated by sampling: with
``local_reparam`` the pre-activations of every linear layer are sampled (Kingma et al. 2015): for inputs ``h``,
``a ~ N(h µ_Wᵀ + µ_b, h² σ_W²ᵀ + σ_b²)``, one independent draw per example; otherwise one weight sample
``θ = µ + σ ε`` is shared by the minibatch (notes-001 App. A).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from bnnpred.curvature.functional import FlatModel
from bnnpred.errors import BnnpredError
from bnnpred.inference.base import Fit, Problem
from bnnpred.inference.mean_field import (
    ExpectedLoglik,
    MeanFieldConfig,
    check_mean_field_config,
    train_mean_field,
)


@dataclass
class BBBConfig(MeanFieldConfig):
    name: str = "bbb"
    n_samples: int = 1  # Monte Carlo samples of the expected log-likelihood per step
    local_reparam: bool = True

    def validate(self) -> None:
        check_mean_field_config(self)
        if self.n_samples < 1:
            raise BnnpredError(f"inference.n_samples (S) must be >= 1, got {self.n_samples}; e.g. "
                               "inference.n_samples=1")


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


def sampled_loglik(cfg: BBBConfig) -> ExpectedLoglik:
    """Monte Carlo estimate of ``(1/B) Σ_b E_q log p(y_b | f(x_b; θ))`` ``[]`` with ``cfg.n_samples`` draws."""

    def estimate(problem: Problem, mu: Tensor, sigma: Tensor, rows: Tensor | slice) -> Tensor:
        X, y = problem.training_batch(rows)
        total = mu.new_zeros(())
        for _ in range(cfg.n_samples):
            if cfg.local_reparam:
                f = local_reparam_forward(problem.model, mu, sigma.square(), X, problem.generator)
            else:
                eps = torch.randn(mu.shape, generator=problem.generator, dtype=mu.dtype, device=mu.device)
                f = problem.model(mu + sigma * eps, X)
            total = total + problem.likelihood.log_prob(f, y).mean()
        return total / cfg.n_samples

    return estimate


def fit_bbb(problem: Problem, cfg: BBBConfig) -> Fit:
    return train_mean_field(problem, cfg, sampled_loglik(cfg))
