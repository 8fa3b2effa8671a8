r"""OGGN, online generalized Gauss-Newton (notes-000 §4.6, eqs. 4.11-4.12; Khan et al. 2018 [20]).

No sampling: ``ĝ = Σ_i J(x_i;µ)ᵀ r(y_i, f(x_i;µ))`` and ``Ĝ = Σ_i J(x_i;µ)ᵀ Λ(f(x_i;µ)) J(x_i;µ)``.
Its fixed point is the Laplace-GGN posterior at a MAP; predict with the GLM predictive.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bnnpred.curvature.ggn import Structure, gradient_and_ggn
from bnnpred.inference.base import Fit, Problem
from bnnpred.inference.ngvi import NGVIConfig, run_ngvi
from bnnpred.inference.ngvi_factor import sampled_gradient_and_factor
from bnnpred.posteriors import Posterior


@dataclass
class OGGNConfig(NGVIConfig):
    name: str = "oggn"


def estimate_oggn(problem: Problem, post: Posterior, X: Tensor, y: Tensor, n_samples: int,
                  generator: torch.Generator, structure: Structure) -> tuple[Tensor, Tensor, Tensor]:
    """Gradient and GGN at the mean: a factor ``[N·C, P]`` (full) or the diagonal (``n_samples`` and
    ``generator`` unused: OGGN does not sample)."""
    if structure is Structure.full:
        return sampled_gradient_and_factor(problem.model, problem.likelihood, post.mean.unsqueeze(0), X, y)
    return gradient_and_ggn(problem.model, problem.likelihood, post.mean, X, y, structure=structure)


def fit_oggn(problem: Problem, cfg: OGGNConfig) -> Fit:
    return run_ngvi(problem, cfg, estimate_oggn)
