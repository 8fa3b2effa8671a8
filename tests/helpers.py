"""Tiny problems for identity tests (float64)."""

from __future__ import annotations

import torch
from torch import nn

from bnnpred.curvature.functional import FlatModel
from bnnpred.inference import Problem
from bnnpred.likelihoods import Bernoulli, Categorical, Gaussian, Likelihood, Poisson
from bnnpred.models.mlp import MLPConfig, build_mlp

LIKELIHOODS = {"gaussian": (lambda: Gaussian(0.3), 1), "bernoulli": (Bernoulli, 1), "categorical": (Categorical, 3),
               "poisson": (Poisson, 1)}


def targets(kind: str, f: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Targets drawn from the model's own likelihood at outputs ``f`` ``[N, C]``."""
    if kind == "gaussian":
        return f[:, 0] + 0.5 * torch.randn(len(f), generator=gen)
    if kind == "bernoulli":
        return torch.bernoulli(torch.sigmoid(f[:, 0]), generator=gen).long()
    if kind == "poisson":
        return torch.poisson(f[:, 0].exp(), generator=gen)
    return torch.multinomial(torch.softmax(f, -1), 1, generator=gen)[:, 0]


def tiny_problem(kind: str, depth: int = 1, n: int = 12, d: int = 2, width: int = 5, delta: float = 0.7,
                 seed: int = 0) -> tuple[Problem, Likelihood]:
    """An MLP (``depth`` hidden tanh layers; 0 = linear model) with data from its own likelihood."""
    make, C = LIKELIHOODS[kind]
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    module: nn.Module = build_mlp(MLPConfig(depth=depth, width=width), (d,), C)
    model = FlatModel(module)
    X = torch.randn(n, d, generator=gen)
    with torch.no_grad():
        y = targets(kind, model(model.theta(), X), gen)
    theta = model.theta()
    lik = make()
    problem = Problem(model=model, likelihood=lik, X=X, y=y, prior_precision=torch.full_like(theta, delta),
                      theta0=theta, generator=gen)
    return problem, lik
