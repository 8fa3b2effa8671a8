"""The image path at full data size (issue 17): training throughput against a plain PyTorch loop, and the memory of
the Kronecker fit and the glm / nn predictives at two training-set sizes (it must not grow with N).

1. Throughput: the 3c3d CNN (P = 892,010) on Fashion-MNIST-sized images, Adam, batch 128: ``--steps`` steps of a
   plain loop (``net(x)``, cross-entropy, backward, step) against as many steps of bnnpred's MAP trainer
   (``train_map``: the flat-parameter ``functional_call``, the prior term, the schedule, checkpoint bookkeeping).
   The trainer's one-off closing pass (the gradient norm over the whole training set, once per training) is left
   out; both warmed up; the best of ``--repeats`` alternating runs each.
2. Memory: in a fresh process per size, the Kronecker fit over N training images, then the glm predictive (100
   samples) and the nn predictive (20 samples) over ``--n-test`` test images; the peak resident memory counted
   from after the data sets are loaded (the 60k images stay resident either way), so a stage whose memory grew
   with N would show it.

    python bench/image_path.py [--steps 30] [--sizes 2000 8000] [--n-test 500]

Results are recorded in bench/README.md.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
from kron_3c3d import images, measure, network

from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.kron import kron_ggn
from bnnpred.inference import map as map_module
from bnnpred.inference.base import Problem
from bnnpred.inference.map import MapConfig, train_map
from bnnpred.likelihoods import Categorical
from bnnpred.posteriors import KronPosterior
from bnnpred.predictive import Context, glm_predictive, nn_predictive

BATCH, DELTA = 128, 10.0


def synchronised(device: torch.device) -> Callable[[Callable[[], object]], float]:
    """A timer of ``fn()`` in seconds with ``device`` synchronised before and after (CUDA runs asynchronously)."""
    def timed(fn: Callable[[], object]) -> float:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - start
    return timed


def plain_loop(X: torch.Tensor, y: torch.Tensor, steps: int, batch: int = BATCH) -> float:
    """Seconds of ``steps`` Adam steps of a plain loop (``net(x)``, cross-entropy, backward, step) of 3c3d on
    batches of ``batch`` of ``X`` ``[N, 1, 28, 28]``, ``y`` ``[N]`` (``N >= steps · batch``), on their device: the
    reference a trainer is measured against. The network's construction is not timed."""
    net = network(X.device)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)

    def loop() -> None:
        for i in range(steps):
            rows = slice(i * batch, (i + 1) * batch)
            optimizer.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(net(X[rows]), y[rows]).backward()
            optimizer.step()

    return synchronised(X.device)(loop)


def bnnpred_trainer(X: torch.Tensor, y: torch.Tensor, steps: int, batch: int = BATCH,
                    channels_last: bool = True) -> float:
    """Seconds of ``steps`` steps of bnnpred's MAP trainer (the flat-parameter call, the prior, the schedule, the
    loop's bookkeeping) on 3c3d, batches of ``batch`` of ``X`` ``[N, 1, 28, 28]``, ``y`` ``[N]``
    (``N >= steps · batch``), on their device, without its one-off closing pass over the training set; channels last
    on the CPU as the runner builds it, unless ``channels_last`` is False. The problem's set-up is not timed."""
    model = FlatModel(network(X.device), channels_last=channels_last)
    theta = model.theta()
    n = steps * batch
    problem = Problem(model=model, likelihood=Categorical(), X=X[:n], y=y[:n],
                      prior_precision=torch.full_like(theta, DELTA / n), theta0=theta,
                      generator=torch.Generator(device=X.device).manual_seed(0))
    closing = map_module.log_joint_grad_norm
    map_module.log_joint_grad_norm = lambda problem, theta: 0.0  # the one-off closing pass, not a step
    try:
        return synchronised(X.device)(lambda: train_map(problem, MapConfig(steps=steps, batch_size=batch, lr=1e-3)))
    finally:
        map_module.log_joint_grad_norm = closing


def throughput(steps: int, repeats: int) -> None:
    torch.set_num_threads(2)
    X, y, _ = images()
    plain_loop(X, y, 3), bnnpred_trainer(X, y, 3)  # warm-up
    plain, ours = [], []
    for _ in range(repeats):
        plain.append(plain_loop(X, y, steps))
        ours.append(bnnpred_trainer(X, y, steps))
    a, b = min(plain) / steps * 1000, min(ours) / steps * 1000
    print(f"training step (batch {BATCH}, 2 threads): plain loop {a:.1f} ms, bnnpred {b:.1f} ms, ratio {b / a:.2f} "
          f"(all runs: plain {[round(t / steps * 1000, 1) for t in plain]}, "
          f"bnnpred {[round(t / steps * 1000, 1) for t in ours]})")


def fit_and_predict(X: torch.Tensor, y: torch.Tensor, X_test: torch.Tensor, n_fit: int,
                    n_test: int) -> dict[str, float]:
    model = FlatModel(network(), channels_last=True)  # as the runner builds it
    theta = model.theta()
    start = time.perf_counter()
    blocks, _ = kron_ggn(model, Categorical(), theta, X[:n_fit], y[:n_fit])
    posterior = KronPosterior(theta, blocks, torch.full_like(theta, DELTA))
    fit = time.perf_counter() - start
    ctx = Context(model, Categorical(), theta, posterior, posterior.prior_precision, X[:n_fit])
    start = time.perf_counter()
    glm_predictive(ctx, X_test[:n_test], 100, torch.Generator().manual_seed(0))
    glm = time.perf_counter() - start
    start = time.perf_counter()
    nn_predictive(ctx, X_test[:n_test], 20, torch.Generator().manual_seed(0))
    return {"fit": fit, "glm": glm, "nn": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 8000])
    parser.add_argument("--n-test", type=int, default=500)
    args = parser.parse_args()
    throughput(args.steps, args.repeats)
    print("| N fitted | Kronecker fit | per image | glm, 100 samples | nn, 20 samples | peak memory |")
    print("|---|---|---|---|---|---|")
    for n in args.sizes:
        r = measure(fit_and_predict, n, args.n_test)
        if r is not None:
            print(f"| {n} | {r['fit']:.1f} s | {r['fit'] / n * 1000:.1f} ms | {r['glm']:.1f} s ({args.n_test}) "
                  f"| {r['nn']:.1f} s ({args.n_test}) | {r['peak_mb']:.0f} MB |")


if __name__ == "__main__":
    main()
