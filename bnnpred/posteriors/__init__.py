"""Gaussian posterior structures; each is built from a mean and a precision of its own shape."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from bnnpred.posteriors.base import Posterior
from bnnpred.posteriors.diag import DiagPosterior
from bnnpred.posteriors.full import FullPosterior
from bnnpred.posteriors.kron import KronPosterior
from bnnpred.posteriors.lowrank import LowRankDiagPosterior
from bnnpred.posteriors.subset import SubsetPosterior

STRUCTURES: dict[str, type[Posterior]] = {"full": FullPosterior, "diag": DiagPosterior, "kron": KronPosterior,
                                       "lowrank": LowRankDiagPosterior, "subset": SubsetPosterior}


def posterior_from_precision(structure: str, mean: Tensor, precision: Tensor) -> Posterior:
    """``N(mean, precision⁻¹)`` with ``precision`` ``[P, P]`` (full) or ``[P]`` (diag); the Kronecker and
    low-rank structures are built from their factors (:class:`KronPosterior`, :class:`LowRankDiagPosterior`)."""
    if structure not in ("full", "diag"):
        raise ValueError(f"posterior_from_precision builds full or diag posteriors, not {structure}")
    return STRUCTURES[structure](mean, precision)


def load_posterior(state: dict[str, Any]) -> Posterior:
    """Rebuild a posterior saved with ``Posterior.state()``."""
    return STRUCTURES[state["structure"]].from_state(state)


__all__ = ["Posterior", "FullPosterior", "DiagPosterior", "KronPosterior", "LowRankDiagPosterior", "SubsetPosterior",
           "STRUCTURES",
           "posterior_from_precision", "load_posterior"]
