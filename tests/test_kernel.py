"""The GLM kernel J S₀ Jᵀ from layer factors (notes-004 eq. 14) and the GP predictive built on it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from bnnpred.curvature import kernel
from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.ggn import curvature
from bnnpred.curvature.jacobians import jacobians
from bnnpred.likelihoods import Categorical
from bnnpred.posteriors import FullPosterior
from bnnpred.predictive import Context, glm_latent, gp_condition, gp_latent


def cnn(seed: int = 0) -> FlatModel:
    """A 3x3 convolution on 5x5 images (nine output positions), pooling, and two linear layers."""
    torch.manual_seed(seed)
    return FlatModel(nn.Sequential(nn.Conv2d(2, 3, 3), nn.Tanh(), nn.Flatten(), nn.Linear(27, 5), nn.Tanh(),
                                   nn.Linear(5, 4)).double())


def layered_prior(model: FlatModel, ard_layer: str | None = None) -> torch.Tensor:
    """Prior variances constant per tensor but different between tensors; ``ard_layer`` gets one per weight."""
    gen = torch.Generator().manual_seed(3)
    parts = [torch.full((size,), 0.2 + i / 4, dtype=torch.float64) for i, size in enumerate(model.sizes)]
    if ard_layer is not None:
        i = model.names.index(ard_layer)
        parts[i] = torch.rand(model.sizes[i], generator=gen, dtype=torch.float64) + 0.1
    return torch.cat(parts)


def features(model: FlatModel, X: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, kernel.Features]:
    chunks = list(kernel.iter_features(model, model.theta(), X, s))
    return torch.cat([f for _, f, _ in chunks]), kernel.concat([u for _, _, u in chunks])


def explicit(model: FlatModel, X1: torch.Tensor, X2: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    theta = model.theta()
    _, J1 = jacobians(model, theta, X1)
    _, J2 = jacobians(model, theta, X2)
    return torch.einsum("bcp,dep->bcde", J1 * s, J2)


@pytest.mark.parametrize("ard_layer", [None, "3.weight"])
@pytest.mark.parametrize("per_class", [False, True])
def test_layer_factor_kernel_equals_the_explicit_jacobian_kernel(ard_layer, per_class):
    """Factored linear layers, formed convolution Jacobians, and a linear layer whose prior is not constant
    (formed explicitly) all give J S₀ Jᵀ; per class keeps exactly the same-class pairs."""
    model = cnn()
    X1, X2 = torch.randn(4, 2, 5, 5, dtype=torch.float64), torch.randn(3, 2, 5, 5, dtype=torch.float64)
    s = layered_prior(model, ard_layer)
    expected = explicit(model, X1, X2, s)
    if per_class:
        expected = expected * torch.eye(4, dtype=torch.float64)[None, :, None, :]
    f1, u = features(model, X1, s)
    _, v = features(model, X2, s)
    kinds = [type(part).__name__ for part in u]
    assert kinds == ["Dense", "Dense" if ard_layer else "Factored", "Factored"]
    torch.testing.assert_close(kernel.cross_kernel(u, v, per_class), expected)
    self_expected = explicit(model, X1, X1, s).diagonal(dim1=0, dim2=2).permute(2, 0, 1)
    if per_class:
        self_expected = torch.diag_embed(self_expected.diagonal(dim1=1, dim2=2))
    torch.testing.assert_close(kernel.self_kernel(u, per_class), self_expected)
    torch.testing.assert_close(f1, model(model.theta(), X1))


@pytest.mark.parametrize("network", ["layer-norm", "reflect-padded"])
def test_networks_with_other_layers_use_their_whole_jacobian(network):
    """A layer the factors do not cover (a layer norm), or a convolution whose padding is not zeros (its unfolded
    patches would be zero-padded), sends the kernel through the whole Jacobian."""
    torch.manual_seed(0)
    if network == "layer-norm":
        model = FlatModel(nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2)).double())
        X = torch.randn(5, 3, dtype=torch.float64)
    else:
        model = FlatModel(nn.Sequential(nn.Conv2d(1, 2, 3, padding=1, padding_mode="reflect"), nn.Tanh(),
                                        nn.Flatten(), nn.Linear(32, 2)).double())
        X = torch.randn(5, 1, 4, 4, dtype=torch.float64)
    s = layered_prior(model)
    _, feats = features(model, X, s)
    assert len(feats) == 1 and isinstance(feats[0], kernel.Dense)
    torch.testing.assert_close(kernel.cross_kernel(feats, feats), explicit(model, X, X, s))


def test_chunked_features_concatenate_to_the_whole_set():
    model = cnn()
    X = torch.randn(7, 2, 5, 5, dtype=torch.float64)
    s = layered_prior(model)
    chunks = list(kernel.iter_features(model, model.theta(), X, s, max_elems=1000))
    assert len(chunks) > 2
    assert [(rows.start, rows.stop) for rows, _, _ in chunks][:2] == [(0, 1), (1, 2)]
    parts = [u for _, _, u in chunks]
    whole = kernel.concat(parts)
    torch.testing.assert_close(kernel.cross_kernel(whole, whole), explicit(model, X, X, s))
    assert all(part is None for u in parts for part in u)  # each chunk's part released as it was joined


def test_gp_on_all_points_of_a_cnn_equals_the_glm_latent():
    """notes-004 §5 item 3 at CNN shape: the function-space GP on all N points is the weight-space full
    Laplace-GGN's J Σ Jᵀ, with a per-tensor prior."""
    model = cnn(1)
    X = torch.randn(10, 2, 5, 5, dtype=torch.float64)
    y = torch.randint(0, 4, (10,))
    theta = model.theta()
    prior_precision = 1 / layered_prior(model)
    ggn, _ = curvature(model, Categorical(), theta, X, y)
    posterior = FullPosterior(theta, ggn + torch.diag(prior_precision))
    ctx = Context(model, Categorical(), theta, posterior, prior_precision, X)
    X_test = torch.randn(3, 2, 5, 5, dtype=torch.float64)
    mean_w, cov_w = glm_latent(ctx, X_test)
    mean_f, cov_f = gp_latent(ctx, X_test, gp_condition(ctx, torch.arange(10)))
    torch.testing.assert_close(mean_f, mean_w)
    torch.testing.assert_close(cov_f, cov_w, rtol=1e-7, atol=1e-10)


def test_per_class_gp_is_the_laplace_gp_of_the_block_diagonal_kernel():
    """gp_per_class: K** − K*M (I + W K_MM)⁻¹ W K_M* with the same-class kernel and W = blockdiag Λ_m, computed
    densely from explicit Jacobians (no factor of Λ, which is singular for the softmax)."""
    model = cnn(2)
    X = torch.randn(6, 2, 5, 5, dtype=torch.float64)
    X_test = torch.randn(3, 2, 5, 5, dtype=torch.float64)
    theta, s = model.theta(), layered_prior(model)
    ctx = Context(model, Categorical(), theta, None, 1 / s, X)
    _, cov = gp_latent(ctx, X_test, gp_condition(ctx, torch.arange(6), per_class=True))
    same_class = torch.eye(4, dtype=torch.float64)[None, :, None, :]
    K = (explicit(model, X, X, s) * same_class).reshape(24, 24)
    K_xM = (explicit(model, X_test, X, s) * same_class).reshape(12, 24)
    K_xx = (explicit(model, X_test, X_test, s) * same_class).reshape(12, 12)
    W = torch.block_diag(*Categorical().hessian(model(theta, X)))
    dense = K_xx - K_xM @ torch.linalg.solve(torch.eye(24, dtype=torch.float64) + W @ K, W @ K_xM.T)
    expected = torch.stack([dense[4 * i : 4 * i + 4, 4 * i : 4 * i + 4] for i in range(3)])  # C = 4
    torch.testing.assert_close(cov, expected)
