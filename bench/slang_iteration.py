"""SLANG's cost (notes-002 §2.12): seconds per update against the parameter count D and the rank L, against the
full-Gaussian empirical-Fisher update at the largest D where a D x D precision still fits comfortably, and SLANG
against BBB per epoch on the CPU MNIST MLP (784-100-100-10 ReLU, 10k images, M = 100, S = 1).

The update (``slang_step``: the top-L eigen-factor of the L + M·S columns, the diagonal correction, the Woodbury
mean step) is timed on random gradient columns with M·S = 16, so its O(D (L + MS)²) cost shows without the
per-example gradients; the full update is ``prec ← (1−β) prec + β (G Gᵀ + λ)``, its Cholesky and one solve,
O(D² MS + D³). The epoch comparison runs both trainers end to end (SLANG's per-example gradients from the linear
layers' factors, and formed by ``vmap(grad)`` as before; one reparameterised draw for BBB), one thread, float32.

    python bench/slang_iteration.py [--epochs-only]

Results are recorded in bench/README.md.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import torch
from laplace_full import gemm_rate

from bnnpred.curvature.functional import FlatModel
from bnnpred.data.images import MNISTConfig, load_images
from bnnpred.data.root import data_root
from bnnpred.errors import BnnpredError
from bnnpred.inference import Problem, gradient_rows
from bnnpred.inference.bbb import BBBConfig, fit_bbb
from bnnpred.inference.gradient_rows import DenseRows
from bnnpred.inference.slang import Eig, SLANGConfig, SLANGState, fit_slang, slang_step
from bnnpred.likelihoods import Categorical
from bnnpred.models.mlp import MLPConfig, build_mlp

MS = 16
SIZES = (10**3, 10**4, 10**5, 10**6)
RANKS = (1, 8, 32, 64)
FULL_D = 4000


def best_of(fn, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def slang_update_seconds(D: int, L: int) -> float:
    gen = torch.Generator().manual_seed(0)
    state = SLANGState(mean=torch.randn(D, generator=gen), U=torch.randn(D, L, generator=gen) / D**0.5,
                       d=torch.ones(D), momentum=torch.zeros(D))
    G, g_hat, prior = torch.randn(MS, D, generator=gen), torch.randn(D, generator=gen), torch.ones(D)
    cfg = SLANGConfig(rank=L, eig=Eig.exact)
    return best_of(lambda: slang_step(state, DenseRows(G), g_hat, prior, 0.1, 0.1, cfg, gen))


def full_update_seconds(D: int) -> float:
    gen = torch.Generator().manual_seed(0)
    G, g, prec = torch.randn(MS, D, generator=gen), torch.randn(D, generator=gen), torch.eye(D)

    def update() -> None:
        new = 0.9 * prec + 0.1 * (G.T @ G + torch.eye(D))
        torch.cholesky_solve(g[:, None], torch.linalg.cholesky(new))

    return best_of(update, repeats=3)


def mnist_problem() -> tuple[Problem, str]:
    try:
        data = load_images(MNISTConfig(seed=0, n_train=10000), data_root(None))
        X, y, source = data.X_train.float(), data.y_train, "MNIST"
    except BnnpredError:
        gen = torch.Generator().manual_seed(0)
        X, y, source = torch.rand(10000, 1, 28, 28, generator=gen), torch.randint(0, 10, (10000,), generator=gen), \
            "random images"
    torch.manual_seed(0)
    model = FlatModel(build_mlp(MLPConfig(depth=2, width=100, activation="relu"), (1, 28, 28), 10))
    theta = model.theta()
    return Problem(model=model, likelihood=Categorical(), X=X, y=y, prior_precision=torch.ones_like(theta),
                   theta0=theta, generator=torch.Generator().manual_seed(0)), source


@contextmanager
def formed_rows() -> Iterator[None]:
    """SLANG with the per-example gradients formed by ``vmap(grad)``, as before the layer factors."""
    covered = gradient_rows.linear_layers
    gradient_rows.linear_layers = lambda model: None
    try:
        yield
    finally:
        gradient_rows.linear_layers = covered


def epoch_seconds(problem: Problem) -> dict[str, float]:
    """One epoch of M = 100 per method, the faster of two; SLANG from the layer factors (L = 1, 8 and issue 35's
    32) and from formed rows (L = 1, 8)."""
    def slang(rank: int, formed: bool) -> None:
        with formed_rows() if formed else nullcontext():
            fit_slang(problem, SLANGConfig(rank=rank, batch_size=100, epochs=1))

    runs = {f"SLANG L={rank}{' (formed rows)' if formed else ''}": lambda rank=rank, formed=formed: slang(rank, formed)
            for formed in (False, True) for rank in ((1, 8, 32) if not formed else (1, 8))}
    runs["BBB"] = lambda: fit_bbb(problem, BBBConfig(epochs=1, batch_size=100))
    return {name: best_of(run, repeats=2) for name, run in runs.items()}


def main() -> None:
    torch.set_num_threads(1)
    if "--epochs-only" not in sys.argv:
        update_table()
    problem, source = mnist_problem()
    epochs = epoch_seconds(problem)
    print(f"one thread's float32 GEMM rate: {gemm_rate(2048, 2048, torch.float32) / 1e9:.0f} GFLOP/s")
    print(f"one epoch, 784-100-100-10 on {source} (10k, M = 100): "
          + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in epochs.items())
          + "; SLANG / BBB: " + ", ".join(f"{name} {seconds / epochs['BBB']:.1f}" for name, seconds in epochs.items()
                                         if name != "BBB"))


def update_table() -> None:
    print(f"SLANG update seconds (exact eigen-factor, M·S = {MS}, float32, one thread)")
    print("| D | " + " | ".join(f"L = {L}" for L in RANKS) + " |")
    print("|---|" + "---|" * len(RANKS))
    for D in SIZES:
        print(f"| {D:.0e} | " + " | ".join(f"{slang_update_seconds(D, L) * 1e3:.2f} ms" for L in RANKS) + " |")
    slang, full = slang_update_seconds(FULL_D, 8), full_update_seconds(FULL_D)
    print(f"D = {FULL_D}: full-Gaussian update {full * 1e3:.1f} ms, SLANG L = 8 {slang * 1e3:.2f} ms, "
          f"ratio {full / slang:.0f}")


if __name__ == "__main__":
    main()
