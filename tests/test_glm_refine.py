"""GLM refinement (notes-004 §2.5): inference in the network linearised at θ*, which stays the linearisation point."""

import pytest
import torch

from bnnpred.curvature.jacobians import jacobians
from bnnpred.inference.glm_refine import GLMRefineConfig, RefineMode, fit_glm_refine
from bnnpred.inference.map import MapConfig
from tests.helpers import tiny_problem

SHORT_MAP = MapConfig(steps=30, lr=0.01)  # far from converged, so the GLM optimum is not θ*


def gaussian_glm_posterior(problem, sigma2, theta_star):
    """The exact posterior of the linear-Gaussian GLM at θ*: targets y − f* + J*θ*, features J*."""
    f, J = jacobians(problem.model, theta_star, problem.X)
    J = J[:, 0]
    precision = J.T @ J / sigma2 + torch.diag(problem.prior_precision)
    mean = theta_star + torch.linalg.solve(precision, J.T @ (problem.y - f[:, 0]) / sigma2
                                           - problem.prior_precision * theta_star)
    return mean, precision


def test_laplace_refinement_of_a_gaussian_glm_is_its_closed_form_posterior():
    problem, lik = tiny_problem("gaussian", depth=1, n=20, d=2, width=4)
    fit = fit_glm_refine(problem, GLMRefineConfig(mode=RefineMode.laplace, gamma=1.0, iterations=3, map=SHORT_MAP))
    mean, precision = gaussian_glm_posterior(problem, lik.sigma2, fit.theta)
    torch.testing.assert_close(fit.posterior.dense_precision(), precision, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(fit.posterior.mean, mean, rtol=1e-9, atol=1e-10)
    assert (fit.posterior.mean - fit.theta).norm() > 1e-3  # refined away from θ*, which stays the expansion point


def test_vi_refinement_of_a_gaussian_glm_converges_to_the_same_posterior():
    problem, lik = tiny_problem("gaussian", depth=1, n=20, d=2, width=4)
    fit = fit_glm_refine(problem, GLMRefineConfig(gamma=0.1, iterations=400, n_samples=20, map=SHORT_MAP))
    mean, precision = gaussian_glm_posterior(problem, lik.sigma2, fit.theta)
    torch.testing.assert_close(fit.posterior.dense_precision(), precision, rtol=1e-10, atol=1e-10)
    std = torch.linalg.inv(precision).diagonal().sqrt()
    assert ((fit.posterior.mean - mean).abs() < 0.1 * std).all()


def test_laplace_refinement_of_a_logistic_glm_reaches_its_map():
    """Newton on the convex GLM objective: at the refined mean, Σ J*ᵀ r(y, f_lin(µ)) − Δµ = 0."""
    problem, lik = tiny_problem("bernoulli", depth=1, n=30, d=2, width=4)
    fit = fit_glm_refine(problem, GLMRefineConfig(mode=RefineMode.laplace, gamma=1.0, iterations=50, tol=1e-13,
                                                  map=SHORT_MAP))
    f, J = jacobians(problem.model, fit.theta, problem.X)
    mu = fit.posterior.mean
    f_lin = f + J @ (mu - fit.theta)
    gradient = torch.einsum("ncp,nc->p", J, lik.residual(f_lin, problem.y)) - problem.prior_precision * mu
    assert gradient.norm() < 1e-9 * (1 + mu.norm())
    assert fit.info["refine_converged"] == 1.0


def test_the_linearised_model_returns_its_stored_jacobians_as_autodiff_would():
    from torch.func import jacrev

    from bnnpred.curvature.functional import LinearizedModel

    gen = torch.Generator().manual_seed(0)
    f, J, theta_star, theta = (torch.randn(*s, generator=gen) for s in ((7, 3), (7, 3, 5), (5,), (5,)))
    model = LinearizedModel(f, J, theta_star)
    rows = torch.tensor([4, 0, 6])
    out, jac = jacobians(model, theta, rows)
    torch.testing.assert_close(out, f[rows] + J[rows] @ (theta - theta_star))
    torch.testing.assert_close(jac, jacrev(model)(theta, rows))


def _dense_lgva(problem, post, X, y, n_samples, generator, structure):
    """The refinement's estimator written plainly: per draw ``A_s = L_s J`` (``C`` rows per input), the full
    curvature as the factor ``[A_1; ...; A_S] / √S`` (so that ``Ĝ = AᵀA``) or the diagonal ``Σ_s A_s² / S`` — the
    reference the production estimator (one factor ``Λ̄^{1/2} J``, reduced rows) must reproduce."""
    from bnnpred.curvature.ggn import Structure

    shifts = post.sample(n_samples, generator) - post.mean
    f, J = jacobians(problem.model, post.mean, X)
    P, lik, S = J.shape[-1], problem.likelihood, len(shifts)
    g, factors, loglik = torch.zeros(P), [], torch.zeros(())
    for f_hat in f + torch.einsum("bcp,sp->sbc", J, shifts):
        g += torch.einsum("bc,bcp->p", lik.residual(f_hat, y), J)
        factors.append((lik.hessian_sqrt(f_hat) @ J).reshape(-1, P))
        loglik += lik.log_prob(f_hat, y).sum()
    curvature = (torch.cat(factors) / S**0.5 if structure is Structure.full
                 else sum(A.square().sum(0) for A in factors) / S)
    return g / S, curvature, loglik / S


@pytest.mark.parametrize("structure", ["full", "diag"])
@pytest.mark.parametrize("iterations", [1, 6])
def test_refinement_iterates_equal_those_of_the_dense_product(structure, iterations):
    """Softmax GLM (C = 3, so the assembly uses 2 rows per input): same start, same draws, same iterates."""
    from bnnpred.curvature.ggn import Curvature, Structure
    from bnnpred.inference.glm_refine import linearized_problem
    from bnnpred.inference.laplace_ggn import laplace_at
    from bnnpred.inference.lgva import estimate_lgva
    from bnnpred.inference.map import train_map
    from bnnpred.inference.ngvi import run_ngvi

    cfg = GLMRefineConfig(structure=Structure(structure), gamma=0.3, iterations=iterations, n_samples=2,
                          map=SHORT_MAP)
    fits = []
    for estimate in (estimate_lgva, _dense_lgva):
        problem, _ = tiny_problem("categorical", depth=1, n=25, d=2, width=6)
        laplace = laplace_at(problem, train_map(problem, cfg.map), cfg.structure, Curvature.ggn)
        fits.append(run_ngvi(linearized_problem(problem, laplace.theta), cfg, estimate, start=laplace.posterior))
    new, old = fits
    assert (new.posterior.mean - laplace.posterior.mean).norm() > 1e-6  # the iterates moved: equal is no tie
    torch.testing.assert_close(new.posterior.mean, old.posterior.mean, rtol=1e-10, atol=1e-12)
    scale = float(old.posterior.dense_precision().abs().max())
    torch.testing.assert_close(new.posterior.dense_precision(), old.posterior.dense_precision(), rtol=0,
                               atol=1e-10 * scale)


# float32 products: the GGN of one step carries a relative error of order √K·ε₃₂ (K = N·(C−1) = 50 rows here,
# ε₃₂ = 6e-8); after 6 steps we measured 4e-8 on the precision and 8e-8 on the mean (relative to their largest
# entries); 1e-6 leaves room for other platforms' summation orders.
FLOAT32_PRODUCTS_TOL = 1e-6


def test_float32_jacobians_give_iterates_within_the_stated_tolerance_of_float64():
    fits = []
    for jacobian_dtype in (None, "float32"):
        problem, _ = tiny_problem("categorical", depth=1, n=25, d=2, width=6)
        cfg = GLMRefineConfig(gamma=0.3, iterations=6, map=SHORT_MAP, jacobian_dtype=jacobian_dtype)
        fits.append(fit_glm_refine(problem, cfg))
    exact, f32 = fits
    assert exact.posterior.dense_precision().dtype == f32.posterior.dense_precision().dtype == torch.float64
    mean_error = float((f32.posterior.mean - exact.posterior.mean).abs().max() / exact.posterior.mean.abs().max())
    precision = exact.posterior.dense_precision()
    precision_error = float((f32.posterior.dense_precision() - precision).abs().max() / precision.abs().max())
    assert 0 < precision_error < FLOAT32_PRODUCTS_TOL and mean_error < FLOAT32_PRODUCTS_TOL


def test_an_unknown_jacobian_dtype_is_named():
    from bnnpred.errors import BnnpredError

    with pytest.raises(BnnpredError, match="jacobian_dtype must be one of None, float32, float64, got half"):
        GLMRefineConfig(jacobian_dtype="half").validate()
