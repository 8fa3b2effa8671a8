"""One run: data, network, inference (with hyperparameter selection), numerical health, predictives, metrics,
files.

A run directory holds ``config.yaml`` (resolved), ``metrics.json``, ``posterior.pt``, ``predictions.npz``,
``selection.csv``, ``trace.csv``, figures and ``manifest.json`` (their checksums, written last). The files are
staged and committed by :mod:`bnnpred.run_files`, under the run's lock, so a failed or killed run leaves the
previous result or none, and a run is finished only when every file verifies (:mod:`bnnpred.run_record`).
``bnnpred eval`` writes beside the run, under ``evals/<key>/``, never over it.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from bnnpred import __version__, inference, metrics, run_files
from bnnpred.config import Config, Device, DType, LikelihoodConfig, Split, run_key
from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.ggn import Structure
from bnnpred.data import Dataset, Task, load_dataset
from bnnpred.errors import BnnpredError
from bnnpred.health import DataTerm, data_term, fit_problems, jitter_flags, non_finite_metrics, objective_at
from bnnpred.inference import Fit, Problem
from bnnpred.inference.laplace_ggn import EvidenceForm, SubsetOfWeights, last_layer_names
from bnnpred.inference.ngvi import DivergenceError
from bnnpred.io import CorruptFile, load_torch, non_finite_to_null, save_npz, save_torch, write_json, write_text
from bnnpred.likelihoods import likelihood_for
from bnnpred.models import build_model
from bnnpred.posteriors import load_posterior
from bnnpred.prediction import ClassPrediction, Prediction
from bnnpred.predictive import (
    Context,
    PredictiveKind,
    check_gp_memory,
    gp_subset_count,
    network_outputs,
    predictor,
)
from bnnpred.prior import Prior, PriorGroups
from bnnpred.provenance import code_commit, code_digest
from bnnpred.run_record import EVAL_FILES, EVALS, FinishedRun, NotFinished, has_result_files, read_finished
from bnnpred.selection import Candidate, SelectionMethod, select
from bnnpred.stored_predictions import StoredPredictions

log = logging.getLogger(__name__)

SPLITS = tuple(split.value for split in Split)


@dataclass
class Setup:
    """Everything a run builds before inference: typed config, data on the device, the network."""

    cfg: Config
    data: Dataset
    model: FlatModel
    device: torch.device
    dtype: torch.dtype
    prior: Prior  # the configured prior, every free group at prior.delta (selection moves it)
    X_ood: torch.Tensor | None = None  # inputs of the out-of-distribution set (``ood=NAME``), or None


def typed(cfg: DictConfig) -> Config:
    """The composed config as dataclass instances (enums and all), interpolations resolved."""
    return OmegaConf.to_object(cfg)


def resolve_device(device: Device) -> torch.device:
    """``auto`` picks CUDA when available; asking for CUDA without it is an error."""
    if device is Device.cuda and not torch.cuda.is_available():
        raise BnnpredError("device=cuda but no CUDA device is available; use device=auto or device=cpu")
    if device is Device.cpu or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda")


def check_network(cfg: Config, data: Dataset) -> None:
    """Checks that need the network: the method's own (``check_network``: VL's activation, SLANG's rank), and the
    GP predictive's subset, which must lie within the training set and fit in free memory."""
    module = build_model(cfg.model, data.input_shape, data.output_dim)
    cfg.inference.check_network(module)
    p = cfg.predictive
    if PredictiveKind.gp in p.kinds:
        model = FlatModel(module.to(torch.float64 if cfg.dtype is DType.float64 else torch.float32))
        M = gp_subset_count(p.gp_subset_size, len(data.X_train))
        n_valid = 0 if p.gp_prior_factors is None else len(data.X_valid)
        check_gp_memory(model, model.theta(), data.X_train[:1].to(model.theta().dtype), M, n_valid)


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


# Keys that only a regression likelihood reads.
REGRESSION_ONLY = ("likelihood.sigma2", "likelihood.noise_precision", "selection.sigma2_grid")


def check_applicable(cfg: Config, overrides: list[str], data: Dataset) -> None:
    """Settings given on the command line that the run would ignore, and a device that is absent: refused before
    anything is written."""
    given = {o.lstrip("+~").split("=", 1)[0] for o in overrides}
    if data.task is not Task.regression and (ignored := [k for k in REGRESSION_ONLY if k in given]):
        raise BnnpredError(f"{', '.join(ignored)} apply to regression only and {data.name} is a classification set; "
                           "drop them")
    if cfg.ood is not None and data.task is Task.regression:
        raise BnnpredError("ood=NAME scores classifiers by predictive entropy; drop it for regression data")
    resolve_device(cfg.device)


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
    for key, grid, bounds in [("selection.delta_grid", cfg.selection.delta_grid, DELTA_RANGE),
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


def setup(cfg: Config) -> Setup:
    check_config(cfg)
    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    device = resolve_device(cfg.device)
    dtype = torch.float64 if cfg.dtype is DType.float64 else torch.float32
    data = to_device(load_dataset(cfg.dataset), device, dtype)
    module = build_model(cfg.model, data.input_shape, data.output_dim).to(device=device, dtype=dtype)
    model = FlatModel(module)
    log.info("model %s: P = %d parameters", cfg.model.name, model.n_params)
    check_full_covariance_fits(cfg, model, dtype)
    X_ood = ood_inputs(cfg, data, device, dtype)
    return Setup(cfg=cfg, data=data, model=model, device=device, dtype=dtype,
                 prior=Prior.from_config(model, cfg.prior), X_ood=X_ood)


def ood_inputs(cfg: Config, data: Dataset, device: torch.device, dtype: torch.dtype) -> torch.Tensor | None:
    """The test inputs of the OOD set (notes-004 §3.5: the OOD dataset's test split), checked against the
    in-distribution input shape and standardised with the in-distribution training statistics."""
    if cfg.ood is None:
        return None
    if data.task is Task.regression:
        raise BnnpredError("ood=NAME scores classifiers by predictive entropy; drop it for regression data")
    ood = load_dataset(dataclasses.replace(cfg.ood, standardize=False) if hasattr(cfg.ood, "standardize")
                       else cfg.ood)
    if ood.input_shape != data.input_shape:
        raise BnnpredError(f"OOD set {cfg.ood.name} has inputs {list(ood.input_shape)} but {cfg.dataset.name} has "
                           f"{list(data.input_shape)}; pick an OOD set of the same shape")
    X = torch.cat([ood.X_valid, ood.X_test])
    if data.standardization is not None:  # the network sees OOD inputs as it saw its own: the training statistics
        mean, std = data.standardization
        X = (X - mean) / std
    return X.to(device=device, dtype=dtype)


def to_device(data: Dataset, device: torch.device, dtype: torch.dtype) -> Dataset:
    """Inputs (and regression targets) in ``dtype`` on ``device``; class labels as int64."""
    y_dtype = dtype if data.task is Task.regression else torch.int64
    moved = {}
    for split in SPLITS:
        X, y = data.split(split)
        moved[f"X_{split}"] = X.to(device=device, dtype=dtype)
        moved[f"y_{split}"] = y.to(device=device, dtype=y_dtype)
    return replace(data, **moved)


def plugin_metrics(s: Setup, theta: torch.Tensor, likelihood: Any) -> dict[str, float]:
    """Average ``log p(y | f(x; θ*))`` per split (notes-000 eq. 5.1), and the RMSE of ``f(x; θ*)`` for regression."""
    out = {}
    with torch.no_grad():
        for split in SPLITS:
            X, y = s.data.split(split)
            if len(X):
                f = network_outputs(s.model, theta, X)
                out[f"{split}_ll_map"] = float(likelihood.log_prob(f, y).mean())
                if s.data.task is Task.regression:
                    out[f"{split}_rmse_map"] = float((f.squeeze(-1) - y).square().mean().sqrt())
    return out


def test_metrics_at(s: Setup, likelihood: Any, theta: torch.Tensor) -> dict[str, float]:
    """``test_<metric>`` of the network at ``θ`` (the plug-in predictive), for training traces."""
    X, y = s.data.split("test")
    if not len(X):
        return {}
    with torch.no_grad():
        pred = likelihood.predict_point(s.model(theta, X))
    return {f"test_{name}": value for name, value in metrics.evaluate(pred, y).items()}


def make_context(s: Setup, fit: Fit, likelihood: Any, prior_precision: torch.Tensor) -> Context:
    return Context(s.model, likelihood, fit.theta, fit.posterior, prior_precision, s.data.X_train)


def predictors(s: Setup, ctx: Context) -> dict[str, Callable[[torch.Tensor], Prediction]]:
    p = s.cfg.predictive
    return {
        kind.value: predictor(kind, ctx, n_samples=p.n_samples, seed=s.cfg.seed,
                              gp_subset_size=p.gp_subset_size, gp_subset_how=p.gp_subset,
                              gp_prior_factors=p.gp_prior_factors, gp_per_class=p.gp_per_class,
                              valid=s.data.split("valid"))
        for kind in p.kinds
    }


def evaluate_all(
    s: Setup, predict_by_kind: dict[str, Callable[[torch.Tensor], Prediction]],
    stored: StoredPredictions | None = None,
) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, Prediction], dict[str, Prediction]]:
    """Metrics ``{split: {kind: {metric: value}}}`` (with the test split's ``ood_auc`` when an OOD set is given), and
    the test-set and OOD-set predictions per kind; each (kind, split) prediction kept in ``stored`` as it finishes
    (a restarted run reuses them)."""
    stored = stored or StoredPredictions(None, "")
    results: dict[str, dict[str, dict[str, float]]] = {split: {} for split in SPLITS}
    test_predictions: dict[str, Prediction] = {}
    ood_predictions: dict[str, Prediction] = {}
    splits = [name.value for name in s.cfg.predictive.splits]

    def predicted(kind: str, split: str, X: torch.Tensor) -> tuple[Prediction, float]:
        if (kept := stored.get(kind, split)) is not None:
            return kept
        start = time.perf_counter()
        pred = predict_by_kind[kind](X)
        seconds = time.perf_counter() - start
        stored.put(kind, split, pred, seconds)
        return pred, seconds

    for i, kind in enumerate(predict_by_kind, 1):
        for split in splits:
            X, y = s.data.split(split)
            if not len(X):
                continue
            log.info("predictive %d/%d (%s) on %s: %d inputs", i, len(predict_by_kind), kind, split, len(X))
            pred, seconds = predicted(kind, split, X)
            values = metrics.evaluate(pred, y)
            if s.data.target_scale is not None:
                values = in_original_units(values, s.data.target_scale)
            results[split][kind] = {**values, "seconds": seconds}
            if split == "test":
                test_predictions[kind] = pred
        if s.X_ood is not None and kind in test_predictions:
            ood_predictions[kind] = predicted(kind, "ood", s.X_ood)[0]
            results["test"][kind]["ood_auc"] = metrics.ood_auc(test_predictions[kind].probs,
                                                               ood_predictions[kind].probs)
    return results, test_predictions, ood_predictions


def noise_variance(cfg: LikelihoodConfig, data: Dataset) -> float:
    """σ² on the targets the model sees: ``sigma2``, or ``1/(τ·s²)`` for a noise precision τ on the original scale
    of targets standardised by ``s``."""
    if cfg.noise_precision is None:
        return cfg.sigma2
    if data.target_scale is None:
        raise BnnpredError(f"likelihood.noise_precision is τ on the original target scale, but {data.name} does not "
                           "standardise its targets; use likelihood.sigma2")
    return 1 / (cfg.noise_precision * data.target_scale**2)


def in_original_units(values: dict[str, float], scale: float) -> dict[str, float]:
    """Regression metrics of standardised targets plus their copies in the data's units: ``rmse·s``,
    ``nll + log s``, ``joint_ll − log s``."""
    extra = {"rmse_original": values["rmse"] * scale} if "rmse" in values else {}
    if "joint_ll" in values:
        extra["joint_ll_original"] = values["joint_ll"] - math.log(scale)
    return {**values, **extra, "nll_original": values["nll"] + math.log(scale)}


def likelihood_at(s: Setup, sigma2: float | None) -> Any:
    """The likelihood of the data's task at noise ``σ²`` (ignored for classification)."""
    return likelihood_for(s.data.task, sigma2 if sigma2 is not None else 1.0)


class Trainer:
    """Fits the configured method at given hyperparameters; ``select`` drives it over grids."""

    def __init__(self, s: Setup, checkpoints: Path | None = None):
        self.s = s
        self.theta0 = s.model.theta()
        self.checkpoints = checkpoints  # folder of the trainers' resumable states, or None
        self.start_data: dict[float | None, DataTerm] = {}  # the likelihood term at θ0, per σ², shared over δ

    def fit_at(self, prior: Prior, sigma2: float | None, warm: torch.Tensor | None) -> Candidate:
        s = self.s
        likelihood = likelihood_at(s, sigma2)
        precision = prior.precision(s.model.theta())
        problem = Problem(
            model=s.model, likelihood=likelihood, X=s.data.X_train, y=s.data.y_train, prior_precision=precision,
            theta0=self.theta0 if warm is None else warm,
            generator=torch.Generator(device=s.device).manual_seed(s.cfg.seed),
            progress=s.cfg.progress, fit_cache=Path(s.cfg.fit_cache) if s.cfg.fit_cache else None,
            monitor=partial(test_metrics_at, s, likelihood), augment=s.data.augment,
            checkpoints=self.checkpoints, checkpoint_seconds=s.cfg.checkpoint_seconds,
        )
        if warm is None and sigma2 not in self.start_data:
            self.start_data[sigma2] = data_term(problem, problem.theta0)
        start = objective_at(problem, problem.theta0, None if warm is not None else self.start_data[sigma2])
        fit = replace(inference.fit(problem, s.cfg.inference), buffers=s.model.buffer_state())
        end = objective_at(problem, fit.theta)
        problems = fit_problems(start, end, fit)
        log_evidence = None if fit.evidence is None else fit.evidence.value
        valid_nll = (self.valid_nll(fit, likelihood, precision) if s.cfg.selection.method is SelectionMethod.valid_nll
                     else None)
        row = {"delta": prior.delta, **prior_columns(prior), "sigma2": sigma2 if sigma2 is not None else float("nan"),
               **fit.info, **plugin_metrics(s, fit.theta, likelihood), "objective_start": start.value,
               "objective_end": end.value, "grad_norm_start": start.grad_norm, "problems": "; ".join(problems)}
        if log_evidence is not None:
            row["log_marglik_per_n"] = log_evidence / len(s.data.X_train)
        if valid_nll is not None:
            row["valid_nll"] = valid_nll
        kept = bool(problems and s.cfg.keep_unhealthy)  # kept, and flagged with the run
        return Candidate(prior=prior, sigma2=sigma2, fit=fit, row=row, log_evidence=log_evidence,
                         valid_nll=valid_nll, problems=[] if kept else problems, flags=problems if kept else [])

    def valid_nll(self, fit: Fit, likelihood: Any, prior: torch.Tensor) -> float:
        X, y = self.s.data.split("valid")
        if not len(X):
            raise BnnpredError("selection=valid_nll needs a validation split; set dataset.n_valid or a fraction")
        first = self.s.cfg.predictive.kinds[0]
        predict = predictors(replace(self.s, cfg=_only_kind(self.s.cfg, first)),
                             make_context(self.s, fit, likelihood, prior))[first.value]
        return metrics.nll(predict(X), y)


def prior_columns(prior: Prior) -> dict[str, float]:
    """``delta[<group>]`` columns of a prior with several groups (none for one group: ``delta`` says it)."""
    return {} if len(prior.names) == 1 else {f"delta[{name}]": value for name, value in prior.deltas().items()}


def _only_kind(cfg: Config, kind: PredictiveKind) -> Config:
    return replace(cfg, predictive=replace(cfg.predictive, kinds=[kind]))


CHECKPOINTS = ".checkpoints"  # in the run directory while its training is unfinished


@dataclass(frozen=True)
class Outcome:
    document: dict[str, Any]  # metrics.json
    trained: bool  # False: a finished run of the same config and code was found and kept


def train(cfg_dict: DictConfig, run_dir: Path) -> Outcome:
    """``bnnpred train``: fit, select, evaluate and write one run directory.

    Holds the run's lock throughout, so a second process with the same run waits, then finds it finished."""
    cfg = typed(cfg_dict)
    key = run_key(cfg_dict)
    run_dir = Path(run_dir)
    with run_files.locked(run_dir):
        run_files.recover(run_dir)
        if not cfg.force and (done := finished_run(run_dir, key)) is not None:
            log.info("%s already holds a finished run of this config; skipped (force=true reruns it)", run_dir)
            print_table(done["metrics"], done["run"])
            return Outcome(done, trained=False)
        checkpoints = run_dir / CHECKPOINTS
        try:
            document = fit_and_write(cfg, cfg_dict, key, run_dir, checkpoints)
        except BnnpredError:  # a deterministic failure: resuming would fail the same way
            shutil.rmtree(checkpoints, ignore_errors=True)
            raise
        shutil.rmtree(checkpoints, ignore_errors=True)  # kept only while the run is unfinished (killed, crashed)
        return Outcome(document, trained=True)


def fit_and_write(cfg: Config, cfg_dict: DictConfig, key: str, run_dir: Path, checkpoints: Path) -> dict[str, Any]:
    from bnnpred.report.run_figures import ood_figure, run_figures

    start = time.perf_counter()
    s = setup(cfg)
    trainer = Trainer(s, checkpoints)
    sigma2 = noise_variance(cfg.likelihood, s.data) if s.data.task is Task.regression else None
    try:
        chosen, rows = select(cfg.selection, trainer.fit_at, s.prior, sigma2)
    except DivergenceError as e:
        keep_last_good(run_dir, e.last_good)
        raise
    if chosen.problems:
        raise BnnpredError(f"the fit is numerically broken: {'; '.join(chosen.problems)} (δ = {chosen.delta:g}); "
                           "lower the learning rate or change the prior, or set keep_unhealthy=true to keep it "
                           "flagged")
    fit = chosen.fit
    s.model.load_buffers(fit.buffers)  # a later candidate of the selection grid may have changed them
    likelihood = likelihood_at(s, chosen.sigma2)
    ctx = make_context(s, fit, likelihood, chosen.prior.precision(fit.theta))
    predict = predictors(s, ctx)  # built once: the GP predictive conditions on its training subset at its first use
    results, test_predictions, ood_predictions = evaluate_all(s, predict, StoredPredictions(checkpoints, key))
    flags = [*chosen.flags, *jitter_flags(fit), *metric_flags(results, cfg.keep_unhealthy)]
    summary = run_summary(s, chosen, key, flags, time.perf_counter() - start)
    document = {"run": summary, "info": non_finite_to_null(fit.info), "metrics": non_finite_to_null(results)}
    with run_files.staged(run_dir) as stage:
        write_text(stage / "config.yaml", OmegaConf.to_yaml(cfg_dict, resolve=True))
        save_torch(stage / "posterior.pt", saved_fit(s, fit, chosen))
        save_npz(stage / "predictions.npz", prediction_arrays(test_predictions, s.data.y_test, ood_predictions))
        write_text(stage / "selection.csv", pd.DataFrame(rows).to_csv(index=False))
        write_text(stage / "trace.csv", pd.DataFrame(fit.trace).to_csv(index=False))
        if cfg.plot.enabled:
            run_figures(stage, s, ctx, predict, rows, fit.trace)
            ood_figure(stage / f"ood_entropy.{cfg.plot.format.value}", results, test_predictions, ood_predictions)
        write_json(stage / "metrics.json", document)
    for flag in flags:
        log.warning("flagged: %s", flag)
    print_table(results, summary)
    return document


def metric_flags(results: dict[str, dict[str, dict[str, float]]], keep: bool) -> list[str]:
    """Flags for metrics that are not finite (written as null), or the error that fails the run."""
    bad = non_finite_metrics(results)
    if bad and not keep:
        raise BnnpredError(f"{len(bad)} metric(s) are not finite ({', '.join(bad[:3])}); the run is failed; set "
                           "keep_unhealthy=true to keep it flagged")
    return [f"metric not finite: {b}" for b in bad]


def finished_run(run_dir: Path, key: str) -> dict[str, Any] | None:
    """The ``metrics.json`` of a finished, intact run in ``run_dir`` with run key ``key`` (the key it was trained
    under, which includes the code's digest), else None; a broken result is named in a warning."""
    try:
        run = read_finished(run_dir)
    except NotFinished as e:
        if has_result_files(run_dir):
            log.warning("%s holds a result that is not used (%s); training it again", run_dir, e)
        return None
    return run.document if run.document["run"].get("key") == key else None


def keep_last_good(run_dir: Path, last_good: Fit) -> None:
    """Save the state before a divergence as ``last_good.pt`` (a diagnostic, not a result)."""
    posterior = None if last_good.posterior is None else last_good.posterior.state()
    save_torch(run_dir / "last_good.pt", {"theta": last_good.theta.cpu(), "posterior": posterior,
                                           "info": last_good.info})
    log.error("diverged; the last finite state is in %s", run_dir / "last_good.pt")


def posterior_structure(cfg: Config) -> str | None:
    """The posterior's structure as tables show it: ``full``, ``diag``, ``kron``, with ``-last_layer`` for a
    last-layer posterior; None for a method without one."""
    structure = getattr(cfg.inference, "structure", None)
    if structure is None:
        return None
    subset = getattr(cfg.inference, "subset_of_weights", SubsetOfWeights.all)
    return structure.value if subset is SubsetOfWeights.all else f"{structure.value}-{subset.value}"


def run_summary(s: Setup, chosen: Candidate, key: str, flags: list[str], seconds: float) -> dict[str, Any]:
    cfg = s.cfg
    return {
        "dataset": s.data.name, "task": s.data.task.value, "model": cfg.model.name,
        "inference": cfg.inference.name, "structure": posterior_structure(cfg),
        "selection": cfg.selection.method.value, "seed": cfg.seed, "delta": chosen.delta, "sigma2": chosen.sigma2,
        "prior": chosen.prior.deltas(),
        "data_split": getattr(cfg.dataset, "split", None),  # the published split of UCI sets
        "n_params": s.model.n_params, "n_train": len(s.data.X_train), "seconds": seconds, "tags": list(cfg.tags),
        "version": __version__, "commit": code_commit(), "code": code_digest(), "key": key, "flags": flags,
    }


def saved_fit(s: Setup, fit: Fit, chosen: Candidate) -> dict[str, Any]:
    return {
        "theta": fit.theta.cpu(),
        "posterior": None if fit.posterior is None else {k: (v.cpu() if torch.is_tensor(v) else v)
                                                          for k, v in fit.posterior.state().items()},
        "delta": chosen.delta,
        "prior": chosen.prior.state(),
        "sigma2": chosen.sigma2,
        "n_params": s.model.n_params,
        "buffers": {name: value.cpu() for name, value in fit.buffers.items()},
    }


def prediction_arrays(predictions: dict[str, Prediction], y: torch.Tensor,
                      ood: dict[str, Prediction]) -> dict[str, np.ndarray]:
    """Test-set predictions per kind (``<kind>_probs``, or ``_mean`` / ``_var``) and OOD ``<kind>_ood_probs``."""
    arrays = {"y": y.cpu().numpy(), **{f"{kind}_ood_probs": pred.probs.cpu().numpy() for kind, pred in ood.items()}}
    for kind, pred in predictions.items():
        if isinstance(pred, ClassPrediction):
            arrays[f"{kind}_probs"] = pred.probs.cpu().numpy()
        else:
            arrays[f"{kind}_mean"] = pred.mean.cpu().numpy()
            arrays[f"{kind}_var"] = pred.variance.cpu().numpy()
    return arrays


def print_table(results: dict[str, dict[str, dict[str, float]]], summary: dict[str, Any]) -> None:
    """Test metrics, one row per predictive."""
    table = pd.DataFrame(results["test"]).T.drop(columns="seconds", errors="ignore")
    header = (f"{summary['dataset']} | {summary['inference']} {summary['structure'] or ''} | "
              f"δ = {summary['delta']:.4g}" + (f", σ² = {summary['sigma2']:.4g}" if summary["sigma2"] else "")
              + f" | P = {summary['n_params']}")
    print(header)
    print(table.to_string(float_format=lambda v: f"{v:.4f}"))


def load_run(run_dir: Path) -> tuple[FinishedRun, dict[str, Any]]:
    """A finished, intact run directory and its saved fit (tensors only: loading runs no code)."""
    try:
        run = read_finished(Path(run_dir))
        return run, load_torch(run.folder / "posterior.pt")
    except (NotFinished, CorruptFile) as e:
        raise BnnpredError(f"{run_dir} is not a finished run ({e}); train it again with the same config") from e


def restore(run_dir: Path, overrides: DictConfig | None = None) -> tuple[Setup, Context]:
    """The set-up (data, model) and predictive context (θ*, posterior, likelihood, prior) of a finished run,
    with ``overrides`` merged into its saved config."""
    return restored(*load_run(run_dir), overrides)


def restored(run: FinishedRun, saved: dict[str, Any], overrides: DictConfig | None) -> tuple[Setup, Context]:
    cfg = typed(eval_config(run, overrides))
    s = setup(cfg)
    theta = saved["theta"].to(device=s.device, dtype=s.dtype)
    s.model.load(theta)
    s.model.load_buffers(saved.get("buffers", {}))  # runs saved before buffers were kept have none
    posterior = None
    if saved["posterior"] is not None:
        state = {k: (v.to(device=s.device, dtype=s.dtype) if torch.is_tensor(v) else v)
                 for k, v in saved["posterior"].items()}
        posterior = load_posterior(state)
    prior = Prior.from_state(saved["prior"]) if "prior" in saved else s.prior.at(saved["delta"])
    return s, Context(s.model, likelihood_at(s, saved["sigma2"]), theta, posterior, prior.precision(theta),
                      s.data.X_train)


def evaluate_run(run_dir: Path, predictive_overrides: DictConfig, force: bool = False) -> dict[str, Any]:
    """``bnnpred eval``: evaluate a saved run with other predictive settings, into ``<run>/evals/<key>/`` (its
    merged config, metrics, test and OOD predictions, figures); the run's own results are never changed. The key
    is the run key of the merged config, so the same re-evaluation is found again and skipped (``force=True`` redoes
    it)."""
    from bnnpred.report.run_figures import ood_figure, run_figures

    run_dir = Path(run_dir)
    with run_files.locked(run_dir):
        run_files.recover(run_dir)
        run, saved = load_run(run_dir)
        merged = eval_config(run, predictive_overrides)
        s, ctx = restored(run, saved, predictive_overrides)
        key = run_key(merged)
        folder = run_dir / EVALS / key
        if folder.is_dir():
            run_files.recover(folder)
        if not force:
            try:
                done = read_finished(folder, EVAL_FILES).document
                print_table(done["metrics"], done["run"])
                print(f"{folder} already holds this re-evaluation; kept (force=true redoes it)")
                return done
            except NotFinished:
                pass
        predict = predictors(s, ctx)
        results, test_predictions, ood_predictions = evaluate_all(s, predict)
        own = run.document["run"]
        summary = {**own, "key": key, "eval_of": own.get("key"), "changes": changed_settings(run.config, merged),
                   "code": code_digest(), "commit": code_commit(),
                   "flags": [*own.get("flags", []), *metric_flags(results, keep=True)]}
        document = {"run": summary, "info": run.document.get("info", {}), "metrics": non_finite_to_null(results)}
        with run_files.staged(folder) as stage:
            write_text(stage / "config.yaml", OmegaConf.to_yaml(merged, resolve=True))
            save_npz(stage / "predictions.npz", prediction_arrays(test_predictions, s.data.y_test, ood_predictions))
            if s.cfg.plot.enabled:
                run_figures(stage, s, ctx, predict, [], [])
                ood_figure(stage / f"ood_entropy.{s.cfg.plot.format.value}", results, test_predictions, ood_predictions)
            write_json(stage / "metrics.json", document)
    print_table(results, summary)
    print(f"re-evaluation written to {folder}")
    return document


def eval_config(run: FinishedRun, overrides: DictConfig | None) -> DictConfig:
    """A run's saved config with a re-evaluation's ``overrides`` merged in, on this code's schemas."""
    from bnnpred.config import retyped

    try:
        return OmegaConf.merge(retyped(run.config), overrides or {})
    except OmegaConfBaseException as e:
        raise BnnpredError(f"{run.folder}'s config does not fit this code's schemas ({str(e).splitlines()[0]}); it "
                           "was made by another version of bnnpred: train it again with this one") from e


def eval_folder(run_dir: Path, overrides: DictConfig | None) -> Path:
    """Where ``bnnpred eval`` with ``overrides`` writes for the run in ``run_dir``: ``evals/<its run key>``."""
    return Path(run_dir) / EVALS / run_key(eval_config(read_finished(run_dir), overrides))


def changed_settings(before: DictConfig, after: DictConfig) -> dict[str, Any]:
    """``{dotted key: new value}`` of the predictive and plot settings that differ between two configs."""
    flat = {}
    for node in ("predictive", "plot"):
        old = OmegaConf.to_container(before[node], resolve=True, enum_to_str=True)
        new = OmegaConf.to_container(after[node], resolve=True, enum_to_str=True)
        flat.update({f"{node}.{k}": v for k, v in new.items() if old.get(k) != v})
    return flat
