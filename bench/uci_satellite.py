"""notes-004 Table 1 on its largest set, satellite (split 0: N = 4505, 36 features, 6 classes), 2x50 tanh
(P = 4706): seconds of each stage of one (split, δ) run, and the memory of the Jacobians the refinement stores.

Long stages are timed on a prefix and extrapolated: MAP and BBB on 200 of their steps (x 10,000 / 5,000), the
refinements on 10 of their 250 iterations.

    BNNPRED_DATA_DIR=../shared/data python bench/uci_satellite.py [--dtype float64]

Results are recorded in bench/README.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import time

import torch

from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.ggn import Curvature, Structure
from bnnpred.data import load_dataset
from bnnpred.data.uci import UCIClassificationConfig
from bnnpred.inference.base import Problem
from bnnpred.inference.bbb import BBBConfig, fit_bbb
from bnnpred.inference.glm_refine import GLMRefineConfig, linearized_problem
from bnnpred.inference.laplace_ggn import laplace_at
from bnnpred.inference.lgva import estimate_lgva
from bnnpred.inference.map import MapConfig, train_map
from bnnpred.inference.ngvi import run_ngvi
from bnnpred.likelihoods import Categorical
from bnnpred.models.mlp import MLPConfig, build_mlp
from bnnpred.predictive import Context, glm_predictive, nn_predictive


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", default="float64", choices=["float32", "float64"])
    ns = parser.parse_args()
    dtype = getattr(torch, ns.dtype)
    torch.manual_seed(0)
    data = load_dataset(UCIClassificationConfig(dataset="satellite", split=0))
    X, y, X_test = data.X_train.to(dtype), data.y_train, data.X_test.to(dtype)
    model = FlatModel(build_mlp(MLPConfig(depth=2, width=50), data.input_shape, data.n_classes).to(dtype))
    theta0 = model.theta()
    P, N, C = theta0.numel(), len(X), data.n_classes
    problem = Problem(model=model, likelihood=Categorical(), X=X, y=y, prior_precision=torch.full_like(theta0, 1.0),
                      theta0=theta0, generator=torch.Generator().manual_seed(0))
    rows = []

    fit, t = timed(lambda: train_map(problem, MapConfig(steps=200)))
    rows.append(("MAP, 10,000 Adam steps (from 200)", t * 50))
    laplace = {}
    for structure in (Structure.full, Structure.diag):
        laplace[structure], t = timed(lambda s=structure: laplace_at(problem, fit, s, Curvature.ggn))
        rows.append((f"Laplace-GGN fit, {structure.value}", t))
    full = laplace[Structure.full]
    ctx = Context(model, problem.likelihood, full.theta, full.posterior, problem.prior_precision, X)
    gen = torch.Generator().manual_seed(0)
    for name, predict in (("nn", nn_predictive), ("glm", glm_predictive)):
        _, t = timed(lambda p=predict: p(ctx, X_test, 1000, gen))
        rows.append((f"{name} predictive, {len(X_test)} test points x 1000 samples", t))
    linear, t = timed(lambda: linearized_problem(problem, full.theta))
    rows.append(("store the N Jacobians for refinement", t))
    for structure, gamma in ((Structure.full, 1e-2), (Structure.diag, 1e-3)):
        cfg = GLMRefineConfig(structure=structure, gamma=gamma, iterations=10)
        _, t = timed(lambda c=cfg, s=laplace[structure].posterior: run_ngvi(linear, c, estimate_lgva, start=s))
        rows.append((f"VI refinement, {structure.value}, 250 iterations (from 10)", t * 25))
    _, t = timed(lambda: fit_bbb(dataclasses.replace(problem), BBBConfig(steps=200)))
    rows.append(("BBB, 5,000 steps (from 200)", t * 25))

    print(f"satellite split 0: N = {N}, C = {C}, P = {P}, {ns.dtype}, {torch.get_num_threads()} threads")
    print("| stage | seconds |\n|---|---|")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.1f} |")
    print(f"| stored Jacobians N x C x P | {N * C * P * 8 / 2**20:.0f} MB in float64, {N * C * P * 4 / 2**20:.0f} MB "
          "in float32 |")
    print(f"| peak memory (max RSS) | {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB |")


if __name__ == "__main__":
    main()
