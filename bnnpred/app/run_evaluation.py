"""Evaluating a fit: the predictives of a run's config on every split (and the OOD set), their metrics, the
plug-in metrics of θ*, and the arrays and console table they are saved and shown as."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import torch

from bnnpred import metrics
from bnnpred.app.config import Config
from bnnpred.app.health import non_finite_metrics
from bnnpred.app.run_setup import SPLITS, Setup
from bnnpred.app.stored_predictions import StoredPredictions
from bnnpred.errors import BnnpredError
from bnnpred.inference import Fit
from bnnpred.prediction import ClassPrediction, Prediction
from bnnpred.predictive import (
    Context,
    PredictiveKind,
    network_outputs,
    predictor,
)

log = logging.getLogger(__name__)


def plugin_metrics(s: Setup, theta: torch.Tensor, likelihood: Any) -> dict[str, float]:
    """Average ``log p(y | f(x; θ*))`` per split (notes-000 eq. 5.1), and the RMSE of the plug-in mean
    ``g⁻¹(f(x; θ*))`` for regression and counts."""
    out = {}
    with torch.no_grad():
        for split in SPLITS:
            X, y = s.data.split(split)
            if len(X):
                f = network_outputs(s.model, theta, X)
                out[f"{split}_ll_map"] = float(likelihood.log_prob(f, y).mean())
                if not s.data.task.classification:
                    out[f"{split}_rmse_map"] = float((likelihood.inv_link(f)[:, 0] - y).square().mean().sqrt())
    return out


MONITORED_SPLITS = ("valid", "test")


def monitor_metrics_at(s: Setup, likelihood: Any, theta: torch.Tensor) -> dict[str, float]:
    """``<split>_<metric>`` of the network at ``θ`` (the plug-in predictive) on the validation and test splits that
    have rows, for training traces (e.g. where a MAP's validation likelihood peaks)."""
    out = {}
    for split in MONITORED_SPLITS:
        X, y = s.data.split(split)
        if len(X):
            pred = likelihood.predict_point(network_outputs(s.model, theta, X))
            out.update({f"{split}_{name}": value for name, value in metrics.evaluate(pred, y).items()})
    return out


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
        if (kept := stored.get(kind, split, X.device)) is not None:
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
            ood_predictions[kind], ood_seconds = predicted(kind, "ood", s.X_ood)
            results["test"][kind]["ood_auc"] = metrics.ood_auc(test_predictions[kind].probs,
                                                               ood_predictions[kind].probs)
            results["test"][kind]["ood_seconds"] = ood_seconds
    return results, test_predictions, ood_predictions


def in_original_units(values: dict[str, float], scale: float) -> dict[str, float]:
    """Regression metrics of standardised targets plus their copies in the data's units: ``rmse·s``,
    ``nll + log s``, ``joint_ll − log s``."""
    extra = {"rmse_original": values["rmse"] * scale} if "rmse" in values else {}
    if "joint_ll" in values:
        extra["joint_ll_original"] = values["joint_ll"] - math.log(scale)
    return {**values, **extra, "nll_original": values["nll"] + math.log(scale)}


def only_kind(cfg: Config, kind: PredictiveKind) -> Config:
    return replace(cfg, predictive=replace(cfg.predictive, kinds=[kind]))


def metric_flags(results: dict[str, dict[str, dict[str, float]]], keep: bool) -> list[str]:
    """Flags for metrics that are not finite (written as null), or the error that fails the run."""
    bad = non_finite_metrics(results)
    if bad and not keep:
        raise BnnpredError(f"{len(bad)} metric(s) are not finite ({', '.join(bad[:3])}); the run is failed; set "
                           "keep_unhealthy=true to keep it flagged")
    return [f"metric not finite: {b}" for b in bad]


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


ENTROPY_BINS = 40  # equal bins of predictive entropy on [0, log C]


def entropy_histograms(test: dict[str, Prediction], ood: dict[str, Prediction]) -> dict[str, Any] | None:
    """What a page draws of the test and OOD predictions, kept in the run's record (its predictions are not):
    ``{"edges": [B + 1], kind: {"test" | "ood": {"counts": [B], "mean": mean entropy, "n": inputs}}}`` over
    :data:`ENTROPY_BINS` equal bins on ``[0, log C]`` (every entropy of C classes lies there), for each
    classification predictive with OOD predictions; None without them."""
    kinds = [kind for kind, pred in test.items() if kind in ood and isinstance(pred, ClassPrediction)]
    if not kinds:
        return None
    n_classes = test[kinds[0]].probs.shape[-1]
    edges = np.linspace(0.0, math.log(n_classes), ENTROPY_BINS + 1)
    out: dict[str, Any] = {"edges": edges.tolist()}
    for kind in kinds:
        out[kind] = {}
        for split, pred in (("test", test[kind]), ("ood", ood[kind])):
            h = metrics.entropy(pred.probs.double()).clamp(0.0, edges[-1]).cpu().numpy()
            out[kind][split] = {"counts": np.histogram(h, bins=edges)[0].tolist(), "mean": float(h.mean()),
                                "n": len(h)}
    return out


def print_table(results: dict[str, dict[str, dict[str, float]]], summary: dict[str, Any]) -> None:
    """Test metrics, one row per predictive."""
    table = pd.DataFrame(results["test"]).T.drop(columns=["seconds", "ood_seconds"], errors="ignore")
    header = (f"{summary['dataset']} | {summary['inference']} {summary['structure'] or ''} | "
              f"δ = {summary['delta']:.4g}" + (f", σ² = {summary['sigma2']:.4g}" if summary["sigma2"] else "")
              + f" | P = {summary['n_params']}")
    print(header)
    print(table.to_string(float_format=lambda v: f"{v:.4f}"))
