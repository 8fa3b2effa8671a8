"""Building blocks of the reproduction pages under ``outputs/``: running the CLI, claims checked against the
papers' pass criteria, and the provenance line every page carries."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path


def bnnpred(*args: str) -> None:
    """Run ``bnnpred ARGS progress=false`` in a subprocess (one BLAS thread; sweeps parallelise over runs)."""
    command = [sys.executable, "-m", "bnnpred.cli", *args, "progress=false"]
    print("+", " ".join(command[2:]), flush=True)
    subprocess.run(command, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})


def train_once(run_dir: Path, *overrides: str) -> Path:
    """``bnnpred train OVERRIDES`` into ``run_dir`` (skipped by the runner when already finished)."""
    bnnpred("train", *overrides, f"hydra.run.dir={run_dir}")
    return run_dir


def sweep(sweep_dir: Path, subdir: str, jobs: int, *overrides: str) -> Path:
    """``bnnpred train -m OVERRIDES`` with the joblib launcher into ``sweep_dir/<subdir>`` (finished runs skipped)."""
    bnnpred("train", "-m", *overrides, "hydra/launcher=joblib", f"hydra.launcher.n_jobs={jobs}",
            f"hydra.sweep.dir={sweep_dir}", f"hydra.sweep.subdir={subdir}")
    return sweep_dir


def check(claim: str, holds: bool, numbers: str) -> str:
    """One row of a claims table: the claim, whether it holds, and the numbers that decide it."""
    return f"| {claim} | {'holds' if holds else 'does not hold'} | {numbers} |"


def checks_table(rows: list[str], header: str = "claim (pass criterion)") -> str:
    return "\n".join([f"| {header} | result | numbers |", "|---|---|---|", *rows])


def provenance(command: str, start: float) -> str:
    """``Made by COMMAND at commit C on DATE, machine, wall time`` (``start`` from ``time.time()``)."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    return (f"Made by `{command}` at commit {commit} on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, "
            f"{platform.machine()} {platform.system()} ({os.cpu_count()} cores), "
            f"{(time.time() - start) / 60:.1f} min including cached runs.")
