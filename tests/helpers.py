"""What several test modules share: tiny problems for identity tests (float64), the closed-form Bayesian linear
regression, and tiny runs through the command line (in a subprocess) and in process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch
from torch import nn

from bnnpred.app.compose import compose
from bnnpred.app.runner import train
from bnnpred.curvature.functional import FlatModel
from bnnpred.inference import Problem
from bnnpred.likelihoods import Bernoulli, Categorical, Gaussian, Likelihood, Poisson
from bnnpred.models.mlp import MLPConfig, build_mlp

REPO = Path(__file__).resolve().parents[1]


def found_data_root() -> Path | None:
    """The real data folder: ``BNNPRED_DATA_DIR``, else ``shared/data`` next to the repository; None if absent."""
    configured = os.environ.get("BNNPRED_DATA_DIR")
    root = Path(configured) if configured else REPO.parent / "shared" / "data"
    return root if root.is_dir() else None


def real_data_root() -> Path:
    """:func:`found_data_root`; skips the test when it is absent."""
    import pytest

    if (root := found_data_root()) is None:
        pytest.skip("real data root not found: set BNNPRED_DATA_DIR to the shared data folder")
    return root


# a run of seconds through the command line
TINY = [
    "dataset.n_train=30", "dataset.n_valid=20", "dataset.n_test=40", "model=mlp", "model.width=8",
    "selection=none", "inference.map.steps=100", "inference.map.lr=0.01", "predictive.n_samples=20",
    "plot.grid_points=8", "progress=false",
]
# the same in process (tests of faults that need the run's Python objects)
TINY_IN_PROCESS = ["dataset.n_train=30", "dataset.n_valid=20", "dataset.n_test=30", "model=mlp", "model.width=8",
                   "predictive.n_samples=20", "plot.enabled=false", "progress=false", "inference.map.steps=150",
                   "inference.map.lr=0.01", "selection=none", "threads=1"]

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


def bnnpred(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``bnnpred ARGS`` in ``cwd`` with this tree's package (not whichever one the environment installed)."""
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "bnnpred.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": path})


def trained(run_dir: Path, *overrides: str) -> dict:
    """The metrics document of a tiny run trained in process into ``run_dir``."""
    return train(compose([*TINY_IN_PROCESS, *overrides]), run_dir).document


def blr(problem, sigma2, delta):
    """Closed-form BLR with features Φ = [x, 1] (the order of nn.Linear's weight, then bias)."""
    Phi = torch.cat([problem.X, torch.ones(len(problem.X), 1)], dim=1)
    precision = Phi.T @ Phi / sigma2 + delta * torch.eye(Phi.shape[1])
    mean = torch.linalg.solve(precision, Phi.T @ problem.y / sigma2)
    marginal = sigma2 * torch.eye(len(Phi)) + Phi @ Phi.T / delta
    evidence = torch.distributions.MultivariateNormal(torch.zeros(len(Phi)), marginal).log_prob(problem.y)
    return mean, precision, evidence
