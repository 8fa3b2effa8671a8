"""Kronecker Laplace at image scale (issue 5): the 3c3d CNN on Fashion-MNIST (P = 892,010), float32.

Seconds and peak memory (the peak resident memory of a fresh process per stage, counted from after the data
sets are loaded) for one training epoch over the 60k images (Adam,
batch 512), the KFLR Kronecker factors over ``--n-fit`` training images, and the glm predictive (per-input C x C
logit covariance, 100 samples) over ``--n-test`` test images; then the same fit and predictive with laplace-torch's
``KronLaplace`` (exact GGN Kronecker factors through curvlinops, glm predictive through its Jacobians) when it can be
imported, as ratios in one run. Both scale linearly in the number of images, so the 60k / 10k figures are the
measured per-image cost times the set size.

    python bench/kron_3c3d.py [--n-fit 2000] [--n-test 100]
    PYTHONPATH=<dir with laplace-torch> python bench/kron_3c3d.py   # with the laplace-torch comparison

Results are recorded in bench/README.md.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
from collections.abc import Callable

import torch

from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.kron import kron_ggn
from bnnpred.data.images import FashionMNISTConfig, load_images
from bnnpred.data.root import data_root
from bnnpred.errors import BnnpredError
from bnnpred.likelihoods import Categorical
from bnnpred.models.deepobs import C3D3Config, build_3c3d
from bnnpred.posteriors import KronPosterior
from bnnpred.predictive import Context, glm_predictive

DELTA, SAMPLES, BATCH = 10.0, 100, 512


def images() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Training images and labels, test images (random ones of the same shape without a data root)."""
    try:
        data = load_images(FashionMNISTConfig(seed=0), data_root(None))
        return data.X_train.float(), data.y_train, data.X_test.float()
    except BnnpredError:
        gen = torch.Generator().manual_seed(0)
        return *random_images(60000, gen), torch.rand(5000, 1, 28, 28, generator=gen)


def random_images(n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random images ``[n, 1, 28, 28]`` in [0, 1) and their labels ``[n]`` in 0..9, drawn from ``generator``."""
    return torch.rand(n, 1, 28, 28, generator=generator), torch.randint(0, 10, (n,), generator=generator)


def network(device: torch.device | str = "cpu") -> torch.nn.Module:
    """3c3d for 28 x 28 images and 10 classes (P = 892,010) on ``device``, initialised from seed 0."""
    torch.manual_seed(0)
    return build_3c3d(C3D3Config(), (1, 28, 28), 10).to(device)


def epoch(X: torch.Tensor, y: torch.Tensor, X_test: torch.Tensor, n_fit: int, n_test: int) -> None:
    net = network()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    for start in range(0, len(X) - BATCH + 1, BATCH):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(net(X[start : start + BATCH]), y[start : start + BATCH]).backward()
        optimizer.step()


def ours(X: torch.Tensor, y: torch.Tensor, X_test: torch.Tensor, n_fit: int, n_test: int) -> dict[str, float]:
    model = FlatModel(network(), channels_last=True)  # as the runner builds it
    theta = model.theta()
    start = time.perf_counter()
    blocks, _ = kron_ggn(model, Categorical(), theta, X[:n_fit], y[:n_fit])
    posterior = KronPosterior(theta, blocks, torch.full_like(theta, DELTA))
    fit = time.perf_counter() - start
    ctx = Context(model, Categorical(), theta, posterior, posterior.prior_precision, X[:n_fit])
    start = time.perf_counter()
    glm_predictive(ctx, X_test[:n_test], SAMPLES, torch.Generator().manual_seed(0))
    return {"fit": fit, "glm": time.perf_counter() - start}


def laplace_torch(X: torch.Tensor, y: torch.Tensor, X_test: torch.Tensor, n_fit: int,
                  n_test: int) -> dict[str, float]:
    from laplace import KronLaplace
    from laplace.curvature import CurvlinopsGGN

    net = network()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X[:n_fit], y[:n_fit]), batch_size=128)
    la = KronLaplace(net, "classification", prior_precision=DELTA, backend=CurvlinopsGGN)
    start = time.perf_counter()
    la.fit(loader)
    la.posterior_precision  # noqa: B018  (the eigendecompositions, as ours does in its constructor)
    fit = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(0, n_test, 10):  # its glm holds [B, C, P] Jacobians: 100 images take over 20 GB
        la(X_test[i : i + 10], pred_type="glm", link_approx="mc", n_samples=SAMPLES)
    return {"fit": fit, "glm": time.perf_counter() - start}


def reset_peak_memory() -> None:
    """Start the process's peak resident memory afresh (Linux: ``clear_refs`` 5 resets VmHWM)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def peak_memory_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024


def _stage(target: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int, int], dict[str, float] | None],
           n_fit: int, n_test: int, queue: mp.Queue) -> None:
    torch.set_num_threads(1)
    X, y, X_test = images()
    reset_peak_memory()  # the stage's peak, with the data sets already resident
    start = time.perf_counter()
    result = target(X, y, X_test, n_fit, n_test) or {"epoch": time.perf_counter() - start}
    queue.put({**result, "peak_mb": peak_memory_mb()})


def measure(target: Callable[..., dict[str, float] | None], n_fit: int, n_test: int) -> dict[str, float] | None:
    """Run one stage in a fresh process (its own peak memory); ``None`` if the process died (e.g. out of memory)."""
    queue: mp.Queue = mp.get_context("spawn").Queue()
    process = mp.get_context("spawn").Process(target=_stage, args=(target, n_fit, n_test, queue))
    process.start()
    process.join()
    if process.exitcode != 0:
        print(f"{target.__name__} stopped with exit code {process.exitcode} (-9: killed, out of memory)")
        return None
    return queue.get()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-fit", type=int, default=2000)
    parser.add_argument("--n-test", type=int, default=100)
    args = parser.parse_args()
    print(f"3c3d, one thread per stage, float32, δ = {DELTA}, {SAMPLES} samples")
    e = measure(epoch, args.n_fit, args.n_test)
    if e is not None:
        print(f"training epoch (60k, batch {BATCH}): {e['epoch']:.1f} s, peak {e['peak_mb']:.0f} MB")
    rows = {"bnnpred": measure(ours, args.n_fit, args.n_test)}
    try:
        import laplace  # noqa: F401
        rows["laplace-torch"] = measure(laplace_torch, args.n_fit, args.n_test)
    except ImportError:
        print("laplace-torch is not importable here: no comparison")
    rows = {name: r for name, r in rows.items() if r is not None}
    print("| | Kronecker fit | per 60k | glm predictive | per 10k | peak memory |")
    print("|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['fit']:.1f} s ({args.n_fit} images) | {r['fit'] * 60000 / args.n_fit / 60:.1f} min "
              f"| {r['glm']:.1f} s ({args.n_test} images) | {r['glm'] * 10000 / args.n_test / 60:.1f} min "
              f"| {r['peak_mb']:.0f} MB |")
    if {"bnnpred", "laplace-torch"} <= set(rows):
        a, other = rows["bnnpred"], rows["laplace-torch"]
        print(f"laplace-torch / bnnpred: fit {other['fit'] / a['fit']:.2f}, glm {other['glm'] / a['glm']:.2f}, "
              f"peak memory {other['peak_mb'] / a['peak_mb']:.2f}")


if __name__ == "__main__":
    main()
