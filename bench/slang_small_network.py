"""SLANG steps on a network with few parameters and many gradient rows (K = S·M > P): the toy cubic of notes-002
Fig. 8 (1x10 ReLU, P = 31, M = 30, S = 100, K = 3,000), where the P x P Gram of the rows is formed. Times the
current per-example rows (all draws in one batched pass of the MLP) against the per-draw passes, in one process.

    python bench/slang_small_network.py [--steps 200]

Results are recorded in bench/README.md.
"""

from __future__ import annotations

import argparse
import time
from unittest import mock

import torch

from bnnpred.curvature.functional import FlatModel
from bnnpred.data.toy import CubicConfig, load_cubic
from bnnpred.inference import gradient_rows
from bnnpred.inference.base import Problem
from bnnpred.inference.slang import SLANGConfig, fit_slang
from bnnpred.likelihoods import Gaussian
from bnnpred.models.mlp import MLPConfig, build_mlp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = load_cubic(CubicConfig(seed=0))
    torch.manual_seed(0)
    model = FlatModel(build_mlp(MLPConfig(depth=1, width=10, activation="relu"), (1,), 1).double())
    cfg = SLANGConfig(rank=1, lr=10, precision_lr=0.5, decay=0.5, momentum=0, n_samples=100, iterations=args.steps,
                      log_every=args.steps)

    def seconds_per_step() -> float:
        problem = Problem(model=model, likelihood=Gaussian(10.0), X=data.X_train, y=data.y_train,
                          prior_precision=torch.full((model.n_params,), 0.01, dtype=torch.float64),
                          theta0=model.theta(), generator=torch.Generator().manual_seed(0))
        start = time.perf_counter()
        fit_slang(problem, cfg)
        return (time.perf_counter() - start) / args.steps

    for _ in range(2):
        batched = seconds_per_step()
        with mock.patch.object(gradient_rows, "_sequential_factors", lambda *a: None):
            per_draw = seconds_per_step()
        print(f"all draws in one pass {batched * 1e3:.1f} ms per step, one pass per draw {per_draw * 1e3:.1f} ms "
              f"({per_draw / batched:.1f}x)")


if __name__ == "__main__":
    main()
