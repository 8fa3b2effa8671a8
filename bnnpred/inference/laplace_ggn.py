r"""Laplace-GGN: MAP, then ``Π = S₀⁻¹ + Σ_i J_iᵀ Λ_i J_i`` at ``θ*`` (notes-000 eqs. 3.11-3.12; notes-004 eq. 12).

The posterior is ``N(θ*, Π⁻¹)`` in full or diagonal form; the empirical Fisher can replace the GGN.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bnnpred.curvature.ggn import Curvature, Structure, curvature
from bnnpred.inference.base import Fit, Problem
from bnnpred.inference.map import MapConfig, train_map
from bnnpred.marglik import log_marglik
from bnnpred.posteriors import posterior_from_precision


@dataclass
class LaplaceGGNConfig:
    name: str = "laplace_ggn"
    structure: Structure = Structure.full
    curvature: Curvature = Curvature.ggn
    map: MapConfig = field(default_factory=MapConfig)

    def validate(self) -> None:
        self.map.validate()


def fit_laplace_ggn(problem: Problem, cfg: LaplaceGGNConfig) -> Fit:
    """Train the MAP, then build the Laplace-GGN posterior and its log evidence there."""
    fit = train_map(problem, cfg.map)
    return laplace_at(problem, fit, cfg.structure, cfg.curvature)


def laplace_at(problem: Problem, fit: Fit, structure: Structure, kind: Curvature) -> Fit:
    """The Laplace posterior at ``fit.theta`` and its log marginal likelihood (notes-000 §5.2)."""
    G, loglik = curvature(
        problem.model, problem.likelihood, fit.theta, problem.X, problem.y, kind=kind, structure=structure
    )
    delta = problem.prior_precision
    precision = G + (delta.diag() if structure is Structure.full else delta)
    posterior = posterior_from_precision(structure.value, fit.theta, precision)
    evidence = log_marglik(loglik, fit.theta, delta, posterior.logdet_precision())
    info = {**fit.info, "log_marglik": float(evidence), "train_loglik_map": float(loglik)}
    return Fit(theta=fit.theta, posterior=posterior, info=info, trace=fit.trace)
