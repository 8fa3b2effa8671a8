"""Shared by the study tests: verdicts as strings, the checklist items a list of claims answers, the identity
checks measured once per session, and a finished run's files."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import pickle
from pathlib import Path
from types import ModuleType

import torch

from bnnpred.app.run_files import locked, write_manifest
from bnnpred.reproduce import STUDIES
from bnnpred.reproduce.claims import Claim
from bnnpred.reproduce.identity_checks import single_thread


def verdicts(claims: list[Claim]) -> list[str]:
    return [c.verdict.value for c in claims]


def answered(claims: list[Claim]) -> set[tuple[str, int]]:
    return {(c.item.notes, c.item.number) for c in claims}


def declared(study: str) -> set[tuple[str, int]]:
    return {(i.notes, i.number) for i in STUDIES[study].items}


# the test session's temporary folder, which pytest-xdist's workers share (each works in its popen-gwK folder) and
# pytest removes with old sessions' folders; set by conftest's session fixture
SHARED: Path | None = None


@dataclasses.dataclass(frozen=True)
class Measurement:
    claims: list[Claim]
    moved_random_state: bool  # whether measuring them moved torch's global random state


def measured(module: ModuleType) -> list[Claim]:
    """An :mod:`~bnnpred.reproduce.identity_checks` module's claims, measured once per test session
    (:func:`measurement`)."""
    return measurement(module).claims


@functools.cache
def measurement(module: ModuleType) -> Measurement:
    """An identity-check module's claims measured as the page measures them, once per test session (tens of
    seconds). pytest-xdist's workers share it through a pickle in the session's temporary folder (:data:`SHARED`),
    written by whichever worker asks first while the others wait on its lock."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None or SHARED is None:
        return _measure(module)
    shared = SHARED / f"bnnpred-identity-checks-{run}" / module.__name__
    with locked(shared):
        if (shared / "measurement.pkl").is_file():
            return pickle.loads((shared / "measurement.pkl").read_bytes())
        result = _measure(module)
        (shared / "measurement.pkl").write_bytes(pickle.dumps(result))
        return result


def _measure(module: ModuleType) -> Measurement:
    """One thread and torch's own default dtype (float32, not the tests' float64), as the page measures."""
    state, dtype = torch.random.get_rng_state(), torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        with single_thread():
            claims = module.claims()
    finally:
        torch.set_default_dtype(dtype)
    return Measurement(claims, not torch.equal(torch.random.get_rng_state(), state))


def finished_run(folder: Path, run: dict, finished_at: float = 0.0) -> Path:
    """A finished run (every run file, verified by its manifest) that records ``run`` in its metrics.json, its
    manifest dated ``finished_at`` (seconds since the epoch; which code is newest goes by it)."""
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text("seed: 0\n")
    summary = {"dataset": "toy", "task": "binary", "model": "mlp", "inference": "laplace_ggn", "seed": 0,
               "key": folder.name, **run}
    (folder / "metrics.json").write_text(json.dumps({"run": summary, "info": {}, "metrics": {}}))
    (folder / "posterior.pt").write_bytes(b"0")
    write_manifest(folder)
    os.utime(folder / "manifest.json", (finished_at, finished_at))
    return folder
