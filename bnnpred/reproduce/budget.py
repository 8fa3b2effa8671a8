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
from typing import Any

from bnnpred.app.report.tables import find_runs
from bnnpred.app.run_files import MANIFEST
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

    def allow(self, what: str, missing: int, seconds_per_run: float | None, workers: int,
              unit: str = "run") -> None:
        """Return if ``missing`` runs (or other ``unit``s) of ``what``, each at most ``seconds_per_run`` (the longest
        earlier one; None when none is known), ``workers`` at a time, end inside the budget; else raise
        :class:`OutOfTime` saying why."""
        if missing == 0 or self.hours is None:
            return
        workers = max(1, min(workers, missing))
        runs = f"{missing} {unit}{'s' * (missing != 1)}"
        if seconds_per_run is None:
            raise OutOfTime(f"{what}: {runs} to make, and no earlier {unit} of it says how long one takes; start it "
                            "once without --hours")
        need = math.ceil(missing / workers) * seconds_per_run
        if need > self.left():
            raise OutOfTime(f"{what}: {runs} to make, about {hours(need)} with {workers} worker"
                            f"{'s' * (workers != 1)} (its longest earlier {unit} took {hours(seconds_per_run)}), "
                            f"{hours(max(0.0, self.left()))} of the {self.hours:g} h budget left")


def hours(seconds: float) -> str:
    """``1.25 h``, ``12 min`` or ``40 s``."""
    if seconds >= 3600:
        return f"{seconds / 3600:.2f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


def _documents(folders: Iterable[Path]) -> list[dict[str, Any]]:
    """The ``metrics.json`` of the finished runs (or re-evaluations) under the existing ``folders``: those with a
    manifest and a readable document (others are skipped, as the pages' readers skip them)."""
    documents = []
    for run in find_runs([Path(folder) for folder in folders if Path(folder).is_dir()]):
        try:
            document = read_json(run / "metrics.json") if (run / MANIFEST).is_file() else None
        except (OSError, ValueError):
            continue
        if isinstance(document, dict) and isinstance(document.get("run"), dict):
            documents.append(document)
    return documents


def held_keys(folders: Iterable[Path]) -> set[str]:
    """The run keys of the finished runs under ``folders`` (a failed one is trained again, so it is not held)."""
    return {d["run"].get("key") for d in _documents(folders)}


def longest_seconds(folders: Iterable[Path]) -> float | None:
    """The longest wall time (``run.seconds``) of the finished runs under ``folders``, of any code; None if there
    are none."""
    return max((float(d["run"]["seconds"]) for d in _documents(folders) if d["run"].get("seconds") is not None),
               default=None)


def evaluation_seconds(document: dict[str, Any]) -> float:
    """A re-evaluation's time from its ``metrics.json``: the sum of its predictives' ``seconds`` and
    ``ood_seconds`` over the splits (its ``run.seconds`` is its run's)."""
    return sum(float(value) for split in document.get("metrics", {}).values() if isinstance(split, dict)
               for metrics in split.values() if isinstance(metrics, dict)
               for key, value in metrics.items() if key in ("seconds", "ood_seconds") and value is not None)


def longest_evaluation(folders: Iterable[Path]) -> float | None:
    """The longest time of the re-evaluations in ``folders`` (:func:`evaluation_seconds`); None if there are
    none."""
    return max((evaluation_seconds(d) for d in _documents(folders)), default=None)
