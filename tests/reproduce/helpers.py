"""Shared by the study tests: verdicts as strings, the checklist items a list of claims answers, the identity
checks measured once per session, and a finished run's files."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from types import ModuleType

import torch

from bnnpred.app.run_files import write_manifest
from bnnpred.reproduce import STUDIES
from bnnpred.reproduce.claims import Claim
from bnnpred.reproduce.identity_checks import single_thread


def verdicts(claims: list[Claim]) -> list[str]:
    return [c.verdict.value for c in claims]


def answered(claims: list[Claim]) -> set[tuple[str, int]]:
    return {(c.item.notes, c.item.number) for c in claims}


def declared(study: str) -> set[tuple[str, int]]:
    return {(i.notes, i.number) for i in STUDIES[study].items}


@functools.cache
def measured(module: ModuleType) -> list[Claim]:
    """An :mod:`~bnnpred.reproduce.identity_checks` module's claims, measured once per test session (seconds)."""
    with single_thread():
        return module.claims()


def afresh(module: ModuleType) -> list[Claim]:
    """An identity-check module's claims measured now (not the session's :func:`measured`), checking that they
    leave the global random state alone (the checks seed their own generators)."""
    state = torch.random.get_rng_state()
    claims = module.claims()
    assert torch.equal(torch.random.get_rng_state(), state)
    return claims


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
