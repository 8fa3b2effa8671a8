"""A finished run (or re-evaluation) read back verified: its config, its metrics document and where its files are.

Every reader of run directories (the skip check of ``train``, ``eval``, ``report`` and the study pages) goes
through :func:`read_finished`, so a run whose files are missing, altered or unreadable is never read as finished.
A run's record (:mod:`bnnpred.app.records`) reads as finished too, its large files absent (:func:`record_absent`).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from bnnpred.app.run_files import EVALS, RECORD, REPLACING, TRACE, locked, problems, recover
from bnnpred.io import read_json

log = logging.getLogger(__name__)

POSTERIOR = "posterior.pt"  # the saved fit: all that a re-evaluation reads of its run
RUN_FILES = ("config.yaml", "metrics.json", POSTERIOR)
EVAL_FILES = ("config.yaml", "metrics.json")
ALWAYS_RECORDED = ("config.yaml", "metrics.json", "selection.csv")  # the small files every record keeps
RECORDED = (*ALWAYS_RECORDED, TRACE)  # the small files a record may keep
# what every run's summary records and its readers rely on (a table's row, the skip check's key): a record without
# one of them is not a finished run, however its manifest agrees
SUMMARY = ("dataset", "task", "model", "inference", "seed", "key")


class _ConfigLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """libyaml's parser where installed (a config checked as a mapping in about a millisecond; OmegaConf reads it
    when a reader asks for it: :attr:`FinishedRun.config`), refusing a mapping with a key twice as OmegaConf's
    loader does, so a config that passes here is one OmegaConf reads."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        keys = [self.construct_object(key, deep=deep) for key, _ in node.value]
        if len(set(keys)) != len(keys):
            raise yaml.constructor.ConstructorError(None, None, "a key is given twice", node.start_mark)
        return super().construct_mapping(node, deep=deep)


class NotFinished(Exception):
    """The folder holds no finished, intact result; the message says why."""


@dataclass(frozen=True)
class FinishedRun:
    folder: Path  # the run directory
    document: dict[str, Any]  # metrics.json: {"run": summary, "info": diagnostics, "metrics": split/kind/metric}
    record: bool = False  # a record: the large files stayed on the machine that made the run

    @functools.cached_property
    def config(self) -> DictConfig:
        """The resolved config it ran with, made on first use: most readers (tables, pages, the skip check) need
        only metrics.json, and OmegaConf's own YAML reading and wrapping was most of a page's rebuild (525 records:
        about 18 ms each)."""
        return OmegaConf.load(self.folder / "config.yaml")


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
        config = yaml.load((folder / "config.yaml").read_bytes(), Loader=_ConfigLoader)
    except (OSError, ValueError, TypeError, yaml.YAMLError) as e:
        raise NotFinished("config.yaml is not a readable config") from e
    try:
        document = read_json(folder / "metrics.json")
    except (OSError, ValueError) as e:
        raise NotFinished("metrics.json is not readable JSON") from e
    if not (isinstance(config, dict) and isinstance(document, dict)
            and isinstance(document.get("run"), dict) and isinstance(document.get("metrics"), dict)):
        raise NotFinished("config.yaml or metrics.json does not hold a run")
    if missing := [name for name in SUMMARY if document["run"].get(name) is None]:
        raise NotFinished(f"metrics.json records no {', '.join(missing)}")
    return FinishedRun(folder=folder, document=document, record=absent is not None)


def record_absent(folder: Path) -> tuple[str, ...] | None:
    """The files a record in ``folder`` left on the machine that made its run (None: not a record); they may be
    missing, never any other file, and never one that every record keeps (:data:`ALWAYS_RECORDED`)."""
    marker = folder / RECORD
    if not marker.is_file():
        return None
    try:
        absent = read_json(marker)["absent"]
        if not (isinstance(absent, list) and all(isinstance(n, str) and n not in ALWAYS_RECORDED for n in absent)):
            raise TypeError
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise NotFinished(f"its {RECORD} is unreadable") from e
    return tuple(absent)


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
