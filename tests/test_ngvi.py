"""The natural-gradient VI family (notes-000 §4.3-4.6, §7 A.6-A.7)."""

import dataclasses

import pytest
import torch

from bnnpred.curvature.ggn import Curvature, Structure, gradient_and_ggn, sampled_gradient_and_ggn
from bnnpred.curvature.jacobians import jacobians
from bnnpred.errors import BnnpredError
from bnnpred.inference import Fit
from bnnpred.inference.base import posterior_trace_row
from bnnpred.inference.laplace_ggn import laplace_at
from bnnpred.inference.lgva import LGVAConfig, estimate_lgva, fit_lgva
from bnnpred.inference.map import neg_log_joint
from bnnpred.inference.ngvi import NGVIConfig, check_ngvi_config, step_size
from bnnpred.inference.oggn import OGGNConfig, estimate_oggn, fit_oggn
from bnnpred.inference.slang import SLANGConfig, fit_slang, per_example_grads
from bnnpred.inference.voggn import VOGGNConfig, fit_voggn
from bnnpred.posteriors import DiagPosterior, FullPosterior
from tests.helpers import tiny_problem
from tests.test_marglik import blr

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


def test_oggn_fixed_point_is_the_laplace_ggn_posterior_at_the_map():
    """Started at a MAP, OGGN stays there and its precision converges to δI + GGN(θ*) (notes-000 §4.6)."""
    problem, lik = tiny_problem("bernoulli", depth=1, n=20, delta=1.0)
    theta = problem.theta0.clone().requires_grad_(True)
    lbfgs = torch.optim.LBFGS([theta], max_iter=500, tolerance_grad=1e-13, tolerance_change=0,
                              line_search_fn="strong_wolfe")

    def closure():
        lbfgs.zero_grad()
        loss = neg_log_joint(problem, theta, slice(None))
        loss.backward()
        return loss

    lbfgs.step(closure)
    theta_map = theta.detach()
    laplace = laplace_at(problem, Fit(theta=theta_map, posterior=None), Structure.full, Curvature.ggn)
    restarted = fit_oggn(dataclasses.replace(problem, theta0=theta_map),
                         OGGNConfig(gamma=0.5, iterations=60, tol=0.0, init_var=0.1))
    # L-BFGS stops at a gradient norm near 1e-7; OGGN only polishes that (notes-000 §7 A.7: 1e-4 ‖θ*‖).
    assert (restarted.theta - theta_map).norm() < 1e-6 * theta_map.norm()
    torch.testing.assert_close(restarted.posterior.dense_precision(), laplace.posterior.dense_precision(),
                               rtol=1e-6, atol=1e-8)


def test_lgva_expected_update_equals_oggn_for_a_gaussian_likelihood():
    """Λ is constant and r linear in f: averaging LGVA's estimates over samples gives OGGN's (notes-000 §4.5)."""
    problem, _ = tiny_problem("gaussian", depth=1, n=15)
    P = problem.theta0.numel()
    post = FullPosterior(problem.theta0, torch.eye(P) * 50.0)
    g_o, G_o, _ = estimate_oggn(problem, post, problem.X, problem.y, 1, problem.generator, Structure.full)
    g_l, G_l, _ = estimate_lgva(problem, post, problem.X, problem.y, 20000, torch.Generator().manual_seed(0),
                                Structure.full)
    torch.testing.assert_close(G_l, G_o)  # exact: Λ does not depend on f
    se = (problem.y.numel() ** 0.5) * 0.05  # Monte Carlo error of the gradient average
    assert (g_l - g_o).abs().max() < se


@pytest.mark.parametrize("config,fit", METHODS)
def test_diagonal_update_is_the_diagonal_of_the_full_update(config, fit):
    problem, _ = tiny_problem("categorical", depth=1, n=15)
    same_start = dataclasses.replace(problem, generator=torch.Generator().manual_seed(0))
    full = fit(same_start, config(gamma=0.5, iterations=1, tol=0.0))
    diag_start = dataclasses.replace(problem, generator=torch.Generator().manual_seed(0))
    diag = fit(diag_start, config(gamma=0.5, iterations=1, tol=0.0, structure=Structure.diag))
    torch.testing.assert_close(diag.posterior.precision, full.posterior.precision.diagonal())


@pytest.mark.parametrize("field,value", [("gamma", 0.0), ("gamma", 1.5), ("init_var", 0.0), ("n_samples", 0),
                                         ("mean_gamma", 0.0), ("momentum", 1.0)])
def test_bad_settings_are_clear_errors(field, value):
    with pytest.raises(BnnpredError, match=f"inference.{field}"):
        check_ngvi_config(NGVIConfig(**{field: value}))


def test_empirical_fisher_option_is_the_sum_of_per_example_gradient_outer_products():
    problem, lik = tiny_problem("bernoulli", depth=1, n=10)
    theta = problem.theta0
    _, G, _ = gradient_and_ggn(problem.model, lik, theta, problem.X, problem.y, kind=Curvature.ef)
    grads = per_example_grads(problem, theta.unsqueeze(0), problem.X, problem.y)  # [N, P]
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
