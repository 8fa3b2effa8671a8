r"""VOGGN, variational online generalized Gauss-Newton (notes-000 §4.4, eqs. 4.7-4.8; Khan et al. 2018 [20]).

Sample first, then linearise at each sample: ``θ_s ~ q``, ``ĝ = (1/S) Σ_s Σ_i J(x_i;θ_s)ᵀ r(y_i, f(x_i;θ_s))``
and ``Ĝ = (1/S) Σ_s Σ_i J(x_i;θ_s)ᵀ Λ(f(x_i;θ_s)) J(x_i;θ_s)``: S Jacobians per point per step. The diagonal
variant is VOGN. The only method of the family whose NN-sampling predictive is justified (§4.10). With
``curvature=ef`` the empirical Fisher ``Σ_i g_i g_iᵀ`` at each sample replaces the GGN (SLANG's "EF" baselines).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bnnpred.curvature.ggn import Curvature, Structure, sampled_gradient_and_ggn
from bnnpred.inference.base import Fit, Problem
from bnnpred.inference.ngvi import Estimator, NGVIConfig, run_ngvi
from bnnpred.inference.ngvi_factor import sampled_gradient_and_factor
from bnnpred.posteriors import Posterior


@dataclass
class VOGGNConfig(NGVIConfig):
    name: str = "voggn"
    curvature: Curvature = Curvature.ggn  # ef: the empirical Fisher at the samples (SLANG's "EF" baselines)


def voggn_estimator(kind: Curvature = Curvature.ggn) -> Estimator:
    """VOGGN's estimates with the GGN (or the empirical Fisher) at each sample: a factor (full) or the diagonal."""

    def estimate(problem: Problem, post: Posterior, X: Tensor, y: Tensor, n_samples: int,
                 generator: torch.Generator, structure: Structure) -> tuple[Tensor, Tensor, Tensor]:
        draws = post.sample(n_samples, generator)
        if structure is Structure.full:
            return sampled_gradient_and_factor(problem.model, problem.likelihood, draws, X, y, kind)
        return sampled_gradient_and_ggn(problem.model, problem.likelihood, draws, X, y, structure=structure,
                                        kind=kind)

    return estimate


def fit_voggn(problem: Problem, cfg: VOGGNConfig) -> Fit:
    return run_ngvi(problem, cfg, voggn_estimator(cfg.curvature))
