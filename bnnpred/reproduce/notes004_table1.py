"""GLM-predictive paper (notes-004 §3.3) Table 1 and Fig. 5: UCI classification with MAP, MFVI (BBB), the bnn and
glm predictives of the full Laplace-GGN, glm diag, and the VI-refined GLM posteriors (full and diagonal); δ chosen
per method, set and split by validation NLL; the checklist's item 6 and 7 criteria checked.

Tiers: ``full`` is the paper's scale (10 splits x 10 δ, MAP 10,000 steps, BBB 5,000, 250 refinement steps: 1-2
CPU-hours per run on digits and satellite, notes-004 §7); ``cpu`` is notes-004 §7's scaled-down version: 3 splits x
5 δ, MAP 5,000 steps, BBB 2,500 (its ELBO is flat after about 1,000 at lr 1e-2), both VI refinements cut to 50 steps
of 5x the paper's γ, the full one only on the three sets with P < 3,400 (australian, breast_cancer, glass), where
a step (a P x P Cholesky and an N·C·P² GEMM) takes about a second on one core;
the predictives as in the paper (1000 samples); ``quick`` is a smoke run.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from bnnpred.app.report import figures
from bnnpred.app.report.tables import collect, select_by_valid_nll, summarize
from bnnpred.reproduce.base import Reproduction, Study
from bnnpred.reproduce.claims import (
    Claim,
    Compare,
    added,
    all_of,
    any_of,
    at_least,
    claim,
    departs,
    every,
    item,
    items,
    lookup,
)

SETS = ["australian", "breast_cancer", "ionosphere", "glass", "vehicle", "waveform", "digits", "satellite"]
# one sweep (splits x δ) per set and method; each method's predictives give the table's columns
METHODS: dict[str, tuple[str, ...]] = {
    "laplace": (),
    "laplace_diag": ("inference.structure=diag", "predictive.kinds=[glm]"),
    "bbb": ("inference=bbb", "predictive.kinds=[nn]"),
    "refine": ("inference=glm_refine", "predictive.kinds=[glm]"),
    "refine_d": ("inference=glm_refine_diag", "predictive.kinds=[glm]"),
}
COLUMNS = {("laplace", "map"): "MAP", ("bbb", "nn"): "MFVI", ("laplace", "nn"): "bnn", ("laplace", "glm"): "glm",
           ("laplace_diag", "glm"): "glm diag", ("refine", "glm"): "glm refine", ("refine_d", "glm"): "glm refine d"}
PAPER = {  # notes-004 Table 1: test NLL, mean over 10 splits
    "australian": [0.31, 0.34, 0.42, 0.32, 0.33, 0.32, 0.31],
    "breast_cancer": [0.11, 0.11, 0.19, 0.10, 0.11, 0.11, 0.12],
    "ionosphere": [0.35, 0.41, 0.50, 0.29, 0.35, 0.35, 0.32],
    "glass": [0.95, 1.06, 1.41, 0.86, 0.99, 0.98, 0.83],
    "vehicle": [0.420, 0.504, 0.885, 0.428, 0.618, 0.402, 0.432],
    "waveform": [0.335, 0.393, 0.516, 0.339, 0.388, 0.335, 0.364],
    "digits": [0.094, 0.219, 0.875, 0.250, 0.409, 0.150, 0.149],
    "satellite": [0.230, 0.307, 0.482, 0.241, 0.327, 0.227, 0.248],
}
PAPER_TOLERANCE = (0.05, 0.15)  # criterion (d): within max(0.05, 15 %) of the paper's NLL
REFINED_SHARE = (5, 8)  # criterion (c): glm refine ≤ glm on 5 of the notes' 8 sets
CPU_SHARED = ("dataset.split=0,1,2", "prior.delta=0.01,0.1,1,10,100")
CPU = {"laplace": ("inference.map.steps=5000",), "laplace_diag": ("inference.map.steps=5000",),
       "bbb": ("inference.steps=2500",),
       "refine": ("inference.map.steps=5000", "inference.iterations=50", "inference.gamma=0.05"),
       "refine_d": ("inference.map.steps=5000", "inference.iterations=50", "inference.gamma=0.005")}
CHEAP_FULL_REFINE = ("australian", "breast_cancer", "glass")  # P < 3,400; the others take 2-20 s per step
QUICK_SHARED = ("dataset.split=0,1,2", "prior.delta=0.1,1,10", "model.width=20", "predictive.n_samples=100")
QUICK = {"laplace": ("inference.map.steps=1000",), "laplace_diag": ("inference.map.steps=1000",),
         "bbb": ("inference.steps=500",), "refine": ("inference.map.steps=1000", "inference.iterations=25"),
         "refine_d": ("inference.map.steps=1000", "inference.iterations=25")}


def runs_full_refine(r: Reproduction, name: str) -> bool:
    return r.pick(quick=name in CHEAP_FULL_REFINE, cpu=name in CHEAP_FULL_REFINE, full=True)


def sweep_all(r: Reproduction, sets: list[str], arch: str, *overrides_all: str) -> pd.DataFrame:
    """Every run of every set and method, with its table column (rows of :func:`collect`)."""
    frames = []
    scaled = {method: r.pick(quick=(), cpu=(*CPU_SHARED, *CPU[method]), full=()) for method in METHODS}
    for name in sets:
        for method, overrides in METHODS.items():
            if method == "refine" and not runs_full_refine(r, name):
                continue
            folder = r.sweep(r.runs / "notes004_table1" / arch / name / method,
                             "split${dataset.split}_delta${prior.delta}", "experiment=notes004_table1",
                             f"dataset.dataset={name}", *overrides_all, *overrides, *scaled[method],
                             quick=(*QUICK_SHARED, *QUICK[method]))
            frame = collect([folder])
            frame["set"], frame["column"] = name, [COLUMNS.get((method, k)) for k in frame["predictive"]]
            frames.append(frame[frame["column"].notna()])
    return pd.concat(frames, ignore_index=True)


def metric_table(table: pd.DataFrame, sets: list[str], metric: str, paper: dict[str, list[float]] | None = None,
                 digits: int = 3) -> list[str]:
    """Markdown of ``metric`` mean ± s.e. per set x column, the paper's value in brackets where given."""
    columns = list(COLUMNS.values())
    lines = ["| set | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for name in sets:
        cells = []
        for i, c in enumerate(columns):
            ours = (f"{table.loc[(name, c), metric]:.{digits}f} ± {table.loc[(name, c), f'{metric}_se']:.{digits}f}"
                    if (name, c) in table.index else "—")
            cells.append(f"{ours} ({paper[name][i]:.3f})" if paper else ours)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def claims(table: pd.DataFrame, sets: list[str], paper: dict[str, list[float]] | None) -> list[Claim]:
    """notes-004 checklist item 6 on the test NLL per (set, column); criterion (d) has no number where the paper has
    no table to compare with (the 1x50 network). A column a set ran whose NLL is missing (a failed sweep) leaves that
    set without a number in (e), never out of its "every other column"."""
    def nll(name: str, column: str) -> float:
        return lookup(table, (name, column), "nll")

    def pairs(column: str, other: str, names: list[str]) -> dict[str, tuple[float, float]]:
        return {n: (nll(n, column), nll(n, other)) for n in names}

    refined = [n for n in sets if (n, "glm refine") in table.index]
    others = {n: float(np.max([nll(n, c) for c in COLUMNS.values() if c != "bnn" and (n, c) in table.index]
                              or [math.nan])) for n in sets}
    return [
        every(item(4, 6, "a"), Compare("glm NLL", "<", "bnn NLL"), pairs("glm", "bnn", sets), over="set"),
        every(item(4, 6, "a"), Compare("glm diag NLL", "<", "bnn NLL"), pairs("glm diag", "bnn", sets), over="set"),
        at_least(item(4, 6, "b"), Compare("glm NLL", "≤", "MFVI NLL"), pairs("glm", "MFVI", sets), (6, 8), over="sets"),
        refinement_claim(pairs("glm refine", "glm", refined)),
        *close_to_paper(nll, sets, paper, set(table.index)),
        at_least(item(4, 6, "e"), Compare("bnn NLL", "≥", "every other column's"),
                 {n: (nll(n, "bnn"), others[n]) for n in sets}, (7, 8), over="sets", note="bnn the worst column"),
    ]


def refinement_claim(refined: dict[str, tuple[float, float]]) -> Claim:
    """notes-004 #6c, "glm refine ≤ glm on ≥ 5/8 (soft)", on the (glm refine, glm) NLL of the refined sets. As the notes
    write it, 5 of their 8 sets: a set without a refined number is not one that passes, so with fewer than 5 refined
    it cannot hold. The CPU plan (notes-004 §7) cuts the full VI refinement or skips it, and this study refines 3 sets
    on the cpu tier; there the page scales 5 of 8 to the refined sets and carries the notes' rule beside it
    (:func:`departs`); with all 8 refined the two are one."""
    needed, of = REFINED_SHARE
    criterion = Compare("glm refine NLL", "≤", "glm NLL")
    coded = at_least(item(4, 6, "c"), criterion, refined, REFINED_SHARE, over="refined sets", note="soft")
    usable = {n: v for n, v in refined.items() if not any(math.isnan(x) for x in v)}
    if len(usable) >= of:
        return coded
    passed = [n for n, v in usable.items() if criterion.test(v)]
    written = claim(item(4, 6, "c"), Compare(f"count of the {of} sets with glm refine NLL ≤ glm NLL", "≥", needed),
                    len(passed) if usable else math.nan)
    short = f", fewer than {needed}, so {needed} of {of} cannot hold" if len(usable) < needed else ""
    return departs(coded, written, f"notes-004 §7 cuts or skips the full VI refinement on CPU: {len(usable)} of the "
                                   f"{of} sets refined{short}; the page scales {needed} of {of} to them")


def close_to_paper(nll: Callable[[str, str], float], sets: list[str], paper: dict[str, list[float]] | None,
                   ran: set[tuple[str, str]]) -> list[Claim]:
    """Criterion (d): MAP, bnn and glm test NLL within max(absolute, relative x paper) of the paper's, and the same for
    the soft columns (MFVI, glm refine, glm refine d) that ``ran`` ((set, column) pairs); no number without a paper
    table."""
    absolute, relative = PAPER_TOLERANCE
    criterion = Compare(f"|ours − paper| / max({absolute:g}, {relative:g} × paper)", "≤", 1)
    firm, soft = ("MAP", "bnn", "glm"), ("MFVI", "glm refine", "glm refine d")
    if paper is None:
        return [claim(item(4, 6, "d"), criterion, math.nan, note=", ".join(firm),
                      numbers="no number: the paper has no table for this network")]
    values = {(n, c): p for n in sets for c, p in zip(COLUMNS.values(), paper[n], strict=True)}

    def distances(columns: tuple[str, ...]) -> dict[str, float]:
        return {f"{n} {c}": abs(nll(n, c) - values[(n, c)]) / max(absolute, relative * values[(n, c)])
                for n in sets for c in columns if c in firm or (n, c) in ran}

    return [every(item(4, 6, "d"), criterion, distances(firm), over="(set, column) of MAP, bnn and glm"),
            every(item(4, 6, "d"), criterion, distances(soft), over="(set, column) run of MFVI, glm refine and glm "
                  "refine d", note="soft")]


def fig5(r: Reproduction, frame: pd.DataFrame, sets: list[str]) -> list[str]:
    """Test NLL against δ (mean over splits) for MAP, bnn, glm and glm refine, one panel per set; checklist
    item 7 on at least one set, as the notes ask, and over every (set, δ) beside it."""
    test = frame[frame["split"] == "test"]
    by_delta = test.groupby(["set", "delta", "column"])["nll"].mean().unstack("column").sort_index()
    shown = ["MAP", "bnn", "glm", "glm refine"]
    deltas = by_delta.index.get_level_values("delta").unique().sort_values()
    panels = {name: {c: by_delta.loc[name].reindex(deltas)[c].to_numpy() for c in shown if c in by_delta.columns}
              for name in sets}
    figures.plot_metric_vs_hyper_panels(r.out / "fig5_nll_vs_delta.png", deltas.to_numpy(), panels,
                                        ylabel="test NLL", log_y=True)
    return ["## Fig. 5: test NLL against δ, every set", "", r.table(fig5_claims(by_delta)), "",
            "![fig5](fig5_nll_vs_delta.png)"]


def fig5_claims(by_delta: pd.DataFrame) -> list[Claim]:
    """notes-004 checklist item 7 (``by_delta``: mean test NLL, one column per table column). The notes ask for Fig. 5
    "on at least one UCI dataset" and its criteria over that dataset's δ grid: glm NLL < bnn NLL at every δ, glm
    refine NLL ≤ MAP NLL at ≥ 70 % of the δ, both on that one dataset: the item holds if one refined set meets both.
    The same criteria pooled over every (set, δ), stricter, are added beside it (not counted toward the item)."""
    def pairs(column: str, other: str) -> dict[str, dict[str, tuple[float, float]]]:
        """Per set the column ran on, its (column, other) NLL per δ; a δ missing there has no number, never left out."""
        if column not in by_delta or other not in by_delta:
            return {}
        ran = by_delta[column].notna().groupby(level="set").transform("any")  # the sets the column ran on
        both = by_delta.loc[ran.to_numpy(), [column, other]]
        per_set: dict[str, dict[str, tuple[float, float]]] = {}
        for (n, d), (a, b) in zip(both.index, both.to_numpy(), strict=True):
            per_set.setdefault(n, {})[f"δ = {d:g}"] = (a, b)
        return per_set

    def pooled(per_set: dict[str, dict[str, tuple[float, float]]]) -> dict[str, tuple[float, float]]:
        return {f"{n} {d}": pair for n, by_d in per_set.items() for d, pair in by_d.items()}

    below, refined = pairs("glm", "bnn"), pairs("glm refine", "MAP")
    # per set: the smallest margin bnn − glm over its δ (> 0: glm below bnn at every δ; NaN: a δ without a number),
    # and the share of its δ where glm refine ≤ MAP (a δ without a number counts as one where it is not)
    margin = {n: float(np.min([b - a for a, b in by_d.values()])) for n, by_d in below.items()}
    share = {n: sum(bool(a <= b) for a, b in by_d.values()) / len(by_d) for n, by_d in refined.items()}
    # notes-004 #7: both parts on one dataset (the Fig. 5 set), so on a refined set; any one of them
    on_one = [all_of(claim(item(4, 7), Compare(f"{n}: min over δ of (bnn NLL − glm NLL)", ">", 0),
                           margin.get(n, np.nan), note="glm NLL < bnn NLL at every δ"),
                     claim(item(4, 7), Compare(f"{n}: share of δ with glm refine NLL ≤ MAP NLL", "≥", 0.7), share[n]))
              for n in share]
    return [
        any_of(*on_one, note="on at least one UCI dataset, both parts on it, as the notes' Fig. 5 asks") if on_one
        else claim(item(4, 7), Compare("share of δ with glm refine NLL ≤ MAP NLL", "≥", 0.7), np.nan,
                   note="no set refined"),
        added(every(item(4, 7), Compare("glm NLL", "<", "bnn NLL"), pooled(below), over="(set, δ)"),
              "every set's δ pooled, stricter than the notes' one dataset"),
        added(at_least(item(4, 7), Compare("glm refine NLL", "≤", "MAP NLL"), pooled(refined), (7, 10),
                       over="refined (set, δ)"), "every refined set's δ pooled, stricter than the notes' one dataset"),
    ]


def selection_outliers(chosen: pd.DataFrame, ratio: float = 3.0) -> list[str]:
    """Chosen runs whose test NLL exceeds ``ratio`` times their validation NLL (a small validation set picking a δ
    that does not generalise), as Markdown bullets."""
    nll = chosen.pivot_table(index=["set", "column", "data_split", "delta"], columns="split", values="nll")
    bad = nll[nll["test"] > ratio * nll["valid"]]
    return [f"- {name}, {column}, split {int(split)}: δ = {delta:g} chosen by validation NLL {row['valid']:.3f}, "
            f"test NLL {row['test']:.3f} (training NLL {row['train']:.3f})"
            for (name, column, split, delta), row in bad.iterrows()] or ["- none"]


def make_for(depth: int) -> Callable[[Reproduction], str]:
    """The page of the ``depth`` x 50 tanh network (the paper's Table 1 is 2 x 50; App. B.3 adds 1 x 50)."""
    arch = f"{depth}x50"

    def make(r: Reproduction) -> str:
        sets = r.pick(quick=["australian", "glass"], cpu=SETS)
        frame = sweep_all(r, sets, arch, f"model.depth={depth}")
        chosen = select_by_valid_nll(frame)
        table = summarize(chosen, "test", ["set", "column"]).set_index(["set", "column"])
        splits = sorted(frame["data_split"].dropna().unique())
        deltas = np.sort(frame["delta"].unique())
        paper = PAPER if depth == 2 else None
        beside = "the paper's value in brackets" if paper else "the paper gives no table for this network"
        return "\n".join([
            f"# GLM predictive paper, Table 1 and Fig. 5: UCI classification, {arch} tanh", "",
            r.provenance(f"bnnpred reproduce {r.out.name}"), "",
            f"{arch} tanh, MAP by full-batch Adam, 1000 predictive samples (quick tier: width 20, 1000 Adam steps, "
            f"100 samples; cpu tier: half the paper's MAP and BBB steps, refinements cut to 50 steps); "
            f"δ ∈ {{{', '.join(f'{d:.3g}' for d in deltas)}}} chosen per set, column and split by "
            f"validation NLL; test metrics mean ± s.e. over splits {', '.join(str(int(s)) for s in splits)}. "
            "Scale of each tier: see the study's docstring (`bnnpred/reproduce/notes004_table1.py`); — marks a "
            "column this tier does not run.", "",
            f"## Test NLL ({beside})", "", *metric_table(table, sets, "nll", paper), "",
            r.table(claims(table, sets, paper)), "",
            "Chosen runs whose test NLL is over 3x their validation NLL:", "", *selection_outliers(chosen), "",
            "## Test accuracy", "", *metric_table(table, sets, "accuracy"), "",
            "## Test ECE", "", *metric_table(table, sets, "ece"), "",
            *fig5(r, frame, sets),
        ]) + "\n"

    return make


STUDY = Study(name="notes004_table1", title="GLM predictive paper (notes-004) Table 1 and Fig. 5: UCI classification "
              "with MAP, MFVI, bnn, glm, glm diag and refined GLM posteriors (2x50 tanh)", make=make_for(2),
              cpu_cost="about 2.5 h with 2 jobs for its 525 runs (8 sets x 3 splits x 5 δ x 4-5 methods; 4.7 h of "
                       "recorded run time, up to 439 s a run: the records of its rerun, 2026-11-29)",
              items=items(4, 6, 7), full_scale=True, from_records=True)
