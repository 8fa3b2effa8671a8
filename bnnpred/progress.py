"""Progress of long loops: a bar on a terminal or in a notebook; elsewhere (nohup, SLURM, ``| tee``) a line with the
rate and the time left every ``LOG_EVERY`` seconds, so a log shows how far a run is and when it will end. The lines
go to the ``bnnpred`` log, or to stderr where nothing handles it (a script that never set up logging)."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm.auto import tqdm

log = logging.getLogger("bnnpred.progress")

LOG_EVERY = 30.0  # seconds between log lines off a terminal
BARS = True  # False: lines even on a terminal (the jobs of a parallel sweep share one; the lines reach each run's log)
T = TypeVar("T")


def progress(items: Iterable[T], total: int, what: str, enabled: bool = True, bar: bool = True) -> Iterator[T]:
    """``items`` (``total`` of them), reported as ``what``: a tqdm bar on a terminal, ETA lines in the log
    otherwise (or always, with ``bar=False``: for inner loops, which log only when one of them runs long),
    nothing when not ``enabled``."""
    if not enabled:
        yield from items
    elif bar and BARS and (sys.stderr.isatty() or "ipykernel" in sys.modules):
        yield from tqdm(items, total=total, desc=what, leave=False)
    else:
        yield from _logged(items, total, what)


def announce(line: str) -> None:
    """One line of what a long call is about to do: to the ``bnnpred`` log where it is handled at INFO, else to
    stderr (a script that never set up logging, or set it to warnings only)."""
    if log.hasHandlers() and log.isEnabledFor(logging.INFO):
        log.info("%s", line)
    else:
        print(line, file=sys.stderr, flush=True)


def _logged(items: Iterable[T], total: int, what: str) -> Iterator[T]:
    start = last = time.monotonic()
    for done, item in enumerate(items, 1):
        yield item
        now = time.monotonic()
        if now - last >= LOG_EVERY:
            last = now
            announce(eta_line(what, done, total, now - start))


def eta_line(what: str, done: int, total: int, elapsed: float) -> str:
    """``MAP: 1200/10000 (12 %), 1.5 min elapsed, about 11 min left``."""
    left = elapsed / done * (total - done)
    return (f"{what}: {done}/{total} ({100 * done / total:.0f} %), {duration(elapsed)} elapsed, "
            f"about {duration(left)} left")


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
