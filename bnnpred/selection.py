"""Hyperparameter selection inside one run: the prior precision δ (and σ² for regression) chosen by the
Laplace-GGN marginal likelihood on a grid or by gradient ascent, or by validation NLL on a grid.

Because δ and σ² enter the MAP objective, every grid point trains its own network (notes-000 §5.2).
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from bnnpred.errors import BnnpredError

log = logging.getLogger(__name__)


class SelectionMethod(str, Enum):
    none = "none"
    marglik_grid = "marglik_grid"
    marglik_gradient = "marglik_gradient"
    valid_nll = "valid_nll"


@dataclass
class SelectionConfig:
    method: SelectionMethod = SelectionMethod.none
    delta_grid: list[float] = field(default_factory=lambda: [0.01, 0.1, 1.0, 10.0, 100.0])
    sigma2_grid: list[float] | None = None  # regression only; None keeps likelihood.sigma2
    rounds: int = 5  # marglik_gradient: MAP retrainings
    steps: int = 200  # marglik_gradient: Adam steps on the hyperparameters per round
    lr: float = 0.1

    def validate(self) -> None:
        if self.method in (SelectionMethod.marglik_grid, SelectionMethod.valid_nll):
            _check_grid("selection.delta_grid", self.delta_grid)
            if self.sigma2_grid is not None:
                _check_grid("selection.sigma2_grid", self.sigma2_grid)
        if self.method is SelectionMethod.marglik_gradient and not (self.rounds >= 1 and self.steps >= 0
                                                                    and self.lr > 0):
            raise BnnpredError("selection.rounds must be >= 1, steps >= 0 and lr > 0 for marglik_gradient")


@dataclass
class Candidate:
    """One trained point: its hyperparameters, the run's fit object, a row of diagnostics, why its numbers are
    broken (``problems``: the point is not usable; see :mod:`bnnpred.health`) and the broken numbers a user chose to
    keep (``flags``, with ``keep_unhealthy=true``)."""

    delta: float
    sigma2: float | None
    fit: Any
    row: dict[str, float]
    problems: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)


FitAt = Callable[[float, float | None, Any], Candidate]


def select(cfg: SelectionConfig, fit_at: FitAt, delta: float, sigma2: float | None,
           frozen_evidence: Callable[[Candidate], Any] | None = None) -> tuple[Candidate, list[dict]]:
    """Run the configured selection and return the chosen candidate and one row per trained point."""
    if cfg.method is SelectionMethod.none:
        chosen = fit_at(delta, sigma2, None)
        return chosen, [chosen.row]
    if cfg.method is SelectionMethod.marglik_gradient:
        return _gradient(cfg, fit_at, delta, sigma2, frozen_evidence)
    return _grid(cfg, fit_at, sigma2)


def _grid(cfg: SelectionConfig, fit_at: FitAt, sigma2: float | None) -> tuple[Candidate, list[dict]]:
    _check_grid("selection.delta_grid", cfg.delta_grid)
    sigma2s = [sigma2] if sigma2 is None or cfg.sigma2_grid is None else cfg.sigma2_grid
    if cfg.sigma2_grid is not None:
        _check_grid("selection.sigma2_grid", cfg.sigma2_grid)
    key, sign = ("log_marglik", 1.0) if cfg.method is SelectionMethod.marglik_grid else ("valid_nll", -1.0)
    points = list(itertools.product(sigma2s, cfg.delta_grid))
    candidates = []
    for i, (s2, d) in enumerate(points, 1):
        log.info("grid point %d/%d: δ=%g σ²=%s", i, len(points), d, s2)
        cand = fit_at(d, s2, None)
        candidates.append(cand)
        log.info("δ=%g σ²=%s %s=%.4f%s", d, s2, key, cand.row[key], "; " + "; ".join(cand.problems)
                 if cand.problems else "")
    return best_usable(candidates, key, sign), [c.row for c in candidates]


def best_usable(candidates: list[Candidate], key: str, sign: float) -> Candidate:
    """The candidate with the best ``sign · row[key]`` among those that are healthy and whose ``key`` is finite
    (an evidence at a jittered precision is NaN); an error naming each point's reason when there is none."""
    usable = [c for c in candidates if not c.problems and math.isfinite(c.row[key])]
    if not usable:
        reasons = "; ".join(f"δ={c.delta:g}: {', '.join(c.problems) or f'{key} = {c.row[key]}'}" for c in candidates)
        raise BnnpredError(f"no grid point gave a usable fit ({reasons}); change the grid or the training settings, "
                           "or set keep_unhealthy=true to keep flagged fits")
    return max(usable, key=lambda c: sign * c.row[key])


def _gradient(cfg: SelectionConfig, fit_at: FitAt, delta: float, sigma2: float | None,
              frozen_evidence: Callable[[Candidate], Any] | None) -> tuple[Candidate, list[dict]]:
    """MacKay-style alternation: train the MAP, then ascend the evidence at that mode; repeat."""
    from bnnpred.marglik import maximise_evidence

    if frozen_evidence is None:
        raise BnnpredError("selection=marglik_gradient needs a Laplace posterior; use inference=laplace_ggn")
    rows, cand, warm = [], None, None
    for _ in range(cfg.rounds):
        cand = fit_at(delta, sigma2, warm)
        rows.append(cand.row)
        delta, sigma2 = maximise_evidence(frozen_evidence(cand), delta, sigma2, steps=cfg.steps, lr=cfg.lr)
        log.info("evidence ascent: δ=%.4g σ²=%s log evidence=%.4f", delta, sigma2, cand.row["log_marglik"])
        warm = cand.fit.theta
    cand = fit_at(delta, sigma2, warm)
    rows.append(cand.row)
    return cand, rows


def _check_grid(name: str, grid: list[float]) -> None:
    if not grid or any(not v > 0 for v in grid):
        raise BnnpredError(f"{name} must be a non-empty list of positive values, got {list(grid)}")
