"""Test metrics for predictive distributions.

Conventions follow ``notes-004.md`` §3.5–3.6 (the reference implementation of Immer,
Korzepa & Bauer, 2021): the NLL averages the MC probabilities before taking the log, the ECE uses 10
equal-width bins on the top-label confidence, and the OOD-AUC scores inputs by predictive entropy with OOD as
the positive class. All scalar metrics return Python floats.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from bnnpred.errors import BnnpredError
from bnnpred.posteriors.base import Posterior
from bnnpred.prediction import ClassPrediction, CountPrediction, Prediction, RegPrediction


def nll(pred: Prediction, y: Tensor) -> float:
    """Mean negative log predictive density ``-(1/B) Σ_i log p(y_i | x_i, D)`` (notes-004 §3.6).

    For a :class:`ClassPrediction` the probabilities are already MC-averaged, so the log is taken of the
    averaged probability; for a :class:`RegPrediction` it is the log density of the full Gaussian mixture, for a
    :class:`CountPrediction` the log pmf of the full Poisson mixture.

    Args:
        pred: predictive distribution over ``B`` points.
        y: targets ``[B]`` (integer labels, real values or counts).
    """
    return -pred.log_prob(y).mean().item()


def accuracy(probs: Tensor, y: Tensor) -> float:
    """Fraction of points whose most probable class is the label.

    Args:
        probs: predictive probabilities ``[B, C]``.
        y: integer labels ``[B]``.
    """
    return (probs.argmax(dim=1) == y.long()).double().mean().item()


def ece(probs: Tensor, y: Tensor, n_bins: int = 10) -> float:
    """Expected calibration error ``Σ_b (|B_b| / n) |acc_b - conf_b|`` (notes-004 §3.6).

    Points are binned by their top-label confidence ``max_c p_c`` into ``n_bins`` equal-width bins. Bins
    are right-closed, ``(lo, hi]``, with the first bin ``[0, 1/n_bins]`` also holding 0, so a confidence
    exactly on an edge ``k / n_bins`` falls into the lower bin. Empty bins contribute nothing.

    Args:
        probs: predictive probabilities ``[B, C]``.
        y: integer labels ``[B]``.
        n_bins: number of equal-width confidence bins on ``[0, 1]``.
    """
    # binned on the CPU: CUDA's weighted bincount adds with atomics, in an order that changes from run to run
    confidence, predicted = (t.cpu() for t in probs.max(dim=1))
    correct = (predicted == y.cpu().long()).to(probs.dtype)
    inner_edges = torch.arange(1, n_bins, dtype=probs.dtype) / n_bins
    bin_index = torch.bucketize(confidence, inner_edges, right=False)
    correct_sum = torch.bincount(bin_index, weights=correct, minlength=n_bins)
    confidence_sum = torch.bincount(bin_index, weights=confidence, minlength=n_bins)
    # |B_b| · |acc_b - conf_b| = |Σ_{i∈B_b} (correct_i - conf_i)|, which is 0 for an empty bin.
    return ((correct_sum - confidence_sum).abs().sum() / probs.shape[0]).item()


def brier(probs: Tensor, y: Tensor) -> float:
    """Brier (1950) score: mean over points of ``Σ_c (p_c - 1[y = c])²``.

    Args:
        probs: predictive probabilities ``[B, C]``.
        y: integer labels ``[B]``.
    """
    one_hot = torch.nn.functional.one_hot(y.long(), probs.shape[1]).to(probs.dtype)
    return ((probs - one_hot) ** 2).sum(dim=1).mean().item()


def rmse(mean: Tensor, y: Tensor) -> float:
    """Root mean squared error of the predictive mean.

    Args:
        mean: predictive means ``[B]``.
        y: targets ``[B]``.
    """
    return ((mean - y) ** 2).mean().sqrt().item()


def gaussian_ll(mean: Tensor, var: Tensor, y: Tensor) -> float:
    """Mean log density ``(1/B) Σ_i log N(y_i | mean_i, var_i)`` of a moment-matched Gaussian predictive.

    Args:
        mean: predictive means ``[B]``.
        var: predictive variances ``[B]``.
        y: targets ``[B]``.
    """
    log_density = -0.5 * (math.log(2 * math.pi) + var.log() + (y - mean) ** 2 / var)
    return log_density.mean().item()


def joint_ll(pred: RegPrediction, y: Tensor) -> float:
    """``(1/B) log (1/K) Σ_k Π_i p(y_i | θ_k)``: the log-likelihood of the whole test set under each component
    (weight sample), mixed, per point (the SLANG reference's definition, notes-002 §3.5). As ``B`` grows it tends to
    the best single sample's average log-likelihood; equal to ``ll`` for one component."""
    return pred.joint_log_prob(y).item() / len(y)


def entropy(probs: Tensor) -> Tensor:
    """Predictive entropy ``-Σ_c p_c log p_c`` in nats, with ``0 · log 0 = 0``.

    Args:
        probs: predictive probabilities ``[B, C]``.

    Returns:
        Entropies ``[B]``.
    """
    return -torch.special.xlogy(probs, probs).sum(dim=-1)


def ood_auc(probs_in: Tensor, probs_out: Tensor) -> float:
    """ROC-AUC for telling OOD from in-distribution inputs by predictive entropy (notes-004 §3.5).

    OOD inputs are the positive class and higher entropy means more OOD. The AUC is the Mann–Whitney
    statistic ``(R_out - n_out (n_out + 1) / 2) / (n_in n_out)``, with ``R_out`` the sum of the OOD ranks
    among all scores and tied scores given their average rank (so a tie counts one half).

    Args:
        probs_in: predictive probabilities ``[N_in, C]`` on in-distribution inputs.
        probs_out: predictive probabilities ``[N_out, C]`` on OOD inputs.
    """
    n_in, n_out = probs_in.shape[0], probs_out.shape[0]
    if n_in == 0 or n_out == 0:
        raise BnnpredError("ood_auc needs at least one in-distribution and one OOD input")
    scores = torch.cat([entropy(probs_in), entropy(probs_out)]).double()
    rank_sum_out = _average_ranks(scores)[n_in:].sum().item()
    return (rank_sum_out - n_out * (n_out + 1) / 2) / (n_in * n_out)


def _average_ranks(values: Tensor) -> Tensor:
    """1-based ranks of ``values`` ``[N]`` in ascending order, ties sharing their average rank; ``[N]``."""
    _, group, count = torch.unique(values, sorted=True, return_inverse=True, return_counts=True)
    last_rank = count.cumsum(0).double()
    return (last_rank - (count.double() - 1) / 2)[group]


def evaluate(pred: Prediction, y: Tensor) -> dict[str, float]:
    """All test metrics of a predictive on targets ``y`` ``[B]``.

    Returns:
        For a :class:`ClassPrediction`: ``nll``, ``accuracy``, ``ece``, ``brier``. For a
        :class:`RegPrediction`: ``nll`` (of the mixture), ``ll`` (= -nll), ``rmse`` (of the mixture mean),
        ``gaussian_ll`` (of the moment-matched Gaussian) and ``joint_ll`` (:func:`joint_ll`). For a
        :class:`CountPrediction`: ``nll`` (of the Poisson mixture) and ``rmse`` (of its mean).
    """
    if isinstance(pred, ClassPrediction):
        return {
            "nll": nll(pred, y),
            "accuracy": accuracy(pred.probs, y),
            "ece": ece(pred.probs, y),
            "brier": brier(pred.probs, y),
        }
    if isinstance(pred, RegPrediction):
        mixture_nll = nll(pred, y)
        return {
            "nll": mixture_nll,
            "ll": -mixture_nll,
            "rmse": rmse(pred.mean, y),
            "gaussian_ll": gaussian_ll(pred.mean, pred.variance, y),
            "joint_ll": joint_ll(pred, y),
        }
    if isinstance(pred, CountPrediction):
        return {"nll": nll(pred, y), "rmse": rmse(pred.mean, y)}
    raise BnnpredError(f"cannot evaluate a prediction of type {type(pred).__name__}")


def symmetric_kl(q: Posterior, p: Posterior) -> float:
    """``½ [KL(q ‖ p) + KL(p ‖ q)]`` between two Gaussians over the same parameters (notes-002 §3.1's distance to
    the exact full-Gaussian posterior), from their dense precisions (small P only)."""
    def kl(a: Posterior, b: Posterior) -> Tensor:
        cov_a, prec_b = torch.linalg.inv(a.dense_precision()), b.dense_precision()
        d = b.mean - a.mean
        return 0.5 * (torch.trace(prec_b @ cov_a) + d @ prec_b @ d - len(d)
                      + a.logdet_precision() - b.logdet_precision())

    return float(0.5 * (kl(q, p) + kl(p, q)))
