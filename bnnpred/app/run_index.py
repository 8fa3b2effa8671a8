"""A task folder's index of its runs: one CSV row per job (when it ended, run key, status, overrides, code,
sweep), so that runs stay findable by what they are rather than by their hashed folder names.

Rows are appended under an ``flock``, so the jobs of a parallel sweep (and concurrent sweeps) can all write it.
"""

from __future__ import annotations

import csv
import fcntl
import io
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

INDEX = "index.csv"
COLUMNS = ["ended", "key", "status", "seconds", "overrides", "code", "commit", "sweep", "run_dir", "message"]


def append(folder: Path, **row: Any) -> Path:
    """Append one row (``COLUMNS``; ``ended`` is now, in UTC) to ``folder/index.csv``, with its header if new."""
    path = Path(folder) / INDEX
    path.parent.mkdir(parents=True, exist_ok=True)
    line = io.StringIO()
    writer = csv.DictWriter(line, fieldnames=COLUMNS, extrasaction="raise")
    writer.writerow({"ended": datetime.now(timezone.utc).isoformat(timespec="seconds"), **row})
    with open(path, "a", newline="") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        if f.tell() == 0:
            f.write(",".join(COLUMNS) + "\r\n")
        f.write(line.getvalue())
    return path


def failed_runs(folder: Path) -> list[dict[str, str]]:
    """The rows of ``folder/index.csv`` whose job failed and whose run folder was not finished by a later job:
    ``{"run_dir", "overrides", "message"}`` each, in order (none without an index)."""
    last = {row["run_dir"]: row for row in _rows(Path(folder) / INDEX)}  # the latest job of each run folder decides
    return [{"run_dir": r["run_dir"], "overrides": r["overrides"], "message": r["message"]}
            for r in last.values() if r["status"] == "failed"]


def failed_keys(folder: Path) -> set[str]:
    """The run keys of the jobs in ``folder/index.csv`` whose latest job failed (none without an index)."""
    last = {row["run_dir"]: row for row in _rows(Path(folder) / INDEX)}
    return {row["key"] for row in last.values() if row["status"] == "failed"}


def copy_relative(sweep_dir: Path, to: Path, merge: bool = False) -> Path:
    """``sweep_dir``'s index written to ``to/index.csv`` with each run folder named relative to the sweep (a run's
    record is committed, and must name no machine's paths); with ``merge``, after the rows ``to`` holds already
    (the jobs of the machines that made its other runs: a campaign continued run by run elsewhere), those it lacks,
    all in the order they ended; returns the copy."""
    to = Path(to)
    rows = _rows(to / INDEX) if merge else []
    for row in _rows(Path(sweep_dir) / INDEX):
        folder = Path(row["run_dir"])
        relative = {**row, "run_dir": str(folder.relative_to(sweep_dir)) if folder.is_relative_to(sweep_dir)
                    else folder.name}
        if relative not in rows:
            rows.append(relative)
    lines = io.StringIO()
    writer = csv.DictWriter(lines, fieldnames=COLUMNS, extrasaction="raise")
    writer.writeheader()
    writer.writerows(sorted(rows, key=lambda row: row["ended"]))
    to.mkdir(parents=True, exist_ok=True)
    (to / INDEX).write_text(lines.getvalue())
    return to / INDEX


def _rows(path: Path) -> list[dict[str, str]]:
    """The rows of an index (none if it does not exist)."""
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))
