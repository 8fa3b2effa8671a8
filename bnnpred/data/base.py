"""The one interface every dataset returns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from torch import Generator, Tensor


class Task(str, Enum):
    regression = "regression"
    binary = "binary"
    multiclass = "multiclass"
    count = "count"  # non-negative integer targets, Poisson likelihood

    @property
    def classification(self) -> bool:
        """Targets are class labels (int64), not numbers whose mean is predicted (regression, counts)."""
        return self in (Task.binary, Task.multiclass)


@dataclass(frozen=True)
class Dataset:
    """Train / validation / test tensors of one dataset.

    Inputs are float64 ``[N, *input_shape]``; targets are float64 ``[N]`` for regression and counts (whole
    numbers for counts) and int64 ``[N]`` class labels in ``0..n_classes-1`` otherwise. A split may be empty
    (``N = 0``).
    """

    name: str
    task: Task
    n_classes: int  # 1 for regression and counts
    input_shape: tuple[int, ...]
    X_train: Tensor
    y_train: Tensor
    X_valid: Tensor
    y_valid: Tensor
    X_test: Tensor
    y_test: Tensor
    # training-time input transform (x_batch, generator) -> x_batch, e.g. random crops; None: none
    augment: Callable[[Tensor, Generator], Tensor] | None = None
    # per-channel (mean, std) ``[C, 1, 1]`` the raw [0, 1] pixels were standardised with (for OOD sets); None: none
    standardization: tuple[Tensor, Tensor] | None = None
    # std of the training targets that standardised a regression set's y; metrics get original-unit copies
    target_scale: float | None = None

    @property
    def output_dim(self) -> int:
        """Number of network outputs: one for regression, counts (the log rate) and binary (a single logit), C
        otherwise."""
        return self.n_classes if self.task is Task.multiclass else 1

    def split(self, name: str) -> tuple[Tensor, Tensor]:
        """``(X, y)`` of ``"train"``, ``"valid"`` or ``"test"``."""
        return getattr(self, f"X_{name}"), getattr(self, f"y_{name}")
