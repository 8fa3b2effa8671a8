"""MAP training's full-batch L-BFGS finish (issue 22, Build 4)."""

import pytest
import torch

from bnnpred.errors import BnnpredError
from bnnpred.inference.map import MapConfig, Schedule, train_map
from tests.helpers import tiny_problem


def newton_optimum(problem) -> torch.Tensor:
    """The MAP of Bayesian logistic regression by Newton's method to machine precision (float64)."""
    X1 = torch.cat([problem.X, torch.ones(len(problem.X), 1, dtype=problem.X.dtype)], 1)  # the linear model's bias
    w = torch.zeros(X1.shape[1], dtype=torch.float64)
    delta = problem.prior_precision[0]
    for _ in range(50):
        p = torch.sigmoid(X1 @ w)
        grad = X1.T @ (problem.y - p) - delta * w
        H = X1.T @ (X1 * (p * (1 - p)).unsqueeze(1)) + delta * torch.eye(len(w), dtype=torch.float64)
        w = w + torch.linalg.solve(H, grad)
    return w, H


def test_lbfgs_finish_reaches_its_tolerance_at_the_known_optimum_of_logistic_regression():
    """30 Adam steps leave the gradient far from zero; the finish brings it to ≤ 1e-7 and θ to Newton's optimum
    within ‖H⁻¹‖·1e-7 (the tolerance through the curvature), the final norm recorded. (Below about 1e-8 the line
    search cannot see the loss fall in float64: the loss is ~30, its changes g²/H.)"""
    problem, _ = tiny_problem("bernoulli", depth=0, n=60, d=3, delta=0.5)
    problem.X, problem.theta0 = problem.X.double(), problem.theta0.double()
    problem.prior_precision = problem.prior_precision.double()
    problem.model.module.double()
    w_star, H = newton_optimum(problem)
    adam_only = train_map(problem, MapConfig(steps=30, lr=0.01, schedule=Schedule.constant))
    assert adam_only.info["grad_norm"] > 1e-2
    tol = 1e-7
    fit = train_map(problem, MapConfig(steps=30, lr=0.01, schedule=Schedule.constant, lbfgs_tol=tol))
    assert fit.info["lbfgs_converged"] == 1.0 and fit.info["grad_norm"] <= tol
    bound = tol / float(torch.linalg.eigvalsh(H)[0])
    assert float((fit.theta - w_star).norm()) <= bound + 1e-12


@pytest.mark.parametrize("value", [0.0, -1e-6])
def test_a_non_positive_lbfgs_tolerance_is_a_clear_error(value):
    with pytest.raises(BnnpredError, match=r"inference.map.lbfgs_tol must be positive.*e.g. 1e-6"):
        MapConfig(lbfgs_tol=value).validate()
