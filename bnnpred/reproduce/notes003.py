"""The second thesis's (notes-003) Laplace-GGN / VOGGN experiments on regression: Fig. 5.1 (the marginal likelihood
over δ on UCI wine-quality-red against train and test MSE) and Fig. 5.8 (Snelson with a gap: Laplace-GGN's BLR and
GP predictives against VOGN's), with checklist items 5 and 12 checked."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from bnnpred.app.report import figures
from bnnpred.app.run_evaluation import predictors
from bnnpred.app.run_setup import Setup
from bnnpred.app.saved_runs import restore
from bnnpred.io import write_text
from bnnpred.predictive import Context
from bnnpred.reproduce.base import Reproduction, Study, document
from bnnpred.reproduce.claims import Claim, Compare, Trend, Verdict, all_of, claim, departs, every, item, items
from bnnpred.reproduce.derived import tensors, training_points

SNELSON = {"laplace_ggn": "notes003_fig5_8", "vogn": "notes003_fig5_8_vogn", "voggn": "notes003_fig5_8_voggn"}
QUICK = {"laplace_ggn": ("inference.map.steps=300",), "vogn": ("inference.iterations=100",),
         "voggn": ("inference.iterations=100",)}
VI = {"vogn": "VOGN (diagonal)", "voggn": "VOGGN (full)"}
GAP = (1.5, 3.0)


# ------------------------------------------------------------------------------------------ Fig. 5.1, wine


def wine(r: Reproduction) -> str:
    splits, out = r.pick(quick="0", cpu="0,1,2,3,4"), r.out
    folder = r.sweep(r.runs / "notes003_wine", "split${dataset.split}", "experiment=notes003_wine",
                     f"dataset.split={splits}", quick=("inference.map.steps=200", "selection.delta_grid=[0.1,10,1000]"))
    rows = pd.concat([pd.read_csv(path).assign(split=path.parent.name)
                      for path in sorted(folder.glob("split*/selection.csv"))])
    rows["train_mse"], rows["test_mse"] = rows["train_rmse_map"] ** 2, rows["test_rmse_map"] ** 2
    by_delta = rows.groupby("delta")[["log_marglik_per_n", "train_mse", "test_mse"]].mean()
    write_text(out / "wine_by_delta.csv", by_delta.to_csv())
    d_ml, d_test = by_delta["log_marglik_per_n"].idxmax(), by_delta["test_mse"].idxmin()
    figures.plot_evidence_1d(out / "wine_fig5_1.png", by_delta.index.to_numpy(),
                             {"log marginal likelihood / N": by_delta["log_marglik_per_n"],
                              "train MSE (standardised y)": by_delta["train_mse"],
                              "test MSE (standardised y)": by_delta["test_mse"]},
                             marks={"evidence argmax": d_ml, "test-MSE argmin": d_test})
    return "\n".join([
        "## Fig. 5.1: marginal likelihood on wine-quality-red",
        "",
        f"`bnnpred train -m experiment=notes003_wine dataset.split={splits}`: Gal's splits (90/10), X and y "
        "standardised on train, 1x20 tanh (P = 261), σ = 0.64, δ ∈ logspace(−1, 3.6, 20), one MAP (Adam) per δ; "
        "curves are means over the splits ([wine_by_delta.csv](wine_by_delta.csv)). The thesis gives no numbers, "
        "only the claim that the marginal likelihood picks the δ of the lowest test error.",
        "",
        r.table(wine_claims(by_delta)),
        "",
        "![wine](wine_fig5_1.png)",
    ])


# notes-003 #5: train MSE "monotone non-decreasing in δ" must rise by more than this (standardised y: 1 % of its
# variance) from the smallest δ to the largest (:data:`FLAT_PASSES`; the one fall on the committed grid: 0.002)
TRAIN_MSE_RISE = 0.01
FLAT_PASSES = ("a train MSE curve δ had no effect on is flat within the MAP's optimisation noise and passes \"does "
               f"not fall\" on its ties: the page asks too that it rises by more than {TRAIN_MSE_RISE:g}")


def wine_claims(by_delta: pd.DataFrame) -> list[Claim]:
    """notes-003 checklist item 5 on the means over splits per δ (ascending): log marginal likelihood per example,
    train and test MSE; the train MSE's trend must rise overall (:data:`TRAIN_MSE_RISE`), beside the notes' trend
    as written (without that rise)."""
    nan = float("nan")
    ratio, at_ml, lowest, where = nan, nan, nan, ""
    if len(by_delta) > 1:
        d_ml, d_test = by_delta["log_marglik_per_n"].idxmax(), by_delta["test_mse"].idxmin()
        deltas = by_delta.index.to_numpy()
        ratio = max(d_ml / d_test, d_test / d_ml)
        steps = abs(np.log10(d_ml / d_test)) / np.log10(deltas[1] / deltas[0])
        at_ml, lowest = by_delta.loc[d_ml, "test_mse"], by_delta["test_mse"].min()
        where = f"δ*_ML = {d_ml:.3g}, δ*_test = {d_test:.3g}: a factor {ratio:.3g} ({steps:.0f} grid steps)"
    train = list(by_delta["train_mse"])
    return [
        claim(item(3, 5), Compare("max(δ*_ML / δ*_test, δ*_test / δ*_ML)", "≤", 3 * (1 + 1e-9)), ratio,
              note="within a factor 3 of the test-MSE argmin", numbers=where),
        claim(item(3, 5), Compare("test MSE at δ*_ML", "≤", "the minimum test MSE", factor=1.05), (at_ml, lowest)),
        departs(claim(item(3, 5), Trend("train MSE", "does not fall", "δ", allowed=2, net=TRAIN_MSE_RISE), train),
                claim(item(3, 5), Trend("train MSE", "does not fall", "δ", allowed=2), train), FLAT_PASSES),
    ]


# -------------------------------------------------------------------------------------- Fig. 5.8, Snelson


def latent_bands(s: Setup, ctx: Context, kinds: list[str],
                 grid: torch.Tensor) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Predictive mean and latent std ``√(V[y] − σ²)`` on ``grid`` ``[G, 1]`` of some of a restored run's
    predictives, by kind."""
    predict = predictors(s, ctx)
    bands = {}
    for kind in kinds:
        pred = predict[kind](grid.to(dtype=s.dtype))
        bands[kind] = pred.mean.numpy(), (pred.variance - ctx.likelihood.sigma2).clamp_min(0).sqrt().numpy()
    return bands


def band_data(kinds: list[str], grid: torch.Tensor) -> Callable[[Path], dict[str, Any]]:
    """A run's :func:`latent_bands` on ``grid`` as numbers kept beside the page (:meth:`Reproduction.derived`):
    ``{kind: {"mean", "std"}}``."""
    def compute(run: Path) -> dict[str, Any]:
        s, ctx = restore(run)
        return {kind: {"mean": mean, "std": std} for kind, (mean, std) in latent_bands(s, ctx, kinds, grid).items()}
    return compute


def snelson(r: Reproduction) -> str:
    out = r.out
    dirs = {name: r.train_once(r.runs / f"notes003_fig5_8_{name}", f"experiment={preset}", quick=QUICK[name])
            for name, preset in SNELSON.items()}
    grid = torch.linspace(-1.0, 7.0, 801, dtype=torch.float64).unsqueeze(1)
    x = grid[:, 0].numpy()
    kinds = {name: ["closed", "gp"] if name == "laplace_ggn" else ["closed"] for name in dirs}
    kept = {name: r.derived(run, "latent_bands", band_data(kinds[name], grid), {"grid": grid, "kinds": kinds[name]})
            for name, run in dirs.items()}
    points = training_points(dirs["laplace_ggn"])
    x_train, y_train = points["x"].numpy(), points["y"].numpy()

    def band(name: str, kind: str) -> tuple[np.ndarray, np.ndarray]:
        pair = tensors(kept[name][kind])
        return pair["mean"].numpy(), pair["std"].numpy()

    bands = {"Laplace-GGN, BLR": band("laplace_ggn", "closed"), "Laplace-GGN, GP": band("laplace_ggn", "gp"),
             **{f"{label}, BLR": band(name, "closed") for name, label in VI.items()}}
    in_gap = (GAP[0] < x) & (x < GAP[1])
    near_data = np.abs(x[:, None] - x_train[None, :]).min(1) < 0.05
    sigma = 0.286
    # the notes' item 12 compares predictive std, √(J Σ Jᵀ + σ²) (the bands the figure draws), not the latent std
    predictive = {k: np.sqrt(std**2 + sigma**2) for k, (_, std) in bands.items()}
    gap_std = {k: float(std[in_gap].mean()) for k, std in predictive.items()}
    data_std = {k: float(std[near_data].mean()) for k, std in predictive.items()}
    blr_gp = {part: float(np.abs(bands["Laplace-GGN, BLR"][i] - bands["Laplace-GGN, GP"][i]).max())
              for i, part in enumerate(("mean", "std"))}
    metrics = {name: document(dirs[name]) for name in SNELSON}
    rmse = {name: m["metrics"]["train"]["closed"]["rmse"] for name, m in metrics.items()}
    info = {name: metrics[name]["info"] for name in VI}
    shown = ["Laplace-GGN, BLR", *[f"{label}, BLR" for label in VI.values()]]

    figures.plot_1d_panels(out / "snelson_fig5_8.png", x,
                           {key: (bands[key][0], np.sqrt(bands[key][1] ** 2 + sigma**2)) for key in shown},
                           x_train, y_train, ncols=len(shown), ylim=(-4, 4), gap=GAP,
                           overlays={"Laplace-GGN, BLR": ("GP mean", bands["Laplace-GGN, GP"][0])},
                           title="mean and ±2 std with the noise; the gap shaded")
    stop = {n: "ELBO plateau" if info[n].get("plateau") else "step cap" for n in VI}
    runs = ", ".join(f"{VI[n]} {info[n]['iterations']:.0f} steps ({stop[n]})" for n in VI)
    return "\n".join([
        "## Fig. 5.8: Snelson with a gap, Laplace-GGN against VOGN and VOGGN",
        "",
        "`bnnpred train experiment=notes003_fig5_8` (Laplace-GGN, δ = 0.1, MAP by Adam at lr 0.01), "
        "`experiment=notes003_fig5_8_vogn` (diagonal) and `experiment=notes003_fig5_8_voggn` (full covariance), "
        "both at δ = 1 (DNN2GP) from the random initialisation with S = 10 draws a step, γ = 0.01, mean step "
        "ρ = 0.05, stopped on the ELBO's plateau; all three on 1x32 sigmoid (P = 97, DNN2GP's network; the thesis "
        "says 2x64, and the notes' CPU plan moves only full-covariance VOGGN to 1x32), the real 200 Snelson points "
        "without 1.5 < x < 3 in training, σ = 0.286. "
        f"Runs: {runs}. Predictive std = √(J Σ Jᵀ + σ²) on a grid, averaged in the gap and 'near the data' (within "
        "0.05 of a training input).",
        "",
        r.table(snelson_claims(gap_std, data_std, rmse, blr_gp, sigma)),
        "",
        "Why (c) fails for the VI posteriors: at δ = 1 and σ = 0.286 the ELBO's optimum itself trades fit for KL. An "
        "independent full-covariance VI on the same network, data and prior (reparameterised gradients, 16 draws, "
        "Adam at lr 0.002 for 40,000 steps; issue 22) ends at ELBO / N ≈ −2.2 with KL ≈ 114 nats and its mean "
        "network's training RMSE at 0.463; VOGGN reaches the same ELBO (−2.05 to −2.1 over 3,000-20,000 steps, "
        "training RMSE 0.46-0.48, from a random start or from the MAP). The shipped thesis-toy recipes "
        "(voggn.yaml, vogn.yaml: γ = 0.001, ρ = 1, S = 1) are still near their narrow Σ₀ at their step caps here "
        "and diverge past them once the precision relaxes (full covariance, about step 2900). At Laplace-GGN's "
        "prior δ = 0.1 (`experiment=notes003_fig5_8_voggn prior.delta=0.1`, seed 0, 10,000 steps) VOGGN fits "
        "(training RMSE 0.287), and its BLR latent std (without the noise) is 0.342 in the gap against 0.083 near "
        "the data, still below Laplace-GGN's in the gap; that run is not one of this page's, so no claim reads it.",
        "",
        "![snelson](snelson_fig5_8.png)",
    ])


def snelson_claims(gap_std: dict[str, float], data_std: dict[str, float], rmse: dict[str, float],
                   blr_gp: dict[str, float], sigma: float) -> list[Claim]:
    """notes-003 checklist item 12: per predictive (``"<method>, BLR"``) its mean predictive std (with the noise)
    in the gap and near the data, each method's training RMSE, and the largest |Δ latent mean| and |Δ latent std| of
    Laplace-GGN's BLR and GP predictives (``blr_gp``: ``{"mean", "std"}``; "the curves must overlap")."""
    laplace = "Laplace-GGN, BLR"
    shown = [k for k in gap_std if k.endswith("BLR")]
    coded = [
        *[claim(item(3, 12, "a"), Compare(f"{k}: predictive std in the gap", "≥", "near the data", factor=1.5),
                (gap_std[k], data_std[k])) for k in shown],
        *[claim(item(3, 12, "b"), Compare(f"{k}: gap std", "≥", "Laplace-GGN's"),
                (gap_std[k], gap_std.get(laplace, float("nan"))), note="the thesis's 'huge variance when data are "
                "missing'") for k in shown if k != laplace],
        every(item(3, 12, "c"), Compare("training RMSE", "≤", sigma, factor=1.5), rmse, over="method"),
        all_of(*(claim(item(3, 12), Compare(f"Laplace-GGN's BLR and GP predictives: max |Δ {part}|", "<", 1e-6),
                       blr_gp.get(part, math.nan)) for part in ("mean", "std")), note="they coincide"),
    ]
    return [departs(c, Claim(c.item, f"{c.text}, Laplace-GGN and VOGN on the notes' 2x64 sigmoid",
                             Verdict.not_applicable, "no number (not run)"), SMALL_NET) for c in coded]


# notes-003 §6's CPU plan: "Snelson 2×64: Laplace full, diagonal VOGGN, and full-covariance VOGGN on 1×32"
SMALL_NET = ("every method on DNN2GP's 1x32 sigmoid (P = 97), where the notes' CPU plan keeps Laplace-GGN and the "
             "diagonal VOGN on 2x64 (P = 4353) and moves only full-covariance VOGGN to 1x32")


def make(r: Reproduction) -> str:
    sections = [wine(r), snelson(r)]
    return "\n\n".join(["# Second thesis (notes-003): wine evidence and Snelson VOGN",
                          r.provenance("bnnpred reproduce notes003"), *sections]) + "\n"


STUDY = Study(name="notes003", title="second thesis (notes-003) Fig. 5.1 (wine marginal likelihood) and Fig. 5.8 "
              "(Snelson, Laplace-GGN vs VOGN)", make=make, cpu_cost="about 10 min", items=items(3, 5, 12),
              from_records=True)
