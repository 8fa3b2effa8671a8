"""Shared by the study claim tests: verdicts as strings, the checklist items a list of claims answers, and the
identity checks measured once per session."""

from __future__ import annotations

import functools
from types import ModuleType

import torch

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
