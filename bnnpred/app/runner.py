"""``bnnpred train``: one run from its config to its folder: the prior and data from
:mod:`bnnpred.app.run_setup` (checked by :mod:`bnnpred.app.run_checks`), the method fitted at each point of the
selection with its numerical health (:mod:`bnnpred.app.health`), the chosen fit evaluated
(:mod:`bnnpred.app.run_evaluation`), and the run directory written.

A run directory holds ``config.yaml`` (resolved), ``metrics.json``, ``posterior.pt``, ``predictions.npz``,
``selection.csv``, ``trace.csv``, figures and ``manifest.json`` (their checksums, written last). The files are
staged and committed by :mod:`bnnpred.app.run_files`, under the run's lock, so a failed or killed run leaves the
previous result or none, and a run is finished only when every file verifies (:mod:`bnnpred.app.run_record`); finished
runs are found, restored and re-evaluated by :mod:`bnnpred.app.saved_runs`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from omegaconf import DictConfig, OmegaConf

from bnnpred import inference, metrics
from bnnpred._version import __version__
from bnnpred.app import run_files
from bnnpred.app.config import Config, run_key
from bnnpred.app.health import fit_problems, jitter_flags, stationarity_flags
from bnnpred.app.run_evaluation import (
    entropy_histograms,
    evaluate_all,
    make_context,
    metric_flags,
    monitor_metrics_at,
    only_kind,
    plugin_metrics,
    prediction_arrays,
    predictors,
    print_table,
)
from bnnpred.app.run_setup import Setup, device_fields, likelihood_at, noise_variance, setup, typed
from bnnpred.app.saved_runs import finished_run, moved
from bnnpred.app.stored_predictions import StoredPredictions
from bnnpred.data import Task
from bnnpred.errors import BnnpredError
from bnnpred.inference import Fit, Problem, Session
from bnnpred.inference.laplace_ggn import SubsetOfWeights
from bnnpred.inference.ngvi import DivergenceError
from bnnpred.inference.objective import DataTerm, data_term, objective_at
from bnnpred.io import non_finite_to_null, save_npz, save_torch, write_json, write_text
from bnnpred.prior import Prior
from bnnpred.provenance import code_commit, code_digest
from bnnpred.selection import Candidate, SelectionMethod, select

log = logging.getLogger(__name__)


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
            augment=s.data.augment,
            session=Session(progress=s.cfg.progress, fit_cache=Path(s.cfg.fit_cache) if s.cfg.fit_cache else None,
                            monitor=partial(monitor_metrics_at, s, likelihood), checkpoints=self.checkpoints,
                            checkpoint_seconds=s.cfg.checkpoint_seconds),
        )
        cv_nll = (self.cv_nll(problem, warm) if s.cfg.selection.method is SelectionMethod.cv_nll else None)
        if warm is None and sigma2 not in self.start_data:
            self.start_data[sigma2] = data_term(problem, problem.theta0)
        start = objective_at(problem, problem.theta0, None if warm is not None else self.start_data[sigma2])
        started = time.perf_counter()
        fit = replace(inference.fit(problem, s.cfg.inference), buffers=s.model.buffer_state())
        fit_seconds = time.perf_counter() - started  # training and posterior: the posterior's is this less training
        end = objective_at(problem, fit.theta)
        problems = fit_problems(start, end, fit, s.cfg.inference.HEALTH, discrete=likelihood.discrete)
        log_evidence = fit.log_evidence
        valid_nll = (self.valid_nll(fit, likelihood, precision) if s.cfg.selection.method is SelectionMethod.valid_nll
                     else None)
        row = {"delta": prior.delta, **prior_columns(prior), "sigma2": sigma2 if sigma2 is not None else float("nan"),
               **recorded_info(fit), **plugin_metrics(s, fit.theta, likelihood), "objective_start": start.value,
               "objective_end": end.value, "grad_norm_start": start.grad_norm, "fit_seconds": fit_seconds,
               "problems": "; ".join(problems)}
        if log_evidence is not None:  # a diagnostic column
            row["log_marglik_per_n"] = log_evidence / len(s.data.X_train)
        if valid_nll is not None:
            row["valid_nll"] = valid_nll
        if cv_nll is not None:  # in the run's info too, for an optimising sweeper (objective=cv_nll)
            row["cv_nll"] = fit.info["cv_nll"] = cv_nll
        kept = bool(problems and s.cfg.keep_unhealthy)  # kept, and flagged with the run
        return Candidate(prior=prior, sigma2=sigma2, fit=fit, row=row, log_evidence=log_evidence,
                         valid_nll=valid_nll, cv_nll=cv_nll, problems=[] if kept else problems,
                         flags=[*(problems if kept else []), *stationarity_flags(end, fit)])

    def cv_nll(self, problem: Problem, warm: torch.Tensor | None) -> float:
        """The K-fold cross-validated NLL of the training split (``selection=cv_nll``): the training rows in
        ``selection.folds`` seeded folds; each fold predicted by the first predictive of the method fitted on the
        other folds at the same prior and noise; the NLL per held-out example over all folds. The folds' fits
        leave the network's buffers as they found them, so the fit on all rows that follows is the same as
        without cross-validation."""
        s = self.s
        if s.cfg.selection.folds > len(problem.X):
            raise BnnpredError(f"selection.folds = {s.cfg.selection.folds} exceeds the {len(problem.X)} training rows; "
                               f"use selection.folds <= {len(problem.X)}")
        first = s.cfg.predictive.kinds[0]
        cfg = only_kind(s.cfg, first)
        rows = torch.randperm(len(problem.X), generator=torch.Generator().manual_seed(s.cfg.seed))
        folds = torch.tensor_split(rows.to(problem.X.device), s.cfg.selection.folds)
        buffers, total = s.model.buffer_state(), 0.0
        for k, held in enumerate(folds):
            kept = torch.cat([fold for j, fold in enumerate(folds) if j != k])
            part = replace(problem, X=problem.X[kept], y=problem.y[kept],
                           session=replace(problem.session, monitor=None), theta0=self.theta0 if warm is None else warm,
                           generator=torch.Generator(device=s.device).manual_seed(s.cfg.seed))
            fit = inference.fit(part, s.cfg.inference)
            on_part = replace(s, cfg=cfg, data=replace(s.data, X_train=part.X, y_train=part.y))
            predict = predictors(on_part, make_context(on_part, fit, problem.likelihood,
                                                       problem.prior_precision))[first.value]
            total += metrics.nll(predict(problem.X[held]), problem.y[held]) * len(held)
            s.model.load_buffers(buffers)
        return total / len(problem.X)

    def valid_nll(self, fit: Fit, likelihood: Any, prior: torch.Tensor) -> float:
        X, y = self.s.data.split("valid")
        if not len(X):
            raise BnnpredError("selection=valid_nll needs a validation split; set dataset.n_valid or a fraction")
        first = self.s.cfg.predictive.kinds[0]
        predict = predictors(replace(self.s, cfg=only_kind(self.s.cfg, first)),
                             make_context(self.s, fit, likelihood, prior))[first.value]
        return metrics.nll(predict(X), y)


def prior_columns(prior: Prior) -> dict[str, float]:
    """``delta[<group>]`` columns of a prior with several groups (none for one group: ``delta`` says it)."""
    return {} if len(prior.names) == 1 else {f"delta[{name}]": value for name, value in prior.deltas().items()}


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
    refuse_link(run_dir)
    with run_files.locked(run_dir):
        run_files.recover(run_dir)
        if not cfg.force and (done := finished_run(run_dir, key)) is not None:
            log.info("%s already holds a finished run of this config; skipped (force=true reruns it)", run_dir)
            shutil.rmtree(run_dir / CHECKPOINTS, ignore_errors=True)  # a kill between commit and clean-up left it
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


def refuse_link(run_dir: Path) -> None:
    """A run folder is a real folder: one that is a link (to another run's folder, say) would be written through."""
    if run_dir.is_symlink():
        raise BnnpredError(f"{run_dir} is a link to {os.readlink(run_dir)}; a run folder must be a real folder: "
                           "remove the link or choose another hydra.run.dir")


def fit_and_write(cfg: Config, cfg_dict: DictConfig, key: str, run_dir: Path, checkpoints: Path) -> dict[str, Any]:
    from bnnpred.app.report.run_figures import ood_figure, run_figures

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
                           "train longer if it stopped early (inference.map.steps or epochs), lower the learning "
                           "rate if it diverged, or change the prior; or set keep_unhealthy=true to keep it flagged")
    fit = chosen.fit
    s.model.load_buffers(fit.buffers)  # a later candidate of the selection grid may have changed them
    likelihood = likelihood_at(s, chosen.sigma2)
    ctx = make_context(s, fit, likelihood, chosen.prior.precision(fit.theta))
    predict = predictors(s, ctx)  # built once: the GP predictive conditions on its training subset at its first use
    results, test_predictions, ood_predictions = evaluate_all(s, predict, StoredPredictions(checkpoints, key))
    flags = [*chosen.flags, *jitter_flags(fit), *metric_flags(results, cfg.keep_unhealthy)]
    summary = run_summary(s, chosen, key, flags, time.perf_counter() - start)
    document = {"run": summary, "info": non_finite_to_null(recorded_info(fit)), "metrics": non_finite_to_null(results),
                "entropy": entropy_histograms(test_predictions, ood_predictions)}
    with run_files.staged(run_dir) as stage:
        write_text(stage / "config.yaml", OmegaConf.to_yaml(cfg_dict, resolve=True))
        save_torch(stage / "posterior.pt", saved_fit(s, fit, chosen))
        save_npz(stage / "predictions.npz", prediction_arrays(test_predictions, s.data.y_test, ood_predictions))
        write_text(stage / "selection.csv", pd.DataFrame(rows).to_csv(index=False))
        write_text(stage / "trace.csv", pd.DataFrame(fit.trace).to_csv(index=False))
        if cfg.plot.enabled:
            run_figures(stage, s, ctx, predict, rows, fit.trace)
            ood_figure(stage / f"ood_entropy.{cfg.plot.format.value}", document)
        write_json(stage / "metrics.json", document)
    for flag in flags:
        log.warning("flagged: %s", flag)
    print_table(results, summary)
    return document


def recorded_info(fit: Fit) -> dict[str, float]:
    """The fit's diagnostics as a run records them: ``info`` with the log evidence as ``log_marglik`` where the
    method has one (the value an optimising sweeper reads, ``objective=log_marglik``)."""
    return fit.info if fit.log_evidence is None else {**fit.info, "log_marglik": fit.log_evidence}


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
        "n_params": s.model.n_params, "n_train": len(s.data.X_train),
        "n_test": len(s.data.X_test), "n_ood": None if s.X_ood is None else len(s.X_ood),
        "theta_sha256": hashlib.sha256(chosen.fit.theta.detach().cpu().numpy().tobytes()).hexdigest()[:16],
        "seconds": seconds, "fit_seconds": chosen.row["fit_seconds"],
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **device_fields(s.device),
        # the training loop's seconds, epochs and seconds per epoch (null: no stepped loop ran, Fit.timing)
        "training": non_finite_to_null(chosen.fit.timing) if chosen.fit.timing else None,
        "tags": list(cfg.tags),
        "version": __version__, "commit": code_commit(), "code": code_digest(), "key": key, "flags": flags,
    }


def saved_fit(s: Setup, fit: Fit, chosen: Candidate) -> dict[str, Any]:
    return {
        "theta": fit.theta.cpu(),
        "posterior": None if fit.posterior is None else moved(fit.posterior.state(), torch.device("cpu")),
        "delta": chosen.delta,
        "prior": chosen.prior.state(),
        "sigma2": chosen.sigma2,
        "n_params": s.model.n_params,
        "buffers": {name: value.cpu() for name, value in fit.buffers.items()},
    }
