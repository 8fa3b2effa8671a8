"""A run's predictive figures from numbers (issue 38): the run draws its figures from
``predictive_figure_data``, and a page keeps those numbers (on its own grid, to four significant digits) beside it
and draws the same figures from them where only the run's record is."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from bnnpred.app.records import export_record
from bnnpred.app.report.run_figures import draw_predictive_figures, predictive_drawings, predictive_figure_data
from bnnpred.app.run_evaluation import predictors
from bnnpred.app.saved_runs import restore
from bnnpred.reproduce.derived import compact, figure_data, plain, rounded, scalars, training_points
from tests.helpers import trained

KINDS = "predictive.kinds=[map,nn,glm]"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A two-moons classifier and a count regression on one input, each a tiny full Laplace-GGN run with its
    figures drawn."""
    home = tmp_path_factory.mktemp("figure_runs")
    made = {"2-D": home / "moons", "1-D": home / "counts"}
    trained(made["2-D"], KINDS, "plot.enabled=true", "plot.grid_points=6")
    trained(made["1-D"], KINDS, "dataset=counts", "plot.enabled=true", "plot.grid_points=6")
    return made


def numbers(values) -> np.ndarray:
    """Every number of nested plain data, flattened in a fixed order (NaN for None)."""
    if isinstance(values, dict):
        return np.concatenate([numbers(values[k]) for k in sorted(values)]) if values else np.zeros(0)
    if isinstance(values, str):
        return np.zeros(0)
    if isinstance(values, list) and values and isinstance(values[0], dict):
        return np.concatenate([numbers(v) for v in values])
    return np.asarray(values, dtype=float).reshape(-1)


@pytest.mark.parametrize("inputs", ["2-D", "1-D"])
def test_a_run_draws_exactly_the_figures_its_numbers_name(runs, inputs, tmp_path):
    run = runs[inputs]
    s, ctx = restore(run)
    data = predictive_figure_data(s, ctx, predictors(s, ctx))
    drawn = {p.stem for p in run.glob("*.png")} - {"selection", "convergence"}
    assert set(predictive_drawings(data)) == drawn
    expected = {"2-D": {"predictive_map", "predictive_nn", "predictive_glm", "predictive_means", "blr_uncertainty"},
                "1-D": {"predictive_map", "predictive_nn", "predictive_glm"}}[inputs]
    assert drawn == expected
    draw_predictive_figures(tmp_path, data, "png")
    assert {p.stem for p in tmp_path.iterdir()} == drawn


def test_the_numbers_have_the_shapes_the_figures_draw(runs):
    s, ctx = restore(runs["2-D"])
    data = predictive_figure_data(s, ctx, predictors(s, ctx), grid_points=5)
    assert tuple(data["axes"].shape) == (2, 5) and tuple(data["X"].shape) == (30, 2)
    assert [(p["kind"], sorted(p)) for p in data["kinds"]] == [(k, ["aleatoric", "epistemic", "kind", "prob"])
                                                               for k in ("map", "nn", "glm")]  # the run's order
    assert all(tuple(v.shape) == (5, 5) for panels in data["kinds"] for k, v in panels.items() if k != "kind")
    assert sorted(data["blr"]["maps"]) == ["model √V[f̂] = Λ√(JΣJᵀ)", "noise √Λ"]
    s, ctx = restore(runs["1-D"])
    data = predictive_figure_data(s, ctx, predictors(s, ctx), grid_points=5)
    assert tuple(data["grid"].shape) == (20,)  # four times the points in 1-D
    by_kind = {panels["kind"]: panels for panels in data["kinds"]}
    assert tuple(by_kind["glm"]["samples"].shape) == (s.cfg.plot.n_function_samples, 20)
    assert "samples" not in by_kind["map"]  # no posterior to draw from


@pytest.mark.parametrize("inputs", ["2-D", "1-D"])
def test_kept_figure_numbers_are_the_runs_to_four_significant_digits(runs, inputs):
    run = runs[inputs]
    s, ctx = restore(run)
    full = plain(predictive_figure_data(s, ctx, predictors(s, ctx), grid_points=7))
    kept = figure_data(7, ("predictive_map", "predictive_nn", "predictive_glm", "blr_uncertainty"))(run)
    del full["X"], full["y"]  # data: never kept (the next test)
    assert kept["name"] == full["name"] and kept.keys() == full.keys()
    exact, short = numbers(full), numbers(kept)
    assert len(exact) == len(short) > 0
    assert np.allclose(short, exact, rtol=5e-4, atol=0)  # |v − round₄(v)| ≤ ½·10^{e−3} ≤ 5e-4·|v|
    assert not np.array_equal(short, exact)  # rounded, not copied


@pytest.mark.parametrize("inputs", ["2-D", "1-D"])
def test_the_training_points_are_read_from_the_data_as_the_run_held_them_and_never_kept(runs, inputs, tmp_path):
    run = runs[inputs]
    s, ctx = restore(run)
    drawn = predictive_figure_data(s, ctx, predictors(s, ctx), grid_points=5)
    export_record(run, tmp_path / "record")
    for source in (run, tmp_path / "record"):  # a fresh clone has the record alone
        points = training_points(source)
        assert points["x"].dtype == points["y"].dtype == torch.float64
        assert torch.equal(points["x"], drawn["X"].double()) and torch.equal(points["y"], drawn["y"].double())
    assert not {"X", "y"} & set(figure_data(5, ("predictive_glm",))(run))


def test_kept_figure_numbers_hold_what_the_named_figures_draw_and_no_more(runs):
    run = runs["2-D"]
    points = training_points(run)
    means = {**figure_data(5, ("predictive_means",))(run), "X": points["x"], "y": points["y"]}
    assert means["kinds"] == [{"kind": k, "prob": p["prob"]} for k, p in zip(("map", "nn", "glm"), means["kinds"],
                                                                             strict=True)]
    assert "blr" not in means and set(predictive_drawings(means)) >= {"predictive_means"}
    glm = {**figure_data(5, ("predictive_glm", "blr_uncertainty"))(run), "X": points["x"], "y": points["y"]}
    assert [sorted(p) for p in glm["kinds"]] == [["aleatoric", "epistemic", "kind", "prob"]]
    assert set(predictive_drawings(glm)) == {"predictive_glm", "blr_uncertainty"}


def test_rounding_keeps_significant_digits_and_leaves_the_rest():
    assert rounded({"a": [0.123456, -98765.4, 1e-9 / 3], "b": None, "c": "name", "d": 7}, 4) == {
        "a": [0.1235, -98770.0, 3.333e-10], "b": None, "c": "name", "d": 7}


def test_kept_single_numbers_come_back_as_floats_and_a_null_as_nan():
    back = scalars(json.loads(compact(plain({"a": float("nan"), "b": [1, float("nan")], "c": 2}))))
    assert back["c"] == 2.0 and isinstance(back["c"], float) and back["b"][0] == 1.0
    assert math.isnan(back["a"]) and math.isnan(back["b"][1])
