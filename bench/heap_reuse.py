"""Training steps with glibc's defaults against ``keep_freed_memory`` (bnnpred/app/process.py), each in a fresh
process, alternated: milliseconds and page faults per step, and a digest of the parameters after the steps (the same
on both sides: the setting moves memory, not numbers).

    python bench/heap_reuse.py [--threads 2] [--rounds 2]

Two networks: 3c3d on 128 Fashion-MNIST-shaped images a step (notes004_table2's), and the toys' 2x50 tanh MLP
full batch on 4,240 two-dimensional inputs (banana's training set, notes003_structures).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import subprocess
import sys
import time

import torch
from torch import nn

from bnnpred.app.process import flush_subnormals, keep_freed_memory
from bnnpred.models.deepobs import C3D3Config, build_3c3d
from bnnpred.models.mlp import MLPConfig, build_mlp

NETWORKS = {"3c3d": (128, (1, 28, 28), 10, 30), "mlp 2x50 tanh": (4240, (2,), 2, 2000)}  # batch, input, classes, steps


def network(name: str) -> nn.Module:
    if name == "3c3d":
        return build_3c3d(C3D3Config(), (1, 28, 28), 10).to(memory_format=torch.channels_last)
    return build_mlp(MLPConfig(depth=2, width=50, activation="tanh"), (2,), 2)


def measure(name: str, kept: bool, threads: int) -> dict[str, float | str]:
    """ms and page faults per step of Adam on the cross-entropy, seeded."""
    if kept:
        keep_freed_memory()
    flush_subnormals()
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    batch, shape, classes, steps = NETWORKS[name]
    net = network(name)
    X, y = torch.randn(batch, *shape), torch.randint(0, classes, (batch,))
    if X.dim() == 4:
        X = X.to(memory_format=torch.channels_last)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(net(X), y).backward()
        optimizer.step()

    for _ in range(steps // 10):
        step()
    faults, start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
    for _ in range(steps):
        step()
    seconds, faults = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    digest = hashlib.sha256(b"".join(p.detach().contiguous().numpy().tobytes() for p in net.parameters()))
    return {"ms": 1e3 * seconds / steps, "faults": faults / steps, "digest": digest.hexdigest()[:16]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # a child: network name, default|kept
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one[0], args.one[1] == "kept", args.threads)))
        return
    print("| network | threads | glibc's default: ms / faults per step | kept: ms / faults per step | ratio | "
          "same parameters |")
    print("|---|---|---|---|---|---|")
    for name in NETWORKS:
        for _ in range(args.rounds):
            runs = {how: json.loads(subprocess.run(
                [sys.executable, __file__, "--threads", str(args.threads), "--one", name, how],
                capture_output=True, text=True, check=True).stdout) for how in ("default", "kept")}
            default, kept = runs["default"], runs["kept"]
            print(f"| {name} | {args.threads} | {default['ms']:.1f} / {default['faults']:.0f} | {kept['ms']:.1f} / "
                  f"{kept['faults']:.0f} | {default['ms'] / kept['ms']:.2f} | {default['digest'] == kept['digest']} |")


if __name__ == "__main__":
    main()
