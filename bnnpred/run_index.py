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
