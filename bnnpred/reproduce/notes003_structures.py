"""notes-003 Figs 5.2, 5.3 and 5.5-5.7 and Table 5.1's diagonal row: one network under the full, Kronecker and
diagonal Laplace-GGN posteriors (``inference.structure``) on the 1-D regression toy, two moons and banana, with the
GLM predictive's uncertainty split checked in numbers (checklist items 6, 7, 8, 10 and 11)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from bnnpred.app.report import figures
from bnnpred.app.report.tables import collect, select_by_valid_nll, summarize
from bnnpred.app.run_evaluation import predictors
from bnnpred.app.saved_runs import restore
from bnnpred.reproduce.base import Reproduction, Study, document
from bnnpred.reproduce.claims import (
    MOVED_NLL,
    Claim,
    Compare,
    Item,
    Ordered,
    all_of,
    claim,
    departs,
    every,
    guarded,
    item,
    items,
)
from bnnpred.reproduce.derived import predictive_band, scalars, tensors, training_points
from bnnpred.reproduce.grids import grid_around, nearest_distance

STRUCTURES = ("full", "kron", "diag")
QUICK_MAP = ("inference.map.steps=300",)
MOONS_MARGIN = 4.0  # the two-moons grid reaches this far beyond the data, so points > 2 units away exist
BANANA_MARGIN = 2.0  # banana's inputs are standardised


# ------------------------------------------------------------------------------------- Fig. 5.2, 1-D regression


# notes-003 §3 E2 and §6 A1: the toys of §5.2 (Figs. 5.2, 5.3) use three hidden layers of 25 tanh units, Fig. 5.6
# two of 50
SECTION_5_2_NET = ("model.depth=3", "model.width=25")
FIG5_6_NET = ("model.depth=2", "model.width=50")


def home(r: Reproduction) -> Path:
    """The study's own folder of runs (toys' banana sweep has other settings: a shared folder would mix them)."""
    return r.runs / "notes003_structures"


def regression(r: Reproduction) -> str:
    """δ at the overfitting end of the evidence grid, its optimum ★ and the underfitting end, under each structure
    (§5.2's 3x25 tanh MLP on Snelson with a gap, σ² = 0.1)."""
    grid = r.train_once(home(r) / "fig5_2_grid", "experiment=thesis_fig5_2", *SECTION_5_2_NET,
                        "selection.sigma2_grid=null", "likelihood.sigma2=0.1",
                        quick=(*QUICK_MAP, "selection.delta_grid=[0.0001,1,100]"))
    evidence = pd.read_csv(grid / "selection.csv").sort_values("delta")
    deltas = {"overfit": evidence["delta"].iloc[0], "★": evidence.loc[evidence["log_marglik"].idxmax(), "delta"],
              "underfit": evidence["delta"].iloc[-1]}
    runs = {(end, structure): r.train_once(home(r) / f"fig5_2_{end.replace('★', 'star')}_{structure}",
                                           "experiment=thesis_fig5_2", *SECTION_5_2_NET, "selection=none",
                                           "likelihood.sigma2=0.1",
                                           f"prior.delta={delta}", f"inference.structure={structure}",
                                           "predictive.kinds=[closed]", quick=QUICK_MAP)
            for end, delta in deltas.items() for structure in STRUCTURES}
    mse = pd.DataFrame([{"end": end, "structure": structure, "delta": deltas[end],
                         **{f"{split}_mse": document(run)["metrics"][split]["closed"]["rmse"] ** 2
                            for split in ("train", "test")}}
                        for (end, structure), run in runs.items()])
    points = training_points(runs["★", "full"])
    x = torch.linspace(float(points["x"].min()) - 1, float(points["x"].max()) + 1, 400, dtype=torch.float64)[:, None]
    panels = {}
    for (end, structure), run in runs.items():
        band = tensors(r.derived(run, "closed_band", predictive_band("closed", x), {"x": x}))
        panels[f"{structure}, {end} (δ = {deltas[end]:.3g})"] = band["mean"], band["std"]
    figures.plot_1d_panels(r.out / "fig5_2_structures.png", x[:, 0], panels, points["x"], points["y"],
                           ncols=3, title="GLM (closed form) predictive; columns full / kron / diag",
                           ylim=(float(points["y"].min()) - 3, float(points["y"].max()) + 3))
    table = mse.pivot_table(index="structure", columns="end", values=["train_mse", "test_mse"]).reindex(STRUCTURES)
    lines = ["| structure | " + " | ".join(f"{end} train / test MSE" for end in deltas) + " |",
             "|---|" + "---|" * len(deltas)]
    lines += [f"| {st} | " + " | ".join(f"{table.loc[st, ('train_mse', end)]:.4f} / "
                                         f"{table.loc[st, ('test_mse', end)]:.4f}" for end in deltas) + " |"
              for st in STRUCTURES]
    return "\n".join([
        "## Fig. 5.2: over- and underfitting under full, Kronecker and diagonal posteriors",
        "",
        f"§5.2's 3x25 tanh MLP (P = {document(grid)['run']['n_params']}) on Snelson with a gap (150 training "
        "points), σ² = 0.1; δ at the ends of the "
        f"evidence grid ({len(evidence)} δ in [{evidence['delta'].min():g}, {evidence['delta'].max():g}], full "
        f"posterior) and at its argmax ★ = {deltas['★']:.3g}; one MAP per δ shared by the three structures; the "
        "closed-form GLM predictive (its mean is the MAP's, so the MSEs agree across structures).",
        "",
        *lines,
        "",
        r.table(regression_claims(mse)),
        "",
        "![structures](fig5_2_structures.png)",
    ])


def regression_claims(mse: pd.DataFrame) -> list[Claim]:
    """notes-003 #6 on ``mse`` (one row per end ∈ {overfit, ★, underfit} and structure: train_mse, test_mse): for
    the overfit δ, test MSE ≥ 1.2 × train MSE; for the underfit δ, train MSE ≥ 1.5 × train MSE at ★.

    Both criteria are on train and test MSEs, which are the MAP's: the closed-form GLM predictive's mean is the MAP's
    output, and one MAP per δ serves the three structures (★ is the full posterior's evidence argmax, the same δ for
    all). The structures' rows repeat one number, so each criterion is claimed once on it: one MAP's number counted
    three times is not three structures. Rows of one end that disagree (no shared MAP) give no number."""
    def the_map(end: str) -> tuple[tuple[float, float], str]:
        """The pair (train MSE, test MSE) every structure's row at ``end`` repeats, and why there is none."""
        rows = mse[mse["end"] == end]
        pairs = set(zip(rows["train_mse"], rows["test_mse"], strict=True))
        if len(pairs) == 1:
            return pairs.pop(), ""
        return (math.nan, math.nan), f"the structures' {end} MSEs differ: not one MAP" if pairs else ""

    (over_train, over_test), over_why = the_map("overfit")
    (star_train, _), star_why = the_map("★")
    (under_train, _), under_why = the_map("underfit")
    shared = f"the MAP's, one for {', '.join(STRUCTURES)}"
    return [
        claim(item(3, 6), Compare("overfit δ: train MSE", "≤", "test MSE", factor=0.8), (over_train, over_test),
              note=f"{shared}; train below test by ≥ 20 % of test, the stricter reading of the notes' 20 %",
              numbers=over_why),
        claim(item(3, 6), Compare("underfit δ: train MSE", "≥", "★'s train MSE", factor=1.5), (under_train, star_train),
              note=shared, numbers="; ".join(why for why in (under_why, star_why) if why)),
    ]


# ------------------------------------------------------------------------------------- Fig. 5.3, two moons


def glm_surface(margin: float) -> Callable[[Path], dict[str, torch.Tensor]]:
    """A run's GLM predictive mean of class 1 on :func:`grid_around` its training inputs: ``{"p"}`` ``[H, W]``."""
    def surface(run: Path) -> dict[str, torch.Tensor]:
        s, ctx = restore(run)
        xx, _, points = grid_around(s.data.X_train, margin)
        return {"p": predictors(s, ctx)["glm"](points).probs[:, 1].reshape(xx.shape)}
    return surface


def kept_split(r: Reproduction, run: Path, margin: float) -> dict[str, float]:
    """:func:`uncertainty_split` of ``run``, kept beside the page."""
    return scalars(r.derived(run, "uncertainty_split", lambda folder: uncertainty_split(folder, margin),
                             {"margin": margin}))


def surfaces(r: Reproduction, runs: dict[str, Path], margin: float
             ) -> tuple[torch.Tensor, torch.Tensor, dict[str, np.ndarray], dict[str, torch.Tensor]]:
    """The grid around the first run's training points (``xx``, ``yy`` ``[H, W]``; the runs share their data),
    each run's :func:`glm_surface` labelled ``GLM, <name>``, and the training points, all kept beside the page."""
    points = training_points(next(iter(runs.values())))
    xx, yy, _ = grid_around(points["x"], margin)
    means = {f"GLM, {k}": tensors(r.derived(run, "glm_surface", glm_surface(margin), {"margin": margin}))["p"].numpy()
             for k, run in runs.items()}
    return xx, yy, means, points


def uncertainty_split(run: Path, margin: float) -> dict[str, float]:
    """The GLM predictive of ``run`` on a grid and at its training inputs (notes-003 item 10): mean aleatoric part
    where ``|p − 0.5| < 0.1`` and where ``> 0.4``; mean epistemic part far from the data (nearest training point
    further than 3x the 95th percentile of the training points' nearest-neighbour distances) and at the training
    inputs; mean confidence ``max(p, 1 − p)`` more than 2 units from every training point (item 7)."""
    s, ctx = restore(run)
    glm = predictors(s, ctx)["glm"]
    X = s.data.X_train
    _, _, points = grid_around(X, margin)
    on_grid, at_data = glm(points), glm(X)
    p = on_grid.probs[:, 1].numpy()
    aleatoric, epistemic = on_grid.aleatoric.numpy(), on_grid.epistemic.numpy()
    distance = nearest_distance(points, X)
    far = distance > 3 * np.quantile(nearest_distance(X, X), 0.95)
    return {"aleatoric_boundary": float(aleatoric[np.abs(p - 0.5) < 0.1].mean()),
            "aleatoric_confident": float(aleatoric[np.abs(p - 0.5) > 0.4].mean()),
            "epistemic_far": float(epistemic[far].mean()), "epistemic_data": float(at_data.epistemic.mean()),
            "confidence_beyond_2": float(np.maximum(p, 1 - p)[distance > 2].mean())}




def moons(r: Reproduction) -> tuple[str, dict[str, float]]:
    """Each structure's evidence-optimal δ on two moons (3x25 tanh), its GLM and NN predictives; and the full
    posterior's on Fig. 5.6's 2x50 tanh, whose uncertainty split and training NLLs item 10 reads."""
    moons_run = functools.partial(r.train_once, quick=(*QUICK_MAP, "selection.delta_grid=[0.01,1,100]"))
    runs = {structure: moons_run(home(r) / f"fig5_3_{structure}", "experiment=thesis_fig5_3", *SECTION_5_2_NET,
                                 f"inference.structure={structure}", "predictive.kinds=[glm,nn]")
            for structure in STRUCTURES}
    fig5_6 = moons_run(home(r) / "fig5_6_full", "experiment=thesis_fig5_3", *FIG5_6_NET, "inference.structure=full",
                       "predictive.kinds=[glm,nn]")
    metrics = {k: document(run)["metrics"] for k, run in runs.items()}
    train_acc = {k: m["train"]["glm"]["accuracy"] for k, m in metrics.items()}
    split = {k: kept_split(r, run, MOONS_MARGIN) for k, run in runs.items()}
    fig5_6_train = document(fig5_6)["metrics"]["train"]
    xx, yy, means, points = surfaces(r, runs, MOONS_MARGIN)
    figures.plot_panels_2d(r.out / "fig5_3_structures.png", xx, yy, means, points["x"], points["y"],
                           title="two moons: GLM predictive mean per structure")
    deltas = {k: document(run)["run"]["delta"] for k, run in runs.items()}
    lines = ["| structure | δ (evidence argmax) | GLM train accuracy | GLM test NLL | NN test NLL | GLM training NLL "
             "| NN training NLL | mean confidence > 2 units from the data |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {k} | {deltas[k]:.3g} | {train_acc[k]:.3f} | {m['test']['glm']['nll']:.3f} | "
              f"{m['test']['nn']['nll']:.3f} | {m['train']['glm']['nll']:.3f} | {m['train']['nn']['nll']:.3f} | "
              f"{split[k]['confidence_beyond_2']:.3f} |" for k, m in metrics.items()]
    page = "\n".join([
        "## Fig. 5.3: two moons under full, Kronecker and diagonal posteriors",
        "",
        f"3x25 tanh MLP (P = {document(runs['full'])['run']['n_params']}), 150 training points, noise 0.3; each "
        "structure at the δ its own Laplace evidence picks on 21 δ in [0.01, 100]; GLM and NN sampling predictives, "
        "1000 samples.",
        "",
        *lines,
        "",
        r.table(moons_claims(train_acc, {k: v["confidence_beyond_2"] for k, v in split.items()})),
        "",
        "![structures](fig5_3_structures.png)",
    ])
    return page, {**kept_split(r, fig5_6, MOONS_MARGIN), "nn_train_nll": fig5_6_train["nn"]["nll"],
                  "glm_train_nll": fig5_6_train["glm"]["nll"]}


def moons_claims(train_acc: dict[str, float], far_confidence: dict[str, float]) -> list[Claim]:
    """notes-003 item 7: the full posterior's GLM training accuracy, and every structure's mean GLM confidence on
    grid points more than 2 units from the data."""
    return [
        claim(item(3, 7), Compare("GLM (full) training accuracy", "≥", 0.85), train_acc.get("full", float("nan"))),
        every(item(3, 7), Compare("mean GLM confidence > 2 units from the data", "≤", 0.9), far_confidence,
              over="structure", note="uncertainty grows away from the data"),
    ]


# ------------------------------------------------------------------------------------- banana


def banana(r: Reproduction) -> tuple[str, dict[str, float]]:
    """Banana (notes-003 Table 5.1 / Fig. 5.7 settings) under each structure, δ per predictive by validation NLL."""
    seeds = r.pick(quick="0", cpu="0,1")
    folder = r.sweep(home(r) / "banana", "${hydra.job.num}", "experiment=banana", f"seed={seeds}",
                     f"inference.structure={','.join(STRUCTURES)}", "predictive.kinds=[map,nn,glm]",
                     "plot.enabled=false",
                     quick=(*QUICK_MAP, "dataset.n_train=300", "predictive.n_samples=100", "prior.delta=0.1,10"))
    everything = collect([folder])
    frame = select_by_valid_nll(everything)
    table = summarize(frame, "test", ["structure", "predictive"]).set_index(["structure", "predictive"])
    glm = table.xs("glm", level="predictive").reindex(list(STRUCTURES))
    test = everything[everything["split"] == "test"]
    glm_runs = frame[(frame["split"] == "test") & (frame["predictive"] == "glm")][["run_dir"]]
    map_at_glm = test[test["predictive"] == "map"].merge(glm_runs, on="run_dir").groupby("structure")["nll"].mean()
    chosen = frame[(frame["split"] == "valid") & (frame["predictive"] == "glm") & (frame["structure"] == "full")
                   & (frame["seed"] == 0)].iloc[0]
    run, delta = Path(chosen["run_dir"]), chosen["delta"]
    split = kept_split(r, run, BANANA_MARGIN)
    train = document(run)["metrics"]["train"]
    at_delta = everything[(everything["delta"] == delta) & (everything["seed"] == 0)]
    same_delta = {k: Path(at_delta[at_delta["structure"] == k].iloc[0]["run_dir"]) for k in STRUCTURES}
    xx, yy, means, points = surfaces(r, same_delta, BANANA_MARGIN)
    figures.plot_panels_2d(r.out / "fig5_7_structures.png", xx, yy, means, points["x"], points["y"],
                           title=f"banana: GLM predictive mean per structure (δ = {delta:g}, seed 0)")
    lines = ["| structure | predictive | NLL | accuracy | ECE |", "|---|---|---|---|---|"]
    lines += [f"| {st} | {kind} | {t['nll']:.4f} ± {t['nll_se']:.4f} | {t['accuracy']:.4f} ± "
              f"{t['accuracy_se']:.4f} | {t['ece']:.4f} ± {t['ece_se']:.4f} |"
              for (st, kind), t in table.reindex(STRUCTURES, level=0).iterrows()]
    page = "\n".join([
        "## Fig. 5.7 and Table 5.1's diagonal row: banana under full, Kronecker and diagonal posteriors",
        "",
        f"2x50 tanh (P = 2751), 80/10/10 stratified split, {everything['delta'].nunique()} δ from "
        f"{everything['delta'].min():g} to {everything['delta'].max():g} (log-spaced) chosen per structure, predictive "
        f"and seed by validation NLL (the MAPs are shared by the structures), 1000 samples; mean ± s.e. over seeds "
        f"{seeds} (test set). The notes read Table 5.1's 'GP-GGN-diag' as the GLM predictive of the diagonal "
        "posterior (notes-003 §6): the row diag / glm.",
        "",
        *lines,
        "",
        r.table(banana_claims(glm["nll"].to_dict(), map_at_glm.to_dict())),
        "",
        "![structures](fig5_7_structures.png)",
    ])
    return page, {**split, "nn_train_nll": train["nn"]["nll"], "glm_train_nll": train["glm"]["nll"]}


# why items 8 and 11 ask too that each structure's GLM moved off its runs' MAP (the notes' criteria alone do not)
NEVER_MOVED = ("a posterior that never moved gives the MAP's NLL under every structure, which the order's ties, and "
               "item 8's \"≥\", pass: the page asks too that each structure's GLM moved off its runs' MAP")


def banana_claims(glm_nll: dict[str, float], map_nll: dict[str, float]) -> list[Claim]:
    """notes-003 items 8 (the diagonal row) and 11 on the GLM test NLL per structure (``glm_nll``, mean over seeds):
    the order full ≤ KFAC ≤ diag with at most one of its three pairs inverted, and that one by at most 0.01; each
    structure's GLM away from the MAP of its own runs (``map_nll``, the same runs' MAP test NLL), which the notes
    leave implicit (:data:`NEVER_MOVED`): each carries the notes' criterion alone beside it."""
    full, kron, diag = ordered = [glm_nll.get(k, math.nan) for k in STRUCTURES]
    inverted = max((a - b for i, a in enumerate(ordered) for b in ordered[i + 1:] if a > b), default=0.0)

    def moved(it: Item, structures: tuple[str, ...]) -> Claim:
        return every(it, Compare("|GLM test NLL − its runs' MAP test NLL|", ">", MOVED_NLL),
                     {k: abs(glm_nll.get(k, math.nan) - map_nll.get(k, math.nan)) for k in structures},
                     over="structure", note="the posterior moved")

    order = (claim(item(3, 11), Ordered("GLM test NLL", "full, KFAC, diag", allowed=1), ordered),
             claim(item(3, 11), Compare("the inverted pair's NLL gap", "≤", 0.01),
                   math.nan if any(map(math.isnan, ordered)) else inverted))
    return [
        guarded(claim(item(3, 8), Compare("GLM-diag NLL", "≥", "GLM-full's"), (diag, full),
                      note="Table 5.1's GP-GGN-diag row"), moved(item(3, 8), ("full", "diag")), NEVER_MOVED),
        departs(all_of(*order, moved(item(3, 11), STRUCTURES)), all_of(*order), NEVER_MOVED),
    ]


# ------------------------------------------------------------------------------------- Figs 5.5 / 5.6


def decomposition_claims(data: str, split: dict[str, float]) -> list[Claim]:
    """notes-003 item 10 (a)-(c) on one data set's :func:`uncertainty_split` of the full posterior's GLM predictive,
    with the training NLLs of its NN and GLM predictives at the same δ."""
    return [
        claim(item(3, 10, "a"), Compare(f"{data}: GLM aleatoric where |p − 0.5| < 0.1", "≥", "where > 0.4", factor=2),
              (split["aleatoric_boundary"], split["aleatoric_confident"])),
        claim(item(3, 10, "b"), Compare(f"{data}: GLM epistemic far from the data", "≥", "at the training inputs",
                                        factor=3), (split["epistemic_far"], split["epistemic_data"])),
        claim(item(3, 10, "c"), Compare(f"{data}: NN training NLL", "≥", "GLM's", factor=1.5),
              (split["nn_train_nll"], split["glm_train_nll"]), note="the BNN underfits"),
    ]


def make(r: Reproduction) -> str:
    moons_page, moons_split = moons(r)
    banana_page, banana_split = banana(r)
    decomposition = [*decomposition_claims("two moons", moons_split), *decomposition_claims("banana", banana_split)]
    return "\n\n".join([
        "# Second thesis (notes-003): full, Kronecker and diagonal posteriors on the toys",
        r.provenance("bnnpred reproduce notes003_structures"),
        regression(r), moons_page, banana_page,
        "\n".join(["## Figs. 5.5 / 5.6: the GLM predictive's aleatoric and epistemic parts, in numbers", "",
                   "Full posterior, GLM predictive (Kwon et al. 2020 split) on a 100 x 100 grid around the data "
                   f"(two moons ± {MOONS_MARGIN:g}, banana ± {BANANA_MARGIN:g} standardised units) and at the "
                   "training inputs, both on Fig. 5.6's 2x50 tanh MLP; two moons at its evidence-optimal δ, banana "
                   "at the GLM's validation-NLL δ (seed 0).", "", r.table(decomposition)]),
    ]) + "\n"


STUDY = Study(name="notes003_structures", title="second thesis (notes-003) Figs 5.2, 5.3, 5.5-5.7 and Table 5.1's "
              "diagonal row: full, Kronecker and diagonal posteriors on the toys", make=make,
              cpu_cost="about 70 min (110 runs on 2 cores at 0608e73, part of it beside another job; banana's 96: "
              "45 min)", items=items(3, 6, 7, 8, 10, 11), from_records=True)
