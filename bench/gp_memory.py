"""The GP predictive's peak memory at image scale (issue 38): 3c3d (P = 892,010) on Fashion-MNIST-shaped images,
float32, the prior factor tuned on validation (13 factors, :func:`~bnnpred.predictive.tuned_gp_condition`), each
route in a process of its own, its peak resident memory above the process's before the GP, beside what the GP's
memory check counts (:func:`~bnnpred.predictive.gp_bytes`):

- before: the M training points' kernel features joined at once (``torch.cat`` of every chunk's parts: the chunks
  and the join held together, the features twice), and each convolution's kernel products as one ``einsum`` (its
  Jacobian columns scaled into a copy and, per class, both sides made contiguous);
- now: each chunk's part released as it is copied in (:func:`~bnnpred.curvature.kernel.concat`), the products as
  matrix products on views, a class's columns scaled at a time (``kernel._dense_products``).

The campaign's re-evaluation of its 3c3d network with the GP on M = 1600 (commit 1a82357, before) was killed by the
kernel at 24.1 GB on a 23.5 GB machine, while the check counted 18 GB. The network is untrained (memory does not
depend on the weights).

    python bench/gp_memory.py [--M 400] [--n-valid 1000] [--threads 2]

Results are recorded in bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

import torch
from gp_tuning import FACTORS, SAMPLES, SEED, context  # its untrained 3c3d on random images

from bnnpred import predictive
from bnnpred.curvature import kernel

ROUTES = ("before", "now")


def joined_at_once(chunks: list[kernel.Features]) -> kernel.Features:
    """The join before: every chunk's parts concatenated while the chunks are still held."""
    out: kernel.Features = []
    for parts in zip(*chunks, strict=True):
        first = parts[0]
        if isinstance(first, kernel.Factored):
            out.append(kernel.Factored(torch.cat([u.a for u in parts]), torch.cat([u.g for u in parts]), first.s_w,
                                       first.s_b))
        else:
            out.append(kernel.Dense(torch.cat([u.J for u in parts]), first.s))
    return out


def products_in_one_einsum(u: kernel.Dense, v: kernel.Dense, per_class: bool) -> torch.Tensor:
    """A convolution's kernel products before."""
    return torch.einsum("bcq,dcq->bcd" if per_class else "bcq,dpq->bcdp", u.J * u.s, v.J)


def peak_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def measure(route: str, M: int, n_valid: int) -> dict[str, float]:
    """One route in this process: the GP's peak above the resident memory before it, and the check's count."""
    ctx = context(max(M, n_valid))
    y = torch.randint(0, 10, (n_valid,), generator=torch.Generator().manual_seed(1))
    if route == "before":
        kernel.concat, kernel._dense_products = joined_at_once, products_in_one_einsum
    counted = predictive.gp_bytes(ctx.model, ctx.theta, ctx.X_train[:1], M, n_valid)
    baseline = peak_kib()
    predictive.tuned_gp_condition(ctx, torch.arange(M), FACTORS, (ctx.X_train[:n_valid], y), SAMPLES, SEED,
                                  per_class=True)
    return {"route": route, "M": M, "n_valid": n_valid, "peak_gb": (peak_kib() - baseline) * 1024 / 1e9,
            "counted_gb": counted / 1e9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--M", type=int, default=400)
    parser.add_argument("--n-valid", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--route", choices=ROUTES, help=argparse.SUPPRESS)  # one route, in a child process
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.route:
        print(json.dumps(measure(args.route, args.M, args.n_valid)))
        return
    print("| route | M | validation images | peak above the process before the GP (GB) | the check's count (GB) |")
    print("|---|---|---|---|---|")
    for route in ROUTES:
        out = subprocess.run([sys.executable, __file__, "--route", route, "--M", str(args.M), "--n-valid",
                              str(args.n_valid), "--threads", str(args.threads)], capture_output=True, text=True,
                             check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"| {route} | {row['M']} | {row['n_valid']} | {row['peak_gb']:.2f} | {row['counted_gb']:.2f} |",
              flush=True)


if __name__ == "__main__":
    main()
