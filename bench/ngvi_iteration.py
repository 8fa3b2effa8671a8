"""Time per iteration of OGGN, LGVA and VOGGN (S = 1 and 10, full and diagonal) on the thesis MLP with N = 150
two-moons-sized inputs, as a ratio to one full-batch Adam step on the same model; and the full variant's
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
    start = time.perf_counter()
    fit(prob, cfg(iterations=iterations, tol=0.0, gamma=0.1, log_every=10**9, **settings))
    return (time.perf_counter() - start) / iterations


def adam_step_seconds(prob: Problem, steps: int = 500) -> float:
    start = time.perf_counter()
    train_map(prob, MapConfig(steps=steps, schedule=Schedule.constant, log_every=10**9))
    return (time.perf_counter() - start) / steps


def main() -> None:
    prob = problem(25)
    adam = adam_step_seconds(prob)
    print(f"thesis MLP, P = {prob.theta0.numel()}, N = 150, threads = {torch.get_num_threads()}")
    print(f"Adam step (full batch)           {adam * 1e3:8.2f} ms")
    for name, (cfg, fit) in METHODS.items():
        for structure in (Structure.full, Structure.diag):  # the NGVI family has no Kronecker variant
            for S in ([1] if name == "oggn" else [1, 10]):
                t = seconds_per_iteration(fit, cfg, prob, 10, structure=structure, n_samples=S)
                print(f"{name:5s} {structure.value:4s} S = {S:2d}    {t * 1e3:8.1f} ms  = {t / adam:7.0f} x Adam")
    for width in (15, 25, 35):
        prob = problem(width)
        t = seconds_per_iteration(fit_oggn, OGGNConfig, prob, 5)
        print(f"oggn full, width {width:3d}, P = {prob.theta0.numel():5d}  {t * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
