"""Gaussian posterior structures; each is built from a mean and a precision of its own shape (a Laplace fit's from
its curvature and prior: :mod:`bnnpred.laplace_evidence`)."""

from __future__ import annotations

from typing import Any

from bnnpred.posteriors.base import Posterior
from bnnpred.posteriors.diag import DiagPosterior
from bnnpred.posteriors.full import FullPosterior
from bnnpred.posteriors.kron import KronPosterior
from bnnpred.posteriors.lowrank import LowRankDiagPosterior
from bnnpred.posteriors.subset import SubsetPosterior

STRUCTURES: dict[str, type[Posterior]] = {"full": FullPosterior, "diag": DiagPosterior, "kron": KronPosterior,
                                       "lowrank": LowRankDiagPosterior, "subset": SubsetPosterior}


def load_posterior(state: dict[str, Any]) -> Posterior:
    """Rebuild a posterior saved with ``Posterior.state()``."""
    return STRUCTURES[state["structure"]].from_state(state)


__all__ = ["Posterior", "FullPosterior", "DiagPosterior", "KronPosterior", "LowRankDiagPosterior", "SubsetPosterior",
           "STRUCTURES",
           "load_posterior"]
