"""SLANG's per-example gradient rows from linear layers' factors equal the formed rows (float64, every product SLANG
uses, several draws, with and without biases; all draws in one pass for an MLP, one draw at a time otherwise);
networks the factors do not cover fall back to the formed rows; a SLANG run takes the same iterates either way."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from bnnpred.curvature.functional import FlatModel
from bnnpred.inference import gradient_rows
from bnnpred.inference.gradient_rows import DenseRows, LinearFactorRows, linear_layers, per_example_rows
from bnnpred.inference.slang import Eig, SLANGConfig, Update, fit_slang
from bnnpred.models.mlp import MLPConfig, build_mlp
from tests.helpers import tiny_problem


def draws(problem, S: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(3)
    return problem.theta0 + 0.3 * torch.randn(S, problem.theta0.numel(), generator=gen)


@pytest.mark.parametrize("kind", ["gaussian", "bernoulli", "categorical"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("columns", [2, 32])  # one product form per layer, then both (per_output)
@pytest.mark.parametrize("column_major", [False, True])  # Q as a QR factor comes (the randomised eigensolver)
def test_layer_factors_give_the_formed_rows_products(kind, bias, columns, column_major):
    problem, _ = tiny_problem(kind, depth=2, n=7, d=3, width=4)
    torch.manual_seed(1)
    model = FlatModel(build_mlp(MLPConfig(depth=2, width=4, bias=bias), (3,), 3 if kind == "categorical" else 1))
    problem = dataclasses.replace(problem, model=model, theta0=model.theta())
    thetas = draws(problem, S=2)
    factored = per_example_rows(problem, thetas, problem.X, problem.y)
    assert isinstance(factored, LinearFactorRows) and factored.n_rows == 14
    forms = {gradient_rows.per_output(layer, columns) for layer in factored.layers}
    assert forms == ({False} if columns < gradient_rows.PER_OUTPUT_MIN_COLUMNS else {True, False})
    formed = DenseRows(gradient_rows._formed_rows(problem, thetas, problem.X, problem.y))
    gen = torch.Generator().manual_seed(4)
    P = problem.theta0.numel()
    Q, V = torch.randn(P, columns, generator=gen), torch.randn(14, columns, generator=gen)
    if column_major:
        Q, V = Q.T.contiguous().T, V.T.contiguous().T
    torch.testing.assert_close(factored.dense(), formed.G, rtol=1e-12, atol=1e-12)
    for name, args in [("gram", ()), ("times", (Q,)), ("transpose_times", (V,)), ("square_norms", ()),
                       ("column_sums", ())]:
        torch.testing.assert_close(getattr(factored, name)(*args), getattr(formed, name)(*args), rtol=1e-12,
                                   atol=1e-12, msg=name)
    torch.testing.assert_close(factored.scaled(2.0).gram(), 4 * formed.gram(), rtol=1e-12, atol=1e-12)


class TwoLayers(nn.Module):
    """Linear layers applied once each, but not an ``nn.Sequential``: the factors come one draw at a time."""

    def __init__(self):
        super().__init__()
        self.first, self.second = nn.Linear(3, 4), nn.Linear(4, 1)

    def forward(self, x):
        return self.second(torch.tanh(self.first(x)))


def test_the_per_draw_factors_of_a_non_sequential_network_and_the_batched_ones_give_the_formed_rows(monkeypatch):
    problem, _ = tiny_problem("gaussian", depth=1, n=6, d=3)
    for model in (FlatModel(TwoLayers()), problem.model):  # per draw; an MLP with the batched path switched off
        if model is problem.model:
            monkeypatch.setattr(gradient_rows, "_sequential_factors", lambda *args: None)
        case = dataclasses.replace(problem, model=model, theta0=model.theta())
        thetas = draws(case, S=3)
        rows = per_example_rows(case, thetas, case.X, case.y)
        assert isinstance(rows, LinearFactorRows)
        torch.testing.assert_close(rows.dense(), gradient_rows._formed_rows(case, thetas, case.X, case.y),
                                   rtol=1e-12, atol=1e-12)


class Shared(nn.Module):
    """One linear layer applied twice: its parameters' gradients are sums over the two uses, not one outer
    product."""

    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(3, 3)

    def forward(self, x):
        return self.layer(torch.tanh(self.layer(x)))[:, :1]


NOT_COVERED = {  # a network, and how it takes tiny_problem's [N, 3] inputs
    "convolution": (lambda: nn.Sequential(nn.Conv1d(1, 2, 2), nn.Flatten(), nn.Linear(4, 1)), lambda X: X[:, None]),
    "shared layer": (Shared, lambda X: X),
    "layer norm": (lambda: nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 1)), lambda X: X),
}


@pytest.mark.parametrize("name", NOT_COVERED)
def test_networks_the_factors_do_not_cover_get_the_formed_rows(name):
    build, inputs = NOT_COVERED[name]
    problem, _ = tiny_problem("gaussian", depth=1, n=5, d=3)
    model = FlatModel(build())
    problem = dataclasses.replace(problem, model=model, theta0=model.theta(), X=inputs(problem.X))
    rows = per_example_rows(problem, draws(problem, S=1), problem.X, problem.y)
    assert isinstance(rows, DenseRows)
    assert rows.G.shape == (5, problem.theta0.numel())


def test_linear_layers_finds_every_parameter_of_an_mlp():
    model = FlatModel(build_mlp(MLPConfig(depth=2, width=4), (3,), 2))
    layers = linear_layers(model)
    assert [(layer.weight.start, layer.weight.stop, layer.bias.stop) for layer in layers] == \
        [(0, 12, 16), (16, 32, 36), (36, 44, 46)]


@pytest.mark.parametrize("update", list(Update))
@pytest.mark.parametrize("eig", list(Eig))
def test_slang_takes_the_same_iterates_from_factors_and_formed_rows(monkeypatch, update, eig):
    """20 steps, K = 16 rows < P = 87 (the rows' Gram; OnlineEig's has no U columns), float64, 1e-10; the randomised
    eigensolver's subspace vectors are column-major (QR's), the exact one's eigenvectors a flipped slice."""
    problem, _ = tiny_problem("categorical", depth=2, n=40, d=3, width=6)
    cfg = SLANGConfig(rank=3, lr=0.1, iterations=20, batch_size=8, n_samples=2, log_every=20, update=update, eig=eig,
                      eig_iterations=30)
    factored = fit_slang(dataclasses.replace(problem, generator=torch.Generator().manual_seed(0)), cfg)
    monkeypatch.setattr(gradient_rows, "linear_layers", lambda model: None)
    formed = fit_slang(dataclasses.replace(problem, generator=torch.Generator().manual_seed(0)), cfg)
    torch.testing.assert_close(factored.theta, formed.theta, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(factored.posterior.d, formed.posterior.d, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(factored.posterior.U @ factored.posterior.U.T,
                               formed.posterior.U @ formed.posterior.U.T, rtol=1e-10, atol=1e-10)
