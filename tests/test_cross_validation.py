"""selection=cv_nll: the K-fold cross-validated NLL of the training split (notes-002 §3.3's score), and
objective=cv_nll, the score an optimising sweeper (Bayesian optimisation with Optuna) minimises."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from bnnpred.app.compose import compose
from bnnpred.app.run_checks import check_config
from bnnpred.app.run_setup import setup, typed
from bnnpred.app.runner import train
from bnnpred.cli import sweep_objective
from bnnpred.errors import BnnpredError
from bnnpred.io import load_torch

# a linear-Gaussian model (no hidden layer) on the cubic toy, its MAP finished by L-BFGS to a 1e-11 gradient
LINEAR = ["dataset=cubic", "model=mlp", "model.depth=0", "inference=laplace_ggn", "inference.structure=full",
          "inference.map.steps=300", "inference.map.finish=lbfgs", "inference.map.finish_tol=1e-11",
          "predictive=closed", "dtype=float64", "likelihood.sigma2=4", "plot.enabled=false", "progress=false",
          "fit_cache=null"]
EXACT = [*LINEAR, "selection=cv_nll", "selection.folds=3"]


def blr_cv_nll(X: torch.Tensor, y: torch.Tensor, delta: float, sigma2: float, folds: list[torch.Tensor]) -> float:
    """Bayesian linear regression on features [x, 1] fitted on all folds but one, its Gaussian predictive NLL on
    that one (noise included), per held-out example over the folds: the closed form that cv_nll must equal on a
    linear-Gaussian model (Laplace-GGN there is exact, notes-000 Thm 3.1)."""
    Phi = torch.cat([X, torch.ones(len(X), 1, dtype=X.dtype)], 1)
    total = 0.0
    for k, held in enumerate(folds):
        kept = torch.cat([f for j, f in enumerate(folds) if j != k])
        precision = Phi[kept].T @ Phi[kept] / sigma2 + delta * torch.eye(2, dtype=X.dtype)
        mean = torch.linalg.solve(precision, Phi[kept].T @ y[kept] / sigma2)
        var = (Phi[held] @ torch.linalg.solve(precision, Phi[held].T)).diagonal() + sigma2
        total += float(0.5 * (torch.log(2 * math.pi * var) + (y[held] - Phi[held] @ mean) ** 2 / var).sum())
    return total / len(X)


def test_cv_nll_on_a_linear_gaussian_model_is_the_closed_form_k_fold_score_of_blr(tmp_path):
    cfg = compose([*EXACT, "selection.delta_grid=[0.5,50]"])
    train(cfg, tmp_path)
    rows = pd.read_csv(tmp_path / "selection.csv").set_index("delta")
    data = setup(typed(cfg)).data
    order = torch.randperm(len(data.X_train), generator=torch.Generator().manual_seed(cfg.seed))
    folds = list(torch.tensor_split(order, 3))
    for delta in (0.5, 50.0):
        expected = blr_cv_nll(data.X_train, data.y_train, delta, 4.0, folds)
        assert rows.loc[delta, "cv_nll"] == pytest.approx(expected, rel=1e-7, abs=1e-9)


def test_cv_nll_picks_the_prior_with_the_better_held_out_fit_and_reports_it_as_the_sweep_objective(tmp_path):
    """δ = 1e4 pins the line's slope to 0 on a cubic's data: every fold's held-out NLL is worse, so δ = 1 is chosen;
    the chosen point's score is in the run's info and is what objective=cv_nll returns to the sweeper."""
    cfg = compose([*EXACT, "selection.delta_grid=[1,10000]", "objective=cv_nll"])
    document = train(cfg, tmp_path).document
    rows = pd.read_csv(tmp_path / "selection.csv").set_index("delta")
    assert rows.loc[1.0, "cv_nll"] < rows.loc[10000.0, "cv_nll"]
    assert document["run"]["delta"] == 1.0
    assert document["info"]["cv_nll"] == pytest.approx(rows.loc[1.0, "cv_nll"], rel=1e-12)
    assert sweep_objective(cfg, document) == document["info"]["cv_nll"]


def test_cross_validation_leaves_the_fit_on_all_rows_as_it_is_without_it(tmp_path):
    """The folds' fits run before the fit on all rows and leave no state behind: θ* is the same bit for bit."""
    train(compose([*EXACT, "selection.delta_grid=[0.5]"]), tmp_path / "cv")
    train(compose([*LINEAR, "selection=none", "prior.delta=0.5"]), tmp_path / "none")
    with_cv, without = (load_torch(tmp_path / name / "posterior.pt")["theta"] for name in ("cv", "none"))
    assert torch.equal(with_cv, without)


@pytest.mark.parametrize(("overrides", "message"), [
    (["selection=cv_nll", "selection.folds=1"],
     "selection.folds must be >= 2 for cv_nll, got 1; e.g. selection.folds=5"),
    (["objective=cv_nll"], "objective=cv_nll returns the cross-validated NLL that selection=cv_nll computes"),
])
def test_bad_cross_validation_settings_are_one_line_errors(overrides, message):
    with pytest.raises(BnnpredError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_config(typed(compose(["dataset=cubic", *overrides])))


def test_more_folds_than_training_rows_is_a_one_line_error(tmp_path):
    with pytest.raises(BnnpredError, match="selection.folds = 1000 exceeds the 30 training rows; use selection.folds"):
        train(compose([*EXACT, "selection.folds=1000", "selection.delta_grid=[1]"]), tmp_path)
