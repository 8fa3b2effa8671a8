"""Hyperparameter selection inside one run: the prior precision δ (and σ² for regression) chosen by the
Laplace-GGN marginal likelihood on a grid or by gradient ascent, or by the held-out NLL on a grid: of the validation
split, or K-fold cross-validated on the training split (notes-002 §3.3's score; its Bayesian optimisation over the
same score is ``hydra/sweeper=optuna objective=cv_nll`` with a one-point grid per trial).

Because δ and σ² enter the MAP objective, every grid point trains its own network (notes-000 §5.2).
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from bnnpred.errors import BnnpredError
from bnnpred.prior import Prior

log = logging.getLogger(__name__)


class SelectionMethod(str, Enum):
    none = "none"
    marglik_grid = "marglik_grid"
    marglik_gradient = "marglik_gradient"
    valid_nll = "valid_nll"
    cv_nll = "cv_nll"


HELD_OUT = (SelectionMethod.valid_nll, SelectionMethod.cv_nll)  # scored by a held-out NLL (minimised)


@dataclass
class SelectionConfig:
    method: SelectionMethod = SelectionMethod.none
    # null: the configured prior.delta alone (an optimising sweeper samples it, one point per trial)
    delta_grid: list[float] | None = field(default_factory=lambda: [0.01, 0.1, 1.0, 10.0, 100.0])
    sigma2_grid: list[float] | None = None  # regression only; None keeps likelihood.sigma2
    rounds: int = 5  # marglik_gradient: MAP retrainings
    steps: int = 200  # marglik_gradient: Adam steps on the hyperparameters per round
    lr: float = 0.1
    folds: int = 5  # cv_nll: K, the training split's seeded folds

    def validate(self) -> None:
        if self.method is SelectionMethod.cv_nll and not self.folds >= 2:
            raise BnnpredError(f"selection.folds must be >= 2 for cv_nll, got {self.folds}; e.g. selection.folds=5")
        if self.method in (SelectionMethod.marglik_grid, *HELD_OUT):
            if self.delta_grid is not None:
                _check_grid("selection.delta_grid", self.delta_grid)
            if self.sigma2_grid is not None:
                _check_grid("selection.sigma2_grid", self.sigma2_grid)
        if self.method is SelectionMethod.marglik_gradient and not (self.rounds >= 1 and self.steps >= 0
                                                                    and self.lr > 0):
            raise BnnpredError("selection.rounds must be >= 1, steps >= 0 and lr > 0 for marglik_gradient")


@dataclass
class Candidate:
    """One trained point: its prior and noise, the run's fit object, its selection scores (the fit's log evidence,
    its validation NLL: None where not computed), a row of diagnostics for ``selection.csv``, why its numbers are
    broken (``problems``: the point is not usable; see :mod:`bnnpred.app.health`) and the broken numbers a user chose to
    keep (``flags``, with ``keep_unhealthy=true``)."""

    prior: Prior
    sigma2: float | None
    fit: Any
    row: dict[str, float]
    log_evidence: float | None = None
    valid_nll: float | None = None
    cv_nll: float | None = None
    problems: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)

    @property
    def delta(self) -> float:
        return self.prior.delta

    def score(self, method: SelectionMethod) -> float:
        """The value selection maximises: the log evidence, or minus the held-out NLL (NaN when missing)."""
        value = getattr(self, method.value) if method in HELD_OUT else self.log_evidence
        if value is None:
            return math.nan
        return -value if method in HELD_OUT else value


FitAt = Callable[[Prior, float | None, Any], Candidate]


def select(cfg: SelectionConfig, fit_at: FitAt, prior: Prior, sigma2: float | None) -> tuple[Candidate, list[dict]]:
    """Run the configured selection from ``prior`` and ``sigma2``; return the chosen candidate and one row per
    trained point."""
    if cfg.method is SelectionMethod.none:
        chosen = fit_at(prior, sigma2, None)
        return chosen, [chosen.row]
    if cfg.method is SelectionMethod.marglik_gradient:
        return _gradient(cfg, fit_at, prior, sigma2)
    return _grid(cfg, fit_at, prior, sigma2)


def _grid(cfg: SelectionConfig, fit_at: FitAt, prior: Prior, sigma2: float | None) -> tuple[Candidate, list[dict]]:
    """Every free group of the prior at each δ of the grid (a shared value; no grid: the prior's own δ), times each
    σ² of its grid."""
    deltas = [prior.delta] if cfg.delta_grid is None else cfg.delta_grid
    _check_grid("selection.delta_grid", deltas)
    sigma2s = [sigma2] if sigma2 is None or cfg.sigma2_grid is None else cfg.sigma2_grid
    if cfg.sigma2_grid is not None:
        _check_grid("selection.sigma2_grid", cfg.sigma2_grid)
    points = list(itertools.product(sigma2s, deltas))
    candidates: list[Candidate] = []
    best: Candidate | None = None
    for i, (s2, d) in enumerate(points, 1):
        log.info("grid point %d/%d: δ=%g σ²=%s", i, len(points), d, s2)
        cand = fit_at(prior.at(d), s2, None)
        log.info("δ=%g σ²=%s score=%.4f%s", d, s2, cand.score(cfg.method), "; " + "; ".join(cand.problems)
                 if cand.problems else "")
        if usable(cand, cfg.method) and (best is None or cand.score(cfg.method) > best.score(cfg.method)):
            best = cand
        # only the best usable point so far keeps its fit: a full posterior and its curvature are P x P each
        candidates = [c if c is best else replace(c, fit=None) for c in [*candidates, cand]]
    return best_usable(candidates, cfg.method), [c.row for c in candidates]


def best_usable(candidates: list[Candidate], method: SelectionMethod) -> Candidate:
    """The candidate with the best score among those that are healthy and whose score is finite (an evidence at a
    jittered precision is NaN); an error naming each point's reason when there is none."""
    kept = [c for c in candidates if usable(c, method)]
    if not kept:
        name, value = (method.value, method.value) if method in HELD_OUT else ("log_marglik", "log_evidence")
        reasons = "; ".join(f"δ={c.delta:g}: {', '.join(c.problems) or f'{name} = {getattr(c, value)}'}"
                            for c in candidates)
        raise BnnpredError(f"no grid point gave a usable fit ({reasons}); change the grid or the training settings, "
                           "or set keep_unhealthy=true to keep flagged fits")
    return max(kept, key=lambda c: c.score(method))


def usable(candidate: Candidate, method: SelectionMethod) -> bool:
    """Healthy, with a finite score (an evidence at a jittered precision is NaN)."""
    return not candidate.problems and math.isfinite(candidate.score(method))


def _gradient(cfg: SelectionConfig, fit_at: FitAt, prior: Prior, sigma2: float | None
              ) -> tuple[Candidate, list[dict]]:
    """MacKay-style alternation: train the MAP, then ascend the evidence at that mode in every free group's δ (and
    σ²); repeat."""
    from bnnpred.laplace_evidence import maximise_evidence

    rows, warm = [], None
    for _ in range(cfg.rounds):
        cand = fit_at(prior, sigma2, warm)
        rows.append(cand.row)
        if cand.fit.evidence is None:
            raise BnnpredError("selection=marglik_gradient needs a Laplace posterior; use inference=laplace_ggn")
        prior, sigma2 = maximise_evidence(cand.fit.evidence, prior, sigma2, steps=cfg.steps, lr=cfg.lr)
        log.info("evidence ascent: δ=%.4g σ²=%s log evidence=%.4f", prior.delta, sigma2, cand.fit.evidence.value)
        warm = cand.fit.theta
    cand = fit_at(prior, sigma2, warm)
    rows.append(cand.row)
    return cand, rows


def _check_grid(name: str, grid: list[float]) -> None:
    if not grid or any(not v > 0 for v in grid):
        raise BnnpredError(f"{name} must be a non-empty list of positive values, got {list(grid)}")
