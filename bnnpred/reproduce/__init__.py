"""The papers' tables and figures, one study per module: a module here that defines ``STUDY`` is registered.

``bnnpred reproduce [NAME ...] --tier quick|cpu|full`` runs them (finished runs are skipped), writes one page
per study under the output folder with its claims as data (``claims.json``), an index linking them and the
checklist index ``checklist.md`` (:mod:`bnnpred.reproduce.checklist`); ``--report-only`` rebuilds the pages from
the run directories alone (a page without runs is kept as it is), then both indexes.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path

from bnnpred.errors import BnnpredError, unknown_choice
from bnnpred.io import read_json, write_json, write_text
from bnnpred.reproduce.base import Reproduction, Study, Tier
from bnnpred.reproduce.budget import Budget, OutOfTime
from bnnpred.reproduce.claims import Verdict, claims_json

log = logging.getLogger(__name__)

__all__ = ["STUDIES", "Made", "Reproduction", "Study", "Tier", "checklist", "reproduce"]


def _discover() -> dict[str, Study]:
    studies = {}
    for module in pkgutil.iter_modules(__path__):
        study = getattr(importlib.import_module(f"{__name__}.{module.name}"), "STUDY", None)
        if study is not None:
            studies[study.name] = study
    return dict(sorted(studies.items()))


STUDIES: dict[str, Study] = _discover()


@dataclass
class Made:
    """What :func:`reproduce` made: the pages written, and the studies the budget stopped (their pages as they
    were)."""

    pages: list[Path] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)


def reproduce(names: list[str], tier: Tier, runs: Path, out: Path, jobs: int, report_only: bool,
              device: str | None = None, hours: float | None = None, from_records: bool = False) -> Made:
    """Make the pages of ``names`` (all studies if empty) with their ``claims.json``, the index ``out/README.md``,
    the checklist index ``out/checklist.md`` and the verdicts table of the README beside ``out``; returns the
    pages and the studies stopped. ``device`` (cpu, cuda) is where a study built from records trains and whose
    records its page reads; by default the CPU, or when only rebuilding, the device its committed page was made
    from. With ``hours``, training that its earlier runs say would not end inside that many hours (from now, for
    all the studies) is not started: its study stops there, its page left as it was, and says what is left
    (:mod:`bnnpred.reproduce.budget`). ``from_records`` builds every study from its run records, as those marked
    so are: how a study whose committed page predates records is rerun across machines."""
    for name in names:
        if name not in STUDIES:
            raise unknown_choice("study", name, STUDIES)
    chosen = [STUDIES[n] for n in names] if names else list(STUDIES.values())
    if tier is Tier.full and not any(s.full_scale for s in chosen):
        raise BnnpredError("none of these studies has a full (GPU) tier yet: their CPU tier is the papers' scale; "
                           "use --tier cpu")
    if hours is not None and (report_only or not hours > 0):
        raise BnnpredError(f"--hours {hours:g}: give a positive budget for training, and none with --report-only "
                           "(a rebuild trains nothing)")
    budget, made = Budget(hours), Made()
    for study in chosen:
        r = Reproduction(runs=runs, out=out / study.name, tier=tier, jobs=jobs, report_only=report_only,
                         device=device or (page_device(out / study.name) if report_only else "cpu"),
                         from_records=study.from_records or from_records, keeps_traces=study.keeps_traces,
                         budget=budget)
        try:
            made.pages.append(make_page(study, r))
        except OutOfTime as e:
            made.stopped.append(study.name)
            print(f"{study.name}: stopped before {e}. Its page is left as it was; what it finished is in its run "
                  "folders (and records); the same command goes on from there.", flush=True)
        except BnnpredError as e:
            if not report_only or names:
                raise
            log.warning("page %s not rebuilt: %s", study.name, e)
    write_text(out / "README.md", index(out))
    checklist(out)
    update_readme(out)
    return made


def make_page(study: Study, r: Reproduction) -> Path:
    """Train what ``study`` misses (unless ``r.report_only``) and write its page ``r.out/README.md`` with its Runs
    and Failed runs sections, and its claims as data, ``claims.json``; returns the page."""
    r.out.mkdir(parents=True, exist_ok=True)
    sections = [study.make(r), r.runs_section(), r.failures_section()]
    page = write_text(r.out / "README.md", "\n\n".join(part.strip() for part in sections if part) + "\n")
    write_json(r.out / "claims.json", {"study": study.name, "tier": r.tier.value,
                                       **({"device": r.device} if r.from_records else {}),
                                       "claims": claims_json(r.claims)})
    return page


def page_device(page: Path) -> str:
    """The device whose records a built page was made from (its ``claims.json``), ``cpu`` if none is recorded."""
    try:
        return str(read_json(page / "claims.json").get("device", "cpu"))
    except (OSError, ValueError, AttributeError):
        return "cpu"


def checklist(out: Path) -> Path:
    """Write ``out/checklist.md`` from the pages' ``claims.json`` under ``out`` (no training, no run read)."""
    from bnnpred.reproduce.checklist import checklist_page

    return write_text(out / "checklist.md", checklist_page(out, STUDIES))


def page_verdicts(out: Path, name: str) -> str:
    """A built page's claims counted by verdict (its ``claims.json``; the tier when not cpu), or why there are
    none."""
    from bnnpred.reproduce.checklist import tally

    if not (out / name / "claims.json").is_file():
        return "not recorded as data (the page predates claims.json)"
    recorded = read_json(out / name / "claims.json")
    tier = "" if recorded["tier"] == Tier.cpu.value else f" (tier {recorded['tier']})"
    return (tally(recorded["claims"]) or "no claim") + tier


def index(out: Path) -> str:
    rows = [f"| [{s.name}/]({s.name}/README.md) | {s.title} | {page_verdicts(out, s.name)} | "
            f"`bnnpred reproduce {s.name}` | {s.cpu_cost} |"
            for s in STUDIES.values() if (out / s.name / "README.md").is_file()]
    return "\n".join([
        "# Reproduced results", "",
        "| page | what | verdicts | made by | CPU time (2 cores) |", "|---|---|---|---|---|", *rows, "",
        "Each page states the command, the commit and the date that produced it, the papers' numbers beside ours, "
        "and which of the notes' pass criteria hold (the verdicts column counts the claims its `claims.json` "
        "records). [checklist.md](checklist.md) lists every item of the notes' "
        "checklists with the page and verdicts that answer it. `make reproduce-tables` remakes them all (finished "
        "runs are kept); `bnnpred reproduce --report-only` rebuilds the pages from the run directories without "
        "training.",
    ]) + "\n"


VERDICTS_START = "<!-- verdicts: generated by bnnpred reproduce from outputs/*/claims.json -->"
VERDICTS_END = "<!-- verdicts: end -->"


def verdicts_block(out: Path) -> str:
    """The README's table of every built page's verdicts and the list of every claim that does not hold, each with
    its checklist item, criterion and numbers (links relative to ``out``'s parent), between the markers
    :data:`VERDICTS_START` and :data:`VERDICTS_END`: generated, so that it can never omit a failure."""
    built = [s.name for s in STUDIES.values() if (out / s.name / "README.md").is_file()]
    rows = [f"| [{name}]({out.name}/{name}/README.md) | {page_verdicts(out, name)} |" for name in built]
    failing = [f"- [{name}]({out.name}/{name}/README.md), {c['notes']} #{c['number']}{c.get('part') or ''}: "
               f"{_failure(c)} ({c['numbers']})"
               for name in built if (out / name / "claims.json").is_file()
               for c in read_json(out / name / "claims.json")["claims"]
               if Verdict.fails.value in (c["verdict"], c.get("as_written", {}).get("verdict"))]
    listed = (["", "Every claim that does not hold (the pages say what was tried and why):", "", *failing]
              if failing else [])
    return "\n".join([VERDICTS_START, "| page | verdicts |", "|---|---|", *rows, *listed, VERDICTS_END])


def _failure(c: dict) -> str:
    """A failing claim's text; for one that holds only as the page codes it, the notes' criterion that fails."""
    written = c.get("as_written")
    if c["verdict"] != Verdict.fails.value and written:
        return (f"{written['text']} (as the notes write it; the page's {c['text']} {c['verdict']}: "
                f"{written['why']})")
    return c["text"]


def with_verdicts(readme: str, block: str) -> str | None:
    """``readme`` with the text between its verdict markers replaced by ``block``; None if it has no markers."""
    start, end = readme.find(VERDICTS_START), readme.find(VERDICTS_END)
    if start < 0 or end < start:
        return None
    return readme[:start] + block + readme[end + len(VERDICTS_END):]


def update_readme(out: Path) -> None:
    """Rewrite the verdicts table of the README beside ``out`` (the project's ``README.md`` for ``outputs/``), if
    that README has the markers; any other README is left alone."""
    readme = out.parent / "README.md"
    if readme.is_file() and (text := with_verdicts(readme.read_text(), verdicts_block(out))) is not None:
        write_text(readme, text)
