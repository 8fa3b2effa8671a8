"""The GGN assembled one triangle at a time (issue 21): equal to the dense product ``Σ (L J)ᵀ (L J)``."""

import pytest
import torch

from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.ggn import Structure, curvature, gradient_and_ggn, sampled_gradient_and_ggn
from bnnpred.curvature.jacobians import stacked_jacobians
from bnnpred.curvature.syrk import (
    BLAS_MIN_SIZE,
    _blas_syrk_lower_,
    _blocked_syrk_lower_,
    gram_lower_,
    mirror_lower_,
    syrk_lower_,
)
from bnnpred.likelihoods import Categorical, reduced_sqrt
from bnnpred.models.mlp import MLPConfig, build_mlp
from tests.helpers import tiny_problem

# float32: each entry of G is a sum of K = N·C products of float32 numbers; its rounding error is bounded by about
# K·ε·Σ|a_ki a_kj| and is typically √K·ε times that. With K = 1,200 and ε = 6e-8 the bound is 7e-5 of the largest
# entry's scale; we allow 2e-5 of max |G| and measured 1.4e-7 (the errors are not all of one sign).
FLOAT32_REL_TOL = 2e-5


def dense_ggn(model, likelihood, theta, X):
    """The reference: all Jacobians stacked and one general product ``AᵀA`` with ``A = L J`` ``[N·C, P]``."""
    f, J = stacked_jacobians(model, theta, X)
    A = (likelihood.hessian_sqrt(f) @ J).reshape(-1, theta.numel())
    return A.T @ A


@pytest.mark.parametrize("update", [syrk_lower_, _blas_syrk_lower_, _blocked_syrk_lower_],
                         ids=["small", "blas", "blocked"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_one_triangle_updates_equal_the_general_product(update, dtype):
    gen = torch.Generator().manual_seed(0)
    A1, A2 = torch.randn(57, 29, generator=gen, dtype=dtype), torch.randn(3, 29, generator=gen, dtype=dtype)
    G = torch.zeros(29, 29, dtype=dtype)
    G[tuple(torch.triu_indices(29, 29, offset=1))] = float("nan")  # the upper triangle must never be read
    update(G, A1)
    update(G, A2)
    mirror_lower_(G)
    expected = A1.T @ A1 + A2.T @ A2
    tol = 1e-13 if dtype is torch.float64 else 1e-5
    torch.testing.assert_close(G, expected, rtol=tol, atol=tol * float(expected.abs().max()))
    assert torch.equal(G, G.mT)  # exactly symmetric, and the stale upper triangle never read


@pytest.mark.parametrize("shape", [(7, 5, 9), (7, 9, 5), (7, 6, 1)], ids=["batched", "stacked", "linear layer"])
def test_gram_of_column_blocks_equals_the_stacked_columns_product(shape):
    """``Σ_n X_n X_nᵀ`` in either path (batched when ``T ≥ d``, in chunks smaller than the batch here; stacked
    columns otherwise) equals the product of the stacked columns, added to what ``G`` held."""
    X = torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    start = torch.randn(shape[1], shape[1], dtype=torch.float64)
    G = mirror_lower_(gram_lower_(start.clone(), X, max_elems=2 * shape[1] ** 2))
    stacked = X.mT.reshape(-1, shape[1])
    want = start.tril() + start.tril(-1).mT + stacked.T @ stacked
    torch.testing.assert_close(G, want, rtol=1e-12, atol=1e-12)


def test_mirror_copies_the_lower_triangle_across_blocks():
    G = torch.arange(600.0**2).reshape(600, 600)  # more rows than one mirror block
    expected = G.tril() + G.tril(-1).mT
    torch.testing.assert_close(mirror_lower_(G), expected, rtol=0, atol=0)


def test_reduced_sqrt_keeps_the_softmax_hessian_with_one_row_fewer():
    f = torch.randn(40, 5, generator=torch.Generator().manual_seed(1)) * 3
    L = Categorical().hessian_sqrt(f)
    R = reduced_sqrt(L)
    assert R.shape == (40, 4, 5)
    torch.testing.assert_close(R.mT @ R, L.mT @ L, rtol=0, atol=1e-15)
    full_rank = torch.randn(7, 3, 3, generator=torch.Generator().manual_seed(2))
    assert reduced_sqrt(full_rank) is full_rank


@pytest.mark.parametrize("kind", ["gaussian", "bernoulli", "categorical"])
def test_symmetric_assembly_equals_the_dense_ggn_in_float64(kind):
    problem, lik = tiny_problem(kind, depth=2, n=30, width=6)
    args = (problem.model, lik, problem.theta0, problem.X, problem.y)
    expected = dense_ggn(problem.model, lik, problem.theta0, problem.X)
    scale = float(expected.abs().max())
    G, _ = curvature(*args, max_elems=7 * problem.theta0.numel() * 3)  # several chunks
    torch.testing.assert_close(G, expected, rtol=0, atol=1e-10 * scale)
    _, G2, _ = gradient_and_ggn(*args)
    torch.testing.assert_close(G2, expected, rtol=0, atol=1e-10 * scale)
    _, G3, _ = sampled_gradient_and_ggn(problem.model, lik, problem.theta0.expand(2, -1), problem.X, problem.y)
    torch.testing.assert_close(G3, expected, rtol=0, atol=1e-10 * scale)
    diag, _ = curvature(*args, structure=Structure.diag)
    torch.testing.assert_close(diag, expected.diagonal(), rtol=0, atol=1e-10 * scale)


def test_symmetric_assembly_in_float32_is_within_the_stated_tolerance_of_float64():
    """The same network, data and θ: the float32 GGN against the float64 one (P = 2,246, large enough for ?syrk;
    N·C = 1,200), and the float64 one against the dense product."""
    torch.manual_seed(0)
    module = build_mlp(MLPConfig(depth=2, width=40), (8,), 6)
    X = torch.randn(200, 8, generator=torch.Generator().manual_seed(0))
    y = torch.randint(0, 6, (200,), generator=torch.Generator().manual_seed(1))
    model64 = FlatModel(module)
    assert model64.n_params >= BLAS_MIN_SIZE
    G64, _ = curvature(model64, Categorical(), model64.theta(), X, y)
    expected = dense_ggn(model64, Categorical(), model64.theta(), X)
    torch.testing.assert_close(G64, expected, rtol=0, atol=1e-10 * float(expected.abs().max()))
    model32 = FlatModel(module.float())
    G32, _ = curvature(model32, Categorical(), model32.theta(), X.float(), y)
    error = float((G32.double() - G64).abs().max() / G64.abs().max())
    assert error < FLOAT32_REL_TOL
    assert torch.equal(G32, G32.mT)
