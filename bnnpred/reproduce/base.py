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

from bnnpred.errors import BnnpredError
from bnnpred.io import read_json
from bnnpred.report.tables import UNRECORDED
from bnnpred.reproduce.claims import Claim, Item, claims_table
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
    read: list[Path] = field(default_factory=list)  # every finished run and re-evaluation the page reads

    def pick(self, *, quick: T, cpu: T, full: T | None = None) -> T:
        """The setting for this tier, the one way a study chooses by tier; the full tier takes the CPU tier's
        unless ``full`` is given."""
        return {Tier.quick: quick, Tier.cpu: cpu, Tier.full: cpu if full is None else full}[self.tier]

    def train_once(self, run_dir: Path, *overrides: str, quick: tuple[str, ...] = ()) -> Path:
        """``bnnpred train OVERRIDES`` into ``run_dir`` (the quick tier appends ``quick``)."""
        if not self.report_only:
            _bnnpred("train", *overrides, *self._quick(quick), f"hydra.run.dir={run_dir}")
        self.read.append(_finished(run_dir))
        return run_dir

    def sweep(self, sweep_dir: Path, subdir: str, *overrides: str, quick: tuple[str, ...] = ()) -> Path:
        """``bnnpred train -m OVERRIDES`` with ``self.jobs`` joblib workers into ``sweep_dir/<subdir>``. A run
        that fails (a broken fit, the health checks) fails alone: it is left out of the page's tables, which lists
        it with its reason (:meth:`failures_section`); a sweep with no finished run is an error."""
        if not self.report_only:
            _bnnpred("train", "-m", *overrides, *self._quick(quick), "hydra/launcher=joblib",
                     f"hydra.launcher.n_jobs={self.jobs}", f"hydra.sweep.dir={sweep_dir}",
                     f"hydra.sweep.subdir={subdir}", failures_allowed=True)
        finished_runs = sorted(manifest.parent for manifest in sweep_dir.glob("*/manifest.json"))
        if not finished_runs:
            raise BnnpredError(f"no finished runs in {sweep_dir}; run the study without --report-only first")
        self.read.extend(finished_runs)
        self.failures.extend(failed_runs(sweep_dir))
        return sweep_dir

    def evaluate(self, run_dir: Path, *overrides: str) -> Path:
        """``bnnpred eval run_dir=RUN_DIR OVERRIDES`` (skipped when only rebuilding the page); returns the
        re-evaluation's folder ``RUN_DIR/evals/<key>``."""
        from bnnpred.cli import predictive_overrides
        from bnnpred.saved_runs import eval_folder

        if not self.report_only:
            _bnnpred("eval", f"run_dir={run_dir}", *overrides)
        folder = _finished(eval_folder(run_dir, predictive_overrides(list(overrides))), EVAL_FILES)
        self.read.append(folder)
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
        """``## Runs``: how many finished runs and re-evaluations the page read, counted by the commit and code
        digest that made them (the provenance line names the commit that built the page, which a page rebuilt with
        ``--report-only`` need not share with its runs); empty if the page read none."""
        if not self.read:
            return ""
        made_by = Counter(_made_by(folder) for folder in dict.fromkeys(self.read))
        counts = ", ".join(f"{n} that record no commit" if commit == UNRECORDED else
                           f"{n} at commit {commit} (code {code})" for (commit, code), n in made_by.most_common())
        return "\n".join(["## Runs", "", f"The page reads {sum(made_by.values())} finished runs and re-evaluations: "
                          f"{counts}.", ""])

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


def _finished(run_dir: Path, required: tuple[str, ...] = RUN_FILES) -> Path:
    document(run_dir, required)
    return run_dir


def _made_by(folder: Path) -> tuple[str, str]:
    """The commit and code digest a finished run (or re-evaluation) records (``unrecorded`` where it has none)."""
    made = read_json(folder / "metrics.json")["run"]
    return made.get("commit") or UNRECORDED, made.get("code") or UNRECORDED


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
