"""Exact Gaussian VI for linear models (notes-002 §2.11) and the symmetric KL (notes-002 §3.1)."""

from __future__ import annotations

import pytest
import torch

from bnnpred.curvature.ggn import Structure
from bnnpred.errors import BnnpredError
from bnnpred.inference.exact_vi import ExactVIConfig, expected_loglik, fit_exact_vi
from bnnpred.metrics import symmetric_kl
from bnnpred.posteriors import DiagPosterior, FullPosterior
from tests.helpers import blr, tiny_problem


def test_full_gaussian_vi_of_linear_regression_is_the_bayesian_linear_regression_posterior():
    """With a Gaussian likelihood the ELBO's optimum over all Gaussians is the exact posterior."""
    problem, lik = tiny_problem("gaussian", depth=0, n=30, d=3, delta=0.7)
    fit = fit_exact_vi(problem, ExactVIConfig())
    mean, precision, _ = blr(problem, lik.sigma2, 0.7)
    torch.testing.assert_close(fit.theta, mean, rtol=1e-6, atol=1e-8)
    torch.testing.assert_close(fit.posterior.dense_precision(), precision, rtol=1e-5, atol=1e-8)


def test_logistic_regression_exact_vi_is_stationary_and_full_beats_mean_field():
    problem, _ = tiny_problem("bernoulli", depth=0, n=40, d=3)
    full = fit_exact_vi(problem, ExactVIConfig())
    diag = fit_exact_vi(problem, ExactVIConfig(structure=Structure.diag))
    assert full.info["grad_max"] < 1e-6 and diag.info["grad_max"] < 1e-6
    for fit in (full, diag):  # the 2-norm lies between the largest entry and √(number of entries) times it
        entries = len(fit.theta) + len(fit.theta) ** 2  # µ and the (full) scale matrix: at most P + P² entries
        assert fit.info["grad_max"] <= fit.info["grad_norm"] <= 1e-6 * entries**0.5
    assert full.info["elbo"] > diag.info["elbo"]
    assert isinstance(full.posterior, FullPosterior) and isinstance(diag.posterior, DiagPosterior)


def test_quadrature_matches_monte_carlo():
    problem, _ = tiny_problem("bernoulli", depth=0, n=8)
    mean, variance = torch.linspace(-2, 2, 8), torch.linspace(0.1, 3, 8)
    f = mean + variance.sqrt() * torch.randn(200000, 8, generator=torch.Generator().manual_seed(0))
    mc = problem.likelihood.log_prob(f.reshape(-1, 1), problem.y.repeat(200000)).mean() * 8
    torch.testing.assert_close(expected_loglik(problem.likelihood, problem.y, mean, variance, 64), mc, rtol=2e-3,
                               atol=0)


def test_a_nonlinear_model_is_refused():
    problem, _ = tiny_problem("bernoulli", depth=1)
    with pytest.raises(BnnpredError, match="needs a model linear in θ"):
        fit_exact_vi(problem, ExactVIConfig())


def test_symmetric_kl_matches_torch_distributions():
    gen = torch.Generator().manual_seed(0)
    A, B = torch.randn(4, 4, generator=gen), torch.randn(4, 4, generator=gen)
    q = FullPosterior(torch.randn(4, generator=gen), A @ A.T + torch.eye(4))
    p = FullPosterior(torch.randn(4, generator=gen), B @ B.T + torch.eye(4))
    mq = torch.distributions.MultivariateNormal(q.mean, precision_matrix=q.precision)
    mp = torch.distributions.MultivariateNormal(p.mean, precision_matrix=p.precision)
    expected = 0.5 * (torch.distributions.kl_divergence(mq, mp) + torch.distributions.kl_divergence(mp, mq))
    assert symmetric_kl(q, p) == pytest.approx(float(expected), rel=1e-9)
    assert symmetric_kl(q, q) == pytest.approx(0.0, abs=1e-12)
