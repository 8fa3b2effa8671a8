"""Predictive identities (notes-000 §7 A.4-A.8, notes-004 §5 items 1 and 3)."""

import dataclasses

import pytest
import torch

from bnnpred import metrics, predictive
from bnnpred.curvature.chunks import DEFAULT_CHUNK_ELEMS
from bnnpred.curvature.ggn import Curvature, Structure
from bnnpred.errors import BnnpredError
from bnnpred.inference import Fit
from bnnpred.inference.laplace_ggn import laplace_at
from bnnpred.likelihoods import Gaussian
from bnnpred.predictive import (
    Context,
    activations_per_input,
    closed_predictive,
    glm_latent,
    glm_predictive,
    gp_condition,
    gp_latent,
    gp_predictive,
    nn_predictive,
    nn_samples,
    tuned_gp_condition,
)
from bnnpred.reproduce.identity_checks import max_abs_error, notes004
from tests.helpers import tiny_problem

KINDS = ["gaussian", "bernoulli", "categorical"]


def laplace_context(kind, depth=2, structure=Structure.full, n=12):
    problem, lik = tiny_problem(kind, depth=depth, n=n)
    fit = laplace_at(problem, Fit(theta=problem.theta0, posterior=None), structure, Curvature.ggn)
    X_test = torch.randn(5, problem.X.shape[1], generator=torch.Generator().manual_seed(9))
    return Context(problem.model, lik, fit.theta, fit.posterior, problem.prior_precision, problem.X), X_test


def test_glm_samples_are_nn_samples_of_a_gaussian_linear_model():
    """notes-004 #1c (f_lin(x, θ_s) = f(x, θ_s) without hidden layer, 100 shared draws, float64 rounding) on its
    logistic problem with a Gaussian likelihood (σ² = 0.3, the 0/1 labels as targets); the page: logistic and
    softmax."""
    t = notes004.tiny("logistic", depth=0, n=12, seed=1)
    gaussian = dataclasses.replace(t.problem, likelihood=Gaussian(0.3), y=t.problem.y.to(notes004.DTYPE))
    glm, nn = notes004.glm_and_bnn_samples(notes004.Tiny(gaussian, t.X_test))
    assert max_abs_error(glm, nn) <= 1e-10 * float(nn.abs().max())


@pytest.mark.parametrize("kind", KINDS)
def test_glm_and_nn_predictives_agree_on_a_linear_model(kind):
    """The glm predictive draws logits from the C x C covariance, the nn predictive parameters: without hidden
    layer the same distribution (sample for sample: notes-004 #1c), 4×10⁴ draws each."""
    ctx, X = laplace_context(kind, depth=0)
    a = glm_predictive(ctx, X, 40000, torch.Generator().manual_seed(1))
    b = nn_predictive(ctx, X, 40000, torch.Generator().manual_seed(2))
    if kind == "gaussian":
        torch.testing.assert_close(a.mean, b.mean, atol=0.03 * float(b.variance.sqrt().max()), rtol=0)
        torch.testing.assert_close(a.variance, b.variance, rtol=0.03, atol=0)
    else:
        torch.testing.assert_close(a.probs, b.probs, atol=0.01, rtol=0)


def test_glm_sampling_variance_converges_to_the_closed_form():
    ctx, X = laplace_context("gaussian")
    closed = closed_predictive(ctx, X)
    mc = glm_predictive(ctx, X, 40000, torch.Generator().manual_seed(0))
    torch.testing.assert_close(mc.variance, closed.variance, rtol=0.03, atol=0)
    sd = closed.variance.sqrt()
    assert ((mc.mean - closed.mean).abs() < 4 * sd / 200).all()  # 4 standard errors of a 40000-sample mean


@pytest.mark.parametrize("kind", notes004.KINDS)
def test_gp_with_all_training_points_is_the_weight_space_covariance(kind):
    """notes-004 #3a (eq. 15, M = N: the gp latent covariance = J Σ_ggn Jᵀ, dense Σ_ggn from autograd) on its 1x5
    tanh problem for every output (C x C) to 1e-8; the page: the binary σ*² to 1e-4."""
    gp, weight = notes004.gp_and_weight_space(notes004.tiny(kind, 1, 20, 5), outputs=True)
    torch.testing.assert_close(gp, weight, rtol=1e-8, atol=1e-10)


def test_gp_with_all_training_points_equals_the_glm_latent_of_a_gaussian_model():
    """The same for a Gaussian likelihood (notes004's autograd reference has Bernoulli and softmax Λ only): weight
    space J Σ Jᵀ = function space K** - K*N (K + W⁻¹)⁻¹ KN* (Woodbury; notes-000 eq. 3.13)."""
    ctx, X = laplace_context("gaussian")
    mean_w, cov_w = glm_latent(ctx, X)
    mean_f, cov_f = gp_latent(ctx, X, gp_condition(ctx, torch.arange(len(ctx.X_train))))
    torch.testing.assert_close(mean_f, mean_w)
    torch.testing.assert_close(cov_f, cov_w, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("structure", [Structure.diag, Structure.kron, Structure.full])
def test_glm_latent_inside_no_grad_equals_outside(structure):
    """The layered path (diagonal, Kronecker) back-propagates per layer: a caller's torch.no_grad() (e.g. a study
    scoring a posterior) must not break it (it did: notes002_logreg's scores)."""
    ctx, X = laplace_context("bernoulli", structure=structure)
    mean, cov = glm_latent(ctx, X)
    with torch.no_grad():
        mean_ng, cov_ng = glm_latent(ctx, X)
    torch.testing.assert_close(mean_ng, mean)
    torch.testing.assert_close(cov_ng, cov)


def test_gp_with_a_subset_has_more_variance_than_with_all_points():
    ctx, X = laplace_context("bernoulli", n=20)
    _, cov_all = gp_latent(ctx, X, gp_condition(ctx, torch.arange(20)))
    _, cov_sub = gp_latent(ctx, X, gp_condition(ctx, torch.arange(10)))
    assert (cov_sub[:, 0, 0] >= cov_all[:, 0, 0] - 1e-12).all()


def test_subset_gp_prior_factor_is_chosen_by_validation_nll():
    """notes-004 §2.4: on M of N points the prior precision becomes δ·N/M·factor, the factor minimising the
    validation NLL."""
    ctx, X = laplace_context("bernoulli", n=20)
    gen = torch.Generator().manual_seed(0)
    valid = (torch.randn(8, X.shape[1], generator=gen), torch.bernoulli(torch.full((8,), 0.5), generator=gen).long())
    subset = torch.arange(0, 20, 2)
    factors = [0.01, 1.0, 100.0]
    chosen = tuned_gp_condition(ctx, subset, factors, valid, n_samples=50, seed=0)
    nlls = [metrics.nll(gp_predictive(ctx, valid[0], 50, torch.Generator().manual_seed(0),
                                      gp_condition(ctx, subset, 2.0 * f)), valid[1]) for f in factors]
    assert len(set(nlls)) == len(factors)  # the factor matters
    best = factors[nlls.index(min(nlls))]
    assert chosen.scale == 2.0 * best
    fresh = gp_condition(ctx, subset, 2.0 * best)
    for a, b in zip(gp_latent(ctx, X, chosen), gp_latent(ctx, X, fresh), strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("per_class", [False, True])
def test_every_prior_scale_from_one_eigendecomposition_equals_its_own_cholesky_conditioning(per_class, monkeypatch):
    """The tuned GP's validation latents, every prior scale from one eigendecomposition of L K Lᵀ, equal
    gp_condition's at each scale (its own Cholesky factor) to float64 rounding, over chunks of two inputs, each
    chunk's covariances made one input at a time (the CPU's cache blocks)."""
    ctx, X = laplace_context("categorical", n=20)
    # chunks of two inputs of the 2-5-5-3 MLP (its layers' inputs and C = 3 output gradients each)
    monkeypatch.setattr(predictive, "DEFAULT_CHUNK_ELEMS", 2 * (2 + 5 + 5 + 3 * (5 + 5 + 3)))
    monkeypatch.setattr(predictive, "CACHE_NUMBERS", 1)
    subset = torch.arange(0, 20, 2)
    feats, L, K = predictive._training_kernel(ctx, subset, per_class)
    scales = [0.01, 1.0, 300.0]
    mean, covs = predictive._latents_at_scales(ctx, X, feats, L, K, scales, per_class)
    for scale, cov in zip(scales, covs, strict=True):
        expected_mean, expected_cov = gp_latent(ctx, X, gp_condition(ctx, subset, scale, per_class))
        assert torch.equal(mean, expected_mean)
        assert max_abs_error(cov, expected_cov) <= 1e-10 * float(expected_cov.abs().max())


def test_cache_blocks_cover_the_rows_in_order_on_the_cpu_and_are_one_block_elsewhere(monkeypatch):
    monkeypatch.setattr(predictive, "CACHE_NUMBERS", 45)  # 2 inputs of 4 x 5 numbers
    assert [(b.start, b.stop) for b in predictive.cache_blocks(torch.zeros(5, 4, 5))] == [(0, 2), (2, 4), (4, 5)]
    assert [(b.start, b.stop) for b in predictive.cache_blocks(torch.zeros(5, 4, 5, device="meta"))] == [(0, 5)]
    assert list(predictive.cache_blocks(torch.zeros(0, 4, 5))) == []


def test_nn_samples_in_small_batches_equal_one_network_call_per_sample(monkeypatch):
    """Batches of (sample, input) pairs are sized by the network's activations per input; any size gives the
    same draws."""
    ctx, X = laplace_context("categorical")
    thetas = ctx.posterior.sample(7, torch.Generator().manual_seed(0))
    assert activations_per_input(ctx.model, ctx.theta, X[:1]) == 2 + 5 + 5 + 5 + 5 + 3  # flatten, 2x5 tanh, 3 classes
    monkeypatch.setattr(predictive, "CPU_MAX_ACTIVATIONS", 50)  # two inputs per batch, one sample at a time
    expected = torch.stack([ctx.model(theta, X) for theta in thetas])
    torch.testing.assert_close(nn_samples(ctx, X, thetas), expected)


def test_a_gp_subset_outside_the_training_set_is_an_error_not_all_points():
    ctx, _ = laplace_context("bernoulli", n=20)
    for size in (0, 21):
        with pytest.raises(BnnpredError, match=f"gp_subset_size={size} must be between 1 and the 20 training"):
            predictive.gp_subset(ctx, size, predictive.GPSubset.random, torch.Generator())
    assert len(predictive.gp_subset(ctx, 20, predictive.GPSubset.random, torch.Generator())) == 20


def test_a_gp_that_would_not_fit_in_free_memory_is_refused_with_the_largest_size_that_would(monkeypatch):
    """The need counts the features of the M points, a chunk of predicted inputs and one of training points three
    times each (the default chunk at this size), four MC x MC matrices and the validation cross-kernels; with
    exactly the need of M = 7 free, M = 20 is refused and 7 is named."""
    ctx, _ = laplace_context("categorical", n=20)
    x = ctx.X_train[:1]
    need = [predictive.gp_bytes(ctx.model, ctx.theta, x, M, n_valid=5) for M in (6, 7, 8)]
    C = 3
    # float64; the 2-5-5-3 MLP's factored features per point: inputs a and output gradients g [C, out] per layer
    per_point = (2 + C * 5) + (5 + C * 5) + (5 + C * 3)
    assert need[1] - need[0] == 8 * (per_point + 4 * C * C * (7**2 - 6**2) + 5 * C * C)
    assert need[0] == 8 * (6 * per_point + 3 * 2 * DEFAULT_CHUNK_ELEMS + 4 * (6 * C) ** 2 + 5 * C * 6 * C)
    monkeypatch.setattr(predictive, "available_bytes", lambda device: need[1])
    predictive.check_gp_memory(ctx.model, ctx.theta, x, 7, n_valid=5)
    with pytest.raises(BnnpredError, match=r"gp_subset_size=20 needs about .* GB for the GP, .* use at most 7$"):
        predictive.check_gp_memory(ctx.model, ctx.theta, x, 20, n_valid=5)
