"""The natural-gradient VI family (notes-000 §4.3-4.6, §7 A.6-A.7)."""

import dataclasses
import math

import pytest
import torch

from bnnpred.curvature.ggn import Curvature, Structure, gradient_and_ggn, sampled_gradient_and_ggn
from bnnpred.curvature.jacobians import jacobians
from bnnpred.errors import BnnpredError
from bnnpred.inference.base import posterior_trace_row
from bnnpred.inference.gradient_rows import per_example_rows
from bnnpred.inference.lgva import LGVAConfig, estimate_lgva, fit_lgva
from bnnpred.inference.ngvi import NGVIConfig, _step, check_ngvi_config, step_size
from bnnpred.inference.ngvi_factor import sampled_gradient_and_factor
from bnnpred.inference.ngvi_precision import DiagPrecision, LowRankPrecision
from bnnpred.inference.oggn import OGGNConfig, estimate_oggn, fit_oggn
from bnnpred.inference.plateau import plateau_reached
from bnnpred.inference.slang import SLANGConfig, fit_slang
from bnnpred.inference.voggn import VOGGNConfig, fit_voggn
from bnnpred.posteriors import DiagPosterior, FullPosterior, LowRankDiagPosterior
from bnnpred.reproduce.identity_checks import notes000_methods as methods
from bnnpred.reproduce.identity_checks import relative_error, single_thread
from tests.helpers import blr, tiny_problem

METHODS = [(OGGNConfig, fit_oggn), (LGVAConfig, fit_lgva), (VOGGNConfig, fit_voggn)]


@pytest.mark.parametrize("config,fit", METHODS)
def test_all_three_reach_the_exact_blr_posterior_on_a_linear_gaussian_model(config, fit):
    """A linear-Gaussian model is its own linearisation with constant Λ: with γ = 1 the precision is the BLR
    precision after one step for every method; the mean is exact for OGGN and, for the sampling methods, within
    Monte Carlo error of S samples (the gradient is evaluated at θ_s)."""
    problem, lik = tiny_problem("gaussian", depth=0, n=30, d=3, delta=0.7)
    mean, precision, _ = blr(problem, lik.sigma2, 0.7)
    S = 1000
    result = fit(problem, config(gamma=1.0, iterations=3, tol=0.0, n_samples=S))
    torch.testing.assert_close(result.posterior.dense_precision(), precision, rtol=1e-10, atol=1e-10)
    if config is OGGNConfig:
        torch.testing.assert_close(result.theta, mean, rtol=1e-10, atol=1e-12)
    else:
        std = torch.linalg.inv(precision).diagonal().sqrt()
        assert ((result.theta - mean).abs() < 4 * std / S**0.5).all()


def test_vogn_momentum_and_mean_step_keep_the_fixed_point():
    """Momentum and a separate mean step (VOGN) change the path, not the fixed point: OGGN still reaches the
    exact BLR posterior of a linear-Gaussian model."""
    problem, lik = tiny_problem("gaussian", depth=0, n=30, d=3, delta=0.7)
    mean, precision, _ = blr(problem, lik.sigma2, 0.7)
    result = fit_oggn(problem, OGGNConfig(gamma=0.3, mean_gamma=1.0, momentum=0.9, iterations=2000, tol=1e-13))
    assert result.info["converged"] == 1.0
    torch.testing.assert_close(result.posterior.dense_precision(), precision, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(result.theta, mean, rtol=1e-9, atol=1e-10)


def test_oggn_from_the_map_stays_there_and_its_precision_converges_to_the_laplace_ggn_one():
    """notes-000 #7 at γ = 0.75 < 1 (the page runs the recipe's γ = 1, where Π = δI + GGN(µ) after one step by
    construction): from the Laplace-GGN MAP θ* of its Bernoulli problem, with the recipe's stable mean step
    ρ = 0.02, the mean stays within 1e-6 ‖θ*‖ over 20 steps and the precision after 19 (the start's weight
    0.25¹⁹ ≈ 4e-12) is δI + GGN(θ*) from autograd (the page: 1e-4 and 1e-3)."""
    with single_thread():  # the page's setting; two threads on a busy machine take many times longer
        theta_map = methods.laplace_fit("bernoulli")[1].theta
        run = methods.oggn_run("bernoulli", 0.75, 0.02)
        precision, final = run[methods.OGGN_STEPS - 1].dense_precision(), run[-1].mean
    assert relative_error(final, theta_map) < 1e-6
    torch.testing.assert_close(precision, methods.laplace_precision_reference("bernoulli", theta_map), rtol=1e-6,
                               atol=1e-8)


def test_lgva_expected_update_equals_oggn_for_a_gaussian_likelihood():
    """Λ is constant and r linear in f: averaging LGVA's estimates over samples gives OGGN's (notes-000 §4.5)."""
    problem, _ = tiny_problem("gaussian", depth=1, n=15)
    P = problem.theta0.numel()
    post = FullPosterior(problem.theta0, torch.eye(P) * 50.0)
    g_o, A_o, _ = estimate_oggn(problem, post, problem.X, problem.y, 1, problem.generator, Structure.full)
    g_l, A_l, _ = estimate_lgva(problem, post, problem.X, problem.y, 20000, torch.Generator().manual_seed(0),
                                Structure.full)
    torch.testing.assert_close(A_l.T @ A_l, A_o.T @ A_o)  # exact: Λ does not depend on f
    se = (problem.y.numel() ** 0.5) * 0.05  # Monte Carlo error of the gradient average
    assert (g_l - g_o).abs().max() < se


@pytest.mark.parametrize("config,fit", METHODS)
def test_diagonal_update_is_the_diagonal_of_the_full_update(config, fit):
    problem, _ = tiny_problem("categorical", depth=1, n=15)
    same_start = dataclasses.replace(problem, generator=torch.Generator().manual_seed(0))
    full = fit(same_start, config(gamma=0.5, iterations=1, tol=0.0))
    diag_start = dataclasses.replace(problem, generator=torch.Generator().manual_seed(0))
    diag = fit(diag_start, config(gamma=0.5, iterations=1, tol=0.0, structure=Structure.diag))
    torch.testing.assert_close(diag.posterior.precision, full.posterior.dense_precision().diagonal())


@pytest.mark.parametrize("field,value", [("gamma", 0.0), ("gamma", 1.5), ("init_var", 0.0), ("n_samples", 0),
                                         ("mean_gamma", 0.0), ("momentum", 1.0)])
def test_bad_settings_are_clear_errors(field, value):
    with pytest.raises(BnnpredError, match=f"inference.{field}"):
        check_ngvi_config(NGVIConfig(**{field: value}))


def test_empirical_fisher_option_is_the_sum_of_per_example_gradient_outer_products():
    problem, lik = tiny_problem("bernoulli", depth=1, n=10)
    theta = problem.theta0
    _, G, _ = gradient_and_ggn(problem.model, lik, theta, problem.X, problem.y, kind=Curvature.ef)
    grads = per_example_rows(problem, theta.unsqueeze(0), problem.X, problem.y).dense()  # [N, P]
    torch.testing.assert_close(G, grads.T @ grads)


@pytest.mark.parametrize("kind", ["categorical", "gaussian"])
@pytest.mark.parametrize("curvature", [Curvature.ggn, Curvature.ef])
@pytest.mark.parametrize("structure", [Structure.full, Structure.diag])
def test_estimates_at_draws_batched_in_one_vmap_equal_the_average_of_each_draws(kind, curvature, structure):
    """VOGGN's estimates with the S draws' Jacobians in one vmap, chunked (3 examples a chunk), against one
    :func:`gradient_and_ggn` per draw, averaged."""
    problem, lik = tiny_problem(kind, depth=1, n=10)
    thetas = problem.theta0 + 0.3 * torch.randn(4, problem.theta0.numel(), generator=torch.Generator().manual_seed(1))
    C, P = problem.model(problem.theta0, problem.X[:1]).shape[1], problem.theta0.numel()
    batched = sampled_gradient_and_ggn(problem.model, lik, thetas, problem.X, problem.y, structure=structure,
                                       kind=curvature, max_elems=4 * 3 * C * P)
    each = [gradient_and_ggn(problem.model, lik, theta, problem.X, problem.y, structure=structure, kind=curvature)
            for theta in thetas]
    for got, parts in zip(batched, zip(*each, strict=True), strict=True):
        torch.testing.assert_close(got, torch.stack(parts).mean(0), rtol=1e-12, atol=1e-12)


def test_decay_divides_both_step_sizes_by_one_plus_t_to_the_omega():
    cfg = VOGGNConfig(gamma=0.05, decay=0.51)
    assert step_size(cfg, 100) == pytest.approx(0.05 / (1 + 100**0.51))
    assert step_size(VOGGNConfig(gamma=0.05), 100) == 0.05


def test_trace_elbo_is_the_closed_form_elbo_per_example_of_a_linear_gaussian_model():
    """E_q log N(y | Jθ, σ²) = Σ_i log N(y_i | J_i µ, σ²) − J_i Σ J_iᵀ / 2σ², minus the KL, over N. Each row's
    estimate uses 8 draws from a generator seeded by its step: 50 steps' rows average to the closed form within
    0.5 % (the variance term alone is 6 % of it)."""
    problem, lik = tiny_problem("gaussian", depth=0, n=30, d=3)
    post = DiagPosterior(problem.theta0 + 0.2, torch.full_like(problem.theta0, 100.0))
    f, J = jacobians(problem.model, post.mean, problem.X)
    variance_term = (J[:, 0] ** 2 / post.precision).sum() / (2 * lik.sigma2)
    kl = post.kl_to_prior(problem.prior_precision)
    exact = (lik.log_prob(f, problem.y).sum() - variance_term - kl) / len(problem.X)
    rows = [posterior_trace_row(problem, post, step=step, epoch=1.0) for step in range(50)]
    assert sum(row["elbo"] for row in rows) / len(rows) == pytest.approx(float(exact), rel=5e-3)
    assert float(variance_term / len(problem.X)) > 0.06 * abs(float(exact))
    assert rows[3] == posterior_trace_row(problem, post, step=3, epoch=1.0)  # the step seeds the draws
    assert rows[3]["kl"] == pytest.approx(float(kl))


@pytest.mark.parametrize("method", ["voggn", "slang"])
def test_how_often_a_run_logs_does_not_change_its_training(method):
    problem, _ = tiny_problem("bernoulli", depth=1, n=40)
    fits = []
    for log_every in (1, 25):
        run = dataclasses.replace(problem, generator=torch.Generator().manual_seed(3))
        if method == "voggn":
            fits.append(fit_voggn(run, VOGGNConfig(gamma=0.1, iterations=25, tol=0, n_samples=2, batch_size=10,
                                                   log_every=log_every)))
        else:
            fits.append(fit_slang(run, SLANGConfig(rank=2, iterations=25, batch_size=10, log_every=log_every)))
    assert len(fits[0].trace) > len(fits[1].trace)
    assert torch.equal(fits[0].theta, fits[1].theta)


@pytest.mark.parametrize("kind", ["categorical", "bernoulli"])
def test_curvature_factors_give_the_accumulated_ggn_of_each_method(kind):
    """OGGN's, VOGGN's (GGN and empirical Fisher) and LGVA's factors ``A`` satisfy ``AᵀA = Ĝ`` of the dense
    accumulation, with the same gradient, to rounding; LGVA's has ``N·r`` rows for any S, ``r`` the rank of Λ
    (``C − 1`` for the softmax, 1 for the Bernoulli)."""
    problem, lik = tiny_problem(kind, depth=1, n=10)
    P = problem.theta0.numel()
    post = FullPosterior(problem.theta0, torch.eye(P) * 20.0)
    for curvature in (Curvature.ggn, Curvature.ef):
        draws = post.sample(3, torch.Generator().manual_seed(1))
        g, A, ll = sampled_gradient_and_factor(problem.model, lik, draws, problem.X, problem.y, curvature)
        g_d, G_d, ll_d = sampled_gradient_and_ggn(problem.model, lik, draws, problem.X, problem.y, kind=curvature)
        for got, want in ((g, g_d), (A.T @ A, G_d), (ll, ll_d)):
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    g, A, ll = estimate_lgva(problem, post, problem.X, problem.y, 5, torch.Generator().manual_seed(2), Structure.full)
    shifts = post.sample(5, torch.Generator().manual_seed(2)) - post.mean
    g_d, G_d, ll_d = gradient_and_ggn(problem.model, lik, post.mean, problem.X, problem.y,
                                      outputs=lambda f, J: f + torch.einsum("bcp,sp->sbc", J, shifts))
    rank = {"categorical": 2, "bernoulli": 1}[kind]  # C = 3 classes; one logit
    assert A.shape == (len(problem.X) * rank, P)
    for got, want in ((g, g_d), (A.T @ A, G_d), (ll, ll_d)):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("gamma,iterations", [(1.0, 4), (0.999, 9), (0.6, 10), (0.05, 8)])
def test_woodbury_oggn_run_equals_the_dense_run(gamma, iterations):
    """OGGN (deterministic) with the low-rank precision equals the dense P x P update to 1e-10 in float64, through
    the dropping of negligible factors (γ = 0.999: 6 kept) and the switch to dense when the rank exceeds P / 4
    (γ = 0.6, 0.05: N·C = 8 rows a step, P = 205)."""
    problem, _ = tiny_problem("bernoulli", depth=2, n=8, width=12)
    runs = {}
    for woodbury in (True, False):
        cfg = OGGNConfig(gamma=gamma, iterations=iterations, tol=0.0, woodbury=woodbury, init_var=0.5)
        runs[woodbury] = fit_oggn(dataclasses.replace(problem, generator=torch.Generator().manual_seed(0)), cfg)
    lowrank, dense = runs[True].posterior, runs[False].posterior
    assert isinstance(lowrank, LowRankDiagPosterior) == (gamma > 0.9)
    torch.testing.assert_close(lowrank.dense_precision(), dense.dense_precision(), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(runs[True].theta, runs[False].theta, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(lowrank.logdet_precision(), dense.logdet_precision(), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(lowrank.marginal_variance(), dense.marginal_variance(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("structure", [Structure.full, Structure.diag])
def test_one_step_from_a_low_rank_state_equals_the_dense_formula(structure):
    """One step from ``Π = diag(d) + UUᵀ`` with given ``ĝ`` and factor ``A`` (S = 3 draws' worth of rows, a momentum
    and a separate mean step) against ``(1 − γ)Π + γ(Δ + s·AᵀA)`` and ``µ + ρ Π⁻¹ m`` formed densely."""
    gen = torch.Generator().manual_seed(0)
    P, k, gamma, rho, beta, scale = 40, 9, 0.3, 0.7, 0.5, 2.0
    d, delta = torch.rand(P, generator=gen) + 0.5, torch.rand(P, generator=gen) + 0.1
    A_old, A = torch.randn(k, P, generator=gen), torch.randn(3 * k, P, generator=gen)
    mean, g, m_old = (torch.randn(P, generator=gen) for _ in range(3))
    cfg = NGVIConfig(gamma=gamma, mean_gamma=rho, momentum=beta)
    if structure is Structure.full:
        state = LowRankPrecision(d, [0.4], [A_old])
        before, curv, G = d.diag() + 0.4 * A_old.T @ A_old, A, A.T @ A
    else:
        state, before = DiagPrecision(d), d.diag()
        curv = A.square().sum(0)
        G = curv.diag()
    new_state, new_post, momentum = _step(state, state.posterior(mean), m_old, scale * g, curv, scale, delta, cfg,
                                          1, gamma)
    precision = (1 - gamma) * before + gamma * (delta.diag() + scale * G)
    m = beta * m_old + (1 - beta) * (scale * g - delta * mean)
    torch.testing.assert_close(new_post.dense_precision(), precision, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(momentum, m, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(new_post.mean, mean + rho * torch.linalg.solve(precision, m), rtol=1e-10, atol=1e-10)


def first_plateau(values: list[float], window: int, tol: float) -> int | None:
    """The first index ``n`` at which ``plateau_reached(values[: n + 1], window, tol)``, or ``None``: where a run
    checking the rule after every trace row stops."""
    return next((n for n in range(2 * window - 1, len(values)) if plateau_reached(values[: n + 1], window, tol)),
                None)


def test_plateau_rule_stops_where_a_noisy_rising_curve_flattens():
    """``e_t = −2 exp(−t/150)`` plus N(0, 0.02²) noise, windows of w = 40 rows, tol = 0.01. Without noise the gain
    of a window's average on the previous one is ``2 (e^{w/150} − 1) exp(−(t − (w−1)/2)/150)`` (to 0.3 %), which
    falls below tol at ``t* = 150 ln(2 (e^{w/150} − 1) / tol) + (w − 1)/2 ≈ 636``. The noise of that gain has std
    0.02·√(2/40) = 0.0045, so the noisy rule stops within ±100 rows of t* (the gain changes by 0.0045 in 70 rows
    there); a flat sequence stops at its first chance, and neither the rising part nor a falling one stops."""
    steps = torch.arange(2000, dtype=torch.float64)
    clean = (-2 * torch.exp(-steps / 150)).tolist()
    noisy = (torch.tensor(clean) + 0.02 * torch.randn(2000, generator=torch.Generator().manual_seed(0),
                                                     dtype=torch.float64)).tolist()
    window, tol = 40, 0.01
    t_star = 150 * math.log(2 * (math.exp(window / 150) - 1) / tol) + (window - 1) / 2
    assert abs(first_plateau(clean, window, tol) - t_star) <= 2
    assert abs(first_plateau(noisy, window, tol) - t_star) <= 100
    assert first_plateau([0.0] * 100, window, tol) == 2 * window - 1
    assert not plateau_reached(clean[:500], window, tol)
    assert first_plateau([-x for x in clean[:500]], window, tol) is None  # a diverging run is not converged


def test_a_plateau_stops_a_run_and_is_recorded():
    problem, _ = tiny_problem("bernoulli", depth=1, n=40)
    fit = fit_voggn(problem, VOGGNConfig(gamma=0.2, iterations=2000, tol=0.0, plateau_window=5, plateau_tol=1e-2,
                                         log_every=5))
    assert fit.info["plateau"] == 1.0 and fit.info["iterations"] < 2000
    elbo = [row["elbo"] for row in fit.trace[1:]]
    assert plateau_reached(elbo, 5, 1e-2) and not plateau_reached(elbo[:-1], 5, 1e-2)


def test_bad_plateau_window_is_a_clear_error():
    with pytest.raises(BnnpredError, match="inference.plateau_window must be >= 1.*e.g. 20"):
        check_ngvi_config(NGVIConfig(plateau_window=0))


def test_voggn_from_a_random_start_fits_a_sine_with_the_shipped_recipe():
    """Seeded end-to-end VOGGN (conf/inference/voggn.yaml's γ, ρ, Σ₀; full covariance, S = 1) on 40 points of
    sin(2x) + N(0, 0.1²), a 1x10 tanh network from its random initialisation: 300 steps bring the mean's training
    RMSE from 0.75 (a constant predicts 0.69) to below 0.25, i.e. it explains ≥ 87 % of the target variance (the
    noise floor is 0.1). A mean stuck at the prior's basin or a collapse to θ ≈ 0 stays near 0.69."""
    from bnnpred.app.compose import compose
    from bnnpred.curvature.functional import FlatModel
    from bnnpred.inference import Problem
    from bnnpred.likelihoods import Gaussian
    from bnnpred.models.mlp import MLPConfig, build_mlp
    recipe = compose(["inference=voggn"]).inference
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    X = 4 * torch.rand(40, 1, generator=gen, dtype=torch.float64) - 2
    y = torch.sin(2 * X[:, 0]) + 0.1 * torch.randn(40, generator=gen, dtype=torch.float64)
    model = FlatModel(build_mlp(MLPConfig(depth=1, width=10), (1,), 1).double())
    theta0 = model.theta()
    problem = Problem(model=model, likelihood=Gaussian(0.05), X=X, y=y, prior_precision=torch.full_like(theta0, 1.0),
                      theta0=theta0, generator=gen)
    cfg = VOGGNConfig(gamma=recipe.gamma, mean_gamma=recipe.mean_gamma, init_var=recipe.init_var,
                      n_samples=recipe.n_samples, iterations=300, tol=0.0, log_every=100)
    fit = fit_voggn(problem, cfg)

    def rmse(theta):
        return float((model(theta, X)[:, 0] - y).square().mean().sqrt())

    assert rmse(theta0) > 0.7
    assert rmse(fit.theta) < 0.25


def test_warm_start_begins_at_the_map_of_the_same_initialisation():
    """``start: map`` trains the MAP (inference.map.*) from θ0 and iterates from there: with a negligible mean step
    one OGGN step stays at that MAP, and the MAP's gradient norm is recorded."""
    from bnnpred.inference.map import MapConfig, train_map
    from bnnpred.inference.ngvi import Start
    problem, _ = tiny_problem("bernoulli", depth=1, n=20)
    map_cfg = MapConfig(steps=200, lr=0.01)
    theta_map = train_map(problem, map_cfg).theta
    fit = fit_oggn(problem, OGGNConfig(start=Start.map, map=map_cfg, gamma=1.0, mean_gamma=1e-12, iterations=1,
                                       tol=0.0))
    torch.testing.assert_close(fit.theta, theta_map, rtol=0, atol=1e-10)
    assert (theta_map - problem.theta0).norm() > 0.1 and fit.info["start_map_grad_norm"] >= 0
