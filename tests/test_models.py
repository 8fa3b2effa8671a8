"""Architectures (parameter counts the papers state or imply) and batch-norm state across training and saving."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from omegaconf import OmegaConf
from torch import nn

from bnnpred.app.compose import compose
from bnnpred.curvature.functional import FlatModel
from bnnpred.errors import BnnpredError
from bnnpred.inference import Session
from bnnpred.inference.map import MapConfig, train_map
from bnnpred.models import build_model, n_params
from bnnpred.models.cnn import Pooling, ThesisCNNConfig, build_thesis_cnn
from bnnpred.models.resnet import PreActResNetConfig, build_preact_resnet18
from tests.helpers import tiny_problem


@pytest.mark.parametrize("shape,classes,expected", [((3, 32, 32), 10, 11_171_146), ((1, 28, 28), 10, 11_169_994),
                                                    ((3, 32, 32), 100, 11_217_316)])
def test_preact_resnet18_parameter_count(shape, classes, expected):
    """notes-001 §3.1's counts for the CIFAR PreActResNet-18 default."""
    assert n_params(build_preact_resnet18(PreActResNetConfig(), shape, classes)) == expected


@pytest.mark.parametrize("name,shape,expected", [("3c3d", (3, 32, 32), 895_210), ("3c3d", (1, 28, 28), 892_010),
                                                 ("allcnnc", (3, 32, 32), 1_369_738),
                                                 ("mlp_images", (1, 28, 28), 1_494_154)])
def test_image_networks_have_the_papers_parameter_counts(name, shape, expected):
    """notes-004 §3.4: 3c3d, All-CNN-C and the (F)MNIST MLP, and their outputs for a batch of two images."""
    cfg = compose([f"model={name}"]).model
    module = build_model(cfg, shape, 10)
    assert n_params(module) == expected
    assert module(torch.zeros(2, *shape)).shape == (2, 10)


def test_softplus_thesis_cnn_keeps_the_thesis_parameter_count():
    module = build_thesis_cnn(ThesisCNNConfig(activation="softplus"), (1, 28, 28), 1)
    assert n_params(module) == 4587
    assert sum(isinstance(m, nn.Softplus) for m in module.modules()) == 4


def test_smooth_thesis_cnn_averages_instead_of_max_pooling():
    """thesis Fig. 5.6's smooth variant (GELU, average pooling): the thesis's P, and the pooling of a 2x2 block is
    its mean (a smooth function of the block, where max-pooling has kinks)."""
    module = build_thesis_cnn(ThesisCNNConfig(activation="gelu", pooling=Pooling.avg), (1, 28, 28), 1)
    assert n_params(module) == 4587
    pools = [m for m in module.modules() if isinstance(m, nn.AvgPool2d)]
    assert len(pools) == 2 and not any(isinstance(m, nn.MaxPool2d) for m in module.modules())
    block = torch.tensor([[[[1.0, 2.0], [3.0, 6.0]]]])
    assert float(pools[0](block)) == 3.0


def batchnorm_problem(tmp_path):
    """A linear-BN-tanh-linear network on the tiny Bernoulli problem's data, with a shared MAP store."""
    problem, _ = tiny_problem("bernoulli", n=40)
    torch.manual_seed(0)
    model = FlatModel(nn.Sequential(nn.Linear(2, 6), nn.BatchNorm1d(6), nn.Tanh(), nn.Linear(6, 1)).double())
    theta = model.theta()
    return dataclasses.replace(problem, model=model, theta0=theta, prior_precision=torch.ones_like(theta),
                               session=Session(fit_cache=tmp_path / "cache"))


def test_training_updates_batchnorm_statistics_and_evaluation_uses_them(tmp_path):
    problem = batchnorm_problem(tmp_path)
    fit = train_map(problem, MapConfig(steps=50, lr=1e-2))
    stats = problem.model.buffer_state()
    assert stats["1.num_batches_tracked"] == 50 and not torch.equal(stats["1.running_var"], torch.ones(6))
    one, batch = problem.model(fit.theta, problem.X[:1]), problem.model(fit.theta, problem.X)
    torch.testing.assert_close(one, batch[:1])  # eval mode: an example's output does not depend on its batch
    assert not problem.model.module.training


def test_a_cached_map_brings_its_batchnorm_statistics(tmp_path):
    trained = batchnorm_problem(tmp_path)
    train_map(trained, MapConfig(steps=30, lr=1e-2))
    fresh = batchnorm_problem(tmp_path)  # a new network with untouched statistics, same content key
    train_map(fresh, MapConfig(steps=30, lr=1e-2))
    for name, value in trained.model.buffer_state().items():
        torch.testing.assert_close(fresh.model.buffers[name], value)


def test_variational_laplace_refuses_the_relu_image_networks():
    cfg = compose(["model=3c3d", "inference=vl", "selection=none", "predictive=map"])
    network = build_model(cfg.model, (3, 32, 32), 10)
    with pytest.raises(BnnpredError, match="the network uses ReLU; use a softplus network"):
        OmegaConf.to_object(cfg.inference).check_network(network)


@pytest.mark.parametrize("name", ["3c3d", "allcnnc"])
def test_an_image_network_runs_channels_last_on_the_cpu_as_the_same_function(name):
    """FlatModel restrides a convolutional network's 4-d weights and images to channels last on the CPU (its
    convolutions and poolings' vectorised kernels): the layers see channels-last tensors, the outputs and θ's
    gradient are the default layout's to 1e-12 in float64, and under vmap (whose wrapped tensors keep the default
    layout) it runs in the default format and agrees too."""
    torch.manual_seed(0)
    module = build_model(compose([f"model={name}"]).model, (3, 16, 16), 10).double()
    model = FlatModel(module, channels_last=True)
    theta, X = model.theta(), torch.randn(4, 3, 16, 16, dtype=torch.float64)
    seen = []
    hook = next(m for m in module.modules() if isinstance(m, nn.Conv2d)).register_forward_hook(
        lambda m, i, out: seen.append(out.is_contiguous(memory_format=torch.channels_last)))
    with torch.enable_grad():
        theta_cl, theta_ref = theta.clone().requires_grad_(True), theta.clone().requires_grad_(True)
        out = model(theta_cl, X)
        hook.remove()
        ref = torch.func.functional_call(module, model.unflatten(theta_ref), (X,))  # the default layout
        grad_cl = torch.autograd.grad(out.square().sum(), theta_cl)[0]
        grad_ref = torch.autograd.grad(ref.square().sum(), theta_ref)[0]
    assert set(seen) == {True}  # the first call tries one image first
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grad_cl, grad_ref, rtol=1e-10, atol=1e-12)
    batched = torch.func.vmap(model, in_dims=(0, None))(torch.stack([theta, 2 * theta]), X)
    torch.testing.assert_close(batched[0], ref.detach(), rtol=1e-12, atol=1e-12)


def test_channels_last_stays_out_of_torch_func_transforms_whose_tensors_cannot_take_it(monkeypatch):
    from bnnpred.curvature import functional

    torch.manual_seed(0)
    model = FlatModel(build_model(compose(["model=3c3d"]).model, (1, 16, 16), 10), channels_last=True)
    thetas, X = torch.stack([model.theta()] * 2), torch.randn(3, 1, 16, 16)
    assert torch.func.vmap(model, in_dims=(0, None))(thetas, X).shape == (2, 3, 10)
    monkeypatch.setattr(functional, "_transformed", lambda: False)  # as if the guard were gone
    with pytest.raises(RuntimeError, match="channels_last"):
        torch.func.vmap(model, in_dims=(0, None))(thetas, X)


class ViewAfterConvolution(nn.Module):
    """A network written with ``.view`` on a convolution's output, which a channels-last tensor refuses."""

    def __init__(self):
        super().__init__()
        self.conv, self.out = nn.Conv2d(2, 3, 3), nn.Linear(3 * 4 * 4, 5)

    def forward(self, x):
        h = self.conv(x)
        return self.out(h.view(h.shape[0], -1))


def test_a_users_network_keeps_the_default_layout_which_a_view_after_a_convolution_needs():
    torch.manual_seed(0)
    module = ViewAfterConvolution()
    X = torch.randn(4, 2, 6, 6)
    model = FlatModel(module)
    with torch.no_grad():
        torch.testing.assert_close(model(model.theta(), X), module(X))
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            FlatModel(module, channels_last=True)(model.theta(), X)
    assert not model.channels_last


def test_the_runner_builds_its_image_networks_channels_last(data_root):
    from bnnpred.app.run_setup import setup, typed

    s = setup(typed(compose(["model=3c3d", "dataset=fashion_mnist", "inference.structure=kron", "device=cpu"])))
    assert s.model.channels_last and not FlatModel(s.model.module).channels_last
