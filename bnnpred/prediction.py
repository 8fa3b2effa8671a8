"""Predictive distributions over targets, the common currency of predictives and metrics."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor


class ClassPrediction(NamedTuple):
    """Predictive class probabilities, with the Kwon et al. (2020) variance split when sampled.

    Attributes:
        probs: ``[B, C]`` with ``C >= 2`` (a single Bernoulli logit is expanded to two classes).
        aleatoric: ``[B]`` ``E_s[sum_c p_sc (1 - p_sc)]``, or ``None`` for closed-form predictives.
        epistemic: ``[B]`` ``sum_c Var_s[p_sc]``, or ``None`` for closed-form predictives.
    """

    probs: Tensor
    aleatoric: Tensor | None = None
    epistemic: Tensor | None = None

    def log_prob(self, y: Tensor) -> Tensor:
        """``log p(y_i | x_i, D)`` for integer labels ``y`` ``[B]``; returns ``[B]``."""
        p = self.probs.gather(1, y.long().view(-1, 1)).squeeze(1)
        return torch.log(p.clamp_min(torch.finfo(p.dtype).tiny))

    @property
    def mean(self) -> Tensor:
        return self.probs


class RegPrediction(NamedTuple):
    """An equal-weight Gaussian mixture over a scalar target (K = 1 for a closed form).

    Attributes:
        loc: ``[K, B]`` component means (e.g. one per posterior sample).
        var: ``[K, B]`` component variances (the noise σ², plus ``J Σ Jᵀ`` for a closed form).
    """

    loc: Tensor
    var: Tensor

    def log_prob(self, y: Tensor) -> Tensor:
        """Mixture log density ``log (1/K) Σ_k N(y | loc_k, var_k)``; ``y`` ``[B]`` -> ``[B]``."""
        return torch.logsumexp(self._component_log_prob(y), dim=0) - math.log(self.loc.shape[0])

    def joint_log_prob(self, y: Tensor) -> Tensor:
        """``log (1/K) Σ_k Π_i N(y_i | loc_ki, var_ki)`` ``[]``: the components' joint density of all ``B`` targets
        (the SLANG reference's "predictive log-likelihood", notes-002 §3.5)."""
        return torch.logsumexp(self._component_log_prob(y).sum(1), dim=0) - math.log(self.loc.shape[0])

    def _component_log_prob(self, y: Tensor) -> Tensor:
        """``log N(y_i | loc_ki, var_ki)`` ``[K, B]``."""
        return -0.5 * (math.log(2 * math.pi) + self.var.log() + (y - self.loc) ** 2 / self.var)

    @property
    def mean(self) -> Tensor:
        """Predictive mean ``[B]``."""
        return self.loc.mean(0)

    @property
    def variance(self) -> Tensor:
        """Total predictive variance ``[B]`` (law of total variance over the components)."""
        return self.var.mean(0) + self.loc.var(0, unbiased=False)

    @property
    def epistemic(self) -> Tensor:
        """Variance of the latent function ``[B]``: spread of the component means, or the closed-form part."""
        return self.loc.var(0, unbiased=False)


class CountPrediction(NamedTuple):
    r"""A mixture of Poissons over a count target, ``p(y) = Σ_k w_k Poisson(y | rate_k)``.

    The components are latent draws ``f_k`` pushed through ``rate = exp(f)`` (equal weights ``1/K``), or the nodes of
    a Gauss-Hermite rule over ``f ~ N(m, v)`` with its weights (the Poisson-lognormal predictive has no closed form).

    Attributes:
        rate: ``[K, B]`` component rates ``exp(f_k)``.
        log_weight: ``[K]`` component log weights, ``logsumexp = 0``.
    """

    rate: Tensor
    log_weight: Tensor

    def log_prob(self, y: Tensor) -> Tensor:
        """Mixture log pmf ``log Σ_k w_k Poisson(y | rate_k)``; counts ``y`` ``[B]`` (float or int) -> ``[B]``."""
        y = y.to(self.rate.dtype)
        component = torch.xlogy(y, self.rate) - self.rate - torch.lgamma(y + 1)  # [K, B]
        return torch.logsumexp(self.log_weight.unsqueeze(1) + component, dim=0)

    @property
    def mean(self) -> Tensor:
        """Predictive mean ``Σ_k w_k rate_k`` ``[B]``."""
        return self._weight() @ self.rate

    @property
    def variance(self) -> Tensor:
        """Total predictive variance ``[B]``: the mean of the Poisson variances (= the mean rate) plus the spread of
        the rates (law of total variance)."""
        return self.mean + self.epistemic

    @property
    def epistemic(self) -> Tensor:
        """Variance of the rate over the components ``Σ_k w_k (rate_k - mean)²`` ``[B]``."""
        return self._weight() @ (self.rate - self.mean).square()

    def _weight(self) -> Tensor:
        return self.log_weight.exp()


Prediction = ClassPrediction | RegPrediction | CountPrediction


def concat(parts: list[Prediction]) -> Prediction:
    """Predictions of consecutive input batches as one over all their inputs: along ``B`` (``[B]`` and
    ``[B, C]`` fields on dim 0, ``[K, B]`` mixtures on dim 1; a mixture's weights ``[K]`` are the same in every
    batch and kept once)."""
    first = parts[0]
    if isinstance(first, ClassPrediction):
        fields = ([getattr(p, name) for p in parts] for name in ClassPrediction._fields)
        return ClassPrediction(*(None if values[0] is None else torch.cat(values) for values in fields))
    if isinstance(first, RegPrediction):
        return RegPrediction(torch.cat([p.loc for p in parts], 1), torch.cat([p.var for p in parts], 1))
    return CountPrediction(torch.cat([p.rate for p in parts], 1), first.log_weight)
