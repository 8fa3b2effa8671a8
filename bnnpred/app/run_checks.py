"""Checks of a run's config that the schemas cannot express, made before anything is trained or written; each
failure is one ``BnnpredError`` naming the key and a fix."""

from __future__ import annotations

import torch

from bnnpred import inference
from bnnpred.app.config import Config, Device, Split, SweepObjective
from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.ggn import Structure
from bnnpred.data import Dataset, Task
from bnnpred.errors import BnnpredError
from bnnpred.inference.laplace_ggn import EvidenceForm, SubsetOfWeights, last_layer_names
from bnnpred.likelihoods import likelihood_for
from bnnpred.models import build_model
from bnnpred.predictive import PredictiveKind, check_applies, check_gp_memory, gp_subset_count
from bnnpred.prior import PriorGroups
from bnnpred.selection import SelectionMethod


def resolve_device(device: Device) -> torch.device:
    """``auto`` picks CUDA when available; asking for CUDA without it is an error."""
    if device is Device.cuda and not torch.cuda.is_available():
        raise BnnpredError("device=cuda but no CUDA device is available; use device=auto or device=cpu")
    if device is Device.cpu or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda")


def check_network(cfg: Config, data: Dataset) -> None:
    """Checks that need the network: the method's own (``check_network``: VL's activation, SLANG's rank), and the
    GP predictive's subset, which must lie within the training set and fit in the run device's free memory (the job's
    own limit where it has one: :mod:`bnnpred.memory`)."""
    module = build_model(cfg.model, data.input_shape, data.output_dim)
    cfg.inference.check_network(module)
    p = cfg.predictive
    if PredictiveKind.gp in p.kinds:  # on the run's device: its memory is the one the GP will need
        model = FlatModel(module.to(device=resolve_device(cfg.device), dtype=cfg.dtype.torch))
        M = gp_subset_count(p.gp_subset_size, len(data.X_train))
        n_valid = 0 if p.gp_prior_factors is None else len(data.X_valid)
        check_gp_memory(model, model.theta(), data.X_train[:1].to(model.theta()), M, n_valid)


# Sane ranges of the prior precision and the noise variance: outside them float64 sums lose the data term (a
# δ of 1e12 gives gradient norms of 1e12; a σ² of 1e-300 log-likelihoods of 1e302).
DELTA_RANGE = (1e-8, 1e8)


SIGMA2_RANGE = (1e-8, 1e8)


def check_range(key: str, value: float, bounds: tuple[float, float], example: str) -> None:
    low, high = bounds
    if not value > 0:
        raise BnnpredError(f"{key} must be positive, got {value}; e.g. {example}")
    if not low <= value <= high:
        raise BnnpredError(f"{key} = {value:g} is outside the sane range [{low:g}, {high:g}]; e.g. {example}")


# Keys that only a regression (Gaussian) likelihood reads.
REGRESSION_ONLY = ("likelihood.sigma2", "likelihood.noise_precision", "selection.sigma2_grid")


def check_applicable(cfg: Config, overrides: list[str], data: Dataset) -> None:
    """Settings given on the command line that the run would ignore, and a device that is absent: refused before
    anything is written."""
    given = {o.lstrip("+~").split("=", 1)[0] for o in overrides}
    if data.task is not Task.regression and (ignored := [k for k in REGRESSION_ONLY if k in given]):
        raise BnnpredError(f"{', '.join(ignored)} apply to regression only and {data.name} is a {data.task.value} "
                           "set; drop them")
    check_task(cfg, data)
    resolve_device(cfg.device)


def check_task(cfg: Config, data: Dataset) -> None:
    """Settings that the data set's task rules out: an OOD set for a regression or count model, a predictive made
    for another likelihood (the Laplace bridge for one logit)."""
    if cfg.ood is not None and not data.task.classification:
        raise BnnpredError(f"ood=NAME scores classifiers by predictive entropy; drop it for {data.task.value} data")
    for kind in cfg.predictive.kinds:
        check_applies(kind, likelihood_for(data.task, cfg.likelihood.sigma2))


def check_config(cfg: Config) -> None:
    """Value checks the schema cannot express; each failure names the key and a fix."""
    check_range("prior.delta", cfg.prior.delta, DELTA_RANGE, "prior.delta=1.0")
    if cfg.prior.bias_delta is not None:
        check_range("prior.bias_delta", cfg.prior.bias_delta, DELTA_RANGE, "prior.bias_delta=null")
    check_range("likelihood.sigma2", cfg.likelihood.sigma2, SIGMA2_RANGE, "likelihood.sigma2=0.1")
    if cfg.likelihood.noise_precision is not None and not cfg.likelihood.noise_precision > 0:
        raise BnnpredError(f"likelihood.noise_precision must be positive or null, got {cfg.likelihood.noise_precision}")
    if cfg.likelihood.noise_precision is not None and cfg.selection.sigma2_grid is not None:
        raise BnnpredError("likelihood.noise_precision fixes the noise, selection.sigma2_grid searches it; set one of "
                           "them to null")
    if cfg.predictive.n_samples < 1:
        raise BnnpredError(f"predictive.n_samples must be >= 1, got {cfg.predictive.n_samples}")
    if not cfg.predictive.kinds:
        raise BnnpredError("predictive.kinds is empty; e.g. predictive=glm")
    if Split.test not in cfg.predictive.splits:
        raise BnnpredError(f"predictive.splits must include test, got {[s.value for s in cfg.predictive.splits]}; "
                           "e.g. predictive.splits=[valid,test]")
    if not cfg.checkpoint_seconds >= 0:
        raise BnnpredError(f"checkpoint_seconds must be >= 0, got {cfg.checkpoint_seconds}; e.g. "
                           "checkpoint_seconds=300")
    if cfg.threads is not None and cfg.threads < 1:
        raise BnnpredError(f"threads must be >= 1 or null (torch's default), got {cfg.threads}")
    inference.check_predictives(cfg.inference.name, cfg.predictive.kinds)
    cfg.inference.validate()
    cfg.selection.validate()
    for key, grid, bounds in [("selection.delta_grid", cfg.selection.delta_grid or [], DELTA_RANGE),
                              ("selection.sigma2_grid", cfg.selection.sigma2_grid or [], SIGMA2_RANGE)]:
        for value in grid:
            check_range(key, value, bounds, f"{key}=[0.1,1,10]")
    if cfg.selection.method is SelectionMethod.marglik_gradient and (
            getattr(cfg.inference, "evidence", EvidenceForm.weight) is EvidenceForm.function):
        raise BnnpredError("selection=marglik_gradient ascends the weight-space evidence; use "
                           "inference.evidence=weight, or selection=marglik_grid for the function-space form")
    if cfg.prior.groups is not PriorGroups.shared and cfg.selection.method is not SelectionMethod.marglik_gradient:
        raise BnnpredError(f"prior.groups={cfg.prior.groups.value} gives each group its own δ, which only "
                           "selection=marglik_gradient moves apart; use it, or prior.groups=shared")
    if cfg.predictive.gp_prior_factors is not None and (
            not cfg.predictive.gp_prior_factors or min(cfg.predictive.gp_prior_factors) <= 0):
        raise BnnpredError(f"predictive.gp_prior_factors must be a non-empty list of positive values or null, got "
                           f"{list(cfg.predictive.gp_prior_factors)}")
    if cfg.objective is SweepObjective.cv_nll and cfg.selection.method is not SelectionMethod.cv_nll:
        raise BnnpredError("objective=cv_nll returns the cross-validated NLL that selection=cv_nll computes; add "
                           "selection=cv_nll (with selection.delta_grid=null the trial's prior.delta alone)")
    marglik = (SelectionMethod.marglik_grid, SelectionMethod.marglik_gradient)
    if cfg.selection.method in marglik and cfg.inference.name not in inference.EVIDENCE_METHODS:
        raise BnnpredError(f"selection={cfg.selection.method.value} needs the Laplace-GGN evidence; use "
                           f"inference={' / '.join(sorted(inference.EVIDENCE_METHODS))}, or selection=valid_nll / "
                           f"none with inference={cfg.inference.name}")


# A full posterior holds about three P x P matrices (curvature, precision, Cholesky factor).
FULL_COVARIANCE_LIMIT_GB = 8.0


def check_full_covariance_fits(cfg: Config, model: FlatModel, dtype: torch.dtype) -> None:
    """A full covariance over the posterior's parameters (all, or the last layer's) must fit in memory."""
    if getattr(cfg.inference, "structure", None) is not Structure.full:
        return
    last_layer = getattr(cfg.inference, "subset_of_weights", SubsetOfWeights.all) is SubsetOfWeights.last_layer
    n_params = (sum(model.sizes[model.names.index(n)] for n in last_layer_names(model)) if last_layer
                else model.n_params)
    gigabytes = 3 * n_params**2 * torch.finfo(dtype).bits / 8 / 1e9
    if gigabytes > FULL_COVARIANCE_LIMIT_GB:
        raise BnnpredError(f"a full covariance for P = {n_params} needs about {gigabytes:.0f} GB; use "
                           "inference.structure=diag or kron, inference.subset_of_weights=last_layer, or a smaller "
                           "model")
