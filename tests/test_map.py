"""MAP training's full-batch finishes, L-BFGS and Newton-CG (issue 22, Build 4), and notes-001's tempered MAP
control (issue 18)."""

import dataclasses

import pytest
import torch
from omegaconf import OmegaConf

from bnnpred.app.compose import compose
from bnnpred.curvature.functional import FlatModel
from bnnpred.errors import BnnpredError
from bnnpred.inference import map_finish
from bnnpred.inference.base import Problem
from bnnpred.inference.map import MapConfig, Schedule, train_map
from bnnpred.inference.map_finish import Finish, _armijo, log_joint_grad_norm, sum_neg_log_joint
from bnnpred.inference.mean_field import kl_to_prior
from bnnpred.likelihoods import Categorical
from bnnpred.models.mlp import MLPConfig, build_mlp
from bnnpred.prior import Prior
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


@pytest.mark.parametrize("finish", list(Finish))
def test_the_finish_reaches_its_tolerance_at_the_known_optimum_of_logistic_regression(finish):
    """30 Adam steps leave the gradient far from zero; the finish brings it to ≤ 1e-7 and θ to Newton's optimum
    within ‖H⁻¹‖·1e-7 (the tolerance through the curvature), the final norm recorded. (Below about 1e-8 the line
    search cannot see the loss fall in float64: the loss is ~30, its changes g²/H.) On a linear model the GGN is
    the Hessian, so the preconditioner is exact and CG takes one step: quadratic convergence, a handful of steps."""
    problem, _ = tiny_problem("bernoulli", depth=0, n=60, d=3, delta=0.5)
    problem.X, problem.theta0 = problem.X.double(), problem.theta0.double()
    problem.prior_precision = problem.prior_precision.double()
    problem.model.module.double()
    w_star, H = newton_optimum(problem)
    adam_only = train_map(problem, MapConfig(steps=30, lr=0.01, schedule=Schedule.constant))
    assert adam_only.info["grad_norm"] > 1e-2
    tol = 1e-7
    fit = train_map(problem, MapConfig(steps=30, lr=0.01, schedule=Schedule.constant, finish=finish, finish_tol=tol))
    assert fit.info["finish_converged"] == 1.0 and fit.info["grad_norm"] <= tol
    if finish is Finish.newton:
        assert fit.info["finish_iterations"] <= 6
    bound = tol / float(torch.linalg.eigvalsh(H)[0])
    assert float((fit.theta - w_star).norm()) <= bound + 1e-12


def test_the_line_search_refuses_a_shortened_step_that_leaves_the_objective_equal(monkeypatch):
    """At the optimum of logistic regression, a descent direction of length 1e-3 along the (rounding-sized)
    gradient overshoots at t = 1; after ~30 halvings the step is ~1e-12 long and the objective is equal in float64,
    which passes ``f ≤ f₀ + c·t·gᵀd`` on rounding alone. Accepting it stalled the Newton finish at its iteration
    cap (one run: ‖∇‖ ≈ 1e-8 for 2,000 iterations of 2.9 s); the search now reports no step, so Newton raises its
    damping and ends. A shortened step that lowers the objective, even by one rounding, is taken, and a full step
    on equality (it shrinks the gradient). Which shortened steps round lower depends on the machine's arithmetic,
    so the objective here is set per step: overshooting at t = 1, then as given."""
    value, slope, theta, step = 34.8, -1.8e-18, torch.zeros(1, dtype=torch.float64), torch.ones(1, dtype=torch.float64)

    def searched(at_shorter_steps: dict[float, float]) -> float | None:
        objective = {1.0: value + 1.0, **at_shorter_steps}
        monkeypatch.setattr(map_finish, "sum_neg_log_joint",
                            lambda problem, at: torch.tensor(objective.get(float(at[0]), value)))
        return _armijo(None, theta, step, value, slope)

    assert searched({}) is None  # every shortened step leaves it equal
    assert searched({2.0**-27: value - 7e-15}) == 2.0**-27  # one rounding lower at the 27th halving
    assert searched({1.0: value}) == 1.0  # a full step on equality


@pytest.mark.parametrize("value", [0.0, -1e-6])
def test_a_non_positive_finish_tolerance_is_a_clear_error(value):
    with pytest.raises(BnnpredError, match=r"inference.map.finish_tol must be positive.*e.g. 1e-6"):
        MapConfig(finish_tol=value).validate()


def test_newton_finish_makes_a_smooth_network_stationary():
    """A tanh MLP on a Gaussian regression (smooth log joint, GGN ≠ Hessian): from 50 Adam steps, the
    Newton finish reaches gradient norm 1e-6 within its 50 iterations and lowers the log joint; the recorded norm is
    the one the health check measures."""
    problem, _ = tiny_problem("gaussian", depth=1, n=40, d=2, delta=1.0)
    problem.X, problem.y, problem.theta0 = problem.X.double(), problem.y.double(), problem.theta0.double()
    problem.prior_precision = problem.prior_precision.double()
    problem.model.module.double()
    adam = MapConfig(steps=50, lr=0.01, schedule=Schedule.constant)
    start = train_map(problem, adam)
    fit = train_map(problem, dataclasses.replace(adam, finish=Finish.newton, finish_tol=1e-6, finish_iterations=50))
    assert start.info["grad_norm"] > 1e-2
    assert fit.info["finish_converged"] == 1.0 and fit.info["grad_norm"] <= 1e-6
    assert fit.info["grad_norm"] == pytest.approx(log_joint_grad_norm(problem, fit.theta), rel=1e-6, abs=1e-9)
    assert float(sum_neg_log_joint(problem, fit.theta)) < float(sum_neg_log_joint(problem, start.theta))


def test_a_newton_finish_asked_for_less_than_float64_can_give_ends_where_it_is():
    """A tolerance below the gradient's float64 floor (about 4e-15 here): the finish ends there within a few steps
    of reaching it, unconverged, instead of running to its iteration cap. It once cycled between a line search that
    could not see the log joint fall and a damped step that moved θ by nothing but left it equal (2,000 iterations,
    95 s, on this problem); below the log joint's rounding a full step must now halve the gradient."""
    problem, _ = tiny_problem("gaussian", depth=1, n=40, d=2, delta=1.0)
    problem.X, problem.y, problem.theta0 = problem.X.double(), problem.y.double(), problem.theta0.double()
    problem.prior_precision = problem.prior_precision.double()
    problem.model.module.double()
    adam = MapConfig(steps=50, lr=0.01, schedule=Schedule.constant)
    fit = train_map(problem, dataclasses.replace(adam, finish=Finish.newton, finish_tol=1e-15,
                                                 finish_iterations=2000))
    assert fit.info["finish_converged"] == 0.0 and fit.info["grad_norm"] < 1e-13
    assert fit.info["finish_iterations"] < 100


def test_the_tempered_map_control_is_map_at_beta_times_the_prior_precision():
    r"""notes-001's tempered ELBO ``E_q log p(y | θ) − β KL(q ‖ p)`` (eq. 10; per example, eq. 29) depends on the
    mean only through ``log p(y | µ) − β ½ µᵀΔµ`` (eq. 11's mean term; VI's and VL's likelihood terms aside): the
    objective of a MAP whose prior precision is ``β·Δ``, i.e. whose prior *variance* is scaled by ``1/β`` (issue
    18's "prior precision scaled by 1/β" read as the variance: at β = 0.1 the control's weight decay is ten times
    weaker than the untempered MAP's). ``experiment=notes001_fmnist_map_tempered`` is that control: its config is
    notes001_fmnist_map's but for ``prior.delta = β·δ`` with VL's β and δ, so its precision vector is exactly
    ``β·Δ``; and Adam on the control's MAP objective gives the same θ, bit for bit, as Adam on the tempered
    objective ``−(1/B) Σ log p + β KL(q ‖ p) / N`` in ``µ`` (σ held fixed; it does not enter the µ-gradient) on a
    tiny softplus MLP (float64, same start, same 40 steps), and another θ than the untempered MAP."""
    vl, untempered = compose(["experiment=notes001_fmnist"]), compose(["experiment=notes001_fmnist_map"])
    control = compose(["experiment=notes001_fmnist_map_tempered"])
    beta = vl.inference.kl_weight
    assert beta == 0.1 and control.prior.delta == beta * vl.prior.delta
    assert vl.prior.delta == untempered.prior.delta
    for key in ("lr", "epochs", "batch_size", "schedule"):  # the controls train as long as VL and VI, alike
        assert untempered.inference.map[key] == vl.inference[key]
    assert OmegaConf.to_container(control) == OmegaConf.to_container(
        OmegaConf.merge(untempered, {"prior": {"delta": control.prior.delta}}))
    torch.manual_seed(0)
    model = FlatModel(build_mlp(MLPConfig(depth=1, width=4, activation="softplus"), (2,), 3))
    precision = Prior.from_config(model, OmegaConf.to_object(vl.prior)).precision()  # Δ of VL and VI
    tempered = Prior.from_config(model, OmegaConf.to_object(control.prior)).precision()
    assert torch.equal(tempered, beta * precision)
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(30, 2, generator=gen)
    y = torch.randint(0, 3, (30,), generator=gen)
    theta0 = model.theta()
    problem = Problem(model=model, likelihood=Categorical(), X=X, y=y, prior_precision=tempered, theta0=theta0,
                      generator=torch.Generator().manual_seed(0))
    fit = train_map(problem, MapConfig(lr=0.05, steps=40, schedule=Schedule.constant))
    mu, sigma = theta0.clone().requires_grad_(True), torch.full_like(theta0, 0.1)
    optimizer = torch.optim.Adam([mu], lr=0.05)
    for _ in range(40):
        optimizer.zero_grad()
        loss = -problem.likelihood.log_prob(model(mu, X), y).mean() + beta * kl_to_prior(mu, sigma, precision) / 30
        loss.backward()
        optimizer.step()
    assert torch.equal(fit.theta, mu.detach())
    assert not torch.allclose(fit.theta, train_map(dataclasses.replace(problem, prior_precision=precision),
                                                   MapConfig(lr=0.05, steps=40, schedule=Schedule.constant)).theta)
