"""Jacobians and the GGN (notes-000 §7 A.2, notes-004 §5 items 1-2)."""

import pytest
import torch
from torch.func import hessian

from bnnpred.curvature.ggn import Curvature, Structure, curvature
from bnnpred.curvature.jacobians import iter_jacobians, jacobians
from bnnpred.models import build_model, n_params
from bnnpred.models.mlp import MLPConfig
from tests.helpers import tiny_problem

KINDS = ["gaussian", "bernoulli", "categorical", "poisson"]


def neg_loglik(problem, theta):
    return -problem.likelihood.log_prob(problem.model(theta, problem.X), problem.y).sum()


@pytest.mark.parametrize("kind", KINDS)
def test_jacobians_match_central_finite_differences(kind):
    problem, _ = tiny_problem(kind, depth=2)
    theta = problem.theta0
    _, J = jacobians(problem.model, theta, problem.X)
    eps = 1e-6
    for p in [0, 7, theta.numel() - 1]:
        e = torch.zeros_like(theta)
        e[p] = eps
        fd = (problem.model(theta + e, problem.X) - problem.model(theta - e, problem.X)) / (2 * eps)
        torch.testing.assert_close(J[:, :, p], fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("kind", KINDS)
def test_ggn_equals_hessian_for_models_without_hidden_layers(kind):
    """Linear, logistic, softmax and Poisson regression: the network Hessian is zero, so GGN = Hessian."""
    problem, _ = tiny_problem(kind, depth=0)
    G, loglik = curvature(problem.model, problem.likelihood, problem.theta0, problem.X, problem.y)
    H = hessian(lambda th: neg_loglik(problem, th))(problem.theta0)
    torch.testing.assert_close(G, H, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(loglik, -neg_loglik(problem, problem.theta0))


@pytest.mark.parametrize("kind", KINDS)
def test_ggn_differs_from_hessian_with_a_hidden_layer_but_is_psd(kind):
    problem, _ = tiny_problem(kind, depth=2)
    G, _ = curvature(problem.model, problem.likelihood, problem.theta0, problem.X, problem.y)
    H = hessian(lambda th: neg_loglik(problem, th))(problem.theta0)
    assert (G - H).abs().max() > 1e-6
    eig = torch.linalg.eigvalsh(G)
    assert eig.min() >= -1e-10 * eig.max()


@pytest.mark.parametrize("kind", KINDS)
def test_diagonal_path_equals_diagonal_of_full(kind):
    problem, _ = tiny_problem(kind, depth=2)
    args = (problem.model, problem.likelihood, problem.theta0, problem.X, problem.y)
    for which in Curvature:
        full, _ = curvature(*args, kind=which, structure=Structure.full)
        diag, _ = curvature(*args, kind=which, structure=Structure.diag)
        torch.testing.assert_close(diag, full.diagonal(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_empirical_fisher_is_sum_of_gradient_outer_products(kind):
    problem, _ = tiny_problem(kind, depth=1)
    EF, _ = curvature(problem.model, problem.likelihood, problem.theta0, problem.X, problem.y, kind=Curvature.ef)
    def loglik(theta, i):
        return problem.likelihood.log_prob(problem.model(theta, problem.X[i : i + 1]), problem.y[i : i + 1])[0]

    grads = torch.stack([torch.func.grad(loglik)(problem.theta0, i) for i in range(len(problem.X))])
    torch.testing.assert_close(EF, grads.T @ grads, rtol=1e-10, atol=1e-12)


def test_chunking_does_not_change_the_ggn():
    problem, _ = tiny_problem("categorical", depth=1, n=17)
    args = (problem.model, problem.likelihood, problem.theta0, problem.X, problem.y)
    whole, _ = curvature(*args)
    P = problem.theta0.numel()
    chunked, _ = curvature(*args, max_elems=3 * P * 2)  # two examples per chunk
    assert len(list(iter_jacobians(problem.model, problem.theta0, problem.X, 3 * P * 2))) == 9
    torch.testing.assert_close(chunked, whole)


@pytest.mark.parametrize("inputs,expected", [(1, 2676), (2, 2701)])
def test_thesis_networks_have_the_thesis_parameter_counts(inputs, expected):
    """notes-000 §6.1: 5 hidden layers of 25 tanh units, one output."""
    model = build_model(MLPConfig(depth=5, width=25), (inputs,), 1)
    assert n_params(model) == expected


def test_thesis_cnn_has_the_thesis_parameter_count():
    """notes-000 §6.4: P = 4587 for the MNIST 4-vs-9 CNN (one logit)."""
    from bnnpred.models.cnn import ThesisCNNConfig

    model = build_model(ThesisCNNConfig(), (1, 28, 28), 1)
    assert n_params(model) == 4587


def _layer_and_autodiff_jacobians(module, X):
    from bnnpred.curvature.functional import FlatModel

    model = FlatModel(module)
    theta = model.theta()
    (_, f, J), = iter_jacobians(model, theta, X)
    f_ref, J_ref = model.outputs_and_jacobians(theta, X)  # vmap(jacrev)
    return f, J, f_ref, J_ref


@pytest.mark.parametrize("which", ["mlp", "cnn"])
def test_jacobians_formed_from_layer_factors_equal_autodiff(which):
    """The layer route (one forward and C backward passes) against one reverse pass per example and output."""
    from bnnpred.models.cnn import ThesisCNNConfig

    torch.manual_seed(0)
    if which == "mlp":
        module, X = build_model(MLPConfig(depth=2, width=7), (3,), 4), torch.randn(9, 3)
    else:
        module, X = build_model(ThesisCNNConfig(), (1, 28, 28), 3), torch.randn(4, 1, 28, 28)
    f, J, f_ref, J_ref = _layer_and_autodiff_jacobians(module, X)
    torch.testing.assert_close(f, f_ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(J, J_ref, rtol=0, atol=1e-12 * float(J_ref.abs().max()))


def test_networks_the_layer_factors_do_not_describe_fall_back_to_autodiff():
    """A layer-norm's parameters (not Linear / Conv2d) and a linear layer applied along a sequence."""
    from bnnpred.curvature.functional import FlatModel
    from bnnpred.curvature.kron import jacobian_layers
    from bnnpred.likelihoods import Categorical

    torch.manual_seed(0)
    normed = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 2))
    assert jacobian_layers(FlatModel(normed)) is None
    sequence = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Flatten(), torch.nn.Linear(20, 2))

    class FoldedPositions(torch.nn.Module):  # the positions folded into the rows: [B·5, 3] into the first layer
        def __init__(self):
            super().__init__()
            self.inner, self.outer = torch.nn.Linear(3, 4), torch.nn.Linear(20, 2)

        def forward(self, x):
            return self.outer(torch.tanh(self.inner(x.reshape(-1, 3))).reshape(len(x), -1))

    cases = ((normed, torch.randn(6, 3)), (sequence, torch.randn(6, 5, 3)), (FoldedPositions(), torch.randn(6, 5, 3)))
    for module, X in cases:
        f, J, f_ref, J_ref = _layer_and_autodiff_jacobians(module, X)
        torch.testing.assert_close(J, J_ref, rtol=0, atol=1e-12)
        model = FlatModel(module)
        y = torch.tensor([0, 1, 1, 0, 1, 0])
        full, _ = curvature(model, Categorical(), model.theta(), X, y)
        diag, _ = curvature(model, Categorical(), model.theta(), X, y, structure=Structure.diag)
        torch.testing.assert_close(diag, full.diagonal(), rtol=0, atol=1e-12)


def test_diagonal_from_layer_factors_equals_the_dense_diagonal_on_a_cnn():
    """Convolutions, max-pooling and a softmax (the factor path of the diagonal) against the full GGN's diagonal."""
    from bnnpred.curvature.functional import FlatModel
    from bnnpred.likelihoods import Categorical
    from bnnpred.models.cnn import ThesisCNNConfig

    torch.manual_seed(0)
    model = FlatModel(build_model(ThesisCNNConfig(), (1, 28, 28), 3))
    X, y = torch.randn(5, 1, 28, 28), torch.tensor([0, 2, 1, 1, 0])
    args = (model, Categorical(), model.theta(), X, y)
    full, loglik_full = curvature(*args)
    diag, loglik = curvature(*args, structure=Structure.diag)
    torch.testing.assert_close(diag, full.diagonal(), rtol=0, atol=1e-12 * float(full.diagonal().max()))
    torch.testing.assert_close(loglik, loglik_full)
