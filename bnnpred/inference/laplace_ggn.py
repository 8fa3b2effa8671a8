r"""Laplace-GGN: MAP, then ``Π = S₀⁻¹ + Σ_i J_iᵀ Λ_i J_i`` at ``θ*`` (notes-000 eqs. 3.11-3.12; notes-004 eq. 12).

The posterior is ``N(θ*, Π⁻¹)`` in full, diagonal or per-layer Kronecker form (notes-004 eq. 8; ``dampen`` gives
the Ritter et al. baseline), over every parameter or over the last layer's alone (``subset_of_weights``, notes-003
"GLM-GGN-Full" on image networks); the empirical Fisher can replace the GGN (full and diagonal).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum

from torch import Tensor

from bnnpred.curvature.functional import FlatModel, SubsetModel
from bnnpred.curvature.ggn import Curvature, Structure, curvature
from bnnpred.curvature.jacobians import stacked_jacobians
from bnnpred.curvature.kron import KronBlock, kron_ggn
from bnnpred.curvature.streamed import Batches, streamed_curvature, streamed_kron
from bnnpred.errors import BnnpredError
from bnnpred.inference.base import Fit, Problem
from bnnpred.inference.contract import POSTERIOR_KINDS, Method
from bnnpred.inference.loop import accumulation
from bnnpred.inference.map import MAP_BUDGET, MapConfig, train_map
from bnnpred.laplace_evidence import (
    DiagCurvature,
    FullCurvature,
    KronCurvature,
    LaplaceCurvature,
    LaplaceEvidence,
    SubsetCurvature,
)
from bnnpred.likelihoods import Gaussian, Likelihood
from bnnpred.marglik import function_space_log_marglik
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
    kron_batch_size: int | None = None  # examples per batch of the Kronecker factors' backward passes; None: as many
    # as keep a batch's layer inputs and back-propagated rows within 2^24 numbers, at least 128 (kron_batch_size)
    evidence: EvidenceForm = EvidenceForm.weight  # the two agree at a stationary MAP (map.finish_tol)
    map: MapConfig = field(default_factory=MapConfig)

    def validate(self) -> None:
        self.map.validate()
        if self.dampen and self.structure is not Structure.kron:
            raise BnnpredError("inference.dampen applies to inference.structure=kron")
        if self.structure is Structure.kron and self.curvature is not Curvature.ggn:
            raise BnnpredError("inference.structure=kron uses the GGN; set inference.curvature=ggn")
        if self.evidence is EvidenceForm.function and self.curvature is not Curvature.ggn:
            raise BnnpredError("inference.evidence=function is the GGN's evidence; set inference.curvature=ggn")
        if self.kron_batch_size is not None and self.kron_batch_size < 1:
            raise BnnpredError(f"inference.kron_batch_size must be >= 1 or null (sized by memory), got "
                               f"{self.kron_batch_size}")


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
    inner, loglik = data_curvature(sub, fit.theta[block], cfg)
    curvature = SubsetCurvature(inner.sigma2, inner.power, inner=inner, start=model.start, stop=model.stop,
                                names=model.names)
    return in_evidence_form(sub, fit.theta[block], with_evidence(problem, fit, curvature, loglik), cfg.evidence)


def laplace_of_structure(problem: Problem, fit: Fit, cfg: LaplaceGGNConfig) -> Fit:
    """The posterior of ``cfg.structure`` at ``fit.theta`` over ``problem``'s parameters, with its evidence."""
    laplace = with_evidence(problem, fit, *data_curvature(problem, fit.theta, cfg))
    return in_evidence_form(problem, fit.theta, laplace, cfg.evidence)


def in_evidence_form(problem: Problem, theta: Tensor, laplace: Fit, form: EvidenceForm) -> Fit:
    """``laplace`` reporting the evidence in ``form``: the weight-space value as it is, or the function-space one
    (notes-000 eqs. 3.17 + 3.19) over ``problem``'s parameters ``theta`` with the weight-space value beside it
    (``info["log_marglik_weight"]``)."""
    if form is EvidenceForm.function:
        f, J = stacked_jacobians(problem.model, theta, problem.X)
        value = float(function_space_log_marglik(problem.likelihood, f, J, problem.y, theta,
                                                 problem.prior_precision))
        laplace.info["log_marglik_weight"] = laplace.evidence.value
        laplace.evidence.value = value
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


def data_curvature(problem: Problem, theta: Tensor, cfg: LaplaceGGNConfig) -> tuple[LaplaceCurvature, float]:
    """The data term's curvature at ``theta`` in ``cfg.structure`` (notes-000 eqs. 3.11-3.12 without the prior;
    notes-004 eq. 8 for the Kronecker factors), with ``Σ log p(y | f(x; θ))``."""
    if cfg.structure is Structure.kron:
        data, loglik = kron_ggn(problem.model, problem.likelihood, theta, problem.X, problem.y,
                                cfg.kron_batch_size, resume=accumulation(problem, "kron", cfg),
                                show_progress=problem.session.progress)
    else:
        data, loglik = curvature(problem.model, problem.likelihood, theta, problem.X, problem.y, kind=cfg.curvature,
                                 structure=cfg.structure)
    return curvature_of(problem.likelihood, cfg, data), float(loglik)


def curvature_of(likelihood: Likelihood, cfg: LaplaceGGNConfig, data: Tensor | list[KronBlock]) -> LaplaceCurvature:
    """The curvature object of ``cfg.structure`` holding ``data`` (``H`` ``[P, P]``, its diagonal ``[P]`` or the
    Kronecker blocks), computed at the likelihood's noise."""
    sigma2 = likelihood.sigma2 if isinstance(likelihood, Gaussian) else None
    power = 2 if cfg.curvature is Curvature.ef else 1
    if cfg.structure is Structure.kron:
        return KronCurvature(sigma2, power, blocks=data, dampen=cfg.dampen)
    if cfg.structure is Structure.full:
        return FullCurvature(sigma2, power, H=data)
    return DiagCurvature(sigma2, power, h=data)


def laplace_from_batches(model: FlatModel, likelihood: Likelihood, theta: Tensor, batches: Batches,
                         prior_precision: Tensor, cfg: LaplaceGGNConfig) -> Fit:
    """Post-hoc: the Laplace-GGN at ``theta`` as it is (no training) with its data curvature and log-likelihood
    summed over ``batches`` of ``(inputs, targets)`` (:mod:`bnnpred.curvature.streamed`: one batch in memory at a
    time), and its log evidence; over every parameter, in the weight-space form."""
    if cfg.subset_of_weights is not SubsetOfWeights.all or cfg.evidence is not EvidenceForm.weight:
        raise BnnpredError("a Laplace fit streamed from a data loader is over every parameter with the weight-space "
                           "evidence; pass tensors for subset_of_weights=last_layer or evidence=function")
    if cfg.structure is Structure.kron:
        data, loglik, n = streamed_kron(model, likelihood, theta, batches, cfg.kron_batch_size)
    else:
        data, loglik, n = streamed_curvature(model, likelihood, theta, batches, kind=cfg.curvature,
                                             structure=cfg.structure)
    return laplace_fit(Fit(theta=theta, posterior=None), curvature_of(likelihood, cfg, data), float(loglik), n,
                       prior_precision)


def laplace_at(problem: Problem, fit: Fit, structure: Structure, kind: Curvature) -> Fit:
    """The full or diagonal Laplace posterior at ``fit.theta`` and its log marginal likelihood (notes-000 §5.2)."""
    cfg = LaplaceGGNConfig(structure=structure, curvature=kind)
    return laplace_of_structure(problem, fit, cfg)


def with_evidence(problem: Problem, fit: Fit, curvature: LaplaceCurvature, loglik: float) -> Fit:
    """:func:`laplace_fit` at the problem's prior and number of examples."""
    return laplace_fit(fit, curvature, loglik, len(problem.X), problem.prior_precision)


def laplace_fit(fit: Fit, curvature: LaplaceCurvature, loglik: float, n: int, prior_precision: Tensor) -> Fit:
    """``fit`` with the Laplace posterior ``N(θ*, (H + Δ)⁻¹)`` at the prior precision ``[P]`` and its log evidence
    over ``n`` examples in ``evidence.value`` (NaN when the precision needed jitter, since the evidence would then
    be that of another prior; the jitter is recorded in ``info``)."""
    evidence = LaplaceEvidence(fit.theta, curvature, loglik, n)
    posterior = evidence.posterior(prior_precision)
    evidence.value = evidence.at_fit(posterior, prior_precision)
    info = {**fit.info, "train_loglik_map": loglik}
    if posterior.jitter:
        info["jitter"] = posterior.jitter
    return Fit(theta=fit.theta, posterior=posterior, info=info, trace=fit.trace, buffers=fit.buffers,
               evidence=evidence, timing=fit.timing)
