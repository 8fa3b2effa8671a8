"""Figures of predictives and hyperparameter sweeps, written as PNG, PDF or SVG (by the path's suffix).

Every function takes numpy arrays (or CPU tensors), writes one file atomically (a temporary file in the target
directory, then ``os.replace``), closes its figure and returns the path written. Every axis and colour bar is
labelled.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import torch

from bnnpred.errors import BnnpredError
from bnnpred.io import atomic_write

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.contour import QuadContourSet  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

ArrayLike = np.ndarray | torch.Tensor

PROB_CMAP = "RdBu_r"
PROB_LEVELS = np.linspace(0.0, 1.0, 21)
PANEL_SIZE = 4.0


def plot_1d_predictive(
    path: str | Path,
    x_grid: ArrayLike,
    mean: ArrayLike,
    std: ArrayLike,
    X_train: ArrayLike,
    y_train: ArrayLike,
    samples: ArrayLike | None = None,
    true_fn_values: ArrayLike | None = None,
    title: str = "",
    gap: tuple[float, float] | None = None,
) -> Path:
    """A 1-D regression predictive: mean, ±2 std band, data, a few function samples.

    Args:
        path: output PNG file.
        x_grid: sorted inputs ``[G]``.
        mean: predictive mean on the grid ``[G]``.
        std: predictive standard deviation on the grid ``[G]``.
        X_train: training inputs ``[N]``.
        y_train: training targets ``[N]``.
        samples: function samples ``[S, G]``; the first 3 are drawn as thin lines.
        true_fn_values: the data-generating function on the grid ``[G]``, drawn dashed.
        title: axes title.
        gap: ``(lo, hi)`` input interval without training data, shaded.
    """
    x, mu, sd = as_array(x_grid), as_array(mean), as_array(std)
    fig, ax = plt.subplots(figsize=(6.0, 4.0), layout="constrained")
    if gap is not None:
        ax.axvspan(*gap, color="0.9", label="gap")
    ax.fill_between(x, mu - 2 * sd, mu + 2 * sd, color="C0", alpha=0.25, label="±2 std")
    if samples is not None:
        for i, sample in enumerate(as_array(samples)[:3]):
            ax.plot(x, sample, color="C0", lw=0.7, alpha=0.7, label="samples" if i == 0 else None)
    if true_fn_values is not None:
        ax.plot(x, as_array(true_fn_values), "k--", lw=1.0, label="true function")
    ax.plot(x, mu, color="C0", lw=2.0, label="mean")
    ax.scatter(as_array(X_train), as_array(y_train), s=10, color="C3", zorder=3, label="data")
    ax.set(xlabel="x", ylabel="y", title=title)
    ax.legend(fontsize="small")
    return _save(fig, path)


def plot_1d_panels(
    path: str | Path,
    x_grid: ArrayLike,
    panels: Mapping[str, tuple[ArrayLike, ArrayLike]],
    X_train: ArrayLike,
    y_train: ArrayLike,
    ncols: int,
    title: str = "",
    ylim: tuple[float, float] | None = None,
    gap: tuple[float, float] | None = None,
    overlays: Mapping[str, tuple[str, ArrayLike]] | None = None,
) -> Path:
    """1-D regression predictives side by side (mean and ±2 std band over the data), ``ncols`` per row.

    Args:
        path: output PNG file.
        x_grid: sorted inputs ``[G]``.
        panels: ``(mean [G], std [G])`` per panel title, row by row.
        X_train: training inputs ``[N]``.
        y_train: training targets ``[N]``.
        ncols: panels per row.
        title: figure title.
        ylim: the shared y range (None: matplotlib's, which the widest band sets).
        gap: ``(lo, hi)`` input interval without training data, shaded on every panel.
        overlays: per panel title, a ``(label, curve [G])`` drawn dashed over its mean (e.g. another predictive's
            mean that should coincide).
    """
    x, X, y = as_array(x_grid), as_array(X_train), as_array(y_train)
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(PANEL_SIZE * ncols, 0.75 * PANEL_SIZE * nrows), sharex=True,
                             sharey=True, squeeze=False, layout="constrained")
    for ax, (name, (mean, std)) in zip(axes.flat[:len(panels)], panels.items(), strict=True):
        mu, sd = as_array(mean), as_array(std)
        if gap is not None:
            ax.axvspan(*gap, color="0.9")
        ax.fill_between(x, mu - 2 * sd, mu + 2 * sd, color="C0", alpha=0.25, label="±2 std")
        ax.plot(x, mu, color="C0", lw=1.5, label="mean")
        if overlays and name in overlays:
            label, curve = overlays[name]
            ax.plot(x, as_array(curve), "--", color="C1", lw=1.2, label=label)
            ax.legend(fontsize="small")
        ax.scatter(X, y, s=5, color="C3", zorder=3, label="data")
        ax.set(title=name, xlabel="x", ylabel="y", ylim=ylim)
    axes.flat[0].legend(fontsize="small")
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def plot_2d_predictive(
    path: str | Path,
    xx: ArrayLike,
    yy: ArrayLike,
    prob: ArrayLike,
    X_train: ArrayLike,
    y_train: ArrayLike,
    maps: Mapping[str, ArrayLike] | None = None,
    title: str = "",
) -> Path:
    """A 2-D binary classification predictive ``p(y=1|x)`` next to per-input maps such as uncertainties.

    Args:
        path: output PNG file.
        xx: first input coordinate on the grid ``[H, W]``.
        yy: second input coordinate on the grid ``[H, W]``.
        prob: predictive probability of class 1 ``[H, W]``.
        X_train: training inputs ``[N, 2]``.
        y_train: binary training labels ``[N]``.
        maps: named maps ``[H, W]`` (e.g. ``{"aleatoric": ..., "epistemic": ...}``), one panel each.
        title: figure title.
    """
    maps = maps or {}
    xx, yy, X, y = as_array(xx), as_array(yy), as_array(X_train), as_array(y_train)
    fig, axes = _panel_row(1 + len(maps))
    filled = _probability_panel(axes[0], xx, yy, as_array(prob), X, y)
    axes[0].set_title("p(y=1 | x)")
    fig.colorbar(filled, ax=axes[0], label="p(y=1 | x)")
    for ax, (name, values) in zip(axes[1:], maps.items(), strict=True):
        mesh = ax.pcolormesh(xx, yy, as_array(values), shading="nearest", cmap="viridis")
        ax.scatter(X[:, 0], X[:, 1], c="w", s=6, edgecolors="k", linewidths=0.3)
        ax.set(title=name, xlabel="x₁", ylabel="x₂")
        fig.colorbar(mesh, ax=ax, label=name)
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def plot_panels_2d(
    path: str | Path,
    xx: ArrayLike,
    yy: ArrayLike,
    probs: Mapping[str, ArrayLike],
    X_train: ArrayLike,
    y_train: ArrayLike,
    title: str = "",
) -> Path:
    """A row of 2-D predictive means ``p(y=1|x)`` (e.g. MAP / NN / GLM / GP) on one colour scale 0..1.

    Args:
        path: output PNG file.
        xx: first input coordinate on the grid ``[H, W]``.
        yy: second input coordinate on the grid ``[H, W]``.
        probs: predictive probability of class 1 ``[H, W]`` per panel title.
        X_train: training inputs ``[N, 2]``.
        y_train: binary training labels ``[N]``.
        title: figure title.
    """
    xx, yy, X, y = as_array(xx), as_array(yy), as_array(X_train), as_array(y_train)
    fig, axes = _panel_row(len(probs))
    for ax, (name, prob) in zip(axes, probs.items(), strict=True):
        filled = _probability_panel(ax, xx, yy, as_array(prob), X, y)
        ax.set_title(name)
    fig.colorbar(filled, ax=list(axes), label="p(y=1 | x)")
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def plot_evidence_1d(
    path: str | Path,
    grid: ArrayLike,
    curves: Mapping[str, ArrayLike],
    xlabel: str = "prior precision δ",
    marks: Mapping[str, float] | None = None,
) -> Path:
    """Stacked curves over one hyperparameter (e.g. log evidence / N, train and test log-lik) on a log x-axis.

    Args:
        path: output PNG file.
        grid: positive hyperparameter values ``[G]``, sorted ascending.
        curves: one curve ``[G]`` per panel, keyed by its y-label; NaN allowed.
        xlabel: label of the shared x-axis.
        marks: named hyperparameter values (e.g. ``{"evidence argmax": 0.13}``), drawn on every panel as a
            dashed vertical line with a star on the curve.
    """
    marks = marks or {}
    if not curves:
        raise BnnpredError("plot_evidence_1d needs at least one curve")
    x = as_array(grid)
    fig, axes = plt.subplots(
        len(curves), 1, sharex=True, squeeze=False, figsize=(6.0, 2.2 * len(curves)), layout="constrained"
    )
    for ax, (name, values) in zip(axes[:, 0], curves.items(), strict=True):
        y = as_array(values)
        ax.plot(x, y, color="k", lw=1.5)
        for colour, (label, at) in enumerate(marks.items(), start=1):
            y_at = np.interp(np.log10(at), np.log10(x), y)
            ax.axvline(at, color=f"C{colour}", ls="--", lw=1.0)
            ax.plot([at], [y_at], marker="*", ms=12, color=f"C{colour}", ls="none", label=label)
        ax.set_xscale("log")
        ax.set_ylabel(name)
    if marks:
        axes[0, 0].legend(fontsize="small")
    axes[-1, 0].set_xlabel(xlabel)
    return _save(fig, path)


def plot_evidence_2d(
    path: str | Path,
    x_grid: ArrayLike,
    y_grid: ArrayLike,
    panels: Mapping[str, ArrayLike],
    xlabel: str = "noise variance σ²",
    ylabel: str = "prior precision δ",
    star: tuple[float, float] | None = None,
    letters: Mapping[str, tuple[float, float]] | None = None,
) -> Path:
    """Heat maps over two hyperparameters on log axes (e.g. log evidence and test log-lik over σ² and δ).

    Args:
        path: output PNG file.
        x_grid: positive values of the horizontal hyperparameter ``[A]``, sorted ascending.
        y_grid: positive values of the vertical hyperparameter ``[B]``, sorted ascending.
        panels: one map ``[B, A]`` per panel title (rows follow ``y_grid``, columns ``x_grid``).
        xlabel: horizontal axis label.
        ylabel: vertical axis label.
        star: ``(x, y)`` point marked with a star on every panel (e.g. the evidence optimum).
        letters: text labels at ``(x, y)`` points on every panel (e.g. ``{"A": (0.1, 1.0)}``).
    """
    letters = letters or {}
    x_edges, y_edges = _log_cell_edges(as_array(x_grid)), _log_cell_edges(as_array(y_grid))
    fig, axes = _panel_row(len(panels))
    for ax, (name, values) in zip(axes, panels.items(), strict=True):
        values = as_array(values)
        # Colours span the top half of the values, so the optimum stays visible beside extreme corners.
        vmin = float(np.nanpercentile(values, 50))
        mesh = ax.pcolormesh(x_edges, y_edges, values, shading="flat", cmap="viridis", vmin=vmin)
        if star is not None:
            ax.plot(*star, marker="*", ms=14, color="r", markeredgecolor="w", ls="none")
        for letter, (x, y) in letters.items():
            ax.text(x, y, letter, ha="center", va="center", fontweight="bold", color="w")
        ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=ylabel, title=name)
        fig.colorbar(mesh, ax=ax, extend="min", label=name)
    return _save(fig, path)


def plot_image_grid(path: str | Path, rows: Sequence[Sequence[tuple[ArrayLike | Path, str]]], *,
                    panel_width: float = 1.35, fontsize: float = 7) -> Path:
    """Images with captions in a grid, one list per row (rows may be shorter than the longest; the rest blank):
    a 2-D array ``[H, W]`` in grey (ink dark), an ``[H, W, 3 or 4]`` one as it is, a ``Path`` read as an image
    file (e.g. a run's own figure)."""
    n_cols = max((len(row) for row in rows), default=0)
    if not n_cols:
        raise BnnpredError("a figure needs at least one panel; got no images")
    pictures = [[(plt.imread(image) if isinstance(image, Path) else as_array(image), caption) for image, caption in row]
                for row in rows]
    aspect = max(picture.shape[0] / picture.shape[1] for row in pictures for picture, _ in row)  # height / width
    fig, axes = plt.subplots(len(rows), n_cols, squeeze=False, layout="constrained",
                             figsize=(panel_width * n_cols, (panel_width * aspect + 0.25) * len(rows)))
    for ax_row, row in zip(axes, pictures, strict=True):
        for ax, (picture, caption) in zip(ax_row, row, strict=False):
            ax.imshow(picture, cmap="gray_r" if picture.ndim == 2 else None)
            ax.set_title(caption, fontsize=fontsize)
        for ax in ax_row:
            ax.set_axis_off()
    return _save(fig, path)


def plot_sorted_values(path: str | Path, values: ArrayLike, *, xlabel: str, ylabel: str, title: str = "") -> Path:
    """``values`` ``[N]`` in ascending order against their rank (e.g. the residual importances of a training set)."""
    fig, ax = plt.subplots(figsize=(8, 3.5), layout="constrained")
    ax.plot(np.sort(as_array(values)), lw=1)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    return _save(fig, path)


def plot_step_example(
    path: str | Path,
    data: tuple[ArrayLike, ArrayLike],
    grid_x: ArrayLike,
    map_probs: ArrayLike,
    posterior: tuple[ArrayLike, ArrayLike, ArrayLike, ArrayLike],
    truth: ArrayLike,
    predictives: Mapping[str, ArrayLike],
) -> Path:
    """notes-004 Fig. 3: the data with the MAP fit, the true and Laplace posteriors over ``(w, b)``, and the
    predictives.

    Args:
        path: output PNG file.
        data: training inputs ``[N]`` and 0/1 labels ``[N]``.
        grid_x: sorted inputs ``[X]`` of the curves.
        map_probs: the MAP's ``p(y = 1 | x)`` on ``grid_x``.
        posterior: ``(w [G], b [G], true [G, G], laplace [G, G])``: the grid and both posterior densities on it
            (any scale; contoured at 1 %, 10 % and 50 % of their maxima).
        truth: the true predictive ``p(y = 1 | x, D)`` on ``grid_x``.
        predictives: each approximate predictive's ``p(y = 1 | x, D)`` on ``grid_x`` by legend label.
    """
    x, y, gx = as_array(data[0]), as_array(data[1]), as_array(grid_x)
    w, b, true, laplace = (as_array(a) for a in posterior)
    fig, (left, mid, right) = plt.subplots(1, 3, figsize=(14, 4), layout="constrained")
    left.scatter(x, y, s=10, c="k", label="data")
    left.plot(gx, as_array(map_probs), label="MAP p(y = 1 | x)")
    left.set(xlabel="x", title="data and MAP fit")
    left.legend(fontsize=8)
    ww, bb = np.meshgrid(w, b, indexing="ij")
    mid.contour(ww, bb, true / true.max(), levels=[0.01, 0.1, 0.5], colors="k")
    mid.contour(ww, bb, laplace / laplace.max(), levels=[0.01, 0.1, 0.5], colors="tab:red", linestyles="--")
    mid.axvline(0, color="grey", lw=0.5)
    mid.set(xlabel="w", ylabel="b", xlim=(-2, 5), ylim=(-3, 3), title="true posterior (black) and Laplace-GGN (red)")
    right.plot(gx, as_array(truth), "k", label="true")
    for label, probs in predictives.items():
        right.plot(gx, as_array(probs), label=label)
    right.scatter(x, y, s=10, c="k")
    right.set(xlabel="x", ylabel="p(y = 1 | x, D)", title="posterior predictives")
    right.legend(fontsize=8)
    return _save(fig, path)


def plot_metric_vs_hyper(
    path: str | Path,
    grid: ArrayLike,
    series: Mapping[str, ArrayLike],
    ylabel: str,
    xlabel: str = "prior precision δ",
) -> Path:
    """One metric over a hyperparameter for several methods, on a log x-axis.

    Args:
        path: output PNG file.
        grid: positive hyperparameter values ``[G]``.
        series: one metric curve ``[G]`` per method (legend label); NaN entries leave gaps.
        ylabel: metric name.
        xlabel: hyperparameter name.
    """
    return plot_metric_vs_hyper_panels(path, grid, {"": series}, ylabel, xlabel)


def plot_metric_vs_hyper_panels(
    path: str | Path,
    grid: ArrayLike,
    panels: Mapping[str, Mapping[str, ArrayLike]],
    ylabel: str,
    xlabel: str = "prior precision δ",
    columns: int = 4,
    log_y: bool = False,
) -> Path:
    """:func:`plot_metric_vs_hyper` for several settings: one titled panel per entry of ``panels``, ``columns``
    to a row (``log_y`` for positive metrics spanning decades)."""
    x = as_array(grid)
    n_cols = min(columns, len(panels))
    n_rows = -(-len(panels) // n_cols)
    fig, axes = plt.subplots(n_rows, n_cols, squeeze=False, figsize=(1.5 * PANEL_SIZE * n_cols, PANEL_SIZE * n_rows),
                             layout="constrained")
    for ax, (title, series) in zip(axes.flat, panels.items(), strict=False):
        for name, values in series.items():
            ax.plot(x, as_array(values), marker="o", ms=4, label=name)
        ax.set(xscale="log", yscale="log" if log_y else "linear", xlabel=xlabel, ylabel=ylabel, title=title)
        if series:
            ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(panels):]:
        ax.set_axis_off()
    return _save(fig, path)


def plot_convergence(path: str | Path, trace: pd.DataFrame) -> Path:
    """An iterative fit's trace against ``step``: one panel per recorded quantity (MAP loss; ELBO estimate and
    relative mean change of the natural-gradient methods; ELBO and KL of the mean-field methods), with grouped
    columns (``log_sigma_over_s/<tensor>``, ``test_<metric>``) sharing one panel each."""
    panels: dict[str, list[str]] = {}
    for column in trace.columns:
        if column in ("step", "epoch"):
            continue
        group = column.split("/")[0] if "/" in column else "test metrics" if column.startswith("test_") else column
        panels.setdefault(group, []).append(column)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.4), layout="constrained", squeeze=False)
    for ax, (group, columns) in zip(axes[0], panels.items(), strict=True):
        for column in columns:
            ax.plot(trace["step"], trace[column], marker=".", label=column.split("/")[-1].removeprefix("test_"))
        ax.set(xlabel="step", ylabel=group.replace("_", " "), yscale=_scale(trace[columns].to_numpy(dtype=float)))
        if len(columns) > 1:
            ax.legend(fontsize="x-small")
    return _save(fig, path)


def _scale(values: np.ndarray) -> str:
    """A log axis for positive values spanning more than a decade (a loss falling by orders), symlog for values of
    both signs spanning more than one (an ELBO from −2000 to −0.5), linear otherwise (an accuracy, an NLL near 1)."""
    finite = np.abs(values[np.isfinite(values)])
    if not finite.size or finite.max() <= 10 * max(finite.min(), 1e-300):
        return "linear"
    return "log" if bool((values[np.isfinite(values)] > 0).all()) else "symlog"


def plot_mean_curves(path: str | Path, frame: pd.DataFrame, *, x: str, metrics: Mapping[str, str], panel: str,
                     hue: str, log_y: Collection[str] = (), floor_quantile: float | None = None) -> Path:
    """Curves averaged over repeats (e.g. seeds), each shaded ±1 standard error of the mean where it has several:
    a row of panels per metric (``{column: label}``; the columns in ``log_y`` on a log axis), a panel per value of
    ``panel`` (e.g. the data set), a line per value of ``hue`` (the method), each metric against ``x``. With
    ``floor_quantile`` a panel's y-axis starts just below that quantile of its values, so that one curve's early
    collapse (an ELBO of −2000 beside −0.5) does not flatten the rest."""
    panels = list(dict.fromkeys(frame[panel]))
    colors = {method: f"C{i}" for i, method in enumerate(dict.fromkeys(frame[hue]))}  # one colour per method
    fig, axes = plt.subplots(len(metrics), len(panels), squeeze=False, layout="constrained",
                             figsize=(PANEL_SIZE * len(panels) + 1.0, 0.8 * PANEL_SIZE * len(metrics)))
    for row, (column, label) in zip(axes, metrics.items(), strict=True):
        for ax, name in zip(row, panels, strict=True):
            shown = frame[frame[panel] == name]
            for method, curve in shown.groupby(hue, sort=False):
                mean = curve.groupby(x)[column].mean()
                ax.plot(mean.index, mean.to_numpy(), color=colors[method], label=str(method))
                error = curve.groupby(x)[column].sem()  # NaN at a point of one repeat: no band there
                if error.notna().any():
                    ax.fill_between(mean.index, (mean - error).to_numpy(), (mean + error).to_numpy(),
                                    color=colors[method], alpha=0.2, linewidth=0)
            ax.set(title=str(name), xlabel=x, ylabel=label, yscale="log" if column in log_y else "linear")
            if floor_quantile is not None and shown[column].notna().any():
                low, high = float(shown[column].quantile(floor_quantile)), float(shown[column].max())
                margin = 0.05 * (high - low) or 0.5
                ax.set_ylim(low - margin, high + margin)
    handles = [plt.Line2D([], [], color=color, label=str(method)) for method, color in colors.items()]
    fig.legend(handles=handles, loc="outside right upper", fontsize="small")
    return _save(fig, path)


def plot_heatmaps(path: str | Path, matrices: Mapping[str, ArrayLike], *, value: str, title: str = "") -> Path:
    """Square matrices side by side on one symmetric colour scale (``nan`` cells, e.g. a masked diagonal, blank);
    ``value`` names what the colour shows (e.g. "covariance")."""
    arrays = {name: as_array(matrix) for name, matrix in matrices.items()}
    limit = max(float(np.nanmax(np.abs(a))) for a in arrays.values())
    fig, axes = _panel_row(len(arrays))
    for ax, (name, matrix) in zip(axes, arrays.items(), strict=True):
        image = ax.imshow(matrix, cmap="RdBu_r", vmin=-limit, vmax=limit, interpolation="nearest")
        ax.set(title=name, xticks=[], yticks=[])
    fig.colorbar(image, ax=list(axes), shrink=0.8, label=value)
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def plot_entropy_histograms(path: str | Path, panels: Mapping[str, tuple[ArrayLike, ArrayLike, ArrayLike, float]],
                            labels: tuple[str, str] = ("in-distribution", "OOD")) -> Path:
    """notes-004 Fig. 6: predictive entropy of in-distribution and OOD test inputs, one panel per method, each
    titled with its OOD-AUC; ``panels`` maps a method to ``(edges [B + 1], counts_in [B], counts_out [B], auc)``,
    histograms over shared bins (a run's record keeps them: ``run_evaluation.entropy_histograms``)."""
    fig, axes = _panel_row(len(panels))
    for ax, (name, (edges, inside, outside, auc)) in zip(axes, panels.items(), strict=True):
        edges = as_array(edges)
        for counts, label in ((inside, labels[0]), (outside, labels[1])):
            counts = as_array(counts).astype(float)
            ax.stairs(counts / max(counts.sum(), 1.0) / np.diff(edges), edges, fill=True, alpha=0.6, label=label)
        ax.set(title=f"{name} (OOD-AUC {auc:.3f})", xlabel="predictive entropy", ylabel="density")
        ax.legend(fontsize="small")
    return _save(fig, path)


def _probability_panel(
    ax: Axes, xx: np.ndarray, yy: np.ndarray, prob: np.ndarray, X: np.ndarray, y: np.ndarray
) -> QuadContourSet:
    """Filled contours of ``prob`` on 0..1, the 0.5 contour and the labelled data; returns the fill."""
    filled = ax.contourf(xx, yy, prob, levels=PROB_LEVELS, cmap=PROB_CMAP, vmin=0.0, vmax=1.0)
    if prob.min() < 0.5 < prob.max():
        ax.contour(xx, yy, prob, levels=[0.5], colors="k", linewidths=1.5)
    ax.scatter(X[:, 0], X[:, 1], c=y, cmap=PROB_CMAP, vmin=0, vmax=1, s=12, edgecolors="k", linewidths=0.5)
    ax.set(xlabel="x₁", ylabel="x₂")
    return filled


def _panel_row(n_panels: int) -> tuple[Figure, np.ndarray]:
    """A figure with ``n_panels`` axes side by side; returns the figure and a 1-D array of axes."""
    if n_panels < 1:
        raise BnnpredError("a figure needs at least one panel; got an empty dict of panels")
    fig, axes = plt.subplots(
        1, n_panels, squeeze=False, figsize=(PANEL_SIZE * n_panels + 1.0, PANEL_SIZE), layout="constrained"
    )
    return fig, axes[0]


def _log_cell_edges(centres: np.ndarray) -> np.ndarray:
    """Cell edges ``[n + 1]`` around positive sorted ``centres`` ``[n]``, halfway between them in log space.

    The outer edges mirror the nearest inner ones; a single centre gets a cell one decade wide.
    """
    log_c = np.log10(centres)
    if len(log_c) == 1:
        return 10.0 ** (log_c[0] + np.array([-0.5, 0.5]))
    mid = (log_c[:-1] + log_c[1:]) / 2
    first, last = 2 * log_c[0] - mid[0], 2 * log_c[-1] - mid[-1]
    return 10.0 ** np.concatenate([[first], mid, [last]])


def as_array(values: ArrayLike) -> np.ndarray:
    """``values`` as a numpy array: tensors detached and moved to the CPU, nested lists as floats (a None, as kept
    JSON holds a NaN, is NaN again)."""
    if isinstance(values, torch.Tensor):
        return values.detach().cpu().numpy()
    if isinstance(values, list):
        return np.asarray(values, dtype=float)
    return np.asarray(values)


# Formats written beside each figure, e.g. ("pdf",) for vector copies of a page's PNGs (`bnnpred reproduce --pdf`)
ALSO: tuple[str, ...] = ()


def _save(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` (PNG, PDF or SVG by its suffix) atomically, with the umask's file mode, and in each
    format of :data:`ALSO` beside it (same name, that suffix), then close it."""
    path = Path(path)
    try:
        for extra in ALSO:
            if f".{extra}" != path.suffix:
                atomic_write(path.with_suffix(f".{extra}"), lambda f, extra=extra: fig.savefig(f, format=extra))
        return atomic_write(path, lambda f: fig.savefig(f, format=path.suffix.lstrip(".") or "png", dpi=120))
    finally:
        plt.close(fig)
