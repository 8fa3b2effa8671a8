"""3c3d on the CPU in the channels-last memory format (``FlatModel`` restrides a convolutional network's 4-d weights
and images per call) against the default format, side by side in one process (issue 35): a forward pass over 512
images, 30 steps of the MAP trainer (Adam, batch 128) beside a plain PyTorch loop, the nn predictive (10 draws over
500 images) and the Kronecker fit over 256 images. The default format is the same code with ``FlatModel``'s
``channels_last`` off. Random images of Fashion-MNIST's shape (the costs do not depend on the
pixels), float32, the best of ``--repeats`` alternating runs.

    python bench/channels_last.py [--threads 2] [--repeats 3]

Results are recorded in bench/README.md.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
from image_path import bnnpred_trainer, plain_loop
from kron_3c3d import network, random_images

from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.kron import kron_ggn
from bnnpred.likelihoods import Categorical
from bnnpred.predictive import Context, nn_samples

STEPS = 30


def seconds(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def stages(X: torch.Tensor, y: torch.Tensor, channels_last: bool) -> dict[str, float]:
    """Each stage's seconds with the channels-last path on or off."""
    model = FlatModel(network(), channels_last=channels_last)
    theta = model.theta()
    draws = theta + 0.01 * torch.randn(10, theta.numel(), generator=torch.Generator().manual_seed(1))
    ctx = Context(model, Categorical(), theta, None, torch.ones_like(theta), X[:500])
    with torch.no_grad():
        forward = seconds(lambda: model(theta, X[:512]))
    return {"forward, 512 images": forward,
            "MAP trainer, per step": bnnpred_trainer(X, y, STEPS, channels_last=channels_last) / STEPS,
            "nn predictive, 10 draws x 500 images": seconds(lambda: nn_samples(ctx, X[:500], draws)),
            "Kronecker fit, 256 images": seconds(lambda: kron_ggn(model, Categorical(), theta, X[:256], y[:256],
                                                                  show_progress=False))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    X, y = random_images(STEPS * 128, torch.Generator().manual_seed(0))
    stages(X, y, True), stages(X, y, False), plain_loop(X, y, 3)  # warm-up
    runs: dict[str, list[dict[str, float]]] = {"channels last": [], "default": []}
    plain = []
    for _ in range(args.repeats):
        runs["channels last"].append(stages(X, y, True))
        runs["default"].append(stages(X, y, False))
        plain.append(plain_loop(X, y, STEPS) / STEPS)
    best = {name: {stage: min(run[stage] for run in done) for stage in done[0]} for name, done in runs.items()}
    print(f"3c3d, float32, {args.threads} threads, best of {args.repeats}; a plain PyTorch loop's step "
          f"{min(plain) * 1e3:.1f} ms")
    print("| stage | default format | channels last | speed-up |")
    print("|---|---|---|---|")
    for stage, default in best["default"].items():
        last = best["channels last"][stage]
        print(f"| {stage} | {default * 1e3:.1f} ms | {last * 1e3:.1f} ms | {default / last:.2f} |")


if __name__ == "__main__":
    main()
