r"""LGVA, linearized Gaussian variational approximation (notes-000 §4.5, eqs. 4.9-4.10; new in the thesis).

Linearise at the mean once, then sample inside the linear model: with ``θ_s ~ q`` and
``f̂_s(x) = f(x;µ) + J(x;µ)(θ_s - µ)``, ``ĝ = (1/S) Σ_s Σ_i J(x_i;µ)ᵀ r(y_i, f̂_s(x_i))`` and
``Ĝ = (1/S) Σ_s Σ_i J(x_i;µ)ᵀ Λ(f̂_s(x_i)) J(x_i;µ)``: one Jacobian per point per step for any S.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bnnpred.curvature.ggn import Structure, gradient_and_ggn
from bnnpred.inference.base import Fit, Problem
from bnnpred.inference.ngvi import NGVIConfig, run_ngvi
from bnnpred.inference.ngvi_factor import linearised_gradient_and_factor
from bnnpred.posteriors import Posterior


@dataclass
class LGVAConfig(NGVIConfig):
    name: str = "lgva"


def estimate_lgva(problem: Problem, post: Posterior, X: Tensor, y: Tensor, n_samples: int,
                  generator: torch.Generator, structure: Structure) -> tuple[Tensor, Tensor, Tensor]:
    """LGVA's estimates: a factor ``[N·r, P]`` of ``Ĝ`` (full; ``r`` the rank of ``Λ``) or its diagonal."""
    shifts = post.sample(n_samples, generator) - post.mean  # [S, P]
    if structure is Structure.full:
        return linearised_gradient_and_factor(problem.model, problem.likelihood, post.mean, shifts, X, y)

    def linearised(f: Tensor, J: Tensor) -> Tensor:
        return f + torch.einsum("bcp,sp->sbc", J, shifts)

    return gradient_and_ggn(problem.model, problem.likelihood, post.mean, X, y, structure=structure,
                            outputs=linearised)


def fit_lgva(problem: Problem, cfg: LGVAConfig) -> Fit:
    return run_ngvi(problem, cfg, estimate_lgva)
