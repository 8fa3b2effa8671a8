"""Table 2.1 (notes-000 §3): residual and Λ equal the autograd derivatives of log p(y|f); the predictives each
likelihood builds."""

import math
import re

import pytest
import torch

from bnnpred.errors import BnnpredError
from bnnpred.likelihoods import Bernoulli, Categorical, Gaussian, Poisson
from bnnpred.prediction import CountPrediction
from bnnpred.reproduce.identity_checks import notes000_theory as theory


def test_residual_and_hessian_are_derivatives_of_log_prob():
    """notes-000 #1a-b as the identity check measures them (Gaussian σ² ∈ {0.1, 1}, Bernoulli, categorical K = 3,
    Poisson at 8 random outputs each): max |r(y, f) − ∇_f log p| and max |Λ(f) + ∇²_f log p| against autograd of
    torch.distributions' log-probability, to 1e-12 (the page: 1e-6). That log p is the library's own log_prob:
    the next test."""
    errors = theory.derivative_errors()
    assert list(errors) == list(theory.table_2_1())
    assert max(max(pair) for pair in errors.values()) <= 1e-12, errors


@pytest.mark.parametrize("name", list(theory.table_2_1()))
def test_log_prob_is_the_torch_distributions_log_prob(name):
    """The library's log_prob is the reference law of notes-000 #1 (theory.reference_loglik), so its residual and Λ
    are the derivatives of its own log_prob; 13 random outputs, targets drawn from the likelihood."""
    case = theory.table_2_1()[name]
    gen = torch.Generator().manual_seed(0)
    f = 1.5 * torch.randn(13, case.outputs, generator=gen, dtype=torch.float64)
    y = case.likelihood.sample(f, gen)
    torch.testing.assert_close(case.likelihood.log_prob(f, y), theory.reference_loglik(case, f, y),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", list(theory.table_2_1()))
def test_the_hessian_root_squares_to_lambda_with_as_many_rows_as_its_rank(name):
    """RᵀR = Λ (= LᵀL) to 1e-14 in float64 for 13 random outputs, with r = rank Λ rows: C − 1 = 2 for the
    categorical (closed form), one for the one-output likelihoods."""
    case = theory.table_2_1()[name]
    f = 1.5 * torch.randn(13, case.outputs, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    R = case.likelihood.hessian_root(f)
    assert R.shape == (13, max(1, case.outputs - 1), case.outputs)
    torch.testing.assert_close(R.mT @ R, case.likelihood.hessian(f), rtol=0, atol=1e-14)


def test_a_one_class_categorical_root_is_one_zero_row():
    """One class: Λ = 0, so R is the general route's [B, 1, 1] of zeros (a back-propagation needs a row)."""
    R = Categorical().hessian_root(torch.randn(5, 1, dtype=torch.float64))
    assert R.shape == (5, 1, 1) and not R.any()


@pytest.mark.parametrize("C", [2, 3, 10])
def test_the_categorical_root_holds_where_the_softmax_saturates(C):
    """Logits that put all mass on the last class, on the first, on two classes and spread evenly (rows of 50s, the
    softmax's underflow): RᵀR = diag(p) − ppᵀ to 1e-15, and the closed-form rows are orthonormal times √p."""
    f = torch.zeros(4, C, dtype=torch.float64)
    f[0, -1], f[1, 0], f[2, :2] = 50, 50, 50
    lik = Categorical()
    R = lik.hessian_root(f)
    p = torch.softmax(f, -1)
    torch.testing.assert_close(R.mT @ R, torch.diag_embed(p) - p.unsqueeze(2) * p.unsqueeze(1), rtol=0, atol=1e-15)
    Q = R / p.sqrt().unsqueeze(1)
    torch.testing.assert_close(Q @ Q.mT, torch.eye(C - 1, dtype=torch.float64).expand(4, -1, -1), rtol=0, atol=1e-15)


def test_gaussian_predictive_is_exact_normal():
    lik = Gaussian(0.3)
    mean, cov = torch.tensor([[0.5]]), torch.tensor([[[0.2]]])
    pred = lik.predict_gaussian(mean, cov)
    expected = torch.distributions.Normal(0.5, 0.5**0.5).log_prob(torch.tensor(1.0))
    torch.testing.assert_close(pred.log_prob(torch.tensor([1.0]))[0], expected)


def test_probit_reduces_to_sigmoid_without_variance_and_shrinks_with_it():
    lik = Bernoulli()
    mean = torch.tensor([[2.0]])
    p0 = lik.predict_gaussian(mean, torch.zeros(1, 1, 1)).probs[0, 1]
    p1 = lik.predict_gaussian(mean, torch.full((1, 1, 1), 8 / torch.pi)).probs[0, 1]
    torch.testing.assert_close(p0, torch.sigmoid(torch.tensor(2.0)))
    torch.testing.assert_close(p1, torch.sigmoid(torch.tensor(2.0 / 2**0.5)))


def test_non_positive_noise_is_a_clear_error():
    with pytest.raises(BnnpredError, match="sigma2 must be positive"):
        Gaussian(0.0)


def test_bernoulli_variance_split_adds_up_to_the_predictive_variance():
    """notes-004 §3.2: aleatoric E[p(1-p)] + epistemic Var[p] = p̄(1 - p̄)."""
    f = torch.randn(200, 5, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    pred = Bernoulli().predict_samples(f)
    p = pred.probs[:, 1]
    torch.testing.assert_close(pred.aleatoric + pred.epistemic, p * (1 - p))


def test_poisson_log_prob_is_the_poisson_log_pmf():
    f = torch.linspace(-3, 3, 13, dtype=torch.float64).unsqueeze(1)
    y = torch.tensor([0, 1, 2, 3, 5, 8, 13, 0, 4, 7, 20, 1, 50], dtype=torch.float64)
    expected = torch.distributions.Poisson(f[:, 0].exp()).log_prob(y)
    torch.testing.assert_close(Poisson().log_prob(f, y), expected, rtol=1e-12, atol=1e-12)


def test_poisson_hessian_factor_squares_to_the_rate():
    f = torch.linspace(-3, 3, 7, dtype=torch.float64).unsqueeze(1)
    torch.testing.assert_close(Poisson().hessian(f)[:, 0, 0], f[:, 0].exp(), rtol=1e-14, atol=0)


@pytest.mark.parametrize("y,shown", [([0.0, 2.0, -1.0], "y[2] = -1.0"), ([1.5, 2.0], "y[0] = 1.5"),
                                     ([3.0, math.nan], "y[1] = nan")])
def test_a_poisson_target_that_is_not_a_count_is_one_line_naming_the_fix(y, shown):
    message = f"Poisson targets must be counts 0, 1, 2, ..., got {shown} (1 of {len(y)}); pass whole non-negative"
    with pytest.raises(BnnpredError, match=re.escape(message)):
        Poisson().check_targets(torch.tensor(y, dtype=torch.float64))
    Poisson().check_targets(torch.tensor([0.0, 1.0, 7.0], dtype=torch.float64))  # counts pass


def test_a_single_component_count_mixture_is_the_poisson_pmf():
    rate = torch.tensor([[0.3, 1.0, 4.5, 12.0]], dtype=torch.float64)
    pred = CountPrediction(rate=rate, log_weight=torch.zeros(1, dtype=torch.float64))
    y = torch.tensor([0.0, 2.0, 4.0, 9.0], dtype=torch.float64)
    torch.testing.assert_close(pred.log_prob(y), torch.distributions.Poisson(rate[0]).log_prob(y), rtol=1e-14, atol=0)
    torch.testing.assert_close(pred.mean, rate[0])
    torch.testing.assert_close(pred.variance, rate[0])  # a single Poisson: variance = mean, no epistemic part
    torch.testing.assert_close(pred.epistemic, torch.zeros(4, dtype=torch.float64))


def test_a_sampled_count_mixture_weighs_its_draws_equally():
    """Two draws: the pmf is the average of the two Poisson pmfs, the variance the mean rate plus the rates'
    spread (law of total variance)."""
    f = torch.log(torch.tensor([[[1.0], [2.0]], [[3.0], [6.0]]], dtype=torch.float64))  # [S=2, B=2, 1]
    pred = Poisson().predict_samples(f)
    y = torch.tensor([2.0, 5.0], dtype=torch.float64)
    rates = f[..., 0].exp()
    mixture = torch.distributions.Poisson(rates).log_prob(y).exp().mean(0).log()
    torch.testing.assert_close(pred.log_prob(y), mixture, rtol=1e-14, atol=0)
    torch.testing.assert_close(pred.mean, torch.tensor([2.0, 4.0], dtype=torch.float64))
    torch.testing.assert_close(pred.variance, torch.tensor([2.0 + 1.0, 4.0 + 4.0], dtype=torch.float64))


@pytest.mark.parametrize("v", [0.01, 0.3, 1.0, 2.0])
def test_the_gauss_hermite_count_predictive_has_the_lognormal_moments(v):
    """f ~ N(m, v), y | f ~ Poisson(e^f): E[y] = e^{m + v/2}, V[y] = E[e^f] + V[e^f] = e^{m + v/2} + (e^v - 1)
    e^{2m + v} (the 20 nodes integrate both exactly to 1e-12 at v ≤ 2)."""
    m = torch.tensor([-2.0, 0.0, 0.7, 2.5], dtype=torch.float64)
    pred = Poisson().predict_gaussian(m.unsqueeze(1), torch.full((4, 1, 1), v, dtype=torch.float64))
    mean = torch.exp(m + v / 2)
    torch.testing.assert_close(pred.mean, mean, rtol=1e-8, atol=0)
    torch.testing.assert_close(pred.variance, mean + math.expm1(v) * torch.exp(2 * m + v), rtol=1e-8, atol=0)
    torch.testing.assert_close(pred.log_weight.exp().sum(), torch.tensor(1.0, dtype=torch.float64))


def test_the_gauss_hermite_count_predictive_tends_to_the_point_predictive_as_the_variance_vanishes():
    m = torch.tensor([[-1.0], [0.5], [2.0]], dtype=torch.float64)
    y = torch.tensor([0.0, 3.0, 11.0], dtype=torch.float64)
    point = Poisson().predict_point(m).log_prob(y)
    gaps = [(Poisson().predict_gaussian(m, torch.full((3, 1, 1), v, dtype=torch.float64)).log_prob(y) - point)
            .abs().max().item() for v in (1e-2, 1e-4, 1e-6, 1e-8)]
    assert all(b < a / 50 for a, b in zip(gaps, gaps[1:], strict=False)) and gaps[-1] < 1e-7
