"""Grid selection keeps only the best point's fit in memory and picks it; ties go to the first point."""

import gc
import weakref

import pytest
from torch import nn

from bnnpred.curvature.functional import FlatModel
from bnnpred.errors import BnnpredError
from bnnpred.prior import Prior, PriorConfig
from bnnpred.selection import Candidate, SelectionConfig, SelectionMethod, select

SCORES = {0.1: -5.0, 1.0: -2.0, 10.0: -2.0, 100.0: float("nan")}  # δ = 1 and 10 tie; 100's evidence is NaN


class FakeFit:
    def __init__(self, delta: float):
        self.delta = delta


MADE: dict[float, weakref.ref] = {}


def fake_fit_at(prior: Prior, sigma2, warm) -> Candidate:
    fit = FakeFit(prior.delta)
    MADE[prior.delta] = weakref.ref(fit)
    return Candidate(prior=prior, sigma2=sigma2, fit=fit, row={"delta": prior.delta},
                     log_evidence=SCORES[prior.delta])


def test_the_grid_keeps_only_the_best_fit_and_picks_it():
    prior = Prior.from_config(FlatModel(nn.Linear(2, 1)), PriorConfig())
    cfg = SelectionConfig(method=SelectionMethod.marglik_grid, delta_grid=list(SCORES))
    chosen, rows = select(cfg, fake_fit_at, prior, None)
    assert chosen.delta == 1.0 and chosen.fit.delta == 1.0
    assert [r["delta"] for r in rows] == list(SCORES)
    gc.collect()
    assert {d for d, ref in MADE.items() if ref() is not None} == {1.0}  # the other fits were released


def test_no_usable_point_is_one_error_naming_each_score():
    prior = Prior.from_config(FlatModel(nn.Linear(2, 1)), PriorConfig())
    cfg = SelectionConfig(method=SelectionMethod.marglik_grid, delta_grid=[100.0])
    with pytest.raises(BnnpredError, match=r"no grid point gave a usable fit \(δ=100: log_marglik = nan\)"):
        select(cfg, fake_fit_at, prior, None)
