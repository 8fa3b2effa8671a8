"""A reproduction's time budget (``bnnpred reproduce --hours H``, issue 38 item 3): a sweep, run or re-evaluation is
started only when the runs already made of it (its records and run folders, of any code) say that what it lacks ends
inside the hours left, so that a session's end cuts nothing short. What does not fit stops its study there: the
sweeps before it have written their records, and the same command started again (here or on a machine with the
committed records) goes on from them."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from bnnpred.app.report.tables import find_runs
from bnnpred.app.run_files import MANIFEST
from bnnpred.app.run_index import failed_keys
from bnnpred.io import read_json


class OutOfTime(Exception):
    """Training that its earlier runs say would not end inside the budget: its study stops before it (a planned
    stop, not an error)."""


@dataclass
class Budget:
    """``hours`` from ``started`` (``time.monotonic``); None: no budget."""

    hours: float | None = None
    started: float = field(default_factory=time.monotonic)

    @property
    def bounded(self) -> bool:
        return self.hours is not None

    def left(self) -> float:
        """Seconds of the budget left (infinite without one)."""
        if self.hours is None:
            return math.inf
        return self.hours * 3600 - (time.monotonic() - self.started)

    def allow(self, what: str, missing: int, seconds_per_run: float | None, workers: int) -> None:
        """Return if ``missing`` runs of ``what``, each at most ``seconds_per_run`` (the longest earlier run; None
        when none is known), ``workers`` at a time, end inside the budget; else raise :class:`OutOfTime` saying
        why."""
        if missing == 0 or self.hours is None:
            return
        runs = f"{missing} run{'s' * (missing != 1)}"
        if seconds_per_run is None:
            raise OutOfTime(f"{what}: {runs} to make, and no earlier run of it says how long one takes; start it "
                            "once without --hours")
        need = math.ceil(missing / max(1, workers)) * seconds_per_run
        if need > self.left():
            raise OutOfTime(f"{what}: {runs} to make, about {hours(need)} with {workers} worker"
                            f"{'s' * (workers != 1)} (its longest earlier run took {hours(seconds_per_run)}), "
                            f"{hours(max(0.0, self.left()))} of the {self.hours:g} h budget left")


def hours(seconds: float) -> str:
    """``1.25 h`` or ``12 min``."""
    return f"{seconds / 3600:.2f} h" if seconds >= 3600 else f"{math.ceil(seconds / 60):.0f} min"


def _runs(folders: Iterable[Path]) -> list[Path]:
    """The finished runs (or re-evaluations) under the existing ``folders``: those with a manifest."""
    return [run for folder in folders if Path(folder).is_dir() for run in find_runs([Path(folder)])
            if (run / MANIFEST).is_file()]


def held_keys(folders: Iterable[Path]) -> set[str]:
    """The run keys of the finished runs under ``folders`` and of the jobs their indexes list as failed (a sweep
    started again does not train those either)."""
    folders = list(folders)
    return ({read_json(run / "metrics.json")["run"].get("key") for run in _runs(folders)}
            | {key for folder in folders for key in failed_keys(folder)})


def longest_seconds(folders: Iterable[Path]) -> float | None:
    """The longest wall time (``run.seconds``) of the finished runs or re-evaluations under ``folders``, of any code;
    None if there are none."""
    seconds = [read_json(run / "metrics.json")["run"].get("seconds") for run in _runs(folders)]
    return max((float(s) for s in seconds if s is not None), default=None)
