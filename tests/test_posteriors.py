"""Gaussian posterior structures against dense float64 oracles."""

import pytest
import torch

from bnnpred.errors import BnnpredError
from bnnpred.posteriors import DiagPosterior, FullPosterior
from bnnpred.posteriors.linalg import robust_cholesky


def random_precision(P: int, seed: int = 0) -> torch.Tensor:
    A = torch.randn(P, P, generator=torch.Generator().manual_seed(seed))
    return A @ A.T / P + 0.5 * torch.eye(P)


def make(structure: str, P: int = 6):
    mean = torch.linspace(-1, 1, P)
    if structure == "full":
        return FullPosterior(mean, random_precision(P))
    return DiagPosterior(mean, torch.linspace(0.5, 3.0, P))


@pytest.mark.parametrize("structure", ["full", "diag"])
def test_logdet_quad_and_log_prob_match_dense(structure):
    post = make(structure)
    dense = post.dense_precision()
    theta = torch.randn(dense.shape[0], generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(post.logdet_precision(), torch.logdet(dense))
    d = theta - post.mean
    torch.testing.assert_close(post.quad(d), d @ dense @ d)
    mvn = torch.distributions.MultivariateNormal(post.mean, precision_matrix=dense)
    torch.testing.assert_close(post.log_prob(theta), mvn.log_prob(theta))


@pytest.mark.parametrize("structure", ["full", "diag"])
def test_functional_cov_is_J_sigma_Jt(structure):
    post = make(structure)
    J = torch.randn(4, 3, post.mean.numel(), generator=torch.Generator().manual_seed(2))
    sigma = torch.linalg.inv(post.dense_precision())
    torch.testing.assert_close(post.functional_cov(J), J @ sigma @ J.mT)
    torch.testing.assert_close(post.marginal_variance(), sigma.diagonal())


@pytest.mark.parametrize("structure", ["full", "diag"])
def test_sample_moments_within_standard_errors(structure):
    post = make(structure)
    n = 40000
    samples = post.sample(n, torch.Generator().manual_seed(3))
    sigma = torch.linalg.inv(post.dense_precision())
    se_mean = (sigma.diagonal() / n).sqrt()
    assert ((samples.mean(0) - post.mean).abs() < 4 * se_mean).all()
    emp = torch.cov(samples.T)
    assert torch.linalg.norm(emp - sigma) / torch.linalg.norm(sigma) < 0.03


def test_jitter_rescues_a_semidefinite_precision_and_is_returned_then_errors():
    v = torch.tensor([1.0, 2.0, 3.0])
    singular = torch.outer(v, v)
    factor, jitter = robust_cholesky(singular)
    assert jitter > 0
    scale = singular.diagonal().mean()
    assert torch.allclose(factor @ factor.T, singular + jitter * scale * torch.eye(3), atol=1e-12)
    assert robust_cholesky(torch.eye(3)).jitter == 0.0
    with pytest.raises(BnnpredError, match="not positive definite"):
        robust_cholesky(-torch.eye(3))


@pytest.mark.parametrize("which", ["mlp", "cnn", "last_layer"])
def test_a_diagonal_posteriors_glm_covariance_from_layer_factors_equals_the_jacobian_one(which):
    """J Σ Jᵀ of a diagonal Σ from each layer's factors (no [B, C, P] Jacobian: the glm predictive of image
    networks) = (J / π) Jᵀ from the formed Jacobians, float64 to 1e-10 relative; the glm latent mean is shifted by
    the same J (µ − θ*); a last-layer posterior uses its block's factors."""
    from bnnpred.curvature.functional import FlatModel
    from bnnpred.curvature.jacobians import iter_jacobians
    from bnnpred.likelihoods import Categorical
    from bnnpred.models import build_model
    from bnnpred.models.cnn import ThesisCNNConfig
    from bnnpred.models.mlp import MLPConfig
    from bnnpred.posteriors import DiagPosterior, SubsetPosterior
    from bnnpred.predictive import Context, glm_latent

    torch.manual_seed(0)
    if which == "cnn":
        module, X = build_model(ThesisCNNConfig(), (1, 28, 28), 3), torch.randn(5, 1, 28, 28)
    else:
        module, X = build_model(MLPConfig(depth=2, width=7), (3,), 4), torch.randn(9, 3)
    model = FlatModel(module.eval())
    theta = model.theta()
    P = len(theta)
    start = P - (7 * 4 + 4) if which == "last_layer" else 0
    precision = torch.rand(P - start, generator=torch.Generator().manual_seed(1), dtype=theta.dtype) + 0.5
    inner = DiagPosterior(theta[start:] + 0.01, precision)
    post = inner if start == 0 else SubsetPosterior(torch.cat([theta[:start], inner.mean]), inner, start, P,
                                                    model.names[-2:])
    mean, cov = glm_latent(Context(model, Categorical(), theta, post, torch.ones_like(theta), X), X)
    (_, f, J), = iter_jacobians(model, theta, X)
    J = J[..., start:]
    torch.testing.assert_close(cov, (J / precision) @ J.mT, rtol=1e-10, atol=1e-10 * float(cov.abs().max()))
    torch.testing.assert_close(mean, f + J @ (inner.mean - theta[start:]), rtol=1e-10, atol=1e-10)
