r"""Laplace-GGN: MAP, then ``Π = S₀⁻¹ + Σ_i J_iᵀ Λ_i J_i`` at ``θ*`` (notes-000 eqs. 3.11-3.12; notes-004 eq. 12).

The posterior is ``N(θ*, Π⁻¹)`` in full, diagonal or per-layer Kronecker form (notes-004 eq. 8; ``dampen`` gives
the Ritter et al. baseline), over every parameter or over the last layer's alone (``subset_of_weights``, notes-003
"GLM-GGN-Full" on image networks); the empirical Fisher can replace the GGN (full and diagonal).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum
from math import nan

from torch import Tensor

from bnnpred.curvature.functional import FlatModel, SubsetModel
from bnnpred.curvature.ggn import Curvature, Structure, curvature
from bnnpred.curvature.jacobians import stacked_jacobians
from bnnpred.curvature.kron import kron_ggn
from bnnpred.errors import BnnpredError
from bnnpred.inference.base import Fit, Problem
from bnnpred.inference.checkpoint import Checkpoints
from bnnpred.inference.contract import POSTERIOR_KINDS, Method
from bnnpred.inference.map import MAP_BUDGET, MapConfig, train_map
from bnnpred.marglik import function_space_log_marglik, log_marglik
from bnnpred.posteriors import KronPosterior, Posterior, SubsetPosterior, posterior_from_precision
from bnnpred.predictive import PredictiveKind


class SubsetOfWeights(str, Enum):
    all = "all"  # every parameter (notes-000 §3)
    last_layer = "last_layer"  # the last layer's, the rest fixed at θ* (notes-003 "GLM-GGN-Full"; laplace-torch's name)


class EvidenceForm(str, Enum):
    weight = "weight"  # notes-000 §5.2's expanded formula: log det of the P x P posterior precision
    function = "function"  # eqs. 3.17 + 3.19: an N x N kernel (cheaper when N·K < P; single-output likelihoods)


@dataclass
class LaplaceGGNConfig(Method):
    KINDS = (*POSTERIOR_KINDS, PredictiveKind.gp)
    EVIDENCE = True
    BUDGET = MAP_BUDGET

    name: str = "laplace_ggn"
    structure: Structure = Structure.full
    subset_of_weights: SubsetOfWeights = SubsetOfWeights.all
    curvature: Curvature = Curvature.ggn
    dampen: bool = False  # kron only: (B + √δ I) ⊗ (A + √δ I) instead of B ⊗ A + δ I
    kron_batch_size: int = 128  # examples per batch of the Kronecker factors' C backward passes
    evidence: EvidenceForm = EvidenceForm.weight  # the two agree at a stationary MAP (map.lbfgs_tol)
    map: MapConfig = field(default_factory=MapConfig)

    def validate(self) -> None:
        self.map.validate()
        if self.dampen and self.structure is not Structure.kron:
            raise BnnpredError("inference.dampen applies to inference.structure=kron")
        if self.structure is Structure.kron and self.curvature is not Curvature.ggn:
            raise BnnpredError("inference.structure=kron uses the GGN; set inference.curvature=ggn")
        if self.evidence is EvidenceForm.function and self.curvature is not Curvature.ggn:
            raise BnnpredError("inference.evidence=function is the GGN's evidence; set inference.curvature=ggn")
        if self.kron_batch_size < 1:
            raise BnnpredError(f"inference.kron_batch_size must be >= 1, got {self.kron_batch_size}")


def fit_laplace_ggn(problem: Problem, cfg: LaplaceGGNConfig) -> Fit:
    """Train the MAP, then build the Laplace-GGN posterior and its log evidence there: over every parameter, or
    over the last layer's with the others fixed at θ* (the evidence is then the last layer's: its prior, its
    precision, the same data term)."""
    fit = train_map(problem, cfg.map)
    if cfg.subset_of_weights is SubsetOfWeights.all:
        return laplace_of_structure(problem, fit, cfg)
    model = SubsetModel(problem.model, fit.theta, last_layer_names(problem.model))
    block = slice(model.start, model.stop)
    sub = dataclasses.replace(problem, model=model, prior_precision=problem.prior_precision[block],
                              theta0=fit.theta[block])
    laplace = laplace_of_structure(sub, Fit(theta=fit.theta[block], posterior=None, info=fit.info), cfg)
    posterior = SubsetPosterior(fit.theta, laplace.posterior, model.start, model.stop, model.names)
    return Fit(theta=fit.theta, posterior=posterior, info=laplace.info, trace=fit.trace, buffers=fit.buffers)


def laplace_of_structure(problem: Problem, fit: Fit, cfg: LaplaceGGNConfig) -> Fit:
    """The posterior of ``cfg.structure`` at ``fit.theta`` over ``problem``'s parameters, with its evidence."""
    if cfg.structure is Structure.kron:
        blocks, loglik = kron_ggn(problem.model, problem.likelihood, fit.theta, problem.X, problem.y,
                                  cfg.kron_batch_size, resume=Checkpoints(problem, "kron", cfg))
        return with_evidence(fit, KronPosterior(fit.theta, blocks, problem.prior_precision, cfg.dampen), loglik,
                             problem.prior_precision)
    laplace = laplace_at(problem, fit, cfg.structure, cfg.curvature)
    if cfg.evidence is EvidenceForm.function:
        f, J = stacked_jacobians(problem.model, fit.theta, problem.X)
        value = function_space_log_marglik(problem.likelihood, f, J, problem.y, fit.theta, problem.prior_precision)
        laplace.info.update(log_marglik=float(value), log_marglik_weight=laplace.info["log_marglik"])
    return laplace


def last_layer_names(model: FlatModel) -> list[str]:
    """The parameters of the network's last module that has any (its output layer), which must be the last in
    θ order."""
    owners = [name for name, module in model.module.named_modules() if list(module.parameters(recurse=False))]
    prefix = f"{owners[-1]}." if owners and owners[-1] else ""
    names = [n for n in model.names if n.startswith(prefix) and "." not in n[len(prefix):]]
    if not names or names != model.names[-len(names):]:
        raise BnnpredError("inference.subset_of_weights=last_layer needs a network whose last module with "
                           "parameters is its output layer; use subset_of_weights=all")
    return names


def laplace_at(problem: Problem, fit: Fit, structure: Structure, kind: Curvature) -> Fit:
    """The full or diagonal Laplace posterior at ``fit.theta`` and its log marginal likelihood (notes-000 §5.2)."""
    G, loglik = curvature(
        problem.model, problem.likelihood, fit.theta, problem.X, problem.y, kind=kind, structure=structure
    )
    delta = problem.prior_precision
    precision = G + (delta.diag() if structure is Structure.full else delta)
    return with_evidence(fit, posterior_from_precision(structure.value, fit.theta, precision), loglik, delta)


def with_evidence(fit: Fit, posterior: Posterior, loglik: Tensor, delta: Tensor) -> Fit:
    """``fit`` with the Laplace posterior and its log evidence at ``fit.theta``; NaN when the precision needed
    jitter, since the evidence would then be that of another prior (the jitter is recorded in ``info``)."""
    evidence = log_marglik(loglik, fit.theta, delta, posterior.logdet_precision()) if not posterior.jitter else nan
    info = {**fit.info, "log_marglik": float(evidence), "train_loglik_map": float(loglik)}
    if posterior.jitter:
        info["jitter"] = posterior.jitter
    return Fit(theta=fit.theta, posterior=posterior, info=info, trace=fit.trace)
