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
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.ggn import curvature
from bnnpred.curvature.kron import kron_ggn
from bnnpred.likelihoods import Categorical
from bnnpred.posteriors import KronPosterior
from bnnpred.predictive import Context, GPSubset, PredictiveKind, predictor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the benchmarks whose stages these are
from image_path import DELTA, bnnpred_trainer, plain_loop, synchronised  # noqa: E402
from kron_3c3d import network, random_images  # noqa: E402
from laplace_torch import mlp_problem  # noqa: E402


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


def images(n: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random images ``[n, 1, 28, 28]`` and labels ``[n]`` on ``device``, the same for every ``n`` from
    seed 0 (no data root needed)."""
    X, y = random_images(n, torch.Generator().manual_seed(0))
    return X.to(device), y.to(device)


def ours(device: torch.device, sizes: Sizes) -> dict[str, tuple[float, str]]:
    """Each stage's (seconds, what the figure is per) for bnnpred."""
    timed = synchronised(device)
    X, y = images(max(sizes.steps * sizes.batch, sizes.n_fit), device)
    X_test, _ = images(sizes.n_test, device)
    plain_loop(X, y, 2, sizes.batch), bnnpred_trainer(X, y, 2, sizes.batch)  # warm-up
    per_step = f"step of {sizes.batch}"
    out = {"3c3d training step, plain PyTorch loop": (plain_loop(X, y, sizes.steps, sizes.batch) / sizes.steps,
                                                      per_step),
           "3c3d training step, bnnpred MAP trainer": (bnnpred_trainer(X, y, sizes.steps, sizes.batch) / sizes.steps,
                                                       per_step)}
    model = FlatModel(network(device), channels_last=True)  # as the runner builds it
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
    net, Xm, ym, _ = mlp_problem(torch.float32, sizes.mlp_n, device)
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
    net, Xm, ym, _ = mlp_problem(torch.float32, sizes.mlp_n, device)
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
