"""Time per iteration of OGGN, LGVA and VOGGN (S = 1 and 10, full and diagonal) on the thesis MLP with N = 150
two-moons-sized inputs, as a ratio to one full-batch Adam step on the same model; the full precision at γ = 1
(kept as diag + low rank, Woodbury) and at γ = 0.001 (dense P x P after a few steps); and the dense variant's
scaling with P (hidden width 15, 25, 35).

    python bench/ngvi_iteration.py

Results are recorded in bench/README.md.
"""

from __future__ import annotations

import time

import torch

from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.ggn import Structure
from bnnpred.inference import Problem
from bnnpred.inference.lgva import LGVAConfig, fit_lgva
from bnnpred.inference.map import MapConfig, Schedule, train_map
from bnnpred.inference.oggn import OGGNConfig, fit_oggn
from bnnpred.inference.voggn import VOGGNConfig, fit_voggn
from bnnpred.likelihoods import Bernoulli
from bnnpred.models.mlp import MLPConfig, build_mlp

METHODS = {"oggn": (OGGNConfig, fit_oggn), "lgva": (LGVAConfig, fit_lgva), "voggn": (VOGGNConfig, fit_voggn)}


def problem(width: int) -> Problem:
    torch.manual_seed(0)
    model = FlatModel(build_mlp(MLPConfig(depth=5, width=width), (2,), 1).double())
    theta = model.theta()
    X = torch.randn(150, 2, dtype=torch.float64)
    y = (X[:, 0] > 0).long()
    return Problem(model=model, likelihood=Bernoulli(), X=X, y=y, prior_precision=torch.full_like(theta, 0.13),
                   theta0=theta, generator=torch.Generator().manual_seed(0))


def seconds_per_iteration(fit, cfg, prob: Problem, iterations: int, **settings) -> float:
    """Time per step of the steps after the fifth (by then a low-rank state that outgrows P / 4 is dense), from
    runs of 5 and ``5 + iterations`` steps; no trace rows."""
    settings = {"gamma": 0.1, "mean_gamma": 0.1, "tol": 0.0, "log_every": 10**9, **settings}
    times = []
    for n in (5, 5 + iterations):
        start = time.perf_counter()
        fit(prob, cfg(iterations=n, **settings))
        times.append(time.perf_counter() - start)
    return (times[1] - times[0]) / iterations


def adam_step_seconds(prob: Problem, steps: int = 500) -> float:
    start = time.perf_counter()
    train_map(prob, MapConfig(steps=steps, schedule=Schedule.constant, log_every=10**9))
    return (time.perf_counter() - start) / steps


def main() -> None:
    prob = problem(25)
    adam = adam_step_seconds(prob)
    print(f"thesis MLP, P = {prob.theta0.numel()}, N = 150, threads = {torch.get_num_threads()}")
    print(f"Adam step (full batch)           {adam * 1e3:8.2f} ms")
    variants = [("full γ=1", Structure.full, 1.0), ("full γ=1e-3", Structure.full, 1e-3),
                ("diag γ=1e-3", Structure.diag, 1e-3)]  # the NGVI family has no Kronecker variant
    for name, (cfg, fit) in METHODS.items():
        for label, structure, gamma in variants:
            for S in ([1] if name == "oggn" else [1, 10]):
                t = seconds_per_iteration(fit, cfg, prob, 20, structure=structure, n_samples=S, gamma=gamma)
                print(f"{name:5s} {label:12s} S = {S:2d}  {t * 1e3:8.1f} ms  = {t / adam:6.1f} x Adam")
    for width in (15, 25, 35):
        prob = problem(width)
        t = seconds_per_iteration(fit_oggn, OGGNConfig, prob, 5, gamma=1e-3)
        print(f"oggn full dense, width {width:3d}, P = {prob.theta0.numel():5d}  {t * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
