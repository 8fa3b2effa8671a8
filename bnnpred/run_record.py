"""A finished run (or re-evaluation) read back verified: its config, its metrics document and where its files are.

Every reader of run directories (the skip check of ``train``, ``eval``, ``report`` and the study pages) goes
through :func:`read_finished`, so a run whose files are missing, altered or unreadable is never read as finished.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from bnnpred.io import read_json
from bnnpred.run_files import EVALS, REPLACING, locked, problems, recover

log = logging.getLogger(__name__)

RUN_FILES = ("config.yaml", "metrics.json", "posterior.pt")
EVAL_FILES = ("config.yaml", "metrics.json")


class NotFinished(Exception):
    """The folder holds no finished, intact result; the message says why."""


@dataclass(frozen=True)
class FinishedRun:
    folder: Path  # the run directory
    config: DictConfig  # the resolved config it ran with
    document: dict[str, Any]  # metrics.json: {"run": summary, "info": diagnostics, "metrics": split/kind/metric}


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
    if (reason := problems(folder, required)) is not None:
        raise NotFinished(reason)
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
    return FinishedRun(folder=folder, config=config, document=document)


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
