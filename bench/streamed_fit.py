"""A post-hoc Laplace fit from a DataLoader (issue 36 item 5): peak memory against N, streamed and gathered.

In a fresh process per (N, mode): a small CNN on 28 x 28 images that a Dataset draws one by one from a seeded
generator (the data set never sits in memory as a whole), then ``bnnpred.fit(net, loader, train=False,
options={"structure": "kron"})``. ``streamed`` passes the loader (one batch of the curvature at a time);
``gathered`` passes the tensors the loader yields, concatenated (the path for methods that train on all of the
data). Peak resident memory is counted from just before the fit, so a stage that grows with N shows it.

    python bench/streamed_fit.py [--sizes 5000 20000] [--batch 256]

Results are recorded in bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import torch


class DrawnImages(torch.utils.data.Dataset):
    """``n`` random 1 x 28 x 28 images with labels, each drawn from its own seed when read."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        gen = torch.Generator().manual_seed(i)
        return torch.rand(1, 28, 28, generator=gen), torch.randint(0, 10, (), generator=gen)


def network() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(1, 16, 5, stride=2), torch.nn.ReLU(),
                               torch.nn.Conv2d(16, 32, 5, stride=2), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(32 * 4 * 4, 10))


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one(n: int, mode: str, batch: int) -> dict[str, float]:
    import bnnpred

    torch.set_num_threads(1)
    loader = torch.utils.data.DataLoader(DrawnImages(n), batch_size=batch)
    net = network()
    data: tuple = (loader,)
    if mode == "gathered":
        X, y = zip(*loader, strict=True)
        data = (torch.cat(X), torch.cat(y))
    before = peak_mb()
    start = time.perf_counter()
    fitted = bnnpred.fit(net, *data, task="multiclass", train=False, options={"structure": "kron"}, progress=False)
    return {"n": n, "mode": mode, "seconds": time.perf_counter() - start, "peak_mb": peak_mb(),
            "growth_mb": peak_mb() - before, "log_evidence": fitted.log_evidence}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--one", nargs=2, metavar=("N", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(int(args.one[0]), args.one[1], args.batch)))
        return
    print("| N | mode | fit seconds | peak memory | growth during the fit | log evidence |")
    print("|---|---|---|---|---|---|")
    for n in args.sizes:
        for mode in ("streamed", "gathered"):
            out = subprocess.run([sys.executable, __file__, "--one", str(n), mode, "--batch", str(args.batch)],
                                 capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"| {n:,} | {mode} | {r['seconds']:.1f} s | {r['peak_mb']:.0f} MB | {r['growth_mb']:.0f} MB | "
                  f"{r['log_evidence']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
