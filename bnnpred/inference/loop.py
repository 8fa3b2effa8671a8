"""The one training loop every stepped method runs (MAP, mean-field VI, natural-gradient VI, SLANG): it owns the
minibatches, the progress bar, the trace cadence, the non-finite guard, checkpoint save and resume, and the training
clock; a method writes its step, its state and its trace row (:class:`Trainer`).

A run of ``steps`` steps draws its minibatches from ``problem.generator`` (:func:`~bnnpred.inference.base.batches`),
takes a trace row every ``log_every`` steps and at the last (and at the first, for a method whose stopping rule
compares against it), stops early when the method says so, and saves a checkpoint at an epoch boundary once the
problem's session's ``checkpoint_seconds`` have passed and at the last step (:mod:`bnnpred.inference.checkpoint`). A
checkpoint holds the method's state, the trace, the generator's state, the network's buffers and the training clock,
so a resumed run ends bit for bit where an uninterrupted one ends.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from bnnpred.errors import BnnpredError
from bnnpred.inference.base import Problem, TrainingClock, batches, steps_per_epoch, training_length
from bnnpred.inference.checkpoint import Checkpoints
from bnnpred.progress import progress

Rows = Tensor | slice  # a minibatch's row indices, or every row


class Trainer(ABC):
    """What a method writes for :meth:`Stage.run`."""

    label: str  # the progress bar's and the divergence message's name of the method
    watched: str  # what :meth:`step` returns, e.g. "loss"
    advice: str  # what to change when a step diverges, e.g. "lower inference.lr"

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """Everything besides the loop's own (step, trace, generator, buffers, clock) that a resume needs."""

    @abstractmethod
    def load(self, state: dict[str, Any]) -> None:
        """Take back a :meth:`state` saved by an earlier process."""

    @abstractmethod
    def step(self, t: int, rows: Callable[[], Rows]) -> float:
        """Take step ``t`` (from 1) on the minibatch ``rows()`` (drawn when the method asks, so a method that draws
        its weight samples first keeps its random stream); returns the number named by ``watched`` (the step's loss,
        or one that is not finite when the step diverged)."""

    @abstractmethod
    def row(self, t: int, epoch: float) -> dict[str, float]:
        """The trace row after step ``t``, ``epoch`` passes over the data."""

    def stop(self, t: int, trace: list[dict[str, float]]) -> bool:
        """Whether to stop after step ``t`` (its row, if one was taken, already in ``trace``): never, unless the
        method has a stopping rule."""
        return False


@dataclass
class Trained:
    """What :meth:`Stage.run` hands back: the trace, the steps taken, and the loop's timing
    (:meth:`TrainingClock.timing`)."""

    trace: list[dict[str, float]]
    steps: int
    timing: dict[str, float]


@dataclass
class Length:
    """How long a loop runs: ``steps`` steps on minibatches of ``batch_size`` (None: the full batch), a trace row
    every ``log_every`` steps, and at the first step too with ``first_row``."""

    steps: int
    batch_size: int | None
    log_every: int
    first_row: bool = False

    @classmethod
    def of(cls, N: int, batch_size: int | None, steps: int, epochs: int | None, log_every: int) -> Length:
        """``epochs`` passes over ``N`` examples with a row per epoch when ``epochs`` is set, else ``steps`` steps
        with a row every ``log_every`` (:func:`~bnnpred.inference.base.training_length`)."""
        steps, log_every = training_length(N, batch_size, steps, epochs, log_every)
        return cls(steps, batch_size, log_every)


class Stage:
    """One stage's checkpoints opened before the method prepares its start (the checkpoint's name is the stage's
    digest, which holds the generator's state: a warm start that moves the generator must come after), and the
    loop run on them."""

    def __init__(self, problem: Problem, stage: str, settings: Any):
        self.problem = problem
        self._checkpoints = Checkpoints(problem, stage, settings)
        self._saved = self._checkpoints.load()

    @property
    def resumed(self) -> bool:
        """Whether a checkpoint of this stage was found: the method's start is in it (no warm start to redo)."""
        return self._saved is not None

    def run(self, trainer: Trainer, length: Length) -> Trained:
        """Run ``trainer`` for ``length`` from its checkpoint or from its start; its clock starts here for a fresh
        run (a warm start before it is not the method's training time)."""
        problem, checkpoints = self.problem, self._checkpoints
        trace: list[dict[str, float]] = []
        done = 0
        if (saved := self._saved) is not None:
            problem.generator.set_state(saved["generator"])
            problem.model.load_buffers(saved["buffers"])
            trainer.load(saved["method"])
            trace, done = saved["trace"], saved["step"]
        else:
            checkpoints.clock = TrainingClock()
        N = len(problem.X)
        per_epoch = steps_per_epoch(N, length.batch_size)
        stream = batches(N, length.batch_size, problem.generator)
        t = done
        for t in progress(range(done + 1, length.steps + 1), length.steps - done, trainer.label,
                          problem.session.progress):
            value = trainer.step(t, lambda: next(stream))
            if not math.isfinite(value):
                raise BnnpredError(f"{trainer.label} {trainer.watched} became {value} at step {t}; {trainer.advice}")
            if t % length.log_every == 0 or t == length.steps or (length.first_row and t == 1):
                trace.append(trainer.row(t, t / per_epoch))
            if trainer.stop(t, trace):
                break
            if checkpoints.due(at_boundary=t % per_epoch == 0, last_step=t == length.steps):
                checkpoints.save({"step": t, "method": trainer.state(), "trace": trace,
                                  "generator": problem.generator.get_state(), "buffers": problem.model.buffer_state()})
        return Trained(trace=trace, steps=t, timing=checkpoints.clock.timing(t / per_epoch))


def train(problem: Problem, stage: str, settings: Any, trainer: Trainer, length: Length) -> Trained:
    """:meth:`Stage.run` for a method with no warm start: ``trainer`` on ``problem`` for ``length``, resumed from
    the checkpoint of ``stage`` under ``settings`` if there is one."""
    return Stage(problem, stage, settings).run(trainer, length)


def accumulation(problem: Problem, stage: str, settings: Any) -> Checkpoints:
    """The checkpoints of a long accumulation that keeps its own partial sums between batches (the Kronecker
    factors: :class:`bnnpred.curvature.kron.Resumable`), named as a loop's are."""
    return Checkpoints(problem, stage, settings)
