"""What every reproduction study shares: the tier it runs at, training through the CLI (finished runs are
skipped by their run key), the claims it renders (:mod:`bnnpred.reproduce.claims`), and the provenance line."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import TypeVar

import pandas as pd

from bnnpred.errors import BnnpredError
from bnnpred.io import read_json
from bnnpred.report.tables import UNRECORDED, check_code, find_runs
from bnnpred.reproduce.claims import Claim, Item, claims_table
from bnnpred.run_files import MANIFEST
from bnnpred.run_index import failed_runs
from bnnpred.run_record import EVAL_FILES, RUN_FILES, FinishedRun, NotFinished, read_finished

T = TypeVar("T")


class Tier(str, Enum):
    quick = "quick"  # every study at smoke scale (minutes): checks that the pipeline runs, not the papers' claims
    cpu = "cpu"  # the CPU-scale study whose pages are committed under outputs/ (hours)
    full = "full"  # the papers' full scale, for a GPU


@dataclass
class Reproduction:
    """One study's run: where its runs and page go, at which tier, and whether to train or only read runs."""

    runs: Path
    out: Path
    tier: Tier
    jobs: int
    report_only: bool = False
    started: float = field(default_factory=time.time)
    claims: list[Claim] = field(default_factory=list)  # every claim the page shows, in order, for claims.json
    failures: list[dict[str, str]] = field(default_factory=list)  # failed runs of its sweeps, listed on the page
    made_by: dict[Path, tuple[str, str]] = field(default_factory=dict)  # (commit, code) of each run it reads

    def pick(self, *, quick: T, cpu: T, full: T | None = None) -> T:
        """The setting for this tier, the one way a study chooses by tier; the full tier takes the CPU tier's
        unless ``full`` is given."""
        return {Tier.quick: quick, Tier.cpu: cpu, Tier.full: cpu if full is None else full}[self.tier]

    def train_once(self, run_dir: Path, *overrides: str, quick: tuple[str, ...] = ()) -> Path:
        """``bnnpred train OVERRIDES`` into ``run_dir`` (the quick tier appends ``quick``)."""
        if not self.report_only:
            _bnnpred("train", *overrides, *self._quick(quick), f"hydra.run.dir={run_dir}")
        self.made_by[run_dir] = _made_by(document(run_dir))
        return run_dir

    def sweep(self, sweep_dir: Path, subdir: str, *overrides: str, quick: tuple[str, ...] = ()) -> Path:
        """``bnnpred train -m OVERRIDES`` with ``self.jobs`` joblib workers into ``sweep_dir/<subdir>``. A run
        that fails (a broken fit, the health checks) fails alone: it is left out of the page's tables, which lists
        it with its reason (:meth:`failures_section`); a sweep with no finished run is an error."""
        if not self.report_only:
            _bnnpred("train", "-m", *overrides, *self._quick(quick), "hydra/launcher=joblib",
                     f"hydra.launcher.n_jobs={self.jobs}", f"hydra.sweep.dir={sweep_dir}",
                     f"hydra.sweep.subdir={subdir}", failures_allowed=True)
        made_by = _sweep_made_by(sweep_dir)
        if not made_by:
            raise BnnpredError(f"no finished runs in {sweep_dir}; run the study without --report-only first")
        self.made_by.update(made_by)
        self.failures.extend(failed_runs(sweep_dir))
        return sweep_dir

    def runs_of(self, sweep_dir: Path) -> list[Path]:
        """The finished runs of a sweep that the page reads: of its newest code, as
        :func:`~bnnpred.report.tables.collect` keeps them."""
        return sorted(run_dir for run_dir in self.made_by if sweep_dir in run_dir.parents)

    def evaluate(self, run_dir: Path, *overrides: str) -> Path:
        """``bnnpred eval run_dir=RUN_DIR OVERRIDES`` (skipped when only rebuilding the page); returns the
        re-evaluation's folder ``RUN_DIR/evals/<key>``."""
        from bnnpred.cli import predictive_overrides
        from bnnpred.saved_runs import eval_folder

        if not self.report_only:
            _bnnpred("eval", f"run_dir={run_dir}", *overrides)
        folder = eval_folder(run_dir, predictive_overrides(list(overrides)))
        self.made_by[folder] = _made_by(document(folder, EVAL_FILES))
        return folder

    def _quick(self, overrides: tuple[str, ...]) -> tuple[str, ...]:
        """The quick tier's overrides; its smoke-scale fits are kept when their numbers are broken (flagged), since
        it checks that the pipeline runs, not the papers' claims."""
        return (*overrides, "keep_unhealthy=true") if self.tier is Tier.quick else ()

    def table(self, claims: Sequence[Claim]) -> str:
        """The claims' Markdown table (:func:`~bnnpred.reproduce.claims.claims_table`), recorded for the page's
        ``claims.json``: the one way a page shows claims."""
        self.claims.extend(claims)
        return claims_table(claims)

    def failures_section(self) -> str:
        """``## Failed runs``: each failed run of the page's sweeps with its overrides and reason; empty if none."""
        if not self.failures:
            return ""
        rows = [f"| {Path(f['run_dir']).name} | `{f['overrides']}` | {f['message'].replace('|', '/')} |"
                for f in self.failures]
        return "\n".join(["## Failed runs", "", "Left out of every table and claim above:", "",
                          "| run | overrides | why it failed |", "|---|---|---|", *rows, ""])

    def runs_section(self) -> str:
        """``## Runs``: the finished runs the page reads (its single runs and re-evaluations, and the runs of its
        sweeps of the code its tables keep: :func:`~bnnpred.report.tables.check_code`), counted by the commit and
        code digest that made them; the provenance line names the commit that built the page, which a page rebuilt
        with ``--report-only`` need not share with its runs. Empty if the page read no run."""
        if not self.made_by:
            return ""
        counts = Counter(self.made_by.values()).most_common()
        made = ", ".join(f"{n} at commit {commit} (code {code})" if commit != UNRECORDED else
                         f"{n} with no recorded commit (code {code})" for (commit, code), n in counts)
        total = len(self.made_by)
        return "\n".join(["## Runs", "", f"The page reads {total} finished run{'s' * (total != 1)}: {made}.", ""])

    def provenance(self, command: str) -> str:
        """``Made by COMMAND at commit C on DATE, machine, wall time``."""
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent).stdout.strip()
        took = ("page rebuilt from the runs (the commits that made them: the Runs section)" if self.report_only
                else f"{(time.time() - self.started) / 60:.1f} min including cached runs")
        return (f"Made by `{command}` (tier {self.tier.value}) at commit {commit} on "
                f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()} {platform.system()} "
                f"({os.cpu_count()} cores), {took}.")


@dataclass(frozen=True)
class Study:
    """A page under ``outputs/<name>/``: ``make(r)`` trains what is missing (unless ``r.report_only``) and
    returns the page's Markdown. A module of :mod:`bnnpred.reproduce` defining ``STUDY`` registers it."""

    name: str
    title: str
    make: Callable[[Reproduction], str]
    cpu_cost: str  # wall time of the CPU tier on 2 cores, for the README
    items: tuple[Item, ...]  # the checklist items its claims answer (the index lists them before claims.json exists)
    full_scale: bool = False  # whether the full tier differs from the CPU tier (GPU presets)


def _bnnpred(*args: str, failures_allowed: bool = False) -> None:
    """``bnnpred ARGS``; a failure is an error, except a sweep's failed runs (exit 2) with ``failures_allowed``."""
    command = [sys.executable, "-m", "bnnpred.cli", *args, "progress=false"]
    print("+", " ".join(command[2:]), flush=True)
    result = subprocess.run(command, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if result.returncode != 0 and not (failures_allowed and result.returncode == 2):
        raise BnnpredError(f"'bnnpred {' '.join(args[:3])} ...' failed (exit {result.returncode}); see above")


def _made_by(document: dict) -> tuple[str, str]:
    """The commit and code digest a run's (or re-evaluation's) ``metrics.json`` records (``unrecorded`` if none)."""
    return document["run"].get("commit") or UNRECORDED, document["run"].get("code") or UNRECORDED


def _sweep_made_by(sweep_dir: Path) -> dict[Path, tuple[str, str]]:
    """The commit and code of each finished run under ``sweep_dir`` that :func:`~bnnpred.report.tables.collect`
    reads from it: runs without a manifest or a readable record left out, and of several code versions only the
    newest's. Only ``metrics.json`` is read: ``collect`` verifies every file against its checksum, and hashing the
    full posteriors twice doubled a page's rebuild (525 runs of notes004_table1 on 2 cores: 43 s against collect's
    23 s; reading the records takes 0.15 s)."""
    made_by = {}
    for run_dir in find_runs([sweep_dir]) if sweep_dir.is_dir() else []:
        try:
            if (run_dir / MANIFEST).is_file():
                made_by[run_dir] = _made_by(read_json(run_dir / "metrics.json"))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):  # not a run's record: collect skips it
            continue
    if not made_by:
        return {}
    frame = pd.DataFrame({"run_dir": list(map(str, made_by)), "code": [code for _, code in made_by.values()]})
    kept = set(check_code(frame, "newest")["run_dir"])
    return {run_dir: made for run_dir, made in made_by.items() if str(run_dir) in kept}


def finished(run_dir: Path, required: tuple[str, ...] = RUN_FILES) -> FinishedRun:
    """A finished run (or re-evaluation) read back verified: its config and metrics document, else an error naming
    why."""
    try:
        return read_finished(run_dir, required)
    except NotFinished as e:
        raise BnnpredError(f"{run_dir} is not a finished run ({e}); run the study without --report-only "
                           "first") from e


def document(run_dir: Path, required: tuple[str, ...] = RUN_FILES) -> dict:
    """The verified ``metrics.json`` of a finished run (or re-evaluation), else an error naming why."""
    return finished(run_dir, required).document
