"""Low-rank-plus-diagonal posterior (notes-002 §2.5-2.6): Woodbury algebra against dense matrices, the corrected
sampler, and the U = 0 (mean-field) limit."""

from __future__ import annotations

import pytest
import torch

from bnnpred.posteriors import LowRankDiagPosterior, load_posterior
from bnnpred.posteriors.lowrank import ROW_BLOCK, weighted_gram
from bnnpred.reproduce.identity_checks import notes002, relative_error


def posterior(P: int = 30, L: int = 4, zero_u: bool = False) -> LowRankDiagPosterior:
    gen = torch.Generator().manual_seed(0)
    U = torch.zeros(P, L) if zero_u else torch.randn(P, L, generator=gen)
    d = torch.rand(P, generator=gen) + 0.5
    return LowRankDiagPosterior(torch.randn(P, generator=gen), U, d)


@pytest.mark.parametrize("zero_u", [False, True])
def test_woodbury_algebra_matches_the_dense_precision(zero_u):
    post = posterior(zero_u=zero_u)
    dense = post.dense_precision()
    cov = torch.linalg.inv(dense)
    v = torch.randn(30, generator=torch.Generator().manual_seed(1))
    J = torch.randn(5, 3, 30, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(post.logdet_precision(), torch.logdet(dense))
    torch.testing.assert_close(post.quad(v), v @ dense @ v)
    torch.testing.assert_close(post.marginal_variance(), cov.diagonal())
    torch.testing.assert_close(post.functional_cov(J), J @ cov @ J.mT)
    torch.testing.assert_close(load_posterior(post.state()).dense_precision(), dense)


@pytest.mark.parametrize("P", [7, ROW_BLOCK, 2 * ROW_BLOCK + 5, 70 * ROW_BLOCK])  # one block, exact blocks, a rest, 64
def test_the_blockwise_weighted_gram_is_the_product(P):
    """Uᵀ diag(w) U by blocks of rows equals the one product to float64 rounding, whatever the rows' split."""
    gen = torch.Generator().manual_seed(3)
    U, w = torch.randn(P, 5, generator=gen, dtype=torch.float64), torch.rand(P, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(weighted_gram(U, w), U.T @ (U * w[:, None]), rtol=1e-12, atol=1e-12 * P)


def test_woodbury_solve_and_the_sampler_factor_are_exact():
    """notes-002 #1 (cov_mv = a dense solve) and #2a (the sampler's factor T: TTᵀ = (UUᵀ + diag d)⁻¹, U random,
    ≡ 0 and of rank 3 < L) at D = 30, L = 4, float64 rounding (the page: D = 500 and 200)."""
    assert relative_error(*notes002.woodbury_solve(D=30, L=4)) < 1e-10
    for name, post in notes002.sampler_posteriors(30, L=4).items():
        T = notes002.sampler_factor(post)
        assert relative_error(T @ T.T, torch.linalg.inv(post.dense_precision())) < 1e-10, name


def test_sampler_draws_are_centred_on_the_mean():
    """The mean of 2×10⁴ draws is µ within 0.05 (their covariance is notes-002 #2b's, of zero-mean posteriors)."""
    post = posterior()
    draws = notes002.sampler_draws(post, n=20000, seed=3)
    torch.testing.assert_close(draws.mean(0), post.mean, atol=0.05, rtol=0)
