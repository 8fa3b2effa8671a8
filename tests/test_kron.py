"""Kronecker-factored Laplace-GGN (notes-004 eq. 8, §2.3): factors, the exact-prior and dampened posteriors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from bnnpred.app.compose import compose
from bnnpred.app.runner import train
from bnnpred.app.saved_runs import restore
from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.ggn import Structure, curvature
from bnnpred.curvature.jacobians import jacobians
from bnnpred.curvature.kron import (
    KronBlock,
    in_weight_order,
    kron_batch_size,
    kron_ggn,
    layer_output_gradients,
    patch_rows,
    supported_layers,
)
from bnnpred.errors import BnnpredError
from bnnpred.inference import Problem
from bnnpred.likelihoods import Categorical
from bnnpred.posteriors import KronPosterior, load_posterior
from bnnpred.predictive import Context, glm_latent
from bnnpred.reproduce.identity_checks import notes004, relative_error


def dense_block(block) -> torch.Tensor:
    return block.dense if block.dense is not None else torch.kron(block.B, block.A)


def mlp_and_data(n: int, seed: int = 0) -> tuple[FlatModel, torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    model = FlatModel(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 3)).double())
    X = torch.randn(n, 3)
    y = torch.randint(0, 3, (n,))
    return model, X, y


def cnn_and_data(n: int) -> tuple[FlatModel, torch.Tensor, torch.Tensor]:
    """A convolution whose kernel covers the whole 4x4 image (one output position), then a linear layer."""
    torch.manual_seed(1)
    model = FlatModel(nn.Sequential(nn.Conv2d(2, 3, 4), nn.Tanh(), nn.Flatten(), nn.Linear(3, 3)).double())
    return model, torch.randn(n, 2, 4, 4), torch.randint(0, 3, (n,))


def cnn_tiny() -> notes004.Tiny:
    """:func:`cnn_and_data`'s network on its first example as a notes-004 problem."""
    model, X, y = cnn_and_data(1)
    theta = model.theta()
    problem = Problem(model=model, likelihood=Categorical(), X=X, y=y,
                      prior_precision=torch.full_like(theta, notes004.DELTA), theta0=theta, generator=torch.Generator())
    return notes004.Tiny(problem, X)


@pytest.mark.parametrize("network", ["mlp", "cnn"])
def test_one_example_kronecker_blocks_are_the_exact_ggn_blocks(network):
    """notes-004 #2c (B ⊗ A of one example = its exact GGN block, float64 rounding) on the page's 1x5 tanh MLP and
    on a convolution whose kernel covers the whole 4x4 image (one output position)."""
    t = notes004.tiny("softmax", depth=1, n=1, seed=3) if network == "mlp" else cnn_tiny()
    blocks = notes004.one_example_blocks(t)
    assert list(blocks) == (["θ[0:10]", "θ[15:30]"] if network == "mlp" else ["θ[0:96]", "θ[99:108]"])
    assert max(relative_error(*pair) for pair in blocks.values()) <= 1e-10


def test_bias_blocks_and_the_log_likelihood_are_exact_and_batches_do_not_change_the_factors():
    model, X, y = mlp_and_data(20)
    theta = model.theta()
    exact, loglik = curvature(model, Categorical(), theta, X, y, structure=Structure.full)
    whole, kron_loglik = kron_ggn(model, Categorical(), theta, X, y, batch_size=20)
    batched, _ = kron_ggn(model, Categorical(), theta, X, y, batch_size=6)
    assert [block.dense is None for block in whole] == [True, False, True, False]  # weights, bias, weights, bias
    for block in (whole[1], whole[3]):
        torch.testing.assert_close(block.dense, exact[block.start:block.stop, block.start:block.stop])
    torch.testing.assert_close(kron_loglik, loglik)
    for a, b in zip(whole, batched, strict=True):
        torch.testing.assert_close(dense_block(a), dense_block(b))


def test_the_batch_is_sized_by_the_numbers_it_holds_and_does_not_change_the_factors():
    """3-4-3 tanh MLP, softmax (C − 1 = 2 back-propagated rows): one input holds 3 + 4 inputs and 2·(4 + 3) rows, 21
    numbers, so a budget of 100 takes 4 inputs a batch (128 with the default floor); the factors at that size (and
    at the default, all 20 at once) equal those of batches of 6 to float64 rounding."""
    model, X, y = mlp_and_data(20)
    theta, lik, layers = model.theta(), Categorical(), supported_layers(model)
    assert kron_batch_size(model, lik, theta, X, layers, max_elems=100, min_inputs=1) == 4
    assert kron_batch_size(model, lik, theta, X, layers, max_elems=100) == 128
    assert kron_batch_size(model, lik, theta, X[:0], layers) == 1
    reference, _ = kron_ggn(model, lik, theta, X, y, batch_size=6)
    for blocks in (kron_ggn(model, lik, theta, X, y, batch_size=4)[0], kron_ggn(model, lik, theta, X, y)[0]):
        for a, b in zip(blocks, reference, strict=True):
            torch.testing.assert_close(dense_block(a), dense_block(b), rtol=1e-12, atol=1e-14)


def kron_posterior(dampen: bool) -> tuple[KronPosterior, torch.Tensor]:
    model, X, y = mlp_and_data(30)
    theta = model.theta()
    blocks, _ = kron_ggn(model, Categorical(), theta, X, y)
    return KronPosterior(theta, blocks, torch.full_like(theta, 0.5), dampen), X


def test_the_exact_prior_and_dampened_posteriors_have_the_dense_kronecker_covariances():
    """notes-004 #2d-e's formulas (:func:`notes004.dense_kron_covariance`): the inverse of each library posterior's
    dense precision, float64 rounding, on the page's 1x5 tanh problem (N = 30)."""
    t = notes004.tiny("softmax", depth=1, n=30, seed=4)
    for name, post in notes004.kron_posteriors(t).items():
        dense = notes004.dense_kron_covariance(post.blocks, notes004.DELTA, post.dampen)
        assert relative_error(torch.linalg.inv(post.dense_precision()), dense) <= 1e-10, name


@pytest.mark.parametrize("dampen", [False, True])
def test_kron_algebra_matches_the_dense_precision(dampen):
    post, X = kron_posterior(dampen)
    dense = post.dense_precision()
    cov = torch.linalg.inv(dense)
    v = torch.randn(post.mean.numel(), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(post.logdet_precision(), torch.logdet(dense))
    torch.testing.assert_close(post.quad(v), v @ dense @ v)
    torch.testing.assert_close(post.cov_mv(v), cov @ v)
    torch.testing.assert_close(post.marginal_variance(), cov.diagonal())
    model, _, _ = mlp_and_data(1)
    _, J = jacobians(model, post.mean, X[:5])
    torch.testing.assert_close(post.functional_cov(J), J @ cov @ J.mT)
    restored = load_posterior(post.state())
    torch.testing.assert_close(restored.dense_precision(), dense)


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("conv", [nn.Conv2d(3, 2, (3, 2)), nn.Conv2d(3, 2, 3, stride=2, padding=(1, 2), dilation=2),
                                  nn.Conv2d(3, 2, (2, 3), stride=(1, 3), padding=(2, 0), dilation=(3, 1)),
                                  nn.Conv2d(1, 2, 5)],
                         ids=["valid", "strided-padded-dilated", "unequal-sides", "one-channel"])
def test_patch_rows_give_the_unfolded_inputs_gram_in_the_weights_order(conv, channels_last):
    """Σ_{b,t} a_bt a_btᵀ from :func:`patch_rows` (a channels-last gather in (kh, kw, in) order), taken to the
    weight's order by :func:`in_weight_order`, equals the Gram of ``F.unfold``'s patches (float64 rounding), with
    one row per example and output position; rows written into an earlier call's larger memory are the same."""
    a = torch.randn(4, conv.in_channels, 9, 8, dtype=torch.float64)
    if channels_last:
        a = a.contiguous(memory_format=torch.channels_last)
    unfolded = torch.nn.functional.unfold(a, conv.kernel_size, conv.dilation, conv.padding, conv.stride)  # [B, I, T]
    expected = torch.einsum("bit,bjt->ij", unfolded, unfolded)
    earlier = patch_rows(conv, torch.randn(5, conv.in_channels, 9, 8, dtype=torch.float64))
    for rows in (patch_rows(conv, a), patch_rows(conv, a, into=earlier)):
        assert rows.shape == (4 * unfolded.shape[-1], unfolded.shape[1])
        torch.testing.assert_close(in_weight_order(conv, rows.T @ rows), expected, rtol=1e-12, atol=1e-12)
    assert patch_rows(conv, a, into=earlier).data_ptr() == earlier.data_ptr()


def test_a_convolution_with_many_positions_has_the_unfolded_input_factor():
    """kron_ggn's A factor of a convolution with 16 output positions (stride 2, padding 1), run channels last in
    batches of 2 and 1 (the last batch smaller), is the Gram of the unfolded input patches (float64 rounding)."""
    torch.manual_seed(2)
    net = nn.Sequential(nn.Conv2d(2, 3, 3, stride=2, padding=1), nn.Tanh(), nn.Flatten(), nn.Linear(48, 3)).double()
    model, X = FlatModel(net, channels_last=True), torch.randn(5, 2, 8, 8, dtype=torch.float64)
    blocks, _ = kron_ggn(model, Categorical(), model.theta(), X, torch.randint(0, 3, (5,)), batch_size=2)
    unfolded = torch.nn.functional.unfold(X, 3, padding=1, stride=2)
    assert unfolded.shape[-1] == 16
    torch.testing.assert_close(blocks[0].A, torch.einsum("bit,bjt->ij", unfolded, unfolded), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("conv, message", [
    (nn.Conv2d(1, 2, 3, padding=1, padding_mode="reflect"), "padding=\\(1, 1\\), padding_mode='reflect'"),
    (nn.Conv2d(1, 2, 3, padding="same"), "padding='same', padding_mode='zeros'")], ids=["reflect", "same"])
def test_convolutions_other_than_zero_padded_are_refused(conv, message):
    model = FlatModel(nn.Sequential(conv, nn.Flatten(), nn.Linear(32, 2)).double())
    with pytest.raises(BnnpredError, match=f"numeric zero padding; 0 has {message}"):
        kron_ggn(model, Categorical(), model.theta(), torch.randn(2, 1, 4, 4, dtype=torch.float64),
                 torch.zeros(2, dtype=torch.long))


def test_unsupported_layers_are_named():
    model = FlatModel(nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)).double())
    with pytest.raises(BnnpredError, match="Linear and Conv2d layers only, not 1.weight"):
        kron_ggn(model, Categorical(), model.theta(), torch.randn(4, 3), torch.zeros(4, dtype=torch.long))


def test_a_kron_laplace_run_gives_glm_samples_that_match_the_closed_form(tmp_path):
    """Two moons, thesis MLP: the GLM predictive sampled from the Kronecker posterior agrees with its probit
    closed form, and the run saves a posterior that ``bnnpred eval`` restores."""
    cfg = compose(["inference.structure=kron", "inference.map.steps=300", "selection=none",
                   "predictive.kinds=[glm,closed]", "predictive.n_samples=2000", "plot.enabled=false",
                   "progress=false"])
    document = train(cfg, tmp_path).document
    test = document["metrics"]["test"]
    assert abs(test["glm"]["nll"] - test["closed"]["nll"]) < 0.02
    assert document["info"]["log_marglik"] < 0
    _, ctx = restore(tmp_path)
    assert isinstance(ctx.posterior, KronPosterior)


def test_ood_auc_is_reported_per_predictive_and_the_ood_probabilities_saved(data_root, tmp_path):
    """Fashion-MNIST with MNIST as the OOD set (notes-004 §3.5) on a small MLP with a dampened Kronecker Laplace: the
    MAP and bnn predictives tell the sets apart well above chance, and predictions.npz keeps the OOD probabilities
    for the entropy histograms."""
    cfg = compose(["dataset=fashion_mnist", "dataset.n_train=300", "ood=mnist", "model=mlp", "model.width=20",
                   "inference.structure=kron", "inference.dampen=true", "inference.map.steps=150",
                   "inference.map.lr=0.01", "selection=none", "predictive.kinds=[map,nn]", "predictive.n_samples=10",
                   "progress=false"])
    document = train(cfg, tmp_path).document
    aucs = {kind: document["metrics"]["test"][kind]["ood_auc"] for kind in ("map", "nn")}
    assert all(0.6 < auc <= 1 for auc in aucs.values()), aucs  # chance is 0.5
    saved = np.load(tmp_path / "predictions.npz")
    assert saved["nn_ood_probs"].shape == (10000, 10)
    assert (tmp_path / "ood_entropy.png").is_file()


@pytest.mark.parametrize("make", [mlp_and_data, cnn_and_data])
def test_layer_factors_give_the_functional_covariance_without_jacobians(make):
    """J Σ Jᵀ from each layer's (inputs, output gradients) equals the dense computation with explicit Jacobians,
    for a dense network and a convolutional one (several output positions)."""
    model, X, y = make(12)
    if make is cnn_and_data:  # a 3x3 kernel on 4x4 images: four output positions per channel
        torch.manual_seed(2)
        model = FlatModel(nn.Sequential(nn.Conv2d(2, 3, 3), nn.Tanh(), nn.Flatten(), nn.Linear(12, 3)).double())
    theta = model.theta()
    blocks, _ = kron_ggn(model, Categorical(), theta, X, y)
    post = KronPosterior(theta, blocks, torch.full_like(theta, 0.5))
    f, factors = layer_output_gradients(model, theta, X[:5])
    _, J = jacobians(model, theta, X[:5])
    torch.testing.assert_close(post.functional_cov_from_layers(factors), post.functional_cov(J))
    torch.testing.assert_close(f, model(theta, X[:5]))


def test_glm_latent_of_a_kron_posterior_matches_the_jacobian_computation():
    model, X, y = mlp_and_data(12)
    theta = model.theta()
    blocks, _ = kron_ggn(model, Categorical(), theta, X, y)
    shifted = KronPosterior(theta + 0.1, blocks, torch.full_like(theta, 0.5))  # a mean away from θ*
    ctx = Context(model, Categorical(), theta, shifted, shifted.prior_precision, X)
    mean, cov = glm_latent(ctx, X[:4])
    f, J = jacobians(model, theta, X[:4])
    torch.testing.assert_close(mean, f + J @ (shifted.mean - theta))
    torch.testing.assert_close(cov, shifted.functional_cov(J))


def test_float32_factors_with_many_zero_eigenvalues_decompose():
    """Dead units leave Kronecker factors with hundreds of repeated zero eigenvalues; the eigendecomposition runs in
    float64 and the precision keeps the factors' dtype."""
    gen = torch.Generator().manual_seed(0)
    a = torch.zeros(400, dtype=torch.float32)
    a[:3] = torch.rand(3, generator=gen, dtype=torch.float32) * 1e4  # three live inputs of 400
    A = torch.outer(a, a) + torch.diag(a)
    B = torch.eye(2, dtype=torch.float32) * 0.5
    post = KronPosterior(torch.zeros(800, dtype=torch.float32), [KronBlock(0, 800, B=B, A=A)],
                         torch.full((800,), 1e3, dtype=torch.float32))
    assert post.eigen[0].eig.dtype == torch.float32
    expected = torch.kron(B, A) + 1e3 * torch.eye(800, dtype=torch.float32)
    torch.testing.assert_close(post.dense_precision(), expected, rtol=1e-4, atol=1e-2)
