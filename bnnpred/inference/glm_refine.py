r"""GLM refinement (notes-004 §2.5, eq. 11): Laplace-GGN at the MAP ``θ*``, then inference in the GLM
``f_lin(x, θ) = f(x; θ*) + J(x; θ*)(θ − θ*)`` whose objective is convex; the linearisation point stays ``θ*``.

The refinement iterates the natural-gradient update of :mod:`bnnpred.inference.ngvi` on the linearised model
(:class:`~bnnpred.curvature.functional.LinearizedModel`, all ``N`` Jacobians held in memory), from the Laplace
posterior:

- ``mode=vi``: Gaussian VI in the GLM, one ``θ_s ~ q`` per step (LGVA's estimates, which are exact in a linear
  model): the reference's "glm refine" (γ = 1e-2, full) and "glm refine d" (γ = 1e-3, diagonal), 250 steps.
- ``mode=laplace``: the estimates at the mean (OGGN's): with γ = 1 this is Newton's method on the GLM objective,
  whose fixed point is the GLM MAP with precision ``Δ + Σ J*ᵀ Λ(f_lin) J*`` there (the Laplace refinement).

Predict with ``glm`` / ``closed``: the GLM predictive uses ``θ*`` and the refined ``N(µ, Σ)``.

Each full-covariance step costs one GGN ``Σ J*ᵀ Λ J*`` (``N·(C−1)·P²`` flops, one triangle) and one ``P x P``
Cholesky. ``jacobian_dtype=float32`` stores ``J*`` in float32 in a float64 run and forms the GGN's products in
float32 (half the memory, about twice the product rate; the gradient and the precision stay float64): the GGN's
relative error is then about 1e-6 (tests/test_glm_refine.py), far below the Monte Carlo noise of a one-sample step,
but the iterates are no longer those of float64 products. The precision's update ``(1−γ)Π + γ(Δ + Ĝ)`` is full rank
here (``N·(C−1)`` rows against ``P`` columns), so each step factorises it afresh.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum

import torch

from bnnpred.curvature.functional import LinearizedModel
from bnnpred.curvature.ggn import Curvature
from bnnpred.curvature.jacobians import stacked_jacobians
from bnnpred.errors import BnnpredError
from bnnpred.inference.base import Fit, Problem
from bnnpred.inference.laplace_ggn import laplace_at
from bnnpred.inference.lgva import estimate_lgva
from bnnpred.inference.map import MapConfig, train_map
from bnnpred.inference.ngvi import NGVIConfig, run_ngvi
from bnnpred.inference.oggn import estimate_oggn


class RefineMode(str, Enum):
    vi = "vi"
    laplace = "laplace"


@dataclass
class GLMRefineConfig(NGVIConfig):
    name: str = "glm_refine"
    mode: RefineMode = RefineMode.vi
    gamma: float = 0.01
    iterations: int = 250
    tol: float = 0.0  # the reference runs a fixed number of steps
    map: MapConfig = field(default_factory=MapConfig)
    jacobian_dtype: str | None = None  # None: θ's; float32: J* stored and the GGN's products formed in float32

    def validate(self) -> None:
        super().validate()
        self.map.validate()
        if self.jacobian_dtype not in JACOBIAN_DTYPES:
            raise BnnpredError(f"inference.jacobian_dtype must be one of {', '.join(map(str, JACOBIAN_DTYPES))}, "
                               f"got {self.jacobian_dtype}")


JACOBIAN_DTYPES = (None, "float32", "float64")


def linearized_problem(problem: Problem, theta_star: torch.Tensor, jacobian_dtype: str | None = None) -> Problem:
    """The same problem on the GLM at ``θ*``: inputs become row numbers ``[N]`` of the stored ``f*`` and ``J*`` (in
    ``jacobian_dtype``, default ``θ*``'s); the network's test monitor does not apply to the GLM's parameters, so the
    traces go without it."""
    dtype = getattr(torch, jacobian_dtype) if jacobian_dtype else None
    model = LinearizedModel(*stacked_jacobians(problem.model, theta_star, problem.X, dtype), theta_star)
    rows = torch.arange(len(problem.X), device=theta_star.device)
    return dataclasses.replace(problem, model=model, X=rows, theta0=theta_star,
                               session=dataclasses.replace(problem.session, monitor=None))


def fit_glm_refine(problem: Problem, cfg: GLMRefineConfig) -> Fit:
    """MAP, Laplace-GGN (``cfg.structure``) at ``θ*``, then ``cfg.iterations`` refinement steps in the GLM."""
    laplace = laplace_at(problem, train_map(problem, cfg.map), cfg.structure, Curvature.ggn)
    estimate = estimate_lgva if cfg.mode is RefineMode.vi else estimate_oggn
    refined = run_ngvi(linearized_problem(problem, laplace.theta, cfg.jacobian_dtype), cfg, estimate,
                       start=laplace.posterior)
    info = {**laplace.info, "laplace_log_marglik": laplace.log_evidence,  # the start's: a diagnostic
            **{f"refine_{k}": v for k, v in refined.info.items()}}
    return Fit(theta=laplace.theta, posterior=refined.posterior, info=info, trace=refined.trace, timing=refined.timing)


