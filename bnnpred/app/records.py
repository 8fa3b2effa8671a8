"""A run's record: the part of a finished run that outlives the machine that made it (issue 38).

A record is a run's small files (:data:`~bnnpred.app.run_record.ALWAYS_RECORDED`, and its training trace, gzipped,
where a page reads it), its re-evaluations' records and its manifest unchanged, so every file it keeps is verified
against the checksum the run wrote; the large files (posterior, predictions, figures) and a trace it leaves out stay
where the run was made, their checksums still listed, their names in :data:`~bnnpred.app.run_files.RECORD`. Study
pages are built from records (committed under ``outputs/<study>/runs/``), and a record copied into a run folder
(:func:`seed_from_record`) reads as that run finished, so a campaign continued on another machine at the same code
skips it (the runner's skip check compares run keys).
"""

from __future__ import annotations

import gzip
import logging
import os
import shutil
from pathlib import Path

from bnnpred.app.report.tables import find_runs
from bnnpred.app.run_files import EVALS, MANIFEST, PACKED, PACKED_FILES, RECORD, locked, recover, stored
from bnnpred.app.run_record import (
    ALWAYS_RECORDED,
    POSTERIOR,
    RECORDED,
    FinishedRun,
    NotFinished,
    evaluations,
    read_finished,
)
from bnnpred.errors import BnnpredError
from bnnpred.io import read_json, write_json

log = logging.getLogger(__name__)

READ = ("config.yaml", "metrics.json")  # what a record must hold to be read


def kept_files(traces: bool) -> tuple[str, ...]:
    """The small files a record keeps: :data:`~bnnpred.app.run_record.ALWAYS_RECORDED`, and the training trace where
    its page reads it (``traces``)."""
    return RECORDED if traces else ALWAYS_RECORDED


def export_record(run_dir: Path, record_dir: Path, keep: tuple[str, ...] = ALWAYS_RECORDED) -> Path:
    """Write the record of the finished run (or record) in ``run_dir`` to ``record_dir``, replacing what is there:
    the files of ``keep`` (of :data:`~bnnpred.app.run_record.RECORDED`; the training trace only where a page reads
    it) that the run has, its manifest and marker, and the records of its finished re-evaluations under
    ``evals/<key>/``; a record exported again with a smaller ``keep`` is trimmed. Written into a dot-folder beside
    and renamed into place; a kill between the two renames leaves the record in dot-folders, which readers skip and
    the next export removes."""
    if not set(ALWAYS_RECORDED) <= set(keep) <= set(RECORDED):
        raise ValueError(f"a record keeps {ALWAYS_RECORDED} and may keep {RECORDED}, not {keep}")
    run = read_finished(run_dir, READ)
    record_dir = Path(record_dir)
    record_dir.parent.mkdir(parents=True, exist_ok=True)
    partial, old = (record_dir.parent / f".{record_dir.name}.{part}" for part in ("partial", "old"))
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    _copy_record(run, partial, keep)
    for evaluation in evaluations(run_dir):
        _copy_record(evaluation, partial / EVALS / evaluation.folder.name, keep)
    if record_dir.exists():
        os.rename(record_dir, old)
    os.rename(partial, record_dir)
    shutil.rmtree(old, ignore_errors=True)
    return record_dir


def _copy_record(run: FinishedRun, to: Path, keep: tuple[str, ...]) -> None:
    listed = read_json(run.folder / MANIFEST)["files"]
    to.mkdir(parents=True)
    kept = [name for name in keep if name in listed and stored(run.folder, name).is_file()]
    for name in kept:
        source = stored(run.folder, name)
        if name not in PACKED_FILES or source.name.endswith(PACKED):
            shutil.copyfile(source, to / source.name)
        else:  # the same bytes for the same file (no name, no time in the header): a record exported again is unchanged
            with open(source, "rb") as f, open(to / f"{name}{PACKED}", "wb") as raw, \
                    gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as packed:
                shutil.copyfileobj(f, packed)
    shutil.copyfile(run.folder / MANIFEST, to / MANIFEST)
    write_json(to / RECORD, {"absent": sorted(set(listed) - set(kept))})


def export_records(runs: Path, records: Path, device: str, keep: tuple[str, ...] = ALWAYS_RECORDED) -> list[Path]:
    """The records (keeping ``keep``: :func:`export_record`) of every finished run of ``device`` under ``runs``,
    written to the same paths under ``records`` (a campaign stopped at its budget keeps what it finished this way);
    where a record there is another training of the run's fit (:func:`same_fit`, not :func:`same_run`), it is kept
    and gains the run's re-evaluations it lacks (:func:`_add_evaluations`). Runs of another device, and folders that
    hold no finished run, are left out with a warning. Returns the records written."""
    written = []
    for run_dir in find_runs([runs]) if runs.is_dir() else []:
        try:
            run = read_finished(run_dir)
        except NotFinished as e:
            log.warning("no record of %s: %s", run_dir, e)
            continue
        if run.config.get("device") != device:
            log.warning("no record of %s: it ran on device=%s, not %s", run_dir, run.config.get("device"), device)
            continue
        record_dir = records / run_dir.relative_to(runs)
        if another_training(run_dir, record_dir):
            _add_evaluations(run_dir, record_dir, keep)
        else:
            export_record(run_dir, record_dir, keep)
        written.append(record_dir)
    return written


def another_training(run_dir: Path, record_dir: Path) -> bool:
    """Whether an intact record in ``record_dir`` is of the finished run's fit (:func:`same_fit`) but was made by
    another training of it (not :func:`same_run`); False where there is no intact record (an export writes one)."""
    if not (Path(record_dir) / MANIFEST).is_file():
        return False
    try:
        return same_fit(run_dir, record_dir) and not same_run(run_dir, record_dir)
    except BnnpredError:
        return False


def same_fit(run_dir: Path, record_dir: Path) -> bool:
    """Whether the record in ``record_dir`` is of the very fit in the finished run in ``run_dir``: the same run key
    and the same checksum of its posterior, all that a re-evaluation reads (the run the record was exported from,
    or the same run trained again to the same bytes on another machine)."""
    run, record = read_finished(run_dir), verify_record(record_dir)
    return (run.document["run"]["key"] == record.document["run"]["key"]
            and read_json(run.folder / MANIFEST)["files"][POSTERIOR]
            == read_json(record.folder / MANIFEST)["files"].get(POSTERIOR))


def same_run(run_dir: Path, record_dir: Path) -> bool:
    """Whether the record in ``record_dir`` was exported from the run in ``run_dir`` (or a copy of it): the same
    checksum of its ``metrics.json``, whose times and finish differ between two trainings of the same fit."""
    return read_json(Path(run_dir) / MANIFEST)["files"]["metrics.json"] == \
        read_json(Path(record_dir) / MANIFEST)["files"]["metrics.json"]


def _add_evaluations(run_dir: Path, record_dir: Path, keep: tuple[str, ...]) -> list[Path]:
    """Write into the record in ``record_dir`` the records of the run's re-evaluations that it lacks, the run being
    another training of the record's fit (:func:`another_training`; on another machine): the record stays the run
    that made it (its times, its finish), and gains re-evaluations of the same posterior bytes. Each is written
    into a dot-folder and renamed into place; returns those written."""
    held = {evaluation.folder.name for evaluation in evaluations(record_dir)}
    written = []
    for evaluation in evaluations(run_dir):
        if (name := evaluation.folder.name) in held:
            continue
        target, partial = Path(record_dir) / EVALS / name, Path(record_dir) / EVALS / f".{name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        _copy_record(evaluation, partial, keep)
        shutil.rmtree(target, ignore_errors=True)  # a broken re-evaluation of that key
        os.rename(partial, target)
        written.append(target)
    return written


def verify_record(record_dir: Path) -> FinishedRun:
    """The record in ``record_dir`` read back, its re-evaluations' records checked too; a folder that is no intact
    record is an error naming it and the fix."""
    runs = []
    for folder in [Path(record_dir), *sorted((Path(record_dir) / EVALS).glob("*/"))]:
        try:
            runs.append(read_finished(folder, READ))
        except NotFinished as e:
            raise BnnpredError(f"the record {folder} is corrupt ({e}); restore it with git checkout -- {folder}, "
                               "or delete it to train that run again") from e
        if not runs[-1].record:
            raise BnnpredError(f"{folder} is not a record (no {RECORD}); records are written by bnnpred reproduce")
    return runs[0]


def seed_from_record(record_dir: Path, run_dir: Path) -> bool:
    """Copy the record in ``record_dir`` into ``run_dir`` unless that folder holds a finished run (a run of this
    machine, with its large files, is never replaced by a record; checked again under the run's lock, so a run
    committed meanwhile is kept); True if copied. The record is verified first."""
    verify_record(record_dir)
    with locked(run_dir):
        recover(run_dir)
        try:
            read_finished(run_dir, READ)
            return False
        except NotFinished:
            pass
        for source in sorted(Path(record_dir).rglob("*"), key=lambda p: (p.name == MANIFEST, str(p))):
            target = run_dir / source.relative_to(record_dir)
            if source.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
                if source.name.endswith(PACKED):  # a broken run's own file of that name would be read in its place
                    target.with_name(source.name.removesuffix(PACKED)).unlink(missing_ok=True)
    return True

