"""Finished runs on disk: whether a folder holds one of a config, loading and restoring it, and ``bnnpred eval``'s
re-evaluations beside it (``<run>/evals/<key>/``), never over it."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from bnnpred.app import run_files
from bnnpred.app.config import run_key
from bnnpred.app.run_evaluation import (
    entropy_histograms,
    evaluate_all,
    metric_flags,
    prediction_arrays,
    predictors,
    print_table,
)
from bnnpred.app.run_record import (
    EVAL_FILES,
    EVALS,
    POSTERIOR,
    FinishedRun,
    NotFinished,
    has_result_files,
    read_finished,
)
from bnnpred.app.run_setup import Setup, device_fields, likelihood_at, setup, typed
from bnnpred.errors import BnnpredError
from bnnpred.io import CorruptFile, load_torch, non_finite_to_null, save_npz, write_json, write_text
from bnnpred.posteriors import load_posterior
from bnnpred.predictive import (
    Context,
)
from bnnpred.prior import Prior
from bnnpred.provenance import code_commit, code_digest

log = logging.getLogger(__name__)


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


def load_run(run_dir: Path) -> tuple[FinishedRun, dict[str, Any]]:
    """A finished, intact run directory and its saved fit (tensors only: loading runs no code)."""
    try:
        run = read_finished(Path(run_dir))
    except NotFinished as e:
        raise BnnpredError(f"{run_dir} is not a finished run ({e}); train it again with the same config") from e
    return run, load_fit(run)


def load_fit(run: FinishedRun) -> dict[str, Any]:
    """A finished run's saved fit (tensors only: loading runs no code); a record's is on the machine that made it."""
    if run.record:
        raise BnnpredError(f"{run.folder} holds the run's record only: its posterior.pt stayed on the machine that "
                           f"made it ({run.document['run'].get('device') or 'unrecorded device'}); train it again "
                           "here with the same config and force=true")
    try:
        return load_torch(run.folder / POSTERIOR)
    except CorruptFile as e:  # its checksum agrees, so train would skip it: force=true
        raise BnnpredError(f"{run.folder} is not a finished run ({e}); train it again with the same config and "
                           "force=true") from e


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
    posterior = None if saved["posterior"] is None else load_posterior(moved(saved["posterior"], s.device, s.dtype))
    prior = Prior.from_state(saved["prior"]) if "prior" in saved else s.prior.at(saved["delta"])
    return s, Context(s.model, likelihood_at(s, saved["sigma2"]), theta, posterior, prior.precision(theta),
                      s.data.X_train)


def moved(state: Any, device: torch.device, dtype: torch.dtype | None = None) -> Any:
    """A saved fit's state with every tensor, nested ones too (a Kronecker posterior's blocks, a subset posterior's
    inner state), on ``device``, floating ones in ``dtype`` (when given)."""
    if isinstance(state, dict):
        return {k: moved(v, device, dtype) for k, v in state.items()}
    if isinstance(state, list | tuple):
        return type(state)(moved(v, device, dtype) for v in state)
    if torch.is_tensor(state):
        return state.to(device=device, dtype=dtype if dtype is not None and state.is_floating_point() else None)
    return state


def evaluate_run(run_dir: Path, predictive_overrides: DictConfig, force: bool = False) -> dict[str, Any]:
    """``bnnpred eval``: evaluate a saved run with other predictive settings, into ``<run>/evals/<key>/`` (its
    merged config, metrics, test and OOD predictions, figures); the run's own results are never changed. The key
    is the run key of the merged config, so the same re-evaluation is found again and skipped (``force=True`` redoes
    it)."""
    from bnnpred.app.report.run_figures import ood_figure, run_figures

    run_dir = Path(run_dir)
    if not run_dir.is_dir():  # never create the folder of a mistyped path
        raise BnnpredError(f"run_dir={run_dir} is not a folder (missing, a file, a broken link or a link loop); give "
                           "the folder of a finished bnnpred train run")
    with run_files.locked(run_dir):
        run_files.recover(run_dir)
        try:
            run = read_finished(run_dir)
        except NotFinished as e:
            raise BnnpredError(f"{run_dir} is not a finished run ({e}); train it again with the same config") from e
        merged = eval_config(run, predictive_overrides)
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
        s, ctx = restored(run, load_fit(run), predictive_overrides)
        predict = predictors(s, ctx)
        results, test_predictions, ood_predictions = evaluate_all(s, predict)
        own = run.document["run"]
        summary = {**own, "key": key, "eval_of": own.get("key"), "changes": changed_settings(run.config, merged),
                   "code": code_digest(), "commit": code_commit(),
                   "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"), **device_fields(s.device),
                   "flags": [*own.get("flags", []), *metric_flags(results, keep=True)]}
        document = {"run": summary, "info": run.document.get("info", {}), "metrics": non_finite_to_null(results),
                    "entropy": entropy_histograms(test_predictions, ood_predictions)}
        with run_files.staged(folder) as stage:
            write_text(stage / "config.yaml", OmegaConf.to_yaml(merged, resolve=True))
            save_npz(stage / "predictions.npz", prediction_arrays(test_predictions, s.data.y_test, ood_predictions))
            if s.cfg.plot.enabled:
                run_figures(stage, s, ctx, predict, [], [])
                ood_figure(stage / f"ood_entropy.{s.cfg.plot.format.value}", document)
            write_json(stage / "metrics.json", document)
    print_table(results, summary)
    print(f"re-evaluation written to {folder}")
    return document


def eval_config(run: FinishedRun, overrides: DictConfig | None) -> DictConfig:
    """A run's saved config with a re-evaluation's ``overrides`` merged in, on this code's schemas."""
    from bnnpred.app.config import retyped

    try:
        return OmegaConf.merge(retyped(run.config), overrides or {})
    except OmegaConfBaseException as e:
        raise BnnpredError(f"{run.folder}'s config does not fit this code's schemas ({str(e).splitlines()[0]}); it "
                           "was made by another version of bnnpred: train it again with this one") from e


def eval_folder(run_dir: Path, overrides: DictConfig | None) -> Path:
    """Where ``bnnpred eval`` with ``overrides`` wrote for the run in ``run_dir``: ``evals/<its run key>``, or, when
    this code keys it otherwise (a page rebuilt by newer code from older runs), the finished re-evaluation of the
    same changed settings made by the run's own code."""
    run = read_finished(run_dir)
    merged = eval_config(run, overrides)
    folder = Path(run_dir) / EVALS / run_key(merged)
    if folder.is_dir():
        return folder
    wanted = changed_settings(run.config, merged)
    for candidate in sorted((Path(run_dir) / EVALS).glob("*/")):
        try:
            made = read_finished(candidate, EVAL_FILES).document["run"]
        except NotFinished:
            continue
        if made.get("changes") == wanted and made.get("code") == run.document["run"].get("code"):
            return candidate
    return folder


def changed_settings(before: DictConfig, after: DictConfig) -> dict[str, Any]:
    """``{dotted key: new value}`` of the predictive and plot settings that differ between two configs."""
    flat = {}
    for node in ("predictive", "plot"):
        old = OmegaConf.to_container(before[node], resolve=True, enum_to_str=True)
        new = OmegaConf.to_container(after[node], resolve=True, enum_to_str=True)
        flat.update({f"{node}.{k}": v for k, v in new.items() if old.get(k) != v})
    return flat
