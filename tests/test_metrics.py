"""Metrics against values computed by hand or by reference implementations."""

import math
from types import SimpleNamespace

import pytest
import torch
from sklearn.metrics import roc_auc_score
from torch.distributions import Normal

from bnnpred import metrics
from bnnpred.app.config import LikelihoodConfig
from bnnpred.app.run_evaluation import in_original_units
from bnnpred.app.run_setup import noise_variance
from bnnpred.errors import BnnpredError
from bnnpred.prediction import ClassPrediction, CountPrediction, RegPrediction

DTYPE = torch.float64


def tensor(values) -> torch.Tensor:
    return torch.tensor(values, dtype=DTYPE)


def random_probs(n: int, generator: torch.Generator) -> torch.Tensor:
    weights = torch.rand(n, 4, dtype=DTYPE, generator=generator)
    return weights / weights.sum(1, keepdim=True)


def test_ece_on_four_points_with_a_confidence_on_a_bin_edge():
    probs = tensor([[0.9, 0.1], [0.15, 0.85], [0.6, 0.4], [0.3, 0.7]])
    y = torch.tensor([0, 0, 0, 0])
    # Bin (0.8, 0.9]: confidences 0.9 (right) and 0.85 (wrong): 2/4 * |0.5 - 0.875| = 0.1875.
    # Bin (0.5, 0.6]: confidence 0.6 (right), on the edge so in the lower bin: 1/4 * |1 - 0.6| = 0.1.
    # Bin (0.6, 0.7]: confidence 0.7 (wrong): 1/4 * |0 - 0.7| = 0.175.
    assert metrics.ece(probs, y) == pytest.approx(0.4625, abs=1e-12)


def test_accuracy_and_brier_on_three_points():
    probs = tensor([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3], [0.2, 0.2, 0.6]])
    y = torch.tensor([0, 2, 2])
    assert metrics.accuracy(probs, y) == pytest.approx(2 / 3, abs=1e-12)
    # Per point: 0.25 + 0.09 + 0.04 = 0.38; 0.01 + 0.36 + 0.49 = 0.86; 0.04 + 0.04 + 0.16 = 0.24.
    assert metrics.brier(probs, y) == pytest.approx((0.38 + 0.86 + 0.24) / 3, abs=1e-12)


def test_class_nll_is_minus_mean_log_probability_of_the_true_class():
    pred = ClassPrediction(tensor([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1]]))
    y = torch.tensor([0, 1])
    assert metrics.nll(pred, y) == pytest.approx(-(math.log(0.7) + math.log(0.8)) / 2, abs=1e-12)


def test_regression_nll_with_one_component_is_the_gaussian_nll():
    loc, var, y = tensor([[0.0, 1.0, -2.0]]), tensor([[1.0, 0.5, 3.0]]), tensor([0.3, 2.0, -1.0])
    expected = -Normal(loc[0], var[0].sqrt()).log_prob(y).mean().item()
    assert metrics.nll(RegPrediction(loc, var), y) == pytest.approx(expected, abs=1e-12)


def test_regression_nll_of_a_two_component_mixture():
    pred = RegPrediction(loc=tensor([[0.0], [2.0]]), var=tensor([[1.0], [4.0]]))
    # 0.5 N(1 | 0, 1) + 0.5 N(1 | 2, 4) = 0.5 (e^{-1/2} / √(2π) + e^{-1/8} / (2 √(2π))).
    density = 0.5 * (math.exp(-0.5) + math.exp(-0.125) / 2) / math.sqrt(2 * math.pi)
    assert metrics.nll(pred, tensor([1.0])) == pytest.approx(-math.log(density), abs=1e-12)


def test_gaussian_ll_matches_torch_normal():
    mean, var, y = tensor([0.5, -1.0, 2.0]), tensor([0.2, 1.5, 4.0]), tensor([0.0, 0.0, 3.0])
    expected = Normal(mean, var.sqrt()).log_prob(y).mean().item()
    assert metrics.gaussian_ll(mean, var, y) == pytest.approx(expected, abs=1e-12)


def test_rmse():
    assert metrics.rmse(tensor([1.0, 2.0]), tensor([0.0, 4.0])) == pytest.approx(math.sqrt(2.5), abs=1e-12)


def test_entropy_of_uniform_is_log_c_and_of_one_hot_is_zero():
    probs = tensor([[0.25] * 4, [0.0, 1.0, 0.0, 0.0]])
    assert torch.equal(metrics.entropy(probs), tensor([math.log(4), 0.0]))


def test_ood_auc_matches_sklearn_with_ties():
    generator = torch.Generator().manual_seed(0)
    probs_in = random_probs(30, generator)
    probs_out = random_probs(20, generator) + 0.2
    probs_out /= probs_out.sum(1, keepdim=True)
    tied = torch.eye(4, dtype=DTYPE)[torch.randint(0, 4, (6,), generator=generator)]
    probs_in, probs_out = torch.cat([probs_in, tied]), torch.cat([probs_out, tied[:3], probs_in[:5]])
    scores = metrics.entropy(torch.cat([probs_in, probs_out]))
    assert len(scores.unique()) < len(scores)
    labels = [0] * len(probs_in) + [1] * len(probs_out)
    expected = roc_auc_score(labels, scores.numpy())
    assert metrics.ood_auc(probs_in, probs_out) == pytest.approx(expected, abs=1e-12)


def test_ood_auc_extremes():
    one_hot, uniform = tensor([[1.0, 0.0]]), tensor([[0.5, 0.5]])
    assert metrics.ood_auc(one_hot, uniform) == 1.0
    assert metrics.ood_auc(uniform, one_hot) == 0.0
    assert metrics.ood_auc(uniform, uniform) == 0.5
    with pytest.raises(BnnpredError):
        metrics.ood_auc(uniform, uniform[:0])


def test_evaluate_dispatches_on_the_prediction_type():
    classification = metrics.evaluate(ClassPrediction(tensor([[0.9, 0.1], [0.4, 0.6]])), torch.tensor([0, 1]))
    assert set(classification) == {"nll", "accuracy", "ece", "brier"}
    assert classification["accuracy"] == 1.0
    pred = RegPrediction(loc=tensor([[0.0, 1.0]]), var=tensor([[1.0, 1.0]]))
    regression = metrics.evaluate(pred, tensor([0.0, 3.0]))
    assert set(regression) == {"nll", "ll", "rmse", "gaussian_ll", "joint_ll"}
    assert regression["ll"] == -regression["nll"]
    assert regression["gaussian_ll"] == pytest.approx(regression["ll"], abs=1e-12)
    assert regression["rmse"] == pytest.approx(math.sqrt(2.0), abs=1e-12)


def test_count_metrics_are_the_mixture_nll_and_the_rmse_of_its_mean():
    """Two equal-weight components with rates (1, 4) and (3, 2) at two points: p(y) = ½ Poisson(y | r₁) +
    ½ Poisson(y | r₂), mean (2, 3)."""
    pred = CountPrediction(rate=tensor([[1.0, 4.0], [3.0, 2.0]]), log_weight=tensor([math.log(0.5)] * 2))
    y = tensor([0.0, 5.0])
    pmf = [0.5 * (math.exp(-1.0) + math.exp(-3.0)),
           0.5 * (math.exp(-4.0) * 4.0**5 + math.exp(-2.0) * 2.0**5) / math.factorial(5)]
    values = metrics.evaluate(pred, y)
    assert set(values) == {"nll", "rmse"}
    assert values["nll"] == pytest.approx(-sum(math.log(p) for p in pmf) / 2, abs=1e-12)
    assert values["rmse"] == pytest.approx(math.sqrt((2.0**2 + 2.0**2) / 2), abs=1e-12)


def test_regression_metrics_in_original_units_equal_those_of_the_unstandardised_prediction():
    """Targets standardised by s: the density picks up 1/s, so NLL + log s and RMSE·s are the metrics of the same
    predictive mixture in the data's units; τ on the original scale is σ² = 1/(τ s²) on the standardised one."""
    gen = torch.Generator().manual_seed(0)
    loc, var = torch.randn(4, 30, generator=gen, dtype=torch.float64), torch.rand(4, 30, generator=gen,
                                                                                 dtype=torch.float64) + 0.1
    z = torch.randn(30, generator=gen, dtype=torch.float64)
    scale, shift = 3.7, -2.0
    standardised = in_original_units(metrics.evaluate(RegPrediction(loc, var), z), scale)
    original = metrics.evaluate(RegPrediction(loc * scale + shift, var * scale**2), z * scale + shift)
    assert standardised["nll_original"] == pytest.approx(original["nll"], rel=1e-12)
    assert standardised["rmse_original"] == pytest.approx(original["rmse"], rel=1e-12)
    assert standardised["joint_ll_original"] == pytest.approx(original["joint_ll"], rel=1e-12)
    data = SimpleNamespace(target_scale=scale)
    assert noise_variance(LikelihoodConfig(sigma2=0.5, noise_precision=2.0), data) == pytest.approx(1 / (2 * 3.7**2))
    assert noise_variance(LikelihoodConfig(sigma2=0.5), data) == 0.5
    with pytest.raises(BnnpredError, match="snelson does not standardise its targets; use likelihood.sigma2"):
        noise_variance(LikelihoodConfig(noise_precision=2.0), SimpleNamespace(target_scale=None, name="snelson"))


def test_joint_log_likelihood_mixes_the_samples_whole_test_set_densities():
    """Two samples, two points: (1/2) log ½[N(y1|0,1) N(y2|0,1) + N(y1|2,1) N(y2|2,1)], by hand; one component
    gives the per-point mean log density; per point, the mixture of joint densities is at most that of marginals
    here (the samples disagree)."""
    y = torch.tensor([0.0, 2.0])
    pred = RegPrediction(torch.tensor([[0.0, 0.0], [2.0, 2.0]]), torch.ones(2, 2))
    log_n = lambda r: -0.5 * math.log(2 * math.pi) - 0.5 * r**2  # noqa: E731
    by_hand = 0.5 * math.log(0.5 * (math.exp(log_n(0) + log_n(2)) + math.exp(log_n(2) + log_n(0))))
    assert metrics.joint_ll(pred, y) == pytest.approx(by_hand, rel=1e-12)
    one = RegPrediction(torch.tensor([[0.3, 1.0]]), torch.tensor([[0.5, 2.0]]))
    assert metrics.joint_ll(one, y) == pytest.approx(metrics.evaluate(one, y)["ll"], rel=1e-12)
    assert metrics.joint_ll(pred, y) < metrics.evaluate(pred, y)["ll"]


def test_entropy_histograms_count_every_input_in_bins_on_zero_to_log_c():
    from bnnpred.app.run_evaluation import ENTROPY_BINS, entropy_histograms
    from bnnpred.prediction import ClassPrediction

    uniform, one_hot = torch.full((1, 4), 0.25), torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    half = torch.tensor([[0.5, 0.5, 0.0, 0.0]])  # entropy log 2: the bin holding log 2 on [0, log 4]
    test = {"glm": ClassPrediction(torch.cat([uniform, one_hot, half]))}
    ood = {"glm": ClassPrediction(torch.cat([uniform, uniform]))}
    h = entropy_histograms(test, ood)
    assert h["edges"][0] == 0.0 and h["edges"][-1] == math.log(4) and len(h["edges"]) == ENTROPY_BINS + 1
    counts = h["glm"]["test"]["counts"]
    assert counts[0] == 1 and counts[-1] == 1 and counts[ENTROPY_BINS // 2] == 1 and sum(counts) == 3
    assert h["glm"]["ood"]["counts"][-1] == 2 and h["glm"]["ood"]["n"] == 2
    assert h["glm"]["test"]["mean"] == pytest.approx((math.log(4) + math.log(2)) / 3, abs=1e-12)
    assert entropy_histograms(test, {}) is None  # no OOD set, nothing to draw
