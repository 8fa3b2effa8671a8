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
from pathlib import Path

from bnnpred.errors import BnnpredError, unknown_choice
from bnnpred.io import write_json, write_text
from bnnpred.reproduce.base import Reproduction, Study, Tier
from bnnpred.reproduce.claims import claims_json

log = logging.getLogger(__name__)

__all__ = ["STUDIES", "Reproduction", "Study", "Tier", "checklist", "reproduce"]


def _discover() -> dict[str, Study]:
    studies = {}
    for module in pkgutil.iter_modules(__path__):
        study = getattr(importlib.import_module(f"{__name__}.{module.name}"), "STUDY", None)
        if study is not None:
            studies[study.name] = study
    return dict(sorted(studies.items()))


STUDIES: dict[str, Study] = _discover()


def reproduce(names: list[str], tier: Tier, runs: Path, out: Path, jobs: int, report_only: bool) -> list[Path]:
    """Make the pages of ``names`` (all studies if empty) with their ``claims.json``, the index ``out/README.md``
    and the checklist index ``out/checklist.md``; returns the pages."""
    for name in names:
        if name not in STUDIES:
            raise unknown_choice("study", name, STUDIES)
    chosen = [STUDIES[n] for n in names] if names else list(STUDIES.values())
    if tier is Tier.full and not any(s.full_scale for s in chosen):
        raise BnnpredError("none of these studies has a full (GPU) tier yet: their CPU tier is the papers' scale; "
                           "use --tier cpu")
    pages = []
    for study in chosen:
        r = Reproduction(runs=runs, out=out / study.name, tier=tier, jobs=jobs, report_only=report_only)
        r.out.mkdir(parents=True, exist_ok=True)
        try:
            page = study.make(r)
        except BnnpredError as e:
            if not report_only or names:
                raise
            log.warning("page %s not rebuilt: %s", study.name, e)
            continue
        failures = r.failures_section()
        pages.append(write_text(r.out / "README.md", page if not failures else f"{page.rstrip()}\n\n{failures}"))
        write_json(r.out / "claims.json", {"study": study.name, "tier": tier.value, "claims": claims_json(r.claims)})
    write_text(out / "README.md", index(out))
    checklist(out)
    return pages


def checklist(out: Path) -> Path:
    """Write ``out/checklist.md`` from the pages' ``claims.json`` under ``out`` (no training, no run read)."""
    from bnnpred.reproduce.checklist import checklist_page

    return write_text(out / "checklist.md", checklist_page(out, STUDIES))


def index(out: Path) -> str:
    rows = [f"| [{s.name}/]({s.name}/README.md) | {s.title} | `bnnpred reproduce {s.name}` | {s.cpu_cost} |"
            for s in STUDIES.values() if (out / s.name / "README.md").is_file()]
    return "\n".join([
        "# Reproduced results", "",
        "| page | what | made by | CPU time (2 cores) |", "|---|---|---|---|", *rows, "",
        "Each page states the command, the commit and the date that produced it, the papers' numbers beside ours, "
        "and which of the notes' pass criteria hold. [checklist.md](checklist.md) lists every item of the notes' "
        "checklists with the page and verdicts that answer it. `make reproduce-tables` remakes them all (finished "
        "runs are kept); `bnnpred reproduce --report-only` rebuilds the pages from the run directories without "
        "training.",
    ]) + "\n"
