"""Jacobians and the GGN (notes-000 §7 A.2, notes-004 §5 items 1-2); the identities notes-000 #2-3 and notes-004 #1b
from their identity checks (bnnpred.reproduce.identity_checks)."""

import pytest
import torch
from torch.func import hessian

from bnnpred.curvature.chunks import DEFAULT_CHUNK_ELEMS
from bnnpred.curvature.ggn import Curvature, Structure, curvature
from bnnpred.curvature.jacobians import iter_jacobians
from bnnpred.models import build_model
from bnnpred.models.mlp import MLPConfig
from bnnpred.reproduce.identity_checks import notes000_theory as theory
from bnnpred.reproduce.identity_checks import notes004, relative_error
from tests.helpers import tiny_problem

KINDS = ["gaussian", "bernoulli", "categorical", "poisson"]


def neg_loglik(problem, theta):
    return -problem.likelihood.log_prob(problem.model(theta, problem.X), problem.y).sum()


@pytest.mark.parametrize("kind", list(notes004.KINDS))
def test_jacobians_match_central_finite_differences(kind):
    """notes-004 #1b as the identity check measures it (its 2x5 tanh MLP, every parameter, ε = 1e-6), here on one
    and three outputs, elementwise to rtol 1e-6, atol 1e-8 (the page: 1e-4 in Frobenius norm). The check reads the
    layer-factor route (stacked_jacobians); the autodiff route (jacobians) equals it to 1e-12 (below)."""
    J, fd = notes004.jacobians_and_differences(notes004.tiny(kind, depth=2, n=12, seed=0))
    torch.testing.assert_close(J, fd, rtol=1e-6, atol=1e-8)


def test_ggn_equals_hessian_for_models_without_hidden_layers():
    """notes-000 #2a as the identity check measures it: for linear, logistic, softmax and Poisson regression (no
    network Hessian) −GGN = the autograd Hessian of the log-likelihood, to 1e-10 relative, every likelihood."""
    errors = {name: relative_error(*pair) for name, pair in theory.linear_model_curvatures().items()}
    assert len(errors) == 5 and max(errors.values()) <= 1e-10, errors


@pytest.mark.parametrize("kind", KINDS)
def test_curvature_returns_the_log_likelihood_it_was_formed_at(kind):
    """The log-likelihood curvature() returns beside the GGN is the likelihood's Σ log p(y|f) at θ."""
    problem, _ = tiny_problem(kind, depth=0)
    _, loglik = curvature(problem.model, problem.likelihood, problem.theta0, problem.X, problem.y)
    torch.testing.assert_close(loglik, -neg_loglik(problem, problem.theta0))


def test_ggn_with_a_hidden_layer_is_psd():
    """notes-000 #2b as the identity check measures it (tanh MLP 3→8→8→C, every likelihood): λ_min ≥ −1e-10 λ_max
    (the page: −1e-8)."""
    spectra = {name: torch.linalg.eigvalsh(G) for name, G in theory.mlp_ggns().items()}
    assert len(spectra) == 5
    assert all(eig.min() >= -1e-10 * eig.max() for eig in spectra.values()), spectra


@pytest.mark.parametrize("kind", KINDS)
def test_ggn_differs_from_hessian_with_a_hidden_layer(kind):
    """The control of notes-000 #2a: with hidden layers the network Hessian is not zero, so GGN ≠ Hessian."""
    problem, _ = tiny_problem(kind, depth=2)
    G, _ = curvature(problem.model, problem.likelihood, problem.theta0, problem.X, problem.y)
    H = hessian(lambda th: neg_loglik(problem, th))(problem.theta0)
    assert (G - H).abs().max() > 1e-6


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


def test_thesis_networks_have_the_thesis_parameter_counts():
    """notes-000 #3 as the identity check counts them: 2676 and 2701 for the MLPs with 5 hidden layers of 25 tanh
    units on 1 and 2 inputs (§6.1), 4587 for the MNIST 4-vs-9 CNN (§6.4), one output each."""
    assert theory.parameter_counts() == theory.THESIS_COUNTS == {"MLP(1→…→1)": 2676, "MLP(2→…→1)": 2701,
                                                                 "MNIST CNN": 4587}


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
    for max_elems in (1, DEFAULT_CHUNK_ELEMS, 2**40):  # one image a chunk, the default, the four after the first
        diag, loglik = curvature(*args, structure=Structure.diag, max_elems=max_elems)
        torch.testing.assert_close(diag, full.diagonal(), rtol=0, atol=1e-12 * float(full.diagonal().max()))
        torch.testing.assert_close(loglik, loglik_full)
