"""GLM-predictive paper (notes-004 §3.3) Table 1 and Fig. 5: UCI classification with MAP, MFVI (BBB), the bnn and
glm predictives of the full Laplace-GGN, glm diag, and the VI-refined GLM posteriors (full and diagonal); δ chosen
per method, set and split by validation NLL; the checklist's item 6 and 7 criteria checked."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bnnpred.report import figures
from bnnpred.report.tables import collect, select_by_valid_nll, summarize
from bnnpred.reproduce.base import Reproduction, Study, check, checks_table

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
QUICK_SHARED = ("dataset.split=0,1,2", "prior.delta=0.1,1,10", "model.width=20", "predictive.n_samples=100")
QUICK = {"laplace": ("inference.map.steps=1000",), "laplace_diag": ("inference.map.steps=1000",),
         "bbb": ("inference.steps=500",), "refine": ("inference.map.steps=1000", "inference.iterations=25"),
         "refine_d": ("inference.map.steps=1000", "inference.iterations=25")}
FIG5_SET = "waveform"


def sweep_all(r: Reproduction, sets: list[str]) -> pd.DataFrame:
    """Every run of every set and method, with its table column (rows of :func:`collect`)."""
    frames = []
    for name in sets:
        for method, overrides in METHODS.items():
            folder = r.sweep(r.runs / "notes004_table1" / name / method, "split${dataset.split}_delta${prior.delta}",
                             "experiment=notes004_table1", f"dataset.dataset={name}", *overrides,
                             quick=(*QUICK_SHARED, *QUICK[method]))
            frame = collect([folder])
            frame["set"], frame["column"] = name, [COLUMNS.get((method, k)) for k in frame["predictive"]]
            frames.append(frame[frame["column"].notna()])
    return pd.concat(frames, ignore_index=True)


def nll_table(selected: pd.DataFrame, sets: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """Test NLL mean and s.e. over splits per set x column, and its Markdown beside the paper's numbers."""
    table = summarize(selected, "test", ["set", "column"]).set_index(["set", "column"])
    columns = list(COLUMNS.values())
    lines = ["| set | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for name in sets:
        cells = [f"{table.loc[(name, c), 'nll']:.3f} ± {table.loc[(name, c), 'nll_se']:.3f} ({p:.3f})"
                 for c, p in zip(columns, PAPER[name], strict=True)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return table, lines


def claims(table: pd.DataFrame, sets: list[str]) -> list[str]:
    """notes-004 checklist item 6."""
    def nll(name: str, column: str) -> float:
        return float(table.loc[(name, column), "nll"])

    paper = {(n, c): p for n in sets for c, p in zip(COLUMNS.values(), PAPER[n], strict=True)}
    close = [(n, c) for n in sets for c in ("MAP", "bnn", "glm")
             if abs(nll(n, c) - paper[(n, c)]) <= max(0.05, 0.15 * paper[(n, c)])]
    worst = [n for n in sets if nll(n, "bnn") >= max(nll(n, c) for c in COLUMNS.values())]
    count = len(sets)
    return [
        check(f"(a) glm < bnn on {count}/{count}", all(nll(n, "glm") < nll(n, "bnn") for n in sets),
              f"{sum(nll(n, 'glm') < nll(n, 'bnn') for n in sets)}/{count}"),
        check(f"(a) glm diag < bnn on {count}/{count}", all(nll(n, "glm diag") < nll(n, "bnn") for n in sets),
              f"{sum(nll(n, 'glm diag') < nll(n, 'bnn') for n in sets)}/{count}"),
        check("(b) glm ≤ MFVI on ≥ 6/8", sum(nll(n, "glm") <= nll(n, "MFVI") for n in sets) >= 0.75 * count,
              f"{sum(nll(n, 'glm') <= nll(n, 'MFVI') for n in sets)}/{count}"),
        check("(c, soft) glm refine ≤ glm on ≥ 5/8",
              sum(nll(n, "glm refine") <= nll(n, "glm") for n in sets) >= 5 / 8 * count,
              f"{sum(nll(n, 'glm refine') <= nll(n, 'glm') for n in sets)}/{count}"),
        check("(d) MAP, bnn, glm within max(0.05, 15 %) of the paper", len(close) == 3 * count,
              f"{len(close)}/{3 * count} cells"),
        check("(e) bnn the worst column on ≥ 7/8", len(worst) >= 7 / 8 * count, f"{len(worst)}/{count}"),
    ]


def fig5(r: Reproduction, frame: pd.DataFrame, name: str) -> list[str]:
    """Test NLL against δ (mean over splits) for MAP, bnn, glm and glm refine on one set; checklist item 7."""
    test = frame[(frame["split"] == "test") & (frame["set"] == name)]
    by_delta = test.groupby(["delta", "column"])["nll"].mean().unstack("column").sort_index()
    shown = ["MAP", "bnn", "glm", "glm refine"]
    figures.plot_metric_vs_hyper(r.out / "fig5_nll_vs_delta.png", by_delta.index.to_numpy(),
                                 {c: by_delta[c].to_numpy() for c in shown}, ylabel=f"test NLL ({name})")
    glm_wins = int((by_delta["glm"] < by_delta["bnn"]).sum())
    refine_wins = int((by_delta["glm refine"] <= by_delta["MAP"]).sum())
    rows = [check("glm < bnn at every δ", glm_wins == len(by_delta), f"{glm_wins}/{len(by_delta)}"),
            check("glm refine ≤ MAP at ≥ 70 % of δ", refine_wins >= 0.7 * len(by_delta),
                  f"{refine_wins}/{len(by_delta)}")]
    return [f"## Fig. 5: test NLL against δ on {name}", "", checks_table(rows, "claim (notes-004 item 7)"), "",
            "![fig5](fig5_nll_vs_delta.png)"]


def make(r: Reproduction) -> str:
    sets = list(r.pick(cpu=SETS, quick=["australian", "glass"]))
    frame = sweep_all(r, sets)
    selected = select_by_valid_nll(frame)
    table, lines = nll_table(selected, sets)
    splits = sorted(frame["data_split"].dropna().unique())
    deltas = np.sort(frame["delta"].unique())
    return "\n".join([
        "# GLM predictive paper, Table 1 and Fig. 5: UCI classification", "",
        r.provenance("bnnpred reproduce notes004_table1"), "",
        "2x50 tanh, MAP by full-batch Adam, 1000 predictive samples (quick tier: 2x20, 1000 Adam steps, 100 samples); "
        f"δ ∈ {{{', '.join(f'{d:.3g}' for d in deltas)}}} chosen per set, column and split by validation NLL; "
        "test NLL mean ± s.e. over splits "
        f"{', '.join(str(int(s)) for s in splits)}, the paper's value in brackets.", "",
        *lines, "", checks_table(claims(table, sets), "claim (notes-004 checklist item 6)"), "",
        *fig5(r, frame, FIG5_SET if FIG5_SET in sets else sets[-1]),
    ]) + "\n"


STUDY = Study(name="notes004_table1", title="GLM predictive paper (notes-004) Table 1 and Fig. 5: UCI classification "
              "with MAP, MFVI, bnn, glm, glm diag and refined GLM posteriors", make=make,
              cpu_cost="many hours (8 sets x 10 splits x 10 δ x 5 methods)")
