"""Resumable training: a trainer's state saved atomically, with a checksum, so that a run killed mid-training (a
SIGKILL, a session's end, a cluster preemption) starts again where it was and ends with the same numbers.

A trainer saves at the end of an epoch (any step of a full-batch run) once the session's ``checkpoint_seconds`` have
passed since its last save, and at its last step. The file is named by the stage's digest (the code, data, prior,
start point, generator state and settings; :func:`bnnpred.inference.fit_cache.stage_digest`), so a checkpoint of
another config or code version is never resumed. The previous checkpoint is kept beside the newest: one that does
not verify (truncated, a flipped bit) is ignored with a warning and the previous one, or a fresh start, is used.
The runner removes the checkpoints once the run's result is committed.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from bnnpred.inference.base import Problem, TrainingClock
from bnnpred.inference.fit_cache import stage_digest
from bnnpred.io import CorruptFile, load_checked, save_checked

log = logging.getLogger(__name__)


class Checkpoints:
    """The checkpoints of one stage of one problem (inactive when its session has no ``checkpoints`` folder), and the
    stage's training clock (``clock``), which a checkpoint carries so that a resumed training counts its whole time."""

    def __init__(self, problem: Problem, stage: str, settings: Any):
        folder, self.every = problem.session.checkpoints, problem.session.checkpoint_seconds
        self.identity = None if folder is None else stage_digest(problem, stage, settings)
        self.path = None if folder is None else Path(folder) / f"{stage}-{self.identity}.pt"
        self.last = time.monotonic()
        self.clock = TrainingClock()

    @property
    def previous(self) -> Path:
        return self.path.with_suffix(".prev.pt")

    def load(self) -> dict[str, Any] | None:
        """The newest checkpoint that verifies, or None (start from scratch)."""
        if self.path is None:
            return None
        for path in (self.path, self.previous):
            try:
                state = load_checked(path)
            except FileNotFoundError:
                continue
            except (CorruptFile, OSError) as e:
                log.warning("checkpoint %s ignored: %s", path.name, e)
                continue
            if state.get("identity") != self.identity:  # a valid file of another problem or stage under this name
                log.warning("checkpoint %s ignored: it is of another problem or stage", path.name)
                continue
            log.info("resuming from %s (step %d)", path.name, state["step"])
            self.clock = TrainingClock(before=state.get("seconds", 0.0))
            return state
        return None

    def due(self, at_boundary: bool, last_step: bool) -> bool:
        """Whether to save now: at an epoch boundary once the interval has passed, and at the last step."""
        return self.path is not None and (last_step or (at_boundary and time.monotonic() - self.last >= self.every))

    def save(self, state: dict[str, Any]) -> None:
        """Save ``state`` (tensors, numbers, lists and dicts of them; ``state["step"]`` the steps done), keeping
        the previous checkpoint; a checkpoint that cannot be written costs a warning, not the run."""
        try:
            if self.path.exists():
                self.path.replace(self.previous)
            save_checked(self.path, {**state, "seconds": self.clock.seconds(), "identity": self.identity})
        except OSError as e:
            log.warning("checkpoint %s not written (%s); training goes on", self.path, e.strerror or e)
        self.last = time.monotonic()
