"""Laplace-GGN on a linear-Gaussian model is Bayesian linear regression (notes-000 §7 A.4-A.5); its evidence forms
(notes-000 #4c, from the identity check bnnpred.reproduce.identity_checks.notes000_theory)."""

from dataclasses import replace

import pytest
import torch

from bnnpred.curvature.ggn import Curvature, Structure
from bnnpred.inference import Fit
from bnnpred.inference.laplace_ggn import laplace_at
from bnnpred.laplace_evidence import maximise_evidence
from bnnpred.prior import Prior, PriorConfig
from bnnpred.reproduce.identity_checks import notes000_theory as theory
from bnnpred.reproduce.identity_checks import single_thread
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


@pytest.mark.parametrize("kind", ["gaussian", "bernoulli"])
def test_function_space_evidence_equals_the_weight_space_blr_evidence_anywhere(kind):
    """notes-000 #4c: the library's eq. 3.19 (NK x NK kernel, with the correction 3.17) = the identity check's dense
    eq. 3.17 + 3.18 (P x P precision; theory.pseudo_data_blr), at a θ that is not a MAP: the two are the same
    Gaussian integral (notes-000 §7 A.4 (c)); float64, 1e-9 (the page's tolerance at the MAP is 1e-6)."""
    from bnnpred.curvature.jacobians import stacked_jacobians
    from bnnpred.marglik import function_space_log_marglik
    problem, lik = tiny_problem(kind, depth=1, n=20, width=6, delta=0.7)
    case = theory.gaussian_case(lik.sigma2) if kind == "gaussian" else theory.table_2_1()["Bernoulli"]
    theta = problem.theta0 + 0.1
    weight = theory.pseudo_data_blr(case, problem.model, theta, problem.X, problem.y, 0.7, problem.X[:2]).evidence_318
    f, J = stacked_jacobians(problem.model, theta, problem.X)
    function = function_space_log_marglik(lik, f, J, problem.y, theta, problem.prior_precision)
    assert abs(float(function) - weight) < 1e-9 * abs(weight)


@pytest.mark.parametrize("name", ["Gaussian σ²=0.1", "Bernoulli"])
def test_function_space_evidence_equals_the_expanded_laplace_evidence_at_a_stationary_map(name):
    """notes-000 #4c as the identity check measures it (theory.equivalence_quantities, here on 12 points): the
    runner's Laplace-GGN fit with the function-space evidence over every weight, at a MAP its Newton finish leaves
    with gradient norm ≤ 1e-6, reports eqs. 3.17 + 3.19 (its log evidence) and the expanded formula (§5.2, its
    log_marglik_weight) within 1e-6·N of each other, both computed (not copied), and both within 1e-6 of the dense
    eq. 3.17 + 3.18 evidence. On one thread, as the page measures (and ~10x faster on a busy machine)."""
    n = 12
    with single_thread():
        q = theory.equivalence_quantities(name, n=n)
    expanded, function = q.evidence
    reference = q.reference.evidence_318
    assert q.grad_norm <= 1e-6
    assert abs(function - expanded) < 1e-6 * n
    if name == "Gaussian σ²=0.1":  # 3e-14 apart; at the Bernoulli MAP (gradient norm 1e-13) the two agree to 1 ulp
        assert function != expanded  # computed, not copied
    assert max(abs(expanded - reference), abs(function - reference)) <= theory.TOLERANCE * abs(reference)


@pytest.mark.parametrize("kind", ["gaussian", "bernoulli"])
def test_function_space_evidence_differs_from_the_expanded_laplace_evidence_off_the_map(kind):
    """The control of notes-000 #4c: at the initial θ (gradient norm ~1) eqs. 3.17 + 3.19 and the expanded formula
    the Laplace fit reports (§5.2) differ by more than 1e-3·N, so their agreement at a MAP is not one formula twice."""
    from bnnpred.curvature.jacobians import stacked_jacobians
    from bnnpred.marglik import function_space_log_marglik
    problem, lik = tiny_problem(kind, depth=1, n=20, width=6, delta=0.7)
    theta = problem.theta0
    laplace = laplace_at(problem, Fit(theta=theta, posterior=None), Structure.full, Curvature.ggn)
    f, J = stacked_jacobians(problem.model, theta, problem.X)
    function = function_space_log_marglik(lik, f, J, problem.y, theta, problem.prior_precision)
    assert abs(float(function) - laplace.log_evidence) > 1e-3 * len(problem.X)


def test_laplace_fit_reports_the_function_space_evidence_over_the_last_layer():
    """Over the last layer's weights (its own Jacobians and prior), at a MAP finished by L-BFGS: the function-space
    evidence is reported, and agrees with the expanded form to 1e-6·N (over every weight: the stationary-MAP test
    above)."""
    from bnnpred.inference.laplace_ggn import EvidenceForm, LaplaceGGNConfig, SubsetOfWeights, fit_laplace_ggn
    from bnnpred.inference.map import MapConfig
    problem, _ = tiny_problem("bernoulli", depth=1, n=20, width=6, delta=0.7)
    cfg = LaplaceGGNConfig(evidence=EvidenceForm.function, subset_of_weights=SubsetOfWeights.last_layer,
                           map=MapConfig(steps=200, lr=0.01, finish_tol=1e-6))
    fit = fit_laplace_ggn(problem, cfg)
    assert abs(fit.log_evidence - fit.info["log_marglik_weight"]) < 1e-6 * len(problem.X)
    assert fit.log_evidence != fit.info["log_marglik_weight"]  # computed, not copied
