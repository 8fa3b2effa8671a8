"""The diagonal GGN from the layers' factors (``curvature(..., structure=diag)``), milliseconds per image on
3c3d (Fashion-MNIST-shaped inputs, notes004_table2's diag posterior) and on notes003_images' MLP 784-256-128-10,
random θ and inputs from seed 0, a softmax likelihood; the sum of the diagonal to compare codes by.

    python bench/diag_ggn.py [--threads 1] [--dtype float32] [--n-3c3d 256] [--n-mlp 4000]
"""

from __future__ import annotations

import argparse
import time

import torch

from bnnpred.app.process import prepare_process
from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.ggn import Structure, curvature
from bnnpred.likelihoods import Categorical
from bnnpred.models.deepobs import C3D3Config, build_3c3d
from bnnpred.models.mlp import MLPConfig, build_mlp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--n-3c3d", type=int, default=256)
    parser.add_argument("--n-mlp", type=int, default=4000)
    args = parser.parse_args()
    prepare_process()
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    problems = {"3c3d": (build_3c3d(C3D3Config(), (1, 28, 28), 10), torch.randn(args.n_3c3d, 1, 28, 28)),
                "MLP 784-256-128-10": (build_mlp(MLPConfig(widths=[256, 128]), (784,), 10),
                                       torch.randn(args.n_mlp, 784))}
    for name, (net, X) in problems.items():
        model = FlatModel(net.to(dtype).eval(), channels_last=True)
        X, y = X.to(dtype), torch.randint(0, 10, (len(X),))
        start = time.perf_counter()
        h, _ = curvature(model, Categorical(), model.theta(), X, y, structure=Structure.diag)
        seconds = time.perf_counter() - start
        print(f"| {name} | {args.dtype} | {args.threads} | {len(X)} | {1e3 * seconds / len(X):.3f} ms | "
              f"{float(h.sum()):.10g} |")


if __name__ == "__main__":
    main()
