"""A Gaussian over a contiguous block of the parameters, ``θ[start:stop]``, the others fixed at the mean (the
last-layer Laplace posterior, notes-003 §5 "GLM-GGN-Full" on the last layer; Kristiadi et al. 2020)."""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import Tensor

from bnnpred.errors import BnnpredError
from bnnpred.posteriors.base import Posterior


class SubsetPosterior(Posterior):
    """``θ[start:stop] ~ inner``, every other parameter equal to ``mean`` (a point mass).

    Args:
        mean: ``[P]``; ``mean[start:stop]`` equals ``inner.mean``.
        inner: the Gaussian over the ``stop - start`` chosen parameters (any structure).
        names: the chosen parameters' names in θ order (the network's last layer).
    """

    def __init__(self, mean: Tensor, inner: Posterior, start: int, stop: int, names: list[str]):
        self.mean, self.inner, self.start, self.stop, self.names = mean, inner, start, stop, list(names)
        self.jitter = inner.jitter

    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        draws = self.mean.expand(n, -1).clone()
        draws[:, self.start : self.stop] = self.inner.sample(n, generator)
        return draws

    def logdet_precision(self) -> Tensor:
        """``log det Π`` of the chosen block (the fixed parameters have no finite precision)."""
        return self.inner.logdet_precision()

    def quad(self, d: Tensor) -> Tensor:
        return self.inner.quad(d[self.start : self.stop])

    def functional_cov(self, J: Tensor) -> Tensor:
        return self.inner.functional_cov(J[..., self.start : self.stop])

    def cov_mv(self, v: Tensor) -> Tensor:
        out = torch.zeros_like(v)
        out[self.start : self.stop] = self.inner.cov_mv(v[self.start : self.stop])
        return out

    def marginal_variance(self) -> Tensor:
        out = torch.zeros_like(self.mean)
        out[self.start : self.stop] = self.inner.marginal_variance()
        return out

    def kl_to_prior(self, prior_precision: Tensor) -> Tensor:
        """The KL of the chosen block to its prior (the fixed parameters are not random)."""
        return self.inner.kl_to_prior(prior_precision[self.start : self.stop])

    def log_prob(self, theta: Tensor) -> Tensor:
        return self.inner.log_prob(theta[self.start : self.stop])

    def dense_precision(self) -> Tensor:
        raise BnnpredError("a last-layer posterior has no finite precision for the fixed parameters; use its "
                           ".inner posterior for the last layer's")

    def shifted(self, mean: Tensor) -> SubsetPosterior:
        moved = copy.copy(self)
        moved.mean, moved.inner = mean, self.inner.shifted(mean[self.start : self.stop])
        return moved

    def state(self) -> dict[str, Any]:
        return {"structure": "subset", "mean": self.mean, "inner": self.inner.state(), "start": self.start,
                "stop": self.stop, "names": self.names}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SubsetPosterior:
        from bnnpred.posteriors import load_posterior

        return cls(state["mean"], load_posterior(state["inner"]), state["start"], state["stop"], state["names"])
