"""Table 2.1 (notes-000 §3): residual and Λ equal the autograd derivatives of log p(y|f)."""

import pytest
import torch
from torch.func import grad, hessian

from bnnpred.likelihoods import Bernoulli, Categorical, Gaussian


def cases():
    gen = torch.Generator().manual_seed(0)
    f1 = torch.randn(6, 1, generator=gen, dtype=torch.float64)
    f3 = torch.randn(6, 3, generator=gen, dtype=torch.float64)
    return [
        (Gaussian(0.1), f1, torch.randn(6, generator=gen, dtype=torch.float64)),
        (Gaussian(1.0), f1, torch.randn(6, generator=gen, dtype=torch.float64)),
        (Bernoulli(), f1, torch.randint(0, 2, (6,), generator=gen)),
        (Categorical(), f3, torch.randint(0, 3, (6,), generator=gen)),
    ]


@pytest.mark.parametrize("lik,f,y", cases())
def test_residual_and_hessian_are_derivatives_of_log_prob(lik, f, y):
    for i in range(len(f)):
        def logp(fi, i=i):
            return lik.log_prob(fi.unsqueeze(0), y[i : i + 1])[0]

        torch.testing.assert_close(lik.residual(f, y)[i], grad(logp)(f[i]), rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(lik.hessian(f)[i], -hessian(logp)(f[i]), rtol=1e-10, atol=1e-12)


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
    from bnnpred.errors import BnnpredError

    with pytest.raises(BnnpredError, match="sigma2 must be positive"):
        Gaussian(0.0)


def test_bernoulli_variance_split_adds_up_to_the_predictive_variance():
    """notes-004 §3.2: aleatoric E[p(1-p)] + epistemic Var[p] = p̄(1 - p̄)."""
    f = torch.randn(200, 5, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    pred = Bernoulli().predict_samples(f)
    p = pred.probs[:, 1]
    torch.testing.assert_close(pred.aleatoric + pred.epistemic, p * (1 - p))
