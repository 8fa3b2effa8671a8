"""Tables over run directories: mean ± standard error over seeds / splits, as CSV, Markdown and LaTeX.

Only finished, intact runs count (:mod:`bnnpred.app.run_record`): every other run directory is skipped with a warning
that says why. Runs of different code (their ``code`` digests differ) are never averaged together: ``bnnpred report``
refuses the table, or with ``--mixed-code mark`` keeps them apart in a ``code`` column; study pages use the runs of
the newest code and say how many stale ones they left out. Runs flagged as numerically broken (kept with
``keep_unhealthy=true``, or whose posterior precision needed jitter) are counted in a ``flagged`` column.
Re-evaluations (``bnnpred eval``) join with ``evals=True`` as predictives named ``kind [changed settings]``.
With ``select_by="valid_nll"`` the prior precision is chosen per (setting, seed, predictive) by validation NLL
before averaging the test metrics (notes-004 §3.3: "δ is selected per method by validation NLL").
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bnnpred.app.run_record import EVALS, NotFinished, evaluations, read_finished
from bnnpred.errors import BnnpredError
from bnnpred.io import write_text

log = logging.getLogger(__name__)

SETTING = ["dataset", "model", "inference", "structure", "selection", "predictive"]
RUN_KEYS = ["dataset", "task", "model", "inference", "structure", "selection", "seed", "data_split", "delta",
            "sigma2", "n_params"]
MARKERS = ("config.yaml", "metrics.json", "manifest.json")
NOT_RUNS = {EVALS}  # re-evaluations; and dot-folders (Hydra's, a commit or an export in progress, a stage)
UNRECORDED = "unrecorded"  # the code digest of runs made before it was recorded
NOT_METRICS = {"run_dir", "split", "predictive", "seconds", "ood_seconds"}  # row columns that are not metrics


def find_runs(dirs: list[Path]) -> list[Path]:
    """Run directories (those holding a config, metrics or manifest file) under the given folders, none inside a
    dot-folder or a run's re-evaluations."""
    runs = set()
    for d in dirs:
        if not d.exists():
            raise BnnpredError(f"no such directory: {d}")
        for marker in MARKERS:
            runs.update(p.parent for p in d.rglob(marker)
                        if not any(part in NOT_RUNS or part.startswith(".") for part in p.relative_to(d).parts))
    return sorted(runs)


def collect(dirs: list[Path], *, evals: bool = False, mixed_code: str = "newest") -> pd.DataFrame:
    """One row per (run, split, predictive) with the run's settings and every metric as columns, each run counted
    once by its run key however often it is reached; runs of several code versions are refused (``refuse``), kept
    apart (``mark``) or, for the study pages, narrowed to the code of the most recently finished run (``newest``:
    the runs a study just trained beside stale ones)."""
    rows, seen = [], {}
    for run_dir in find_runs(dirs):
        try:
            run = read_finished(run_dir)
        except NotFinished as e:
            log.warning("skipping %s: %s", run_dir, e)
            continue
        key = run.document["run"].get("key") or str(run_dir.resolve())
        if key in seen:  # the same run reached twice (a link, another spelling of its path, a copy): counted once
            log.warning("skipping %s: it is the run in %s again (run key %s)", run_dir, seen[key], key)
            continue
        seen[key] = run_dir
        rows += rows_of(run_dir, run.document)
        for evaluation in evaluations(run_dir) if evals else []:
            rows += rows_of(run_dir, evaluation.document, eval_label(evaluation.document["run"]))
    if not rows:
        raise BnnpredError(f"no finished runs under {', '.join(map(str, dirs))}; run bnnpred train first")
    frame = check_code(pd.DataFrame(rows), mixed_code)
    frame["structure"] = frame["structure"].fillna("-")
    # rows in an order that does not depend on folder names, so sums (and tables) are byte-reproducible
    order = ["split", "predictive", *SETTING, "delta", "sigma2", "seed", "data_split"]
    return frame.sort_values(order, kind="stable", na_position="first").reset_index(drop=True)


def rows_of(run_dir: Path, document: dict[str, Any], label: str = "") -> list[dict[str, Any]]:
    summary = document["run"]
    run = {k: summary.get(k) for k in RUN_KEYS}
    run["code"] = summary.get("code") or UNRECORDED
    run["finished"] = summary.get("finished")
    run["flags"] = "; ".join(summary.get("flags") or [])
    return [{"run_dir": str(run_dir), **run, "split": split, "predictive": f"{kind}{label}", **values}
            for split, by_kind in document["metrics"].items() for kind, values in by_kind.items()]


def eval_label(summary: dict[str, Any]) -> str:
    """`` [n_samples=2]``: a re-evaluation's changed settings, beside its predictive's name."""
    def shown(value: Any) -> str:
        return f"[{','.join(map(str, value))}]" if isinstance(value, list) else str(value)

    changes = ", ".join(f"{k.split('.', 1)[-1]}={shown(v)}" for k, v in sorted(summary.get("changes", {}).items())
                        if not k.startswith("plot."))
    return f" [{changes or 'eval'}]"


def check_code(frame: pd.DataFrame, mixed_code: str) -> pd.DataFrame:
    """The rows to report when runs of several code versions are present: an error (``refuse``), all of them with a
    warning (``mark``: tables keep them apart by their ``code`` column), or those of the newest code with a warning
    naming how many stale runs were left out (``newest``)."""
    counts = frame.drop_duplicates("run_dir")["code"].value_counts()
    if len(counts) < 2:
        return frame
    listed = ", ".join(f"{code}: {n} run(s)" for code, n in counts.items())
    if mixed_code == "refuse":
        raise BnnpredError(f"these runs come from {len(counts)} code versions ({listed}); train the stale ones again "
                           "or remove them, or report them side by side with --mixed-code mark")
    if mixed_code == "mark":
        log.warning("these runs come from %d code versions (%s); the table keeps them apart by a code column",
                    len(counts), listed)
        return frame
    finished = frame.drop_duplicates("run_dir").set_index("run_dir")
    when = finished["finished"] if "finished" in finished else pd.Series(None, index=finished.index, dtype=object)
    ended = {run: ended_at(run, at) for run, at in when.items()}
    newest = finished["code"][max(ended, key=ended.get)]
    log.warning("these runs come from %d code versions (%s); only the %d run(s) of the newest code (%s) are used",
                len(counts), listed, counts[newest], newest)
    return frame[frame["code"] == newest]


def ended_at(run_dir: str, finished: str | None) -> float:
    """When a run finished, in seconds since the epoch: the time its record states (a record copied elsewhere has
    new file times), else its manifest's modification time (runs made before the time was recorded)."""
    if isinstance(finished, str):
        return datetime.fromisoformat(finished).timestamp()
    return (Path(run_dir) / "manifest.json").stat().st_mtime


def select_by_valid_nll(frame: pd.DataFrame) -> pd.DataFrame:
    """Keep, per setting, seed and data split, the run (δ, σ²) with the lowest validation NLL of each predictive."""
    valid = frame[frame["split"] == "valid"]
    if valid.empty:
        raise BnnpredError("--select-by valid_nll needs runs with a validation split")
    per_run = SETTING + ["code", "seed", "data_split"]
    best = valid.loc[valid.groupby(per_run, dropna=False)["nll"].idxmin(), ["run_dir", "predictive"]]
    return frame.merge(best, on=["run_dir", "predictive"])


def summarize(frame: pd.DataFrame, split: str, by: list[str]) -> pd.DataFrame:
    """Mean, standard error and count of every metric over the rows of each group in ``split``; with a
    ``flagged`` count when any of the rows comes from a flagged run."""
    part = frame[frame["split"] == split]
    metrics = [c for c in part.columns
               if c not in set(RUN_KEYS) | NOT_METRICS and pd.api.types.is_numeric_dtype(part[c])]
    grouped = part.groupby(by, dropna=False)
    mean, sem, count = grouped[metrics].mean(), grouped[metrics].sem(ddof=1).add_suffix("_se"), grouped.size()
    table = mean.join(sem).join(count.rename("n"))
    columns = [c for m in metrics for c in (m, f"{m}_se")] + ["n"]
    if "flags" in part and part["flags"].astype(bool).any():
        table = table.join(grouped["flags"].agg(lambda f: int(f.astype(bool).sum())).rename("flagged"))
        columns.append("flagged")
    return table[columns].reset_index()


def formatted(table: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """``mean ± s.e.`` strings (s.e. omitted for a single run)."""
    counts = [c for c in ("n", "flagged") if c in table.columns]
    metrics = [c for c in table.columns if c not in by and not c.endswith("_se") and c not in counts]
    out = table[by + counts].copy()
    for m in metrics:
        out[m] = [_pm(v, se) for v, se in zip(table[m], table[f"{m}_se"], strict=True)]
    return out


def _pm(value: float, se: float) -> str:
    if np.isnan(value):
        return "-"
    return f"{value:.4f}" if np.isnan(se) else f"{value:.4f} ± {se:.4f}"


def write_report(dirs: list[Path], out: Path, *, split: str = "test", select_by: str = "none",
                 by: list[str] | None = None, evals: bool = False, mixed_code: str = "refuse") -> list[Path]:
    """Write ``<out>/table.csv`` (numbers), ``table.md`` and ``table.tex`` (mean ± s.e.); returns the paths."""
    frame = collect(dirs, evals=evals, mixed_code=mixed_code)
    if select_by == "valid_nll":
        frame = select_by_valid_nll(frame)
    by = by or [k for k in [*SETTING, "code"] if frame[k].nunique(dropna=False) > 1 or k in ("dataset", "predictive")]
    if select_by == "none" and frame["delta"].nunique() > 1 and "delta" not in by:
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


# LaTeX's special characters in text, each as it is typeset literally (``±`` as math)
LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "±": r"$\pm$"}


def latex_text(value: object) -> str:
    """``value`` as LaTeX text: every special character escaped, one pass (an escape is never escaped again)."""
    return "".join(LATEX_ESCAPES.get(char, char) for char in str(value))


def latex(table: pd.DataFrame) -> str:
    """A ``tabular`` environment (booktabs rules), every cell escaped (:func:`latex_text`)."""
    cell = latex_text

    rows = [" & ".join(cell(v) for v in row) + r" \\" for row in table.itertuples(index=False)]
    header = " & ".join(cell(c) for c in table.columns) + r" \\"
    body = "\n".join([r"\begin{tabular}{" + "l" * len(table.columns) + "}", r"\toprule", header, r"\midrule",
                      *rows, r"\bottomrule", r"\end{tabular}"])
    return body + "\n"
