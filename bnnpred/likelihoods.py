r"""GLM likelihoods in natural form ``p(y|f) = h(y) exp{<y, f> - A(f)}``; notes-000 Table 2.1.

Each likelihood gives, for network outputs ``f`` ``[B, C]``:

- ``log_prob(f, y)``: ``log p(y_i | f_i)`` ``[B]``;
- ``inv_link(f)``: ``E[y] = g^{-1}(f)`` ``[B, C]``;
- ``residual(f, y)``: ``r = ∇_f log p(y|f)`` ``[B, C]`` (Lemma 2.1: ``y - g^{-1}(f)``, over σ² for the Gaussian);
- ``hessian(f)``: ``Λ = -∇²_f log p(y|f)`` ``[B, C, C]``;
- ``hessian_sqrt(f)``: ``L`` ``[B, C, C]`` with ``Lᵀ L = Λ``, so the GGN is ``Σ_i (L_i J_i)ᵀ (L_i J_i)``;
- ``hessian_root(f)``: ``R`` ``[B, r, C]`` with ``Rᵀ R = Λ`` and ``r`` rows, Λ's rank (notes-000 eq. 2.25): the
  fewest back-propagations and GGN rows;
- ``predict_samples(f_s)`` / ``predict_gaussian(mean, cov)``: the predictive over ``y`` from latent samples
  ``[S, B, C]`` (Monte Carlo) or from a Gaussian over the latent (closed form: exact for the Gaussian,
  probit for classification, Gauss-Hermite quadrature for the Poisson).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from bnnpred.data.base import Task
from bnnpred.errors import BnnpredError
from bnnpred.prediction import ClassPrediction, CountPrediction, Prediction, RegPrediction

LOG_2PI = math.log(2 * math.pi)

# Gauss-Hermite nodes of the Poisson's closed-form predictive (exact for polynomials of degree < 40 in f): its mean
# exp(m + v/2) and variance match their closed forms to 1e-15 relative for latent variances v ≤ 1, 1e-12 at v = 2
# and 1e-7 at v = 4.
POISSON_QUADRATURE_NODES = 20


class Likelihood(ABC):
    """A GLM likelihood over network outputs ``f`` ``[B, C]``."""

    # a probability mass function (log p ≤ 0 at every target): an ELBO of it, E_q[log p] − β·KL, is never above 0
    discrete: ClassVar[bool] = False

    @abstractmethod
    def log_prob(self, f: Tensor, y: Tensor) -> Tensor: ...

    @abstractmethod
    def inv_link(self, f: Tensor) -> Tensor: ...

    @abstractmethod
    def residual(self, f: Tensor, y: Tensor) -> Tensor: ...

    @abstractmethod
    def hessian_sqrt(self, f: Tensor) -> Tensor: ...

    def hessian_root(self, f: Tensor) -> Tensor:
        """``R`` ``[B, r, C]`` with ``RᵀR = Λ`` and ``r`` at most ``C``: here the batch's largest rank of Λ, from the
        eigenpairs of ``LᵀL`` (:func:`reduced_sqrt`); the categorical's ``C − 1`` rows in closed form."""
        return reduced_sqrt(self.hessian_sqrt(f))

    @abstractmethod
    def sample(self, f: Tensor, generator: torch.Generator) -> Tensor:
        """Targets ``ỹ ~ p(y | f)`` ``[B]`` for outputs ``[B, C]`` (labels from the model, as VL's Fisher needs)."""

    @abstractmethod
    def predict_samples(self, f_samples: Tensor) -> Prediction: ...

    @abstractmethod
    def predict_gaussian(self, mean: Tensor, cov: Tensor) -> Prediction: ...

    def check_targets(self, y: Tensor) -> None:
        """Raise a :class:`BnnpredError` for targets ``[N]`` outside the likelihood's support (here: not finite)."""
        _refuse_targets(y, ~y.isfinite(), "targets must be finite", "drop or impute those points")

    def hessian(self, f: Tensor) -> Tensor:
        """``Λ(f) = -∇²_f log p(y|f)`` ``[B, C, C]`` (independent of ``y`` for GLMs)."""
        L = self.hessian_sqrt(f)
        return L.transpose(1, 2) @ L

    def predict_point(self, f: Tensor) -> Prediction:
        """Plug-in predictive ``p(y | f(x; θ*))`` for outputs ``[B, C]`` (the MAP predictive)."""
        return self.predict_samples(f.unsqueeze(0))


class Gaussian(Likelihood):
    r"""``y ~ N(f, σ²)`` with a single output; ``Λ = σ^{-2}``, ``r = (y - f)/σ²``."""

    def __init__(self, sigma2: float):
        if not sigma2 > 0:
            raise BnnpredError(f"likelihood.sigma2 must be positive, got {sigma2}; set likelihood.sigma2=0.1")
        self.sigma2 = float(sigma2)

    def log_prob(self, f: Tensor, y: Tensor) -> Tensor:
        return -0.5 * (LOG_2PI + math.log(self.sigma2) + (y - f[:, 0]) ** 2 / self.sigma2)

    def inv_link(self, f: Tensor) -> Tensor:
        return f

    def residual(self, f: Tensor, y: Tensor) -> Tensor:
        return (y.unsqueeze(1) - f) / self.sigma2

    def hessian_sqrt(self, f: Tensor) -> Tensor:
        return torch.full_like(f, self.sigma2**-0.5).unsqueeze(2)

    def sample(self, f: Tensor, generator: torch.Generator) -> Tensor:
        noise = torch.randn(f[:, 0].shape, generator=generator, dtype=f.dtype, device=f.device)
        return f[:, 0] + self.sigma2**0.5 * noise

    def predict_samples(self, f_samples: Tensor) -> RegPrediction:
        loc = f_samples[..., 0]
        return RegPrediction(loc=loc, var=torch.full_like(loc, self.sigma2))

    def predict_gaussian(self, mean: Tensor, cov: Tensor) -> RegPrediction:
        """Exact: ``y* ~ N(f*, J Σ Jᵀ + σ²)`` (notes-000 §5.1, GLM = BLR for the Gaussian)."""
        return RegPrediction(loc=mean[:, 0].unsqueeze(0), var=(cov[:, 0, 0] + self.sigma2).unsqueeze(0))


class Bernoulli(Likelihood):
    r"""``y ~ Bernoulli(σ(f))`` with one logit; ``Λ = σ(f)(1 - σ(f))``."""

    discrete = True

    def log_prob(self, f: Tensor, y: Tensor) -> Tensor:
        return -F.binary_cross_entropy_with_logits(f[:, 0], y.to(f.dtype), reduction="none")

    def inv_link(self, f: Tensor) -> Tensor:
        return torch.sigmoid(f)

    def residual(self, f: Tensor, y: Tensor) -> Tensor:
        return y.to(f.dtype).unsqueeze(1) - torch.sigmoid(f)

    def hessian_sqrt(self, f: Tensor) -> Tensor:
        p = torch.sigmoid(f)
        return (p * (1 - p)).sqrt().unsqueeze(2)

    def sample(self, f: Tensor, generator: torch.Generator) -> Tensor:
        return torch.bernoulli(torch.sigmoid(f[:, 0]), generator=generator).long()

    def predict_samples(self, f_samples: Tensor) -> ClassPrediction:
        p1 = torch.sigmoid(f_samples[..., 0])  # [S, B]
        return _class_prediction(torch.stack([1 - p1, p1], dim=-1), p1.unsqueeze(-1))

    def predict_gaussian(self, mean: Tensor, cov: Tensor) -> ClassPrediction:
        """Probit approximation ``σ(μ / sqrt(1 + π v / 8))`` (MacKay 1992)."""
        p1 = torch.sigmoid(_probit_scale(mean[:, 0], cov[:, 0, 0]))
        return ClassPrediction(probs=torch.stack([1 - p1, p1], dim=-1))


class Categorical(Likelihood):
    r"""``y ~ Cat(softmax(f))``; ``Λ = diag(p) - p pᵀ`` (rank C - 1)."""

    discrete = True

    def log_prob(self, f: Tensor, y: Tensor) -> Tensor:
        return -F.cross_entropy(f, y.long(), reduction="none")

    def inv_link(self, f: Tensor) -> Tensor:
        return torch.softmax(f, dim=-1)

    def residual(self, f: Tensor, y: Tensor) -> Tensor:
        return F.one_hot(y.long(), f.shape[1]).to(f.dtype) - torch.softmax(f, dim=-1)

    def hessian_sqrt(self, f: Tensor) -> Tensor:
        """``L = diag(√p) - √p pᵀ``; ``Lᵀ L = diag(p) - p pᵀ`` because ``Σ_c p_c = 1``."""
        p = torch.softmax(f, dim=-1)
        s = p.sqrt()
        return torch.diag_embed(s) - s.unsqueeze(2) * p.unsqueeze(1)

    def hessian_root(self, f: Tensor) -> Tensor:
        """``R = Q diag(√p)`` ``[B, C−1, C]``, in closed form: ``s = √p`` is a unit vector, so
        ``Λ = diag(s) (I − s sᵀ) diag(s)``, and the first ``C − 1`` rows ``Q`` of the Householder reflection
        ``H = I − v vᵀ / (1 + s_C)``, ``v = s + e_C`` (``H s = −e_C``), are an orthonormal basis of ``s``'s
        complement: ``QᵀQ = I − s sᵀ``. ``O(C²)`` per input where the eigenpairs cost ``O(C³)``. (One class: Λ = 0,
        the general route's one zero row.)"""
        if f.shape[-1] == 1:
            return super().hessian_root(f)
        s = torch.softmax(f, dim=-1).sqrt()  # [B, C]
        v = torch.cat([s[:, :-1], s[:, -1:] + 1], dim=1)
        reflected = (s[:, :-1] / (1 + s[:, -1:])).unsqueeze(2) * (v * s).unsqueeze(1)  # [B, C−1, C]
        return torch.diag_embed(s)[:, :-1] - reflected

    def sample(self, f: Tensor, generator: torch.Generator) -> Tensor:
        return torch.multinomial(torch.softmax(f, dim=-1), 1, generator=generator)[:, 0]

    def predict_samples(self, f_samples: Tensor) -> ClassPrediction:
        probs = torch.softmax(f_samples, dim=-1)
        return _class_prediction(probs, probs)

    def predict_gaussian(self, mean: Tensor, cov: Tensor) -> ClassPrediction:
        """Multiclass probit: ``softmax(μ_c / sqrt(1 + π Σ_cc / 8))`` (Lu et al. 2020 mean-field)."""
        var = torch.diagonal(cov, dim1=1, dim2=2)
        return ClassPrediction(probs=torch.softmax(_probit_scale(mean, var), dim=-1))


class Poisson(Likelihood):
    r"""``y ~ Poisson(exp(f))`` with one output, the log rate (notes-000 Table 2.1): ``log p = y f - e^f - log y!``,
    ``r = y - e^f``, ``Λ = V[Y] = e^f``."""

    discrete = True

    def log_prob(self, f: Tensor, y: Tensor) -> Tensor:
        return y * f[:, 0] - f[:, 0].exp() - torch.lgamma(y + 1)

    def inv_link(self, f: Tensor) -> Tensor:
        return f.exp()

    def residual(self, f: Tensor, y: Tensor) -> Tensor:
        return y.unsqueeze(1) - f.exp()

    def hessian_sqrt(self, f: Tensor) -> Tensor:
        return (f / 2).exp().unsqueeze(2)

    def sample(self, f: Tensor, generator: torch.Generator) -> Tensor:
        return torch.poisson(f[:, 0].exp(), generator=generator)

    def check_targets(self, y: Tensor) -> None:
        _refuse_targets(y, (y < 0) | (y != y.floor()) | ~y.isfinite(), "Poisson targets must be counts 0, 1, 2, ...",
                        "pass whole non-negative numbers, or task regression for real-valued targets")

    def predict_samples(self, f_samples: Tensor) -> CountPrediction:
        """Equal-weight mixture of ``Poisson(exp f_s)`` over the draws ``[S, B, 1]``."""
        S = f_samples.shape[0]
        log_weight = torch.full((S,), -math.log(S), dtype=f_samples.dtype, device=f_samples.device)
        return CountPrediction(rate=f_samples[..., 0].exp(), log_weight=log_weight)

    def predict_gaussian(self, mean: Tensor, cov: Tensor) -> CountPrediction:
        """``∫ Poisson(y | e^f) N(f | m, v) df`` (Poisson-lognormal, no closed form) by
        ``POISSON_QUADRATURE_NODES``-point Gauss-Hermite quadrature: a Poisson mixture at the nodes."""
        f, weight = gauss_hermite(mean[:, 0], cov[:, 0, 0], POISSON_QUADRATURE_NODES)
        return CountPrediction(rate=f.exp(), log_weight=weight.log())


def gauss_hermite(mean: Tensor, var: Tensor, nodes: int) -> tuple[Tensor, Tensor]:
    r"""Gauss-Hermite rule for ``E_{f ~ N(m, v)}[g(f)] ≈ Σ_k w_k g(f_k)``: points ``f_k = m + √(2v) t_k``
    ``[K, *m.shape]`` and weights ``w_k = ω_k / √π`` ``[K]`` (summing to 1), for means and variances ``[*]`` (a
    variance below zero by round-off, as ``J Σ Jᵀ`` can be, is read as zero)."""
    t, omega = (torch.as_tensor(a, dtype=mean.dtype, device=mean.device)
                for a in np.polynomial.hermite.hermgauss(nodes))
    points = mean.unsqueeze(0) + (2 * var.clamp_min(0)).sqrt().unsqueeze(0) * t.view(-1, *(1,) * mean.dim())
    return points, omega / math.sqrt(math.pi)


def _refuse_targets(y: Tensor, bad: Tensor, problem: str, fix: str) -> None:
    """One line naming the first of the ``bad`` targets ``[N]`` (a bool mask) and the fix, if there is any."""
    if bool(bad.any()):
        i = int(bad.nonzero()[0, 0])
        raise BnnpredError(f"{problem}, got y[{i}] = {float(y[i])!r} ({int(bad.sum())} of {len(y)}); {fix}")


def _probit_scale(mean: Tensor, var: Tensor) -> Tensor:
    return mean / torch.sqrt(1 + math.pi / 8 * var)


def _class_prediction(sample_probs: Tensor, split_on: Tensor) -> ClassPrediction:
    """Average sampled probabilities ``[S, B, C]``; split the variance of ``split_on`` ``[S, B, K]``.

    Kwon et al. (2020): aleatoric ``E_s[Σ_k p_k(1 - p_k)]``, epistemic ``Σ_k Var_s[p_k]``; for a Bernoulli
    ``split_on`` is ``p(y=1)`` alone, so the two add up to ``p̄(1 - p̄)`` (notes-004 §3.2).
    """
    probs = sample_probs.mean(0)
    aleatoric = (split_on * (1 - split_on)).sum(-1).mean(0)
    epistemic = split_on.var(0, unbiased=False).sum(-1)
    return ClassPrediction(probs=probs, aleatoric=aleatoric, epistemic=epistemic)


LIKELIHOODS = {Task.binary: Bernoulli, Task.multiclass: Categorical, Task.count: Poisson}


def likelihood_for(task: Task, sigma2: float) -> Likelihood:
    """The likelihood a task implies: Gaussian(σ²) for regression, one-logit Bernoulli, categorical or Poisson."""
    return Gaussian(sigma2) if task is Task.regression else LIKELIHOODS[task]()


# Λ = RᵀR by a factor with as few rows as Λ's rank (notes-000 eq. 2.25): hessian_root's route for any likelihood.


def reduced_sqrt(L: Tensor) -> Tensor:
    """A factor ``R`` ``[B, r, C]`` with ``RᵀR = LᵀL`` for ``L`` ``[B, C, C]`` and ``r`` the largest rank of the
    ``LᵀL`` (:func:`psd_root`); ``L`` itself when they all have full rank."""
    if L.shape[-1] == 1 or len(L) == 0:
        return L
    R = psd_root(L.mT @ L)
    return L if R.shape[1] == L.shape[-1] else R


def psd_root(M: Tensor) -> Tensor:
    """``R = diag(√λ) Vᵀ`` ``[B, r, C]`` over the top ``r`` eigenpairs of the PSD ``M = V diag(λ) Vᵀ`` ``[B, C, C]``,
    so ``RᵀR = M``, with ``r`` the largest rank of the ``M`` (eigenvalues at or below ``C·ε·λ_max`` count as zero,
    a rounding-level change)."""
    C = M.shape[-1]
    lam, V = torch.linalg.eigh(M)  # ascending
    rank = int((lam > C * torch.finfo(M.dtype).eps * lam[:, -1:]).sum(-1).max()) if len(M) else C
    return (V[:, :, C - rank :] * lam[:, None, C - rank :].clamp_min(0).sqrt()).mT
