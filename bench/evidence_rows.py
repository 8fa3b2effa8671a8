"""The full posterior's log det off its kept spectrum (per-layer δ: one Cholesky factor a row,
``FullCurvature.logdets``), seconds per row at ``P`` parameters, and the grid's sum to compare codes by. ``H`` is
a random positive semi-definite matrix of rank P / 2 (the cost does not depend on its entries), float32 as a fit
keeps it; the precisions are float64, as the evidence passes them, or ``--dtype float32``.

    python bench/evidence_rows.py [--threads 1] [--p 4706] [--rows 5] [--dtype float64]
"""

from __future__ import annotations

import argparse
import time

import torch

from bnnpred.laplace_evidence import FullCurvature


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--p", type=int, default=4706)
    parser.add_argument("--rows", type=int, default=5)
    parser.add_argument("--dtype", default="float64", choices=["float32", "float64"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    J = torch.randn(args.p, args.p // 2, generator=generator)
    H = J @ J.T / args.p
    dtype = getattr(torch, args.dtype)
    precisions = 10 ** (4 * torch.rand(args.rows, args.p, generator=generator, dtype=dtype) - 2)  # none spectral
    curvature = FullCurvature(None, 1, H=H)
    curvature.logdets(precisions[:1], 1.0)  # warm-up
    start = time.perf_counter()
    values = curvature.logdets(precisions, 1.0)
    seconds = time.perf_counter() - start
    print(f"| P = {args.p} | {args.dtype} | {args.threads} | {seconds / args.rows:.3f} s a row | "
          f"{float(values.sum()):.12g} |")


if __name__ == "__main__":
    main()
