"""Every stage of the image path timed on one device (issue 35 item 4): the MAP's training step of 3c3d against a
plain PyTorch loop, the Kronecker fit, the glm / nn / gp predictives, and the full GGN fit of an MLP; laplace-torch's
Kronecker fit, glm predictive and full fit beside them where it is installed. Written for a lent GPU (CUDA, float32)
and runnable on the CPU at any size (``--tiny`` is the test's).

    python bench/gpu/stages.py --device cuda [--out stages.md]      # on the GPU machine: bench/gpu/stages.sh
    python bench/gpu/stages.py --device cpu --tiny                   # tests/test_bench_stages.py

Synthetic 28 x 28 images and labels (the timings do not depend on the pixels; no data root needed). Each stage is
timed after a warm-up, with the device synchronised around it; per-image figures divide by the images the stage
saw. The table names the device and torch's version; results go into bench/README.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.ggn import curvature
from bnnpred.curvature.kron import kron_ggn
from bnnpred.inference import map as map_module
from bnnpred.inference.base import Problem
from bnnpred.inference.map import MapConfig, train_map
from bnnpred.likelihoods import Categorical
from bnnpred.models.deepobs import C3D3Config, build_3c3d
from bnnpred.posteriors import KronPosterior
from bnnpred.predictive import Context, GPSubset, PredictiveKind, predictor

DELTA, CLASSES = 10.0, 10


@dataclass(frozen=True)
class Sizes:
    """How much each stage does: training steps and their batch, images fitted and predicted, samples, the GP's M,
    the MLP's N."""

    steps: int = 50
    batch: int = 128
    n_fit: int = 2048
    n_test: int = 256
    samples: int = 100
    nn_samples: int = 20
    gp_m: int = 800
    mlp_n: int = 4500


TINY = Sizes(steps=2, batch=8, n_fit=16, n_test=4, samples=4, nn_samples=2, gp_m=8, mlp_n=64)


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


def images(n: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return (torch.rand(n, 1, 28, 28, generator=gen, dtype=torch.float32).to(device),
            torch.randint(0, CLASSES, (n,), generator=gen).to(device))


def network(device: torch.device) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_3c3d(C3D3Config(), (1, 28, 28), CLASSES).to(device=device, dtype=torch.float32)


def plain_steps(X: torch.Tensor, y: torch.Tensor, steps: int, batch: int) -> None:
    """``steps`` Adam steps of a plain loop on batches of ``batch``: the reference a trainer is measured against."""
    net = network(X.device)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    for i in range(steps):
        rows = slice(i * batch, (i + 1) * batch)
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(net(X[rows]), y[rows]).backward()
        optimizer.step()


def bnnpred_steps(X: torch.Tensor, y: torch.Tensor, steps: int, batch: int) -> None:
    """``steps`` steps of bnnpred's MAP trainer (the flat-parameter call, the prior, the schedule, the loop's
    bookkeeping), without its one-off closing pass over the training set."""
    model = FlatModel(network(X.device))
    theta = model.theta()
    n = steps * batch
    problem = Problem(model=model, likelihood=Categorical(), X=X[:n], y=y[:n],
                      prior_precision=torch.full_like(theta, DELTA / n), theta0=theta,
                      generator=torch.Generator(device=X.device).manual_seed(0))
    closing = map_module.log_joint_grad_norm
    map_module.log_joint_grad_norm = lambda problem, theta: 0.0
    try:
        train_map(problem, MapConfig(steps=steps, batch_size=batch, lr=1e-3))
    finally:
        map_module.log_joint_grad_norm = closing


def mlp(device: torch.device, n: int) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    """bench/laplace_torch.py's MLP problem: 2x50 tanh on 36 features, 6 classes (P = 4,706)."""
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(36, 50), torch.nn.Tanh(), torch.nn.Linear(50, 50), torch.nn.Tanh(),
                              torch.nn.Linear(50, 6)).to(device)
    return (net.float(), torch.randn(n, 36, generator=gen, dtype=torch.float32).to(device),
            torch.randint(0, 6, (n,), generator=gen).to(device))


def ours(device: torch.device, sizes: Sizes) -> dict[str, tuple[float, str]]:
    """Each stage's (seconds, what the figure is per) for bnnpred."""
    timed = synchronised(device)
    X, y = images(max(sizes.steps * sizes.batch, sizes.n_fit), device)
    X_test, _ = images(sizes.n_test, device)
    plain_steps(X, y, 2, sizes.batch), bnnpred_steps(X, y, 2, sizes.batch)  # warm-up
    per_step = f"step of {sizes.batch}"
    out = {"3c3d training step, plain PyTorch loop":
           (timed(lambda: plain_steps(X, y, sizes.steps, sizes.batch)) / sizes.steps, per_step),
           "3c3d training step, bnnpred MAP trainer":
           (timed(lambda: bnnpred_steps(X, y, sizes.steps, sizes.batch)) / sizes.steps, per_step)}
    model = FlatModel(network(device))
    theta = model.theta()
    kron_ggn(model, Categorical(), theta, X[:sizes.batch], y[:sizes.batch], show_progress=False)  # warm-up
    blocks: list = []
    seconds = timed(lambda: blocks.extend(kron_ggn(model, Categorical(), theta, X[:sizes.n_fit], y[:sizes.n_fit],
                                                   show_progress=False)[0]))
    out["3c3d Kronecker fit"] = (seconds / sizes.n_fit, "image fitted")
    posterior = KronPosterior(theta, blocks, torch.full_like(theta, DELTA))
    ctx = Context(model, Categorical(), theta, posterior, posterior.prior_precision, X[:sizes.n_fit])
    for kind, samples in ((PredictiveKind.glm, sizes.samples), (PredictiveKind.nn, sizes.nn_samples),
                          (PredictiveKind.gp, sizes.samples)):
        predict = predictor(kind, ctx, n_samples=samples, seed=0, gp_subset_size=sizes.gp_m,
                            gp_subset_how=GPSubset.random)
        first = timed(lambda predict=predict: predict(X_test[:2]))  # warm-up; the GP's conditioning on M points
        if kind is PredictiveKind.gp:
            out[f"3c3d gp conditioning on M = {sizes.gp_m}"] = (first, "once")
        out[f"3c3d {kind.value} predictive, {samples} samples"] = (
            timed(lambda predict=predict: predict(X_test)) / sizes.n_test, "image predicted")
    net, Xm, ym = mlp(device, sizes.mlp_n)
    flat = FlatModel(net)
    out[f"MLP full GGN fit (P = {flat.n_params:,}, N = {sizes.mlp_n:,})"] = (
        timed(lambda: curvature(flat, Categorical(), flat.theta(), Xm, ym)), "fit")
    return out


def theirs(device: torch.device, sizes: Sizes) -> dict[str, tuple[float, str]]:
    """laplace-torch's Kronecker fit and glm predictive on 3c3d and full fit on the MLP (its fastest backend,
    curvlinops or BackPACK, whichever loads), or nothing where it is not installed."""
    if importlib.util.find_spec("laplace") is None:
        return {}
    from laplace import Laplace

    timed = synchronised(device)
    X, y = images(sizes.n_fit, device)
    X_test, _ = images(sizes.n_test, device)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y), batch_size=sizes.batch)
    la = Laplace(network(device), "classification", subset_of_weights="all", hessian_structure="kron",
                 prior_precision=DELTA)
    out = {"3c3d Kronecker fit": (timed(lambda: la.fit(loader)) / sizes.n_fit, "image fitted")}
    la(X_test[:2], pred_type="glm", link_approx="mc", n_samples=sizes.samples)  # warm-up
    out[f"3c3d glm predictive, {sizes.samples} samples"] = (
        timed(lambda: la(X_test, pred_type="glm", link_approx="mc", n_samples=sizes.samples)) / sizes.n_test,
        "image predicted")
    net, Xm, ym = mlp(device, sizes.mlp_n)
    full = Laplace(net, "classification", subset_of_weights="all", hessian_structure="full", prior_precision=1.0)
    mlp_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(Xm, ym), batch_size=500)
    out[f"MLP full GGN fit (P = {sum(p.numel() for p in net.parameters()):,}, N = {sizes.mlp_n:,})"] = (
        timed(lambda: full.fit(mlp_loader)), "fit")
    return out


def table(device: torch.device, sizes: Sizes) -> str:
    """The Markdown table of every stage: ours, laplace-torch's where it ran, and their ratio."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    mine, other = ours(device, sizes), theirs(device, sizes)
    rows = [f"Device: {name}; torch {torch.__version__}; float32; laplace-torch "
            f"{'installed' if other else 'not installed'}.", "",
            "| stage | per | bnnpred | laplace-torch | ratio (laplace-torch / bnnpred) |", "|---|---|---|---|---|"]
    for stage, (seconds, per) in mine.items():
        theirs_seconds = other.get(stage, (None, ""))[0]
        shown = "" if theirs_seconds is None else f"{theirs_seconds * 1000:.2f} ms"
        ratio = "" if theirs_seconds is None else f"{theirs_seconds / seconds:.2f}"
        rows.append(f"| {stage} | {per} | {seconds * 1000:.2f} ms | {shown} | {ratio} |")
    plain = mine["3c3d training step, plain PyTorch loop"][0]
    trainer = mine["3c3d training step, bnnpred MAP trainer"][0]
    steps = 60000 // sizes.batch
    rows += ["", f"bnnpred's MAP step / the plain loop's: {trainer / plain:.2f}; a 60,000-image epoch "
             f"({steps} steps of {sizes.batch}): {trainer * steps:.1f} s."]
    return "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tiny", action="store_true", help="the smallest sizes (the test's)")
    parser.add_argument("--threads", type=int, help="CPU threads (default: torch's)")
    parser.add_argument("--out", type=Path, help="write the table here too")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    text = table(torch.device(args.device), TINY if args.tiny else Sizes())
    print(text, end="")
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
