"""The checklist index ``outputs/checklist.md``: every numbered item of the five notes' reproduction checklists
(``../shared/papers/notes-00N.md``), one table row each, with the pages that answer it and their verdicts, or why
no page does.

The items and their texts come from ``checklist.yaml`` (read from the notes by hand); which page answers an item
from the studies' ``items`` and the ``claims.json`` each page writes beside its README; the verdicts only from
``claims.json`` (a page built before claims were recorded as data says so instead of a verdict).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from bnnpred.io import read_json
from bnnpred.reproduce.base import Study
from bnnpred.reproduce.claims import Item, Verdict, cell

CHECKLIST = Path(__file__).with_name("checklist.yaml")
VERDICT_ORDER = (Verdict.holds, Verdict.fails, Verdict.not_applicable)


@dataclass(frozen=True)
class Entry:
    """One checklist item: its short text and, if no page answers it, why."""

    item: Item
    text: str
    reason: str | None = None


def entries(path: Path = CHECKLIST) -> list[Entry]:
    """Every checklist item of ``path``, in the notes' order."""
    data = yaml.safe_load(path.read_text())
    return [Entry(Item(notes, int(number)), e["text"], e.get("reason"))
            for notes, numbered in data.items() for number, e in numbered.items()]


def recorded(out: Path, studies: Mapping[str, Study]) -> dict[str, dict]:
    """What each built page recorded (``out/<study>/claims.json``: its tier and claims), by study."""
    return {name: read_json(out / name / "claims.json") for name in studies if (out / name / "claims.json").is_file()}


def tally(claims: list[dict]) -> str:
    """``2 hold, 1 does not hold``: the claims (``claims.json`` entries) counted by verdict; empty for none."""
    counts = Counter(Verdict(c["verdict"]) for c in claims)
    plural = {Verdict.holds: "hold", Verdict.fails: "do not hold", Verdict.not_applicable: "not applicable"}
    departing = sum(c["verdict"] == Verdict.holds.value and c.get("as_written", {}).get("verdict", c["verdict"])
                    != Verdict.holds.value for c in claims)  # holds as the page codes it, not as the notes write it
    only_coded = {Verdict.holds: f" ({departing} of them not as the notes write it)" if departing else ""}
    return ", ".join(f"{counts[v]} {plural[v] if counts[v] > 1 else v.value}{only_coded.get(v, '')}"
                     for v in VERDICT_ORDER if counts[v])


def verdicts(claims: list[dict], item: Item) -> str:
    """The :func:`tally` of the claims on ``item`` (any part), or why there is none: the page was built before its
    study answered the item. A claim the page added beside the notes' criteria (``added``:
    :func:`~bnnpred.reproduce.claims.added`) is not counted toward the item's verdict; they are tallied apart."""
    on_item = [c for c in claims if (c["notes"], c["number"]) == (item.notes, item.number)]
    notes = tally([c for c in on_item if not c.get("added")])
    extra = tally([c for c in on_item if c.get("added")])
    if extra:
        return (notes or "none of the notes' criteria") + f" (not counted: added beside the notes' criteria, {extra})"
    return notes or "no verdict yet (the page was built before its study answered this item; rerun it)"


def where(entry: Entry, out: Path, studies: Mapping[str, Study],
          pages_claims: dict[str, dict]) -> tuple[str, str, bool]:
    """The (pages, verdicts) cells of one item's row, and whether a page recorded a verdict for it."""
    key = (entry.item.notes, entry.item.number)
    claims = {name: page["claims"] for name, page in pages_claims.items()}
    pages = [name for name, study in studies.items()
             if key in {(i.notes, i.number) for i in study.items}
             or any((c["notes"], c["number"]) == key for c in claims.get(name, []))]
    if not pages:
        return "not reproduced here", entry.reason or "no page answers it (no reason in checklist.yaml)", False
    cells = []
    for name in pages:
        if name in claims:
            tier = pages_claims[name]["tier"]
            cells.append(f"{name}{'' if tier == 'cpu' else f' (tier {tier})'}: {verdicts(claims[name], entry.item)}")
        elif (out / name / "README.md").is_file():
            cells.append(f"{name}: verdict not yet recorded as data (page predates claims.json)")
        else:
            cells.append(f"{name}: page not built yet (`bnnpred reproduce {name}`)")
    links = ", ".join(f"[{name}]({name}/README.md)" for name in pages)
    return links, "; ".join(cells), any((c["notes"], c["number"]) == key for name in pages
                                        for c in claims.get(name, []))


def checklist_page(out: Path, studies: Mapping[str, Study], path: Path = CHECKLIST) -> str:
    """The Markdown of ``out/checklist.md``."""
    claims = recorded(out, studies)
    all_entries = entries(path)
    lines = [
        "# The notes' reproduction checklists, item by item", "",
        "Generated by `bnnpred reproduce` (every run of it, `--report-only` included, which trains nothing and "
        "keeps a page whose runs are absent) from "
        "`bnnpred/reproduce/checklist.yaml` (each item's text and, where no page answers it, why; read from "
        "../shared/papers/notes-00N.md by hand), the studies' declared items (`Study.items`) and the claims each "
        "page records in its `claims.json`. A verdict appears only where a page recorded its claims as data; a "
        "page built before that says so. Counts are per claim: an item can have several criteria on several pages; "
        "a tier other than cpu (the committed pages' scale) is named.",
    ]
    answered = with_verdicts = 0
    for notes in dict.fromkeys(e.item.notes for e in all_entries):
        lines += ["", f"## {notes}", "", "| # | item | page | verdicts (or why not here) |", "|---|---|---|---|"]
        for entry in (e for e in all_entries if e.item.notes == notes):
            page, verdict, has_verdict = where(entry, out, studies, claims)
            answered += page != "not reproduced here"
            with_verdicts += has_verdict
            lines.append(f"| {entry.item.number} | {cell(entry.text)} | {page} | {cell(verdict)} |")
    lines[2:2] = [f"{len(all_entries)} items: {answered} on a page ({with_verdicts} with verdicts recorded as data), "
                  f"{len(all_entries) - answered} on none.", ""]
    return "\n".join(lines) + "\n"
