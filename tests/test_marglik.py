"""Laplace-GGN on a linear-Gaussian model is Bayesian linear regression (notes-000 §7 A.4-A.5)."""

import math
from dataclasses import replace

import pytest
import torch

from bnnpred.curvature.ggn import Curvature, Structure
from bnnpred.inference import Fit
from bnnpred.inference.laplace_ggn import laplace_at
from bnnpred.laplace_evidence import maximise_evidence
from bnnpred.prior import Prior, PriorConfig
from tests.helpers import blr, tiny_problem


def test_laplace_ggn_on_linear_gaussian_model_is_blr_with_its_evidence():
    problem, lik = tiny_problem("gaussian", depth=0, n=30, d=3, delta=0.7)
    mean, precision, evidence = blr(problem, lik.sigma2, 0.7)
    fit = laplace_at(problem, Fit(theta=mean, posterior=None), Structure.full, Curvature.ggn)
    torch.testing.assert_close(fit.posterior.dense_precision(), precision, rtol=1e-12, atol=1e-12)
    assert abs(fit.log_evidence - float(evidence)) < 1e-8


@pytest.mark.parametrize("structure", [Structure.full, Structure.diag])
@pytest.mark.parametrize("kind", ["gaussian", "bernoulli"])
def test_the_evidence_function_at_the_fits_own_prior_is_the_reported_evidence(structure, kind):
    """The differentiable path (eigenvalues of H for the full structure) = the fit's value from its posterior's
    Cholesky factor, float64, 1e-8."""
    problem, lik = tiny_problem(kind, depth=1, delta=0.7)
    fit = laplace_at(problem, Fit(theta=problem.theta0, posterior=None), structure, Curvature.ggn)
    sigma2 = getattr(lik, "sigma2", None)
    value = fit.evidence(problem.prior_precision, None if sigma2 is None else torch.tensor(sigma2))
    assert abs(float(value) - fit.log_evidence) < 1e-8


@pytest.mark.parametrize("structure", [Structure.full, Structure.diag])
def test_the_evidence_at_another_prior_and_noise_is_a_refit_there(structure):
    """posterior(Δ, σ²) and the evidence at (Δ, σ²) from the curvature kept at (0.7, σ²₀) = a Laplace fit made at
    (Δ, σ²) from scratch, with a per-tensor Δ (no isotropic shortcut), float64, 1e-9."""
    from bnnpred.likelihoods import Gaussian
    problem, lik = tiny_problem("gaussian", depth=1, delta=0.7)
    fit = laplace_at(problem, Fit(theta=problem.theta0, posterior=None), structure, Curvature.ggn)
    precision = torch.linspace(0.2, 3.0, len(problem.theta0), dtype=torch.float64)
    again = replace(problem, prior_precision=precision, likelihood=Gaussian(0.37))
    refit = laplace_at(again, Fit(theta=problem.theta0, posterior=None), structure, Curvature.ggn)
    torch.testing.assert_close(fit.evidence.posterior(precision, 0.37).dense_precision(),
                               refit.posterior.dense_precision(), rtol=1e-12, atol=1e-12)
    assert abs(float(fit.evidence(precision, torch.tensor(0.37, dtype=torch.float64)))
               - refit.log_evidence) < 1e-9 * abs(refit.log_evidence)


def test_evidence_ascent_reaches_the_mackay_fixed_point():
    """At the optimum δ‖θ‖² = γ = Σ λ/(δ + λ) and σ² = SSE / (N - γ) (MacKay 1992)."""
    problem, lik = tiny_problem("gaussian", depth=1, n=40, delta=0.7)
    fit = laplace_at(problem, Fit(theta=problem.theta0, posterior=None), Structure.full, Curvature.ggn)
    prior = Prior.from_config(problem.model, PriorConfig(delta=0.7))
    chosen, sigma2 = maximise_evidence(fit.evidence, prior, lik.sigma2, steps=3000, lr=0.05)
    delta = chosen.delta
    lam = torch.linalg.eigvalsh(fit.evidence.curvature.H) * lik.sigma2 / sigma2
    gamma = float((lam / (delta + lam)).sum())
    sse = float((problem.y - problem.model(fit.theta, problem.X)[:, 0]).square().sum())
    assert delta * float(fit.theta.square().sum()) == pytest.approx(gamma, rel=1e-3)
    assert sigma2 == pytest.approx(sse / (len(problem.X) - gamma), rel=1e-3)


def blr_weight_space_evidence(problem, lik, theta):
    """notes-000 eqs. 3.17 + 3.18 written out: the pseudo-observation BLR's posterior N(µ, Σ) in weight space, its
    evidence ``Σ log N(y | g⁻¹_lin(µ), V) − ½ log(det Σ₀ / det Σ) − ½ µᵀΣ₀⁻¹µ`` plus the correction."""
    from bnnpred.curvature.jacobians import stacked_jacobians
    from bnnpred.marglik import _pseudo_observation_model
    f, J = stacked_jacobians(problem.model, theta, problem.X)
    mean, D, V = _pseudo_observation_model(lik, f)
    Phi, delta, y = D.unsqueeze(1) * J[:, 0], problem.prior_precision, problem.y.double()
    precision = delta.diag() + Phi.T @ (Phi / V.unsqueeze(1))
    mu = torch.linalg.solve(precision, Phi.T @ ((y - mean + Phi @ theta) / V))
    fitted = mean + Phi @ (mu - theta)
    gauss = lambda m: -0.5 * (torch.log(2 * math.pi * V) + (y - m).square() / V)  # noqa: E731
    blr = (gauss(fitted).sum() - 0.5 * (torch.logdet(precision) - delta.log().sum())
           - 0.5 * (delta * mu.square()).sum())
    return blr + (lik.log_prob(f, problem.y) - gauss(mean)).sum(), f, J


@pytest.mark.parametrize("kind", ["gaussian", "bernoulli"])
def test_function_space_evidence_equals_the_weight_space_blr_evidence_anywhere(kind):
    """eq. 3.19 (NK x NK kernel) = eq. 3.18 (P x P precision), both with the correction 3.17, at a θ that is not a
    MAP: the two are the same Gaussian integral (notes-000 §7 A.4 (c)); float64, 1e-9."""
    from bnnpred.marglik import function_space_log_marglik
    problem, lik = tiny_problem(kind, depth=1, n=20, width=6, delta=0.7)
    theta = problem.theta0 + 0.1
    weight, f, J = blr_weight_space_evidence(problem, lik, theta)
    function = function_space_log_marglik(lik, f, J, problem.y, theta, problem.prior_precision)
    assert abs(float(function - weight)) < 1e-9 * abs(float(weight))


@pytest.mark.parametrize("kind", ["gaussian", "bernoulli"])
def test_function_space_evidence_equals_the_expanded_laplace_evidence_at_a_stationary_map(kind):
    """At a MAP finished by L-BFGS (gradient norm ≤ 1e-6), eqs. 3.17 + 3.19 equal the expanded formula the
    Laplace fit reports (§5.2) to 1e-6·N; at the start point (gradient norm ~1) they differ by more."""
    from bnnpred.curvature.jacobians import stacked_jacobians
    from bnnpred.inference.map import MapConfig, train_map
    from bnnpred.marglik import function_space_log_marglik
    problem, lik = tiny_problem(kind, depth=1, n=20, width=6, delta=0.7)
    fit = train_map(problem, MapConfig(steps=200, lr=0.01, finish_tol=1e-6))
    assert fit.info["grad_norm"] <= 1e-6
    N = len(problem.X)
    gaps = []
    for theta in (fit.theta, problem.theta0):
        laplace = laplace_at(problem, Fit(theta=theta, posterior=None), Structure.full, Curvature.ggn)
        f, J = stacked_jacobians(problem.model, theta, problem.X)
        function = function_space_log_marglik(lik, f, J, problem.y, theta, problem.prior_precision)
        gaps.append(abs(float(function) - laplace.log_evidence))
    assert gaps[0] < 1e-6 * N
    assert gaps[1] > 1e-3 * N


@pytest.mark.parametrize("subset", ["all", "last_layer"])
def test_laplace_fit_reports_the_selected_evidence_form(subset):
    """Over every parameter and over the last layer's (its own Jacobians and prior)."""
    from bnnpred.inference.laplace_ggn import EvidenceForm, LaplaceGGNConfig, SubsetOfWeights, fit_laplace_ggn
    from bnnpred.inference.map import MapConfig
    problem, _ = tiny_problem("bernoulli", depth=1, n=20, width=6, delta=0.7)
    cfg = LaplaceGGNConfig(evidence=EvidenceForm.function, subset_of_weights=SubsetOfWeights(subset),
                           map=MapConfig(steps=200, lr=0.01, finish_tol=1e-6))
    fit = fit_laplace_ggn(problem, cfg)
    assert abs(fit.log_evidence - fit.info["log_marglik_weight"]) < 1e-6 * len(problem.X)
    assert fit.log_evidence != fit.info["log_marglik_weight"]  # computed, not copied
