"""Last-layer Laplace-GGN (notes-003 "GLM-GGN-Full" on the last layer): the full, diagonal and Kronecker posteriors
over the output layer with the rest fixed at θ* equal the same blocks of the all-weights Laplace, in float64."""

from __future__ import annotations

import pytest
import torch

from bnnpred.curvature.ggn import Curvature, Structure
from bnnpred.inference import Fit
from bnnpred.inference.laplace_ggn import LaplaceGGNConfig, SubsetOfWeights, fit_laplace_ggn, laplace_at
from bnnpred.inference.map import MapConfig
from bnnpred.marglik import log_marglik
from bnnpred.posteriors import SubsetPosterior, load_posterior
from bnnpred.predictive import Context, closed_predictive, glm_latent, gp_condition, gp_latent, nn_predictive
from tests.helpers import tiny_problem

MAP = MapConfig(steps=200, lr=1e-2)


def fitted(kind: str, structure: Structure, subset: SubsetOfWeights):
    problem, lik = tiny_problem(kind, depth=2, n=16)
    problem.prior_precision[-problem.model.sizes[-1]:] = 2.5  # the output bias's own precision: the block's entries
    # must be the ones used
    return problem, lik, fit_laplace_ggn(problem, LaplaceGGNConfig(structure=structure, subset_of_weights=subset,
                                                                   map=MAP))


@pytest.mark.parametrize("kind", ["gaussian", "categorical"])
def test_last_layer_full_laplace_is_the_full_laplace_restricted_to_the_last_layer(kind):
    """Π_LL = G_LL + Δ_LL (the last layer's block of the all-weights GGN), the evidence is the block's, and the
    glm predictive's covariance is J_L Σ_L J_Lᵀ."""
    problem, lik, last = fitted(kind, Structure.full, SubsetOfWeights.last_layer)
    post = last.posterior
    assert isinstance(post, SubsetPosterior) and post.names == ["5.weight", "5.bias"]
    block = slice(post.start, post.stop)
    whole = laplace_at(problem, Fit(theta=last.theta, posterior=None), Structure.full, Curvature.ggn)
    Pi = whole.posterior.dense_precision()
    torch.testing.assert_close(post.inner.dense_precision(), Pi[block, block], rtol=1e-12, atol=1e-12)
    loglik = whole.info["train_loglik_map"]
    expected = log_marglik(torch.tensor(loglik, dtype=torch.float64), last.theta[block],
                           problem.prior_precision[block], torch.logdet(Pi[block, block]))
    assert last.log_evidence == pytest.approx(float(expected), rel=1e-12)
    X = torch.randn(6, problem.X.shape[1], generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    ctx = Context(problem.model, lik, last.theta, post, problem.prior_precision, problem.X)
    _, cov = glm_latent(ctx, X)
    J = torch.func.vmap(torch.func.jacrev(lambda t, x: problem.model(t, x[None])[0]), (None, 0))(last.theta, X)
    J_L = J[..., block]
    torch.testing.assert_close(cov, J_L @ torch.linalg.inv(Pi[block, block]) @ J_L.mT, rtol=1e-9, atol=1e-12)
    draws = post.sample(5, torch.Generator().manual_seed(0))
    assert torch.equal(draws[:, : post.start], last.theta[: post.start].expand(5, -1))
    assert not torch.equal(draws[:, block], last.theta[block].expand(5, -1))


@pytest.mark.parametrize("structure", [Structure.diag, Structure.kron])
def test_last_layer_diagonal_and_kronecker_posteriors_are_the_blocks_of_the_all_weights_ones(structure):
    problem, lik, last = fitted("categorical", structure, SubsetOfWeights.last_layer)
    _, _, whole = fitted("categorical", structure, SubsetOfWeights.all)
    torch.testing.assert_close(last.theta, whole.theta, rtol=0, atol=0)
    block = slice(last.posterior.start, last.posterior.stop)
    torch.testing.assert_close(last.posterior.inner.dense_precision(),
                               whole.posterior.dense_precision()[block, block], rtol=1e-10, atol=1e-12)


def test_every_predictive_runs_on_a_last_layer_posterior_and_the_gp_on_all_points_is_its_glm():
    problem, lik, last = fitted("categorical", Structure.full, SubsetOfWeights.last_layer)
    ctx = Context(problem.model, lik, last.theta, last.posterior, problem.prior_precision, problem.X)
    X = torch.randn(5, problem.X.shape[1], generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    mean_w, cov_w = glm_latent(ctx, X)
    sub = ctx.within_subset()
    mean_f, cov_f = gp_latent(sub, X, gp_condition(sub, torch.arange(len(problem.X))))
    torch.testing.assert_close(mean_f, mean_w)
    torch.testing.assert_close(cov_f, cov_w, rtol=1e-8, atol=1e-10)
    assert closed_predictive(ctx, X).probs.shape == (5, 3)
    assert nn_predictive(ctx, X, 20, torch.Generator().manual_seed(0)).probs.shape == (5, 3)
    again = load_posterior(last.posterior.state())
    torch.testing.assert_close(glm_latent(Context(problem.model, lik, last.theta, again, problem.prior_precision,
                                                  problem.X), X)[1], cov_w)
