"""A finished run (or re-evaluation) read back verified: its config, its metrics document and where its files are;
and a run's record, the part of it that outlives the machine that made it.

Every reader of run directories (the skip check of ``train``, ``eval``, ``report`` and the study pages) goes
through :func:`read_finished`, so a run whose files are missing, altered or unreadable is never read as finished.

A record (:func:`export_record`) is a run's small files (:data:`RECORDED`), its re-evaluations' records and its
manifest unchanged, so every file it keeps is verified against the checksum the run wrote; the large files
(posterior, predictions, figures) stay where the run was made, their checksums still listed. Study pages are built
from records (committed under ``outputs/<study>/runs/``), and a record copied into a run folder
(:func:`seed_from_record`) counts as that run finished, so a campaign continued on another machine skips it.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from bnnpred.errors import BnnpredError
from bnnpred.io import read_json, write_json
from bnnpred.run_files import EVALS, MANIFEST, RECORD, REPLACING, locked, problems, recover

log = logging.getLogger(__name__)

RUN_FILES = ("config.yaml", "metrics.json", "posterior.pt")
EVAL_FILES = ("config.yaml", "metrics.json")
RECORDED = ("config.yaml", "metrics.json", "selection.csv", "trace.csv")  # the small files a record keeps


class NotFinished(Exception):
    """The folder holds no finished, intact result; the message says why."""


@dataclass(frozen=True)
class FinishedRun:
    folder: Path  # the run directory
    config: DictConfig  # the resolved config it ran with
    document: dict[str, Any]  # metrics.json: {"run": summary, "info": diagnostics, "metrics": split/kind/metric}
    record: bool = False  # a record: the large files stayed on the machine that made the run


def read_finished(run_dir: Path, required: tuple[str, ...] = RUN_FILES) -> FinishedRun:
    """The verified result in ``run_dir`` (completing a commit that a killed process left unfinished);
    ``NotFinished`` with the reason otherwise."""
    folder = Path(run_dir)
    if (folder / REPLACING).exists():
        try:
            with locked(folder, wait=False):
                recover(folder)
        except OSError as e:
            raise NotFinished("its files are being replaced by another process") from e
    absent = record_absent(folder)
    if (reason := problems(folder, required, absent_ok=absent or ())) is not None:
        raise NotFinished(reason if absent is None else f"its record's {reason}")
    try:
        config = OmegaConf.load(folder / "config.yaml")
    except (OSError, ValueError, OmegaConfBaseException, yaml.YAMLError) as e:
        raise NotFinished("config.yaml is not a readable config") from e
    try:
        document = read_json(folder / "metrics.json")
    except (OSError, ValueError) as e:
        raise NotFinished("metrics.json is not readable JSON") from e
    if not (isinstance(config, DictConfig) and isinstance(document, dict)
            and isinstance(document.get("run"), dict) and isinstance(document.get("metrics"), dict)):
        raise NotFinished("config.yaml or metrics.json does not hold a run")
    return FinishedRun(folder=folder, config=config, document=document, record=absent is not None)


def record_absent(folder: Path) -> tuple[str, ...] | None:
    """The files a record in ``folder`` left on the machine that made its run (None: not a record); they may be
    missing, never any other file, and only large files (not :data:`RECORDED`) can be left."""
    marker = folder / RECORD
    if not marker.is_file():
        return None
    try:
        absent = read_json(marker)["absent"]
        if not (isinstance(absent, list) and all(isinstance(n, str) and n not in RECORDED for n in absent)):
            raise TypeError
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise NotFinished(f"its {RECORD} is unreadable") from e
    return tuple(absent)


def export_record(run_dir: Path, record_dir: Path) -> Path:
    """Write the record of the finished run (or record) in ``run_dir`` to ``record_dir``, replacing what is there:
    its :data:`RECORDED` files, its manifest and :data:`~bnnpred.run_files.RECORD`, and the records of its finished
    re-evaluations under ``evals/<key>/``. Written beside and renamed into place, so a killed export leaves the
    previous record or the new one."""
    run = read_finished(run_dir, ("config.yaml", "metrics.json"))
    record_dir = Path(record_dir)
    record_dir.parent.mkdir(parents=True, exist_ok=True)
    partial = record_dir.parent / f".{record_dir.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    _copy_record(run, partial)
    for evaluation in evaluations(run_dir):
        _copy_record(evaluation, partial / EVALS / evaluation.folder.name)
    old = record_dir.parent / f".{record_dir.name}.old"
    shutil.rmtree(old, ignore_errors=True)
    if record_dir.exists():
        os.rename(record_dir, old)
    os.rename(partial, record_dir)
    shutil.rmtree(old, ignore_errors=True)
    return record_dir


def _copy_record(run: FinishedRun, to: Path) -> None:
    listed = read_json(run.folder / MANIFEST)["files"]
    to.mkdir(parents=True)
    kept = [name for name in RECORDED if name in listed and (run.folder / name).is_file()]
    for name in kept:
        shutil.copyfile(run.folder / name, to / name)
    shutil.copyfile(run.folder / MANIFEST, to / MANIFEST)
    write_json(to / RECORD, {"absent": sorted(set(listed) - set(kept))})


def verify_record(record_dir: Path) -> FinishedRun:
    """The record in ``record_dir`` read back, its re-evaluations' records checked too; a record that fails its
    checksums or cannot be read is an error naming the file and the fix."""
    folders = [Path(record_dir), *sorted((Path(record_dir) / EVALS).glob("*/"))]
    for folder in folders:
        try:
            run = read_finished(folder, ("config.yaml", "metrics.json"))
        except NotFinished as e:
            raise BnnpredError(f"the record {folder} is corrupt ({e}); restore it with git checkout -- {folder}, "
                               "or delete it to train that run again") from e
        if not run.record:
            raise BnnpredError(f"{folder} is not a record (no {RECORD}); records are written by bnnpred reproduce")
    return read_finished(record_dir, ("config.yaml", "metrics.json"))


def seed_from_record(record_dir: Path, run_dir: Path) -> bool:
    """Copy the record in ``record_dir`` into ``run_dir`` unless that folder holds a finished run already (a run
    of this machine, with its large files, is never replaced by a record); True if copied. The record is verified
    first: one that fails its checksums is an error naming the file."""
    verify_record(record_dir)
    try:
        read_finished(run_dir, ("config.yaml", "metrics.json"))
        return False
    except NotFinished:
        pass
    with locked(run_dir):
        recover(run_dir)
        for source in sorted(Path(record_dir).rglob("*"), key=lambda p: (p.name == MANIFEST, str(p))):
            target = run_dir / source.relative_to(record_dir)
            if source.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
    return True


def has_result_files(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds anything of a result (so that a broken one is worth a warning)."""
    return any((Path(run_dir) / name).exists() for name in (*RUN_FILES, "manifest.json"))


def evaluations(run_dir: Path) -> list[FinishedRun]:
    """The run's verified re-evaluations (``bnnpred eval``), by key; broken ones are skipped with a warning."""
    found = []
    for folder in sorted((Path(run_dir) / EVALS).glob("*/")):
        try:
            found.append(read_finished(folder, EVAL_FILES))
        except NotFinished as e:
            log.warning("skipping re-evaluation %s: %s", folder, e)
    return found
