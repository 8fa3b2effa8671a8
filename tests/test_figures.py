"""Every figure function writes a non-empty PNG atomically on tiny inputs."""

import os

import numpy as np
import pandas as pd
import pytest
import torch

from bnnpred.app.report import figures
from bnnpred.errors import BnnpredError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_only_png(tmp_path, path):
    """A PNG, alone in its folder (no temporary file left), with the mode the umask gives a new file (not
    mkstemp's 0600)."""
    assert path.read_bytes().startswith(PNG_SIGNATURE)
    assert list(tmp_path.iterdir()) == [path]
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_figure_that_fails_to_render_leaves_no_file(tmp_path, monkeypatch):
    def fail(*args, **kwargs):
        raise RuntimeError("renderer failed")

    monkeypatch.setattr(figures.Figure, "savefig", fail)
    with pytest.raises(RuntimeError, match="renderer failed"):
        figures.plot_metric_vs_hyper(tmp_path / "metric.png", np.array([0.1, 1.0]), {"a": np.array([1.0, 2.0])},
                                     ylabel="NLL")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def grid_2d():
    xx, yy = np.meshgrid(np.linspace(-1, 1, 6), np.linspace(-1, 1, 5))
    prob = 1 / (1 + np.exp(-3 * xx))
    X = np.array([[-0.5, 0.2], [0.5, -0.3], [0.1, 0.8]])
    return xx, yy, prob, X, np.array([0, 1, 1])


def test_plot_1d_predictive(tmp_path):
    x = np.linspace(-2, 2, 9)
    path = figures.plot_1d_predictive(
        tmp_path / "1d.png",
        torch.tensor(x),
        np.sin(x),
        np.full(9, 0.3),
        np.array([-1.5, 1.5]),
        np.array([-1.0, 1.0]),
        samples=np.sin(x) + np.random.default_rng(0).normal(size=(5, 9)) * 0.1,
        true_fn_values=np.sin(x),
        title="toy",
        gap=(-0.5, 0.5),
    )
    assert_only_png(tmp_path, path)


def test_plot_1d_panels(tmp_path):
    x = np.linspace(-2, 2, 9)
    panels = {f"panel {i}": (np.sin(x) * i, np.full(9, 0.1 * i)) for i in range(5)}  # 2 rows of 3, one empty
    path = figures.plot_1d_panels(tmp_path / "panels.png", x, panels, np.array([-1.5, 1.5]), np.array([-1.0, 1.0]),
                                  ncols=3, title="structures", ylim=(-2, 2))
    assert_only_png(tmp_path, path)


def test_plot_2d_predictive(tmp_path, grid_2d):
    xx, yy, prob, X, y = grid_2d
    maps = {"aleatoric": prob * (1 - prob), "epistemic": np.abs(yy)}
    path = figures.plot_2d_predictive(tmp_path / "2d.png", xx, yy, prob, X, y, maps=maps, title="banana")
    assert_only_png(tmp_path, path)


def test_plot_panels_2d(tmp_path, grid_2d):
    xx, yy, prob, X, y = grid_2d
    probs = {"MAP": prob, "GLM": 0.5 + 0.5 * (prob - 0.5), "GP": np.full_like(prob, 0.5)}
    path = figures.plot_panels_2d(tmp_path / "panels.png", xx, yy, probs, X, y, title="banana")
    assert_only_png(tmp_path, path)


def test_plot_evidence_1d(tmp_path):
    grid = np.logspace(-2, 2, 7)
    curves = {"log evidence / N": -(np.log(grid) ** 2), "test log-lik": np.where(grid > 10, np.nan, -grid)}
    path = figures.plot_evidence_1d(tmp_path / "ev1d.png", grid, curves, marks={"evidence argmax": 1.0})
    assert_only_png(tmp_path, path)


def test_plot_evidence_2d(tmp_path):
    x_grid, y_grid = np.logspace(-3, 0, 4), np.logspace(-2, 2, 5)
    panel = -np.add.outer(np.log(y_grid) ** 2, np.log(x_grid) ** 2)
    path = figures.plot_evidence_2d(
        tmp_path / "ev2d.png",
        x_grid,
        y_grid,
        {"log evidence": panel, "test log-lik": 2 * panel},
        star=(0.1, 1.0),
        letters={"A": (0.01, 0.1), "B": (0.5, 50.0)},
    )
    assert_only_png(tmp_path, path)


def test_plot_metric_vs_hyper(tmp_path):
    grid = np.logspace(-2, 2, 5)
    series = {"glm": np.array([0.3, 0.25, np.nan, 0.3, 0.4]), "bnn": np.linspace(0.5, 0.4, 5)}
    path = figures.plot_metric_vs_hyper(tmp_path / "metric.png", grid, series, ylabel="test NLL")
    assert_only_png(tmp_path, path)


def test_plot_entropy_histograms(tmp_path):
    edges = np.linspace(0, np.log(3), 41)
    gen = np.random.default_rng(0)
    panels = {"MAP": (edges, gen.integers(0, 9, 40), gen.integers(0, 9, 40), 0.9),
              "glm": (edges, gen.integers(0, 9, 40), np.zeros(40, dtype=int), 0.95)}  # an empty histogram draws 0
    assert_only_png(tmp_path, figures.plot_entropy_histograms(tmp_path / "fig6.png", panels))
    with pytest.raises(BnnpredError, match="at least one panel"):
        figures.plot_entropy_histograms(tmp_path / "empty.png", {})


def test_plot_convergence_groups_per_tensor_and_test_columns_into_one_panel_each(tmp_path, monkeypatch):
    trace = pd.DataFrame({"step": [1, 2], "epoch": [0.5, 1.0], "elbo": [-2.0, -1.0], "log_sigma_over_s/1.weight":
                          [-3.0, -2.0], "log_sigma_over_s/1.bias": [-3.0, -2.5], "test_nll": [0.7, 0.5],
                          "test_accuracy": [0.6, 0.8]})
    created = []
    real = figures.plt.subplots
    monkeypatch.setattr(figures.plt, "subplots", lambda *a, **k: created.append(a) or real(*a, **k))
    assert_only_png(tmp_path, figures.plot_convergence(tmp_path / "convergence.png", trace))
    assert created == [(1, 3)]  # elbo, log σ − log s, test metrics


def test_plot_mean_curves_averages_repeats_with_one_colour_per_method(tmp_path, monkeypatch):
    """A row per metric, a panel per set; a method absent from one panel keeps its colour in the others."""
    frame = pd.DataFrame({"epoch": [1, 2] * 4, "nll": [1.0, 0.5, 3.0, 1.5, 2.0, 1.0, 0.6, 0.3],
                          "method": ["a"] * 4 + ["b"] * 4, "set": ["x"] * 6 + ["y"] * 2})
    lines = []
    real = figures.Axes.plot
    monkeypatch.setattr(figures.Axes, "plot", lambda ax, *a, **k: lines.append((a, k)) or real(ax, *a, **k))
    assert_only_png(tmp_path, figures.plot_mean_curves(tmp_path / "curves.png", frame, x="epoch", panel="set",
                                                       hue="method", metrics={"nll": "NLL"}, log_y=("nll",)))
    assert list(lines[0][0][1]) == [2.0, 1.0]  # the two seeds of method a on set x, averaged per epoch
    assert [(k["label"], k["color"]) for _, k in lines] == [("a", "C0"), ("b", "C1"), ("b", "C1")]


def test_plot_mean_curves_floor_quantile_keeps_a_collapsed_curve_from_flattening_the_panel(tmp_path, monkeypatch):
    """One method's ELBO collapses to −2000 at one epoch; with floor_quantile = 0.2 the axis runs from just below
    the values' 20 % quantile (−1.1) to just above their maximum (−0.6), margins 5 % of that span."""
    frame = pd.DataFrame({"epoch": [1, 2, 3] * 2, "elbo": [-1.0, -0.8, -0.6, -1.1, -2000.0, -0.7],
                          "method": ["a"] * 3 + ["b"] * 3, "set": "x"})
    limits = []
    real = figures.Axes.set_ylim

    def record(ax, *args, **kwargs):
        if len(args) == 2:
            limits.append(args)
        return real(ax, *args, **kwargs)

    monkeypatch.setattr(figures.Axes, "set_ylim", record)
    assert_only_png(tmp_path, figures.plot_mean_curves(tmp_path / "elbo.png", frame, x="epoch", panel="set",
                                                       hue="method", metrics={"elbo": "ELBO"}, floor_quantile=0.2))
    assert limits == [pytest.approx((-1.125, -0.575))]


def test_plot_1d_panels_shades_the_gap_and_draws_an_overlay_on_its_panel_only(tmp_path, monkeypatch):
    x = np.linspace(-2, 2, 9)
    panels = {"blr": (np.sin(x), np.full(9, 0.1)), "other": (np.cos(x), np.full(9, 0.2))}
    dashed, shaded = [], []
    real_plot, real_span = figures.Axes.plot, figures.Axes.axvspan

    def plot(ax, *args, **kwargs):
        if any(isinstance(a, str) and a == "--" for a in args):
            dashed.append(kwargs["label"])
        return real_plot(ax, *args, **kwargs)

    monkeypatch.setattr(figures.Axes, "plot", plot)
    monkeypatch.setattr(figures.Axes, "axvspan", lambda ax, *a, **k: shaded.append(a) or real_span(ax, *a, **k))
    path = figures.plot_1d_panels(tmp_path / "gap.png", x, panels, np.array([-1.5]), np.array([0.0]), ncols=2,
                                  gap=(0.0, 1.0), overlays={"blr": ("GP mean", np.sin(x))})
    assert_only_png(tmp_path, path)
    assert dashed == ["GP mean"] and shaded == [(0.0, 1.0), (0.0, 1.0)]


def test_plot_step_example(tmp_path):
    w = b = np.linspace(-3, 3, 21)
    ww, bb = np.meshgrid(w, b, indexing="ij")
    density = np.exp(-0.5 * ((ww - 1) ** 2 + bb**2))
    grid_x = np.linspace(-2, 2, 11)
    path = figures.plot_step_example(tmp_path / "fig3.png", (np.array([-1.0, 1.0]), np.array([0.0, 1.0])), grid_x,
                                     1 / (1 + np.exp(-grid_x)), (w, b, density, density ** 1.2),
                                     1 / (1 + np.exp(-grid_x)), {"glm": 1 / (1 + np.exp(-0.9 * grid_x))})
    assert_only_png(tmp_path, path)


def test_plot_image_grid_takes_arrays_and_image_files_in_ragged_rows(tmp_path):
    first = figures.plot_image_grid(tmp_path / "digits.png", [[(np.eye(28), "a"), (np.ones((28, 28)), "b")],
                                                              [(torch.zeros(28, 28), "c")]])
    picture = tmp_path / "montage.png"
    figures.plot_image_grid(picture, [[(first, "read back from its file")]], panel_width=4, fontsize=10)
    assert first.read_bytes().startswith(PNG_SIGNATURE) and picture.read_bytes().startswith(PNG_SIGNATURE)
    with pytest.raises(BnnpredError, match="at least one panel"):
        figures.plot_image_grid(tmp_path / "none.png", [[]])


def test_plot_sorted_values(tmp_path):
    path = figures.plot_sorted_values(tmp_path / "a.png", torch.tensor([0.3, -0.2, 0.9]), xlabel="rank", ylabel="a")
    assert_only_png(tmp_path, path)


@pytest.mark.parametrize("values,scale", [
    ([0.55, 0.71, 0.92], "linear"),  # an accuracy: never a log axis
    ([2.3, 0.04, 0.001], "log"),  # a loss falling by three decades
    ([-2000.0, -0.5], "symlog"),  # an ELBO collapsing at one point
    ([-1.1, -0.6], "linear"),
])
def test_a_convergence_axis_is_logarithmic_only_over_more_than_a_decade(values, scale):
    assert figures._scale(np.array(values)) == scale


def test_plot_mean_curves_shades_one_standard_error_where_there_are_several_repeats(tmp_path, monkeypatch):
    frame = pd.DataFrame({"epoch": [1, 2, 1, 2, 1, 2], "nll": [1.0, 0.5, 3.0, 1.5, 2.0, 1.0],
                          "method": ["a"] * 4 + ["b"] * 2, "set": "x"})
    bands = []
    real = figures.Axes.fill_between
    monkeypatch.setattr(figures.Axes, "fill_between", lambda ax, *a, **k: bands.append(a) or real(ax, *a, **k))
    figures.plot_mean_curves(tmp_path / "curves.png", frame, x="epoch", panel="set", hue="method",
                             metrics={"nll": "NLL"})
    (x, low, high), = bands  # method a (two seeds) only: b has one
    assert list(x) == [1, 2] and np.allclose(high - low, [2.0, 1.0])  # 2 s.e. of (1, 3) and of (0.5, 1.5)


def test_plot_heatmaps_names_what_its_colour_shows(tmp_path):
    path = figures.plot_heatmaps(tmp_path / "cov.png", {"a": np.eye(3)}, value="covariance")
    assert path.read_bytes().startswith(PNG_SIGNATURE)
    with pytest.raises(TypeError):
        figures.plot_heatmaps(tmp_path / "cov.png", {"a": np.eye(3)})  # no silent "value" label


def test_a_page_figure_is_also_written_as_a_pdf_when_asked(tmp_path, monkeypatch):
    """Issue 36: `bnnpred reproduce --pdf` writes a vector copy beside each PNG."""
    path = tmp_path / "nll.png"
    figures.plot_metric_vs_hyper(path, np.array([0.1, 1.0, 10.0]), {"glm": np.array([0.3, 0.2, 0.4])}, ylabel="NLL")
    assert path.read_bytes()[:4] == b"\x89PNG" and not path.with_suffix(".pdf").exists()
    monkeypatch.setattr(figures, "ALSO", ("pdf",))
    figures.plot_metric_vs_hyper(path, np.array([0.1, 1.0, 10.0]), {"glm": np.array([0.3, 0.2, 0.4])}, ylabel="NLL")
    assert path.read_bytes()[:4] == b"\x89PNG" and path.with_suffix(".pdf").read_bytes()[:5] == b"%PDF-"
