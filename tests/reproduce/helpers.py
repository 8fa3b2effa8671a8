"""Shared by the study claim tests: verdicts as strings, and the checklist items a list of claims answers."""

from __future__ import annotations

from bnnpred.reproduce import STUDIES
from bnnpred.reproduce.claims import Claim


def verdicts(claims: list[Claim]) -> list[str]:
    return [c.verdict.value for c in claims]


def answered(claims: list[Claim]) -> set[tuple[str, int]]:
    return {(c.item.notes, c.item.number) for c in claims}


def declared(study: str) -> set[tuple[str, int]]:
    return {(i.notes, i.number) for i in STUDIES[study].items}
