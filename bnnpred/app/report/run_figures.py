"""Figures of one run: the predictive over a 1-D or 2-D input grid, and the evidence over the grid searched."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from bnnpred.app.report import figures
from bnnpred.data import Task
from bnnpred.prediction import ClassPrediction
from bnnpred.predictive import Context, PredictiveKind, glm_latent, glm_samples, nn_samples

# notes-000 §8 item 23: plot 1.5 beyond the data in 1-D, 1.0 around it in 2-D.
MARGIN_1D = 1.5
MARGIN_2D = 1.0


def run_figures(out: Path, s: Any, ctx: Context, predict: dict[str, Callable[[torch.Tensor], Any]],
                rows: list[dict], trace: list[dict]) -> None:
    """Write the figures that fit this run's inputs (1-D regression or counts, 2-D binary), selection and
    convergence trace into ``out``."""
    if (data := predictive_figure_data(s, ctx, predict)) is not None:
        draw_predictive_figures(out, data, suffix(s))
    if len(rows) > 1:
        evidence_figure(out / f"selection.{suffix(s)}", pd.DataFrame(rows))
    if trace:
        figures.plot_convergence(out / f"convergence.{suffix(s)}", pd.DataFrame(trace))


def predictive_figure_data(s: Any, ctx: Context, predict: dict[str, Callable[[torch.Tensor], Any]],
                           grid_points: int | None = None, blr: bool = True) -> dict[str, Any] | None:
    """The numbers a run's predictive figures draw (:func:`draw_predictive_figures`), on a grid of ``grid_points``
    per axis (default ``plot.grid_points``; 1-D: four times as many); None for inputs other than 1-D regression or
    counts and 2-D binary classification.

    1-D: ``{"name", "X" [N], "y" [N], "grid" [G], "kinds": [{"kind", "mean", "std" [G], "samples" [S, G]}]}`` (no
    ``samples`` for predictives without a posterior to draw from). 2-D: ``{"name", "X" [N, 2], "y" [N], "axes" [2, n],
    "kinds": [{"kind", "prob" [n, n], "aleatoric", "epistemic" [n, n] where the predictive splits its variance}],
    "blr": {"prob" [n, n], "maps": {name: [n, n]}}}`` (``blr`` where asked and the run has a posterior). ``kinds`` is
    a list, in the run's order of predictives, so that the order survives JSON, whose objects a kept copy sorts by
    key."""
    n = grid_points or s.cfg.plot.grid_points
    dim = s.data.X_train.shape[1] if s.data.X_train.dim() == 2 else 0
    if dim == 1 and not s.data.task.classification:
        return _data_1d(s, ctx, predict, 4 * n)
    if dim == 2 and s.data.task is Task.binary:
        return _data_2d(s, ctx, predict, n, blr)
    return None


def draw_predictive_figures(out: Path, data: dict[str, Any], file_suffix: str) -> None:
    """Draw :func:`predictive_figure_data`'s numbers into ``out``: ``predictive_<kind>`` per predictive and, in
    2-D, ``predictive_means`` (with more than one predictive) and ``blr_uncertainty`` (with a posterior)."""
    for name, draw in predictive_drawings(data).items():
        draw(out / f"{name}.{file_suffix}")


def predictive_drawings(data: dict[str, Any]) -> dict[str, Callable[[Path], Path]]:
    """Each figure :func:`draw_predictive_figures` can draw from ``data`` (tensors, or the lists kept JSON holds), by
    name: a function of its file."""
    name, X, y = data["name"], data["X"], data["y"]
    if "grid" in data:
        return {f"predictive_{band['kind']}": partial(
            figures.plot_1d_predictive, x_grid=data["grid"], mean=band["mean"], std=band["std"], X_train=X, y_train=y,
            samples=band.get("samples"), title=f"{name}: {band['kind']} predictive") for band in data["kinds"]}
    xx, yy = np.meshgrid(*figures.as_array(data["axes"]), indexing="xy")
    drawings = {f"predictive_{panels['kind']}": partial(
        figures.plot_2d_predictive, xx=xx, yy=yy, prob=panels["prob"], X_train=X, y_train=y,
        maps={k: v for k, v in panels.items() if k not in ("kind", "prob")},
        title=f"{name}: {panels['kind']} predictive") for panels in data["kinds"]}
    if len(data["kinds"]) > 1:
        drawings["predictive_means"] = partial(
            figures.plot_panels_2d, xx=xx, yy=yy, X_train=X, y_train=y, title=name,
            probs={panels["kind"]: panels["prob"] for panels in data["kinds"]})
    if (blr := data.get("blr")) is not None:
        drawings["blr_uncertainty"] = partial(figures.plot_2d_predictive, xx=xx, yy=yy, prob=blr["prob"], X_train=X,
                                              y_train=y, maps=blr["maps"], title=f"{name}: BLR predictive")
    return drawings


def suffix(s: Any) -> str:
    """The figure file suffix of the run (``plot.format``)."""
    return s.cfg.plot.format.value


def ood_figure(path: Path, document: dict[str, Any]) -> None:
    """notes-004 Fig. 6 for one run: predictive entropy of the test and OOD inputs per predictive, with its
    OOD-AUC, from the histograms of its ``metrics.json`` (nothing without an OOD set)."""
    if (histograms := document.get("entropy")) is not None:
        test = document["metrics"]["test"]
        figures.plot_entropy_histograms(path, {kind: entropy_panel(histograms, kind, test[kind]["ood_auc"])
                                               for kind in histograms if kind != "edges"})


def entropy_panel(histograms: dict[str, Any], kind: str, auc: float) -> tuple[Any, ...]:
    """One panel of :func:`~bnnpred.app.report.figures.plot_entropy_histograms`: a predictive's test and OOD entropy
    histograms from a run's ``entropy`` record, and its OOD-AUC."""
    return histograms["edges"], histograms[kind]["test"]["counts"], histograms[kind]["ood"]["counts"], auc


def _data_1d(s: Any, ctx: Context, predict: dict, points: int) -> dict[str, Any]:
    X = s.data.X_train[:, 0]
    lo, hi = float(X.min()) - MARGIN_1D, float(X.max()) + MARGIN_1D
    grid = torch.linspace(lo, hi, points, dtype=X.dtype, device=X.device).unsqueeze(1)
    gen = torch.Generator(device=ctx.theta.device).manual_seed(s.cfg.seed + 1)
    kinds = []
    for kind, fn in predict.items():
        pred = fn(grid)
        samples = _function_samples(kind, ctx, grid, s.cfg.plot.n_function_samples, gen)
        kinds.append({"kind": kind, "mean": pred.mean.reshape(-1).cpu(), "std": pred.variance.sqrt().reshape(-1).cpu(),
                      **({} if samples is None else {"samples": samples})})
    return {"name": s.data.name, "X": X.cpu(), "y": s.data.y_train.cpu(), "grid": grid[:, 0].cpu(), "kinds": kinds}


def _function_samples(kind: str, ctx: Context, grid: torch.Tensor, n: int, gen: torch.Generator):
    """Joint draws of the mean ``g⁻¹(f)`` ``[n, G]`` (the function itself for regression, the rate for counts)
    through the network (nn) or its linearisation (glm)."""
    if ctx.posterior is None or n == 0 or kind not in (PredictiveKind.nn.value, PredictiveKind.glm.value):
        return None
    thetas = ctx.posterior.sample(n, gen)
    draw = nn_samples if kind == PredictiveKind.nn.value else glm_samples
    return ctx.likelihood.inv_link(draw(ctx, grid, thetas))[..., 0].cpu()


def _data_2d(s: Any, ctx: Context, predict: dict, n: int, blr: bool) -> dict[str, Any]:
    X = s.data.X_train
    axes = [torch.linspace(float(X[:, i].min()) - MARGIN_2D, float(X[:, i].max()) + MARGIN_2D, n,
                           dtype=X.dtype, device=X.device) for i in range(2)]
    xx, yy = torch.meshgrid(*axes, indexing="xy")
    points = torch.stack([xx.reshape(-1), yy.reshape(-1)], dim=1)
    kinds = []
    for kind, fn in predict.items():
        pred: ClassPrediction = fn(points)
        kinds.append({"kind": kind, "prob": pred.probs[:, 1].reshape(n, n).cpu()})
        if pred.aleatoric is not None:
            kinds[-1] |= {"aleatoric": pred.aleatoric.reshape(n, n).cpu(),
                          "epistemic": pred.epistemic.reshape(n, n).cpu()}
    data = {"name": s.data.name, "X": X.cpu(), "y": s.data.y_train.cpu(), "axes": torch.stack(axes).cpu(),
            "kinds": kinds}
    if blr and ctx.posterior is not None:
        prob, maps = blr_uncertainty(ctx, points)
        data["blr"] = {"prob": prob.reshape(n, n), "maps": {k: v.reshape(n, n) for k, v in maps.items()}}
    return data


def blr_uncertainty(ctx: Context, X: torch.Tensor) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    r"""The BLR predictive's two variance parts for one output (notes-000 eq. 3.16, Fig. 5.5b, §8 item 11).

    Model uncertainty ``√V[f̂_GP] = Λ √(J Σ Jᵀ)`` and observation noise ``√Λ``, with ``Λ`` at ``f(x; θ*)``;
    the mean ``g⁻¹(f(x;θ*)) + Λ J (µ - θ*)``.
    """
    mean, cov = glm_latent(ctx, X)
    with torch.no_grad():
        f_star = ctx.model(ctx.theta, X)
    lam = ctx.likelihood.hessian(f_star)[:, 0, 0]
    prob = ctx.likelihood.inv_link(f_star)[:, 0] + lam * (mean - f_star)[:, 0]
    maps = {"model √V[f̂] = Λ√(JΣJᵀ)": lam * cov[:, 0, 0].sqrt(), "noise √Λ": lam.sqrt()}
    return prob.clamp(0, 1).cpu().numpy(), {k: v.cpu().numpy() for k, v in maps.items()}


def evidence_figure(path: Path, table: pd.DataFrame) -> Path | None:
    """Evidence and plug-in train / test log-likelihood against δ (and σ² if it varies); notes-000 Figs 5.2-5.3."""
    curves = {c: label for c, label in [("log_marglik_per_n", "log evidence / N"), ("valid_nll", "valid NLL"),
                                        ("train_ll_map", "train log-lik"), ("test_ll_map", "test log-lik")]
              if c in table}
    if table["delta"].nunique() < 2 or not curves:
        return None
    sigma2 = table["sigma2"].dropna().unique()
    if len(sigma2) > 1:
        return _evidence_2d(path, table, curves)
    table = table.sort_values("delta")
    best = _best(table)
    return figures.plot_evidence_1d(path, table["delta"].to_numpy(),
                                    {label: table[c].to_numpy() for c, label in curves.items()},
                                    marks={"selected": float(best["delta"])})


def _best(table: pd.DataFrame) -> pd.Series:
    if "log_marglik" in table:
        return table.loc[table["log_marglik"].idxmax()]
    return table.loc[table["valid_nll"].idxmin()]


def _evidence_2d(path: Path, table: pd.DataFrame, curves: dict[str, str]) -> Path:
    panels = {label: table.pivot_table(index="delta", columns="sigma2", values=c).to_numpy()
              for c, label in curves.items()}
    best = _best(table)
    return figures.plot_evidence_2d(path, np.sort(table["sigma2"].unique()), np.sort(table["delta"].unique()),
                                    panels, star=(float(best["sigma2"]), float(best["delta"])))
