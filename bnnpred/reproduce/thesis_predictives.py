"""Thesis Figs. 5.4 and 5.5 (notes-000 §6.3): NN vs GLM sampling for L-GGN, OGGN, LGVA and VOGGN on Snelson with
a gap and on two moons, a table of test NLL (and RMSE / accuracy) per method x predictive over five seeds, and the
notes' pass criteria 15-18 checked. Each (experiment, method) is one sweep over the seeds."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from bnnpred.app.report import figures
from bnnpred.app.report.run_figures import blr_uncertainty, predictive_drawings
from bnnpred.app.report.tables import collect, summarize
from bnnpred.app.saved_runs import restore
from bnnpred.reproduce.base import Reproduction, Study, document, read_trace
from bnnpred.reproduce.claims import (
    Claim,
    Compare,
    Item,
    all_of,
    any_of,
    claim,
    departs,
    ends,
    every,
    item,
    items,
    lookup,
)
from bnnpred.reproduce.derived import scalars
from bnnpred.reproduce.grids import GRID_POINTS, grid_around, nearest_distance

# Each NGVI method runs at its shipped defaults (bnnpred/conf/inference/{oggn,lgva,voggn}.yaml: the recipe, its
# deviations from the thesis and the evidence for them); the page's intro and "what was tried" rows repeat them.
METHODS: dict[str, list[str]] = {
    "L-GGN": ["inference=laplace_ggn"],
    "OGGN": ["inference=oggn"],
    "LGVA": ["inference=lgva"],
    "VOGGN": ["inference=voggn", "inference.start=map", "inference.mean_gamma=0.05", "inference.iterations=300"],
}
PER_EXPERIMENT: dict[tuple[str, str], list[str]] = {}
QUICK = {"L-GGN": ("inference.map.steps=300",), "OGGN": ("inference.iterations=10",),
         "LGVA": ("inference.iterations=10",), "VOGGN": ("inference.iterations=10",)}
EXPERIMENTS = {"thesis_fig5_4": "Snelson with a gap (Fig. 5.4)", "thesis_fig5_5": "two moons (Fig. 5.5)"}


def slug(method: str) -> str:
    return method.lower().replace("-", "_")


def sweep_method(r: Reproduction, experiment: str, method: str) -> Path:
    return r.sweep(r.runs / experiment / slug(method), "seed${seed}", f"experiment={experiment}", *METHODS[method],
                   *PER_EXPERIMENT.get((experiment, method), []), f"seed={seeds(r)}",
                   quick=(*QUICK[method], "predictive.n_samples=100", "plot.grid_points=20"))


def seeds(r: Reproduction) -> str:
    """Five seeds for every method."""
    return str(r.pick(quick="0,1", cpu="0,1,2,3,4"))


def kl_kept(trace: pd.DataFrame) -> float:
    """KL(q ‖ p) at the last row of a natural-gradient ``trace`` over that at its first (after the first step): the
    share of its start KL the posterior kept; NaN for a trace without a KL (L-GGN's MAP)."""
    if "kl" not in trace:
        return math.nan
    last, first = ends(trace["kl"].dropna())
    return last / first


def run_extras(r: Reproduction, run_dir: Path) -> dict[str, float]:
    """NGVI iterations, whether the plateau rule stopped the run, its wall time, the share of its start KL(q ‖ p)
    the posterior kept (:func:`kl_kept`) and, for regression, the mean test predictive std of NN and GLM sampling
    (from its stored predictions: :func:`predictive_std`)."""
    metrics = document(run_dir)
    info = metrics["info"]
    return {"iterations": info.get("iterations", np.nan), "plateau": info.get("plateau", np.nan),
            "run_seconds": metrics["run"].get("seconds", np.nan),
            "kl_kept": kl_kept(read_trace(run_dir)),
            **scalars(r.derived(run_dir, "predictive_std", predictive_std))}


def predictive_std(run_dir: Path) -> dict[str, float]:
    """``{"nn_std", "glm_std"}``: the mean test predictive std of NN and GLM sampling in the run's stored
    predictions (none for classification, whose predictions hold no variance)."""
    with np.load(run_dir / "predictions.npz") as predictions:
        return {f"{kind}_std": float(np.sqrt(predictions[f"{kind}_var"]).mean())
                for kind in ("nn", "glm") if f"{kind}_var" in predictions}


def method_table(r: Reproduction, folders: dict[str, Path]) -> pd.DataFrame:
    """Test metrics per (method, predictive) of the methods' sweeps (``folders``, as the page reads them): mean and
    s.e. over seeds, with iterations, the share of the start KL kept and predictive std."""
    frames = []
    for method, folder in folders.items():
        frame = collect([folder])
        extras = {run: run_extras(r, Path(run)) for run in frame["run_dir"].unique()}
        frame["method"] = method
        for key in ("iterations", "plateau", "run_seconds", "kl_kept"):
            frame[key] = [extras[run][key] for run in frame["run_dir"]]
        frame["pred_std"] = [extras[run].get(f"{kind}_std", np.nan)
                             for run, kind in zip(frame["run_dir"], frame["predictive"], strict=True)]
        frames.append(frame)
    table = summarize(pd.concat(frames, ignore_index=True), "test", ["method", "predictive"])
    return table.set_index(["method", "predictive"])


def per_seed_glm_nll(folders: dict[str, Path]) -> str:
    """One line: each method's GLM test NLL per seed (a failed check's spread shows which runs make it)."""
    parts = []
    for method, folder in folders.items():
        frame = collect([folder])
        rows = frame[(frame["split"] == "test") & (frame["predictive"] == "glm")].sort_values("seed")
        parts.append(f"{method} " + " / ".join(f"{v:.3f}" for v in rows["nll"]))
    return "GLM test NLL per seed: " + "; ".join(parts) + "."


# the figures the page draws of each method's seed-0 run (one set of kept numbers per run)
FIGURES = {method: ("predictive_nn", "predictive_glm", *(("blr_uncertainty",) if method == "L-GGN" else ()))
           for method in METHODS}


def grid_figure(r: Reproduction, folders: dict[str, Path], path: Path) -> None:
    """Rows NN / GLM, one column per method: the seed-0 run's predictive figures side by side."""
    with tempfile.TemporaryDirectory() as folder:
        drawings = {method: predictive_drawings(r.figure_numbers(folders[method] / "seed0", *FIGURES[method]))
                    for method in METHODS}
        rows = [[(drawings[method][f"predictive_{kind}"](Path(folder) / f"{slug(method)}_{kind}.png"),
                  f"{method}: {kind.upper()} sampling") for method in METHODS] for kind in ("nn", "glm")]
        figures.plot_image_grid(path, rows, panel_width=4, fontsize=10)


def results_table(table: pd.DataFrame, score: str) -> list[str]:
    lines = [f"| method | NN NLL | GLM NLL | NN {score} | GLM {score} | NN / GLM mean predictive std | iterations "
             "(share stopped by the ELBO plateau) | KL(q ‖ p) at the last / first trace row | seconds per run |",
             "|---|---|---|---|---|---|---|---|---|"]
    for method in METHODS:
        nn, glm = table.loc[(method, "nn")], table.loc[(method, "glm")]
        iters = (f"{glm['iterations']:.0f} ({glm['plateau']:.0%})" if np.isfinite(glm["iterations"])
                 else "- (Adam MAP)")
        kept = f"{glm['kl_kept']:.3f}" if np.isfinite(glm["kl_kept"]) else "-"
        lines.append(f"| {method} | {nn['nll']:.3f} ± {nn['nll_se']:.3f} | {glm['nll']:.3f} ± {glm['nll_se']:.3f} | "
                     f"{nn[score]:.3f} ± {nn[score + '_se']:.3f} | {glm[score]:.3f} ± {glm[score + '_se']:.3f} | "
                     f"{nn['pred_std']:.2f} / {glm['pred_std']:.2f} | {iters} | {kept} | {glm['run_seconds']:.0f} |"
                     .replace("nan / nan", "-"))
    return lines


# A method has learned when its GLM predictive beats predicting the training mean by a margin: Snelson targets
# have std ≈ 0.9 (RMSE of a constant), two moons is at chance with accuracy 0.5. Per experiment: its checklist item,
# the metric and the criterion.
LEARNED = {"thesis_fig5_4": (item(0, 15), "rmse", Compare("GLM test RMSE", "<", 0.6)),
           "thesis_fig5_5": (item(0, 17), "accuracy", Compare("GLM test accuracy", ">", 0.8))}


def learned_claim(t: pd.DataFrame, experiment: str) -> tuple[list[str], Claim]:
    """Which methods learned at all (claims about a method that did not are void), and the claim that all did."""
    where, key, criterion = LEARNED[experiment]
    values = {m: lookup(t, (m, "glm"), key) for m in METHODS}
    failed = [m for m, v in values.items() if not criterion.test(v)]
    return failed, every(where, criterion, values, over="method", note="the methods fit the data")


# VOGGN's NN and GLM predictives agree trivially while q is still a near point mass (issue 33), so notes-000 #15c
# and #17c also ask that q spread from its start: its KL(q ‖ p) at the last trace row at most KEPT of that at the
# first. q starts at Σ₀ = 2e-4 I (bnnpred/conf/inference/voggn.yaml), about 4 nats of KL per weight, nearly all of
# it the covariance's (−½ log δΣ₀ per weight); at the precision's fixed point Δ + E_q[Ĝ] the P − N (over 2500 of
# about 2700) directions that the data leave unconstrained carry none, so a q that has spread keeps about a tenth, while
# at γ = 0.001 the precision moves 1 − e^{−γt} of its way (26 % at the page's 300-step cap) and the KL falls a few
# per cent. A half lies far from both. (A start wider than the fixed point would fail this, never pass it.)
KEPT = 0.5
POINT_MASS = ("the notes' criterion alone passes a q that never left its near point-mass start, whose NN and GLM "
              "predictives agree trivially (issue 33)")
# notes-000 #15a and #17a compare the GLM predictives of four algorithms; VOGGN starts at L-GGN's MAP
# (inference.start=map), so the same guard asks that its q spread, else its GLM is the MAP's and three spread
THREE = ("VOGGN starts at L-GGN's MAP: while its q has not spread from its near point-mass start, its GLM predictive "
         "is the MAP's and the spread is of three algorithms, not the notes' four (issue 33)")


def spread_claim(where: Item, kept: float) -> Claim:
    """The share of its start KL(q ‖ p) that VOGGN's posterior kept (:func:`kl_kept`, mean over the seeds) at most
    :data:`KEPT`: the mechanism of notes-000 #15c and #17c, that q spread from its near point-mass start, and of
    #15a and #17a, that its GLM predictive is a fourth algorithm's (:data:`THREE`)."""
    return claim(where, Compare("VOGGN's KL(q ‖ p) at the last / first trace row", "≤", KEPT), kept,
                 note="q spread from its start")


def snelson_claims(t: pd.DataFrame) -> list[Claim]:
    """notes-000 checklist item 15 on the test metrics per (method, predictive) (log-likelihood = −NLL, nats per
    point); #15a and #15c also ask that VOGGN's q spread (:func:`spread_claim`: four algorithms; not a trivial
    agreement), departing from the notes."""
    def of(m: str, kind: str, key: str) -> float:
        return lookup(t, (m, kind), key)

    glm = [of(m, "glm", "nll") for m in METHODS]
    gap = {m: of(m, "nn", "nll") - of(m, "glm", "nll") for m in METHODS}
    ratio = {m: of(m, "nn", "pred_std") / of(m, "glm", "pred_std") for m in METHODS}
    agree = claim(item(0, 15, "c"), Compare("VOGGN: |NN NLL − GLM NLL|", "≤", 0.2), abs(gap["VOGGN"]))
    spread = claim(item(0, 15, "a"), Compare("spread of the four GLM test NLLs", "≤", 0.2), float(np.ptp(glm)),
                   numbers=f"GLM NLL {min(glm):.3f} to {max(glm):.3f}")
    return [
        departs(all_of(spread, spread_claim(item(0, 15, "a"), of("VOGGN", "glm", "kl_kept"))), spread, THREE),
        *[any_of(claim(item(0, 15, "b"), Compare(f"{m}: NN NLL − GLM NLL", "≥", 0.5), gap[m]),
                 claim(item(0, 15, "b"), Compare("NN std / GLM std", "≥", 3), ratio[m])) for m in ("L-GGN", "OGGN")],
        departs(all_of(agree, spread_claim(item(0, 15, "c"), of("VOGGN", "glm", "kl_kept"))), agree, POINT_MASS),
        all_of(claim(item(0, 15, "d"), Compare("LGVA: NN NLL − GLM NLL", ">", 0), gap["LGVA"]),
               claim(item(0, 15, "d"), Compare("LGVA's NN − GLM NLL", "≤", "L-GGN's", margin=0.1),
                     (gap["LGVA"], gap["L-GGN"]))),
    ]


# notes-000 #17d: an NN predictive "shows a boundary" when its test accuracy is at least BOUNDARY. A flat predictive
# (p = ½ everywhere, NLL log 2) scores chance, 0.5 ± 0.016 on the 1000 test points; 0.7 is over ten of those s.e.
# above it, and below the 0.8 that counts as fitting the data (LEARNED): a boundary drawn by NN samples may blur.
BOUNDARY = 0.7


def moons_claims(t: pd.DataFrame) -> list[Claim]:
    """notes-000 checklist item 17 on the test metrics per (method, predictive); #17a and #17c also ask that VOGGN's
    q spread (:func:`spread_claim`: four algorithms; not a trivial agreement), departing from the notes; #17d's
    boundary is an NN test accuracy of at least :data:`BOUNDARY`."""
    def nn_minus_glm(m: str, key: str) -> float:
        return lookup(t, (m, "nn"), key) - lookup(t, (m, "glm"), key)

    acc = [lookup(t, (m, "glm"), "accuracy") for m in METHODS]
    nll = [lookup(t, (m, "glm"), "nll") for m in METHODS]
    agree = claim(item(0, 17, "c"), Compare("VOGGN: |NN − GLM accuracy|", "≤", 0.03),
                  abs(nn_minus_glm("VOGGN", "accuracy")))
    spread = all_of(claim(item(0, 17, "a"), Compare("spread of the four GLM accuracies", "≤", 0.03),
                          float(np.ptp(acc))),
                    claim(item(0, 17, "a"), Compare("of their NLLs", "≤", 0.05), float(np.ptp(nll))))
    kept = lookup(t, ("VOGGN", "glm"), "kl_kept")
    return [
        departs(all_of(spread, spread_claim(item(0, 17, "a"), kept)), spread, THREE),
        claim(item(0, 17, "b"), Compare("L-GGN NN test NLL", "≥", 0.6), lookup(t, ("L-GGN", "nn"), "nll"),
              note="NN sampling is uniform"),
        departs(all_of(agree, spread_claim(item(0, 17, "c"), kept)), agree, POINT_MASS),
        all_of(*[part for m in ("LGVA", "OGGN") for part in (
            claim(item(0, 17, "d"), Compare(f"{m}: NN test accuracy", "≥", BOUNDARY), lookup(t, (m, "nn"), "accuracy"),
                  note="shows a boundary"),
            claim(item(0, 17, "d"), Compare(f"{m}: NN NLL − GLM NLL", ">", 0), nn_minus_glm(m, "nll")))]),
    ]


FAR = 2.0  # notes-000 item 18: grid points "at distance > 2 from the data"
BAND = 0.1  # the boundary band |p − 0.5| < BAND; "far from the boundary": |p − 0.5| > 0.5 − BAND


def blr_numbers(run: Path) -> dict[str, float]:
    """notes-000 item 18's numbers for the L-GGN ``run`` (Fig. 5.5b's BLR maps on a grid reaching ``2·FAR`` beyond
    the training inputs): max √Λ and the distance of the BLR mean from 0.5 where √Λ peaks; the median model std
    √V[f̂_GP] at the training inputs (all of them, and those on the boundary band), on the boundary band further than
    ``FAR`` from the data, and on confident points further than ``FAR`` from the data."""
    s, ctx = restore(run)
    X = s.data.X_train
    _, _, points = grid_around(X, 2 * FAR)
    prob, maps = blr_uncertainty(ctx, points)
    noise, model = maps["noise √Λ"], maps["model √V[f̂] = Λ√(JΣJᵀ)"]
    prob_data, at_data = blr_uncertainty(ctx, X)
    far = nearest_distance(points, X) > FAR
    band, confident = np.abs(prob - 0.5) < BAND, np.abs(prob - 0.5) > 0.5 - BAND

    def median(values: np.ndarray) -> float:
        return float(np.median(values)) if len(values) else float("nan")

    return {"max_noise": float(noise.max()), "peak_offset": float(abs(prob[np.argmax(noise)] - 0.5)),
            "model_data": median(at_data["model √V[f̂] = Λ√(JΣJᵀ)"]),
            "model_data_band": median(at_data["model √V[f̂] = Λ√(JΣJᵀ)"][np.abs(prob_data - 0.5) < BAND]),
            "model_far_band": median(model[far & band]),
            "model_far_confident": median(model[far & confident])}


def blr_claims(numbers: dict[str, float], accuracy: float) -> list[Claim]:
    """notes-000 checklist item 18 (Fig. 5.5b) on :func:`blr_numbers`. √Λ = √(p(1 − p)) at L-GGN's BLR mean p, so
    "max √Λ ≤ 0.5, peaking on the 0.5-contour" holds for any predictor, a flat p = 0.5 too: the first row also asks
    that L-GGN's GLM (``accuracy``, its test accuracy) shows a boundary."""
    return [
        all_of(claim(item(0, 18), Compare("max √Λ", "≤", 0.5), numbers["max_noise"]),
               claim(item(0, 18), Compare("|BLR mean − 0.5| where √Λ peaks", "≤", 0.05), numbers["peak_offset"]),
               claim(item(0, 18), Compare("L-GGN GLM test accuracy", "≥", BOUNDARY), accuracy,
                     note="a boundary: the first two are identities of √(p(1 − p))"),
               note="√Λ peaks on the 0.5-contour"),
        all_of(*(claim(item(0, 18), Compare(f"median model std √V[f̂_GP] at the training inputs{where}", "<",
                                            f"on the boundary band further than {FAR:g} from the data"),
                       (numbers[key], numbers["model_far_band"]))
                 for where, key in (("", "model_data"), (" on the boundary band", "model_data_band"))),
               note="the notes' proposed medians, and their text's 'training inputs near the boundary'"),
        claim(item(0, 18), Compare(f"median model std further than {FAR:g} from the data and the boundary", "<",
                                   "on the boundary band there"),
              (numbers["model_far_confident"], numbers["model_far_band"]), note="small far from both"),
    ]


def section(r: Reproduction, experiment: str) -> str:
    folders = {method: sweep_method(r, experiment, method) for method in METHODS}
    out = r.out
    table = method_table(r, folders)
    score = "rmse" if experiment == "thesis_fig5_4" else "accuracy"
    grid_figure(r, folders, out / f"{experiment}_grid.png")
    failed, learned = learned_claim(table, experiment)
    checks = [learned, *(snelson_claims(table) if experiment == "thesis_fig5_4" else moons_claims(table))]
    lines = [f"## {EXPERIMENTS[experiment]}", "", f"`bnnpred train -m experiment={experiment} <method> "
             f"seed={seeds(r)}`; test set, mean ± s.e. over the seeds, "
             "1000 predictive samples.", "",
             *results_table(table, score), "", r.table(checks), "",
             per_seed_glm_nll(folders), "",
             *([f"{', '.join(failed)} did not learn here, so the claims about {'it' if len(failed) == 1 else 'them'} "
                "test a trivial predictor.", ""] if failed else []),
             "Seed 0, rows NN / GLM sampling (mean ± 2 std and three joint function samples for Snelson; "
             "p(y = 1 | x) for two moons):", "", f"![grid]({experiment}_grid.png)"]
    if experiment == "thesis_fig5_5":
        run = folders["L-GGN"] / "seed0"
        predictive_drawings(r.figure_numbers(run, *FIGURES["L-GGN"]))["blr_uncertainty"](
            out / "thesis_fig5_5b_blr_uncertainty.png")
        lines += ["", "Fig. 5.5b, L-GGN's BLR model uncertainty √V[f̂_GP] and observation noise √Λ:", "",
                  "![blr](thesis_fig5_5b_blr_uncertainty.png)", "",
                  f"Fig. 5.5b in numbers (L-GGN, seed 0, a grid reaching {2 * FAR:g} beyond the training inputs; "
                  f"boundary band |p − 0.5| < {BAND:g}, confident |p − 0.5| > {0.5 - BAND:g}):", "",
                  r.table(blr_claims(scalars(r.derived(run, "blr_numbers", blr_numbers,
                                                     {"far": FAR, "band": BAND, "grid_points": GRID_POINTS})),
                                     lookup(table, ("L-GGN", "glm"), "accuracy")))]
    return "\n".join(lines)


def recipe_table() -> str:
    """The settings each NGVI method runs at on this page (its shipped config plus the page's overrides) against
    the thesis's."""
    from bnnpred.app.compose import compose

    lines = ["| method | µ₀ | γ (weight of the new GGN) | mean step ρ | S | Σ₀ | stop | step cap |",
             "|---|---|---|---|---|---|---|---|",
             "| thesis (§5.2) | shared random init | β = 0.999, read as γ = 1 − β = 0.001 | γ | 1 | 0.1 I | "
             "'until convergence' | - |"]
    for method in ("OGGN", "LGVA", "VOGGN"):
        c = compose(METHODS[method]).inference
        start = "shared random init" if c.start.value == "init" else "the L-GGN MAP (warm start)"
        rho = "γ" if c.mean_gamma is None else f"{c.mean_gamma:g}"
        on = "GLM ELBO" if c.plateau_on.value == "glm_elbo" else "ELBO"
        stop = (f"{on} plateau (change < {c.plateau_tol:g} nats/example between windows of {c.plateau_window} "
                f"trace rows, {c.log_every} steps a row)" if c.plateau_window else f"‖Δµ‖/‖µ‖ < {c.tol:g}")
        lines.append(f"| {method} | {start} | {c.gamma:g} | {rho} | {c.n_samples} | {c.init_var:g} I | {stop} | "
                     f"{c.iterations} |")
    return "\n".join(lines)


def make(r: Reproduction) -> str:
    intro = ("Thesis settings (notes-000 §6.3): full covariance, one shared random initial mean (seeded), δ from "
             "our Figs 5.2 / 5.3 (0.398, σ² = 0.1; 0.631), 1000 predictive samples. Each NGVI method runs at its "
             "shipped recipe (bnnpred/conf/inference/{oggn,lgva,voggn}.yaml, where each deviation and its evidence is "
             "written down); VOGGN starts from the L-GGN MAP with ρ = 0.05 for 300 steps (a warm start: its shipped "
             "random-start recipe underfits Snelson, NLL 0.96, see the last section):")
    sections = [section(r, experiment) for experiment in EXPERIMENTS]
    return "\n\n".join(["# Thesis Figs 5.4 and 5.5: which predictive for which posterior",
                          r.provenance("bnnpred reproduce thesis_predictives"), intro, recipe_table(),
                          RECIPE_NOTES, *sections, TRIED]) + "\n"


RECIPE_NOTES = (
    "Why these recipes (issue 22; the numbers are this session's seed-0 trials on the thesis MLP): OGGN's and "
    "LGVA's fixed points do not depend on γ, so they rebuild the precision every step (γ = 1, Π = Δ + Ĝ: diagonal "
    "plus rank N·K, a Woodbury step at ~5 Adam steps against ~80 for the dense P x P update that γ < 1 needs), "
    "and damp only the mean (ρ = γ = 1 jumps to θ ≈ 0). VOGGN needs γ small: its precision must average the GGNs "
    "of many draws. With the thesis's coupled ρ = γ = 0.001 the mean moves too slowly (70 % two-moons accuracy "
    "after 3000 diagonal steps); ρ = 1 learns fast (two moons 87 % at 500 full steps) but diverges once the "
    "precision relaxes (diagonal at γ = 0.01 by step 300; full covariance on notes-003's Snelson after 2900 "
    "steps). Σ₀ = 0.1 I makes VOGGN's draws random networks (diagonal, ρ = 1: chance on two moons); Σ₀ = 0.01 I is "
    "the variance of the initial weights.")
TRIED = "\n".join([
    "## What was tried (seed 0, thesis MLP, one run a row; the settings the page runs are marked)",
    "",
    "| method | setting | result |",
    "|---|---|---|",
    "| OGGN | γ = ρ = 0.999 (the thesis read literally) | θ ≈ 0, constant predictions on both toys (issue 22) |",
    "| OGGN | γ = 1, ρ = 0.1 | two moons 84.4 % (plateau at 130-320 steps); Snelson GLM ELBO oscillating, RMSE 0.54 |",
    "| OGGN | **γ = 1, ρ = 0.02** | two moons 91.1 % at 600 steps, Snelson GLM RMSE 0.314 |",
    "| LGVA | γ = 1, ρ = 0.1, S = 10 (the page of 2026-11-24, five seeds) | two moons 91.1 % at seed 0; Snelson "
    "GLM NLL 0.356 / 0.338 / 1.990 / 0.314 / 0.298: seed 2 swung to the 3000-step cap (2 of 5 stopped by the "
    "plateau) |",
    "| LGVA | **γ = 1, ρ = 0.05, S = 10** | Snelson GLM NLL 0.271 / 0.297 / 0.366 at seeds 0 / 2 / 3, all stopped by "
    "the plateau (1490-2500 steps, 38-59 s); ρ = 0.02: seed 2 0.261 (1660 steps); two moons seeds 1 / 2 GLM NLL "
    "0.339 / 0.340, as at ρ = 0.1 and as OGGN's (another mode than seed 0's) |",
    "| VOGGN | γ = ρ = 0.1, Σ₀ = 1e-3 I, 300 steps | two moons at chance (49 %) |",
    "| VOGGN | γ = 0.001, ρ = 1, Σ₀ = 1e-3 I, 500 steps | two moons 87.4 %, NN NLL 0.299 vs GLM 0.298 |",
    "| VOGGN | γ = 0.001, ρ = 0.05, Σ₀ = 0.01 I | Snelson diverged within 50 steps |",
    "| VOGGN | γ = 0.001, ρ = 1, Σ₀ = 2e-4 I, 800 steps (the shipped default) | Snelson GLM RMSE 0.50, NLL 0.96 (NN "
    "0.94): learns, underfits |",
    "| VOGGN | **MAP warm start, γ = 0.001, ρ = 0.05, Σ₀ = 2e-4 I** (400 steps) | Snelson GLM RMSE 0.355, NLL 0.36 "
    "(NN 0.37) |",
    "| VOGGN 1x32 (notes-003 Snelson) | γ = 0.001, ρ = 1, Σ₀ = 2e-4 I | diverged at about step 2900, once Π "
    "relaxed |",
    "| VOGN (diag) | γ = 0.01, ρ = 1, Σ₀ = 1e-3 I | diverged (two moons) |",
    "| VOGN (diag) | γ = 0.001, ρ = 1, Σ₀ = 0.01 I or 0.1 I | chance on two moons (draws are random networks) |",
    "| VOGN (diag) | γ = ρ = 0.001, Σ₀ = 1e-3 I, 3000 steps | two moons 69.9 % (the mean moves too slowly) |",
    "| VOGN (diag) | γ = 0.001, ρ = 1, Σ₀ = 1e-3 I | two moons 90.5 % at 1000 steps; Snelson diverged at step 202 |",
    "| VOGN (diag) | γ = 0.001, ρ = 1, Σ₀ = 1e-4 I, 1500 steps (bnnpred/conf/inference/vogn.yaml) | two moons 85.6 %, "
    "Snelson RMSE 0.51 |",
    "",
    "Why VOGGN is a transient here: its fixed point has Π = Δ + E_q[GGN], which leaves the prior's variance "
    "(1/δ ≈ 1.6 per weight) in the directions the 150 points do not constrain. Draws from it are random networks "
    "whose gradients pull the mean into the prior's basin (issue 22: at γ = 0.01 the ELBO stalls at −4.4 per "
    "example, far below the Laplace evidence). At γ = 0.001 the covariance has moved only 1 − e^{−γt} of the way "
    "from Σ₀ to that fixed point after t steps (26 % at 300, 55 % at 800), so VOGGN's NN and GLM predictives agree "
    "because q is still narrow, not because its covariance has converged; the ELBO is still rising at the cap.",
])


STUDY = Study(name="thesis_predictives", title="thesis Figs 5.4 and 5.5: NN vs GLM sampling for L-GGN, OGGN, LGVA "
              "and VOGGN, five seeds", make=make, cpu_cost="about 30 min (40 runs with 2 jobs, measured)",
              items=items(0, 15, 17, 18), from_records=True, keeps_traces=True)
