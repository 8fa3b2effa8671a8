"""Tables over run directories: mean ± standard error over seeds / splits, as CSV, Markdown and LaTeX.

Only finished runs count: a directory whose ``metrics.json`` is missing or unreadable is skipped and named.
With ``select_by="valid_nll"`` the prior precision is chosen per (setting, seed, predictive) by validation NLL
before averaging the test metrics (notes-004 §3.3: "δ is selected per method by validation NLL").
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from bnnpred.errors import BnnpredError
from bnnpred.io import write_text

log = logging.getLogger(__name__)

SETTING = ["dataset", "model", "inference", "structure", "selection", "predictive"]
RUN_KEYS = ["dataset", "task", "model", "inference", "structure", "selection", "seed", "data_split", "delta",
            "sigma2", "n_params"]


def find_runs(dirs: list[Path]) -> list[Path]:
    """Run directories (those holding a ``config.yaml``) under the given folders."""
    runs = set()
    for d in dirs:
        if not d.exists():
            raise BnnpredError(f"no such directory: {d}")
        runs.update(p.parent for p in d.rglob("config.yaml") if not {".incomplete", ".hydra"} & set(p.parts))
    return sorted(runs)


def read_metrics(run_dir: Path) -> dict | None:
    """``metrics.json`` of a finished run, or ``None`` (with a warning) when missing or truncated."""
    try:
        return json.loads((run_dir / "metrics.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        log.warning("skipping unfinished run %s (no complete metrics.json)", run_dir)
        return None


def collect(dirs: list[Path]) -> pd.DataFrame:
    """One row per (run, split, predictive) with the run's settings and every metric as columns."""
    rows = []
    for run_dir in find_runs(dirs):
        document = read_metrics(run_dir)
        if document is None:
            continue
        run = {k: document["run"].get(k) for k in RUN_KEYS}
        run["version"] = document["run"].get("version", "0.1.0")  # runs before versions were recorded
        for split, by_kind in document["metrics"].items():
            for kind, values in by_kind.items():
                rows.append({"run_dir": str(run_dir), **run, "split": split, "predictive": kind, **values})
    if not rows:
        raise BnnpredError(f"no finished runs under {', '.join(map(str, dirs))}; run bnnpred train first")
    if len(versions := {row["version"] for row in rows}) > 1:
        log.warning("these runs come from different code versions (%s); rerun the older ones to compare like "
                    "with like", ", ".join(sorted(map(str, versions))))
    frame = pd.DataFrame(rows)
    frame["structure"] = frame["structure"].fillna("-")
    # rows in an order that does not depend on folder names, so sums (and tables) are byte-reproducible
    order = ["split", "predictive", *SETTING, "delta", "sigma2", "seed", "data_split"]
    return frame.sort_values(order, kind="stable", na_position="first").reset_index(drop=True)


def select_by_valid_nll(frame: pd.DataFrame) -> pd.DataFrame:
    """Keep, per setting, seed and data split, the run (δ, σ²) with the lowest validation NLL of each predictive."""
    valid = frame[frame["split"] == "valid"]
    if valid.empty:
        raise BnnpredError("--select-by valid_nll needs runs with a validation split")
    per_run = SETTING + ["seed", "data_split"]
    best = valid.loc[valid.groupby(per_run, dropna=False)["nll"].idxmin(), ["run_dir", "predictive"]]
    return frame.merge(best, on=["run_dir", "predictive"])


def summarize(frame: pd.DataFrame, split: str, by: list[str]) -> pd.DataFrame:
    """Mean, standard error and count of every metric over the rows of each group in ``split``."""
    part = frame[frame["split"] == split]
    metrics = [c for c in part.columns if c not in set(RUN_KEYS) | {"run_dir", "split", "predictive", "seconds"}
               and pd.api.types.is_numeric_dtype(part[c])]
    grouped = part.groupby(by, dropna=False)[metrics]
    mean, sem, count = grouped.mean(), grouped.sem(ddof=1).add_suffix("_se"), grouped.size().rename("n")
    table = mean.join(sem).join(count)
    return table[[c for m in metrics for c in (m, f"{m}_se")] + ["n"]].reset_index()


def formatted(table: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """``mean ± s.e.`` strings (s.e. omitted for a single run)."""
    metrics = [c for c in table.columns if c not in by and not c.endswith("_se") and c != "n"]
    out = table[by + ["n"]].copy()
    for m in metrics:
        out[m] = [_pm(v, se) for v, se in zip(table[m], table[f"{m}_se"], strict=True)]
    return out


def _pm(value: float, se: float) -> str:
    if np.isnan(value):
        return "-"
    return f"{value:.4f}" if np.isnan(se) else f"{value:.4f} ± {se:.4f}"


def write_report(dirs: list[Path], out: Path, *, split: str = "test", select_by: str = "none",
                 by: list[str] | None = None) -> list[Path]:
    """Write ``<out>/table.csv`` (numbers), ``table.md`` and ``table.tex`` (mean ± s.e.); returns the paths."""
    frame = collect(dirs)
    if select_by == "valid_nll":
        frame = select_by_valid_nll(frame)
    by = by or [k for k in SETTING if frame[k].nunique(dropna=False) > 1 or k in ("dataset", "predictive")]
    if select_by == "none" and frame["delta"].nunique() > 1:
        by = by + ["delta"]
    table = summarize(frame, split, by)
    pretty = formatted(table, by)
    return [
        write_text(out / "table.csv", table.to_csv(index=False)),
        write_text(out / "table.md", markdown(pretty)),
        write_text(out / "table.tex", latex(pretty)),
    ]


def markdown(table: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(map(str, table.columns)) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def latex(table: pd.DataFrame) -> str:
    """A ``tabular`` environment (booktabs rules), ``±`` as ``$\\pm$``."""
    def cell(value: object) -> str:
        return str(value).replace("±", "$\\pm$").replace("_", "\\_")

    rows = [" & ".join(cell(v) for v in row) + r" \\" for row in table.itertuples(index=False)]
    header = " & ".join(cell(c) for c in table.columns) + r" \\"
    body = "\n".join([r"\begin{tabular}{" + "l" * len(table.columns) + "}", r"\toprule", header, r"\midrule",
                      *rows, r"\bottomrule", r"\end{tabular}"])
    return body + "\n"
