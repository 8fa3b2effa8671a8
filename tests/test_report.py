"""Tables over run directories: per-predictive δ selection by validation NLL, mean ± s.e., unfinished runs."""

import json

import pandas as pd
import pytest

from bnnpred.report.tables import collect, find_runs, select_by_valid_nll, summarize, write_report


def fake_run(root, name, seed, delta, valid_nll, test_nll):
    """A run directory with a config and metrics for predictives ``glm`` and ``nn``."""
    run = root / name
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("seed: 0\n")
    metrics = {split: {kind: {"nll": values[kind]} for kind in values}
               for split, values in [("valid", valid_nll), ("test", test_nll)]}
    doc = {"run": {"dataset": "toy", "model": "mlp", "inference": "laplace_ggn", "structure": "full",
                   "selection": "none", "seed": seed, "delta": delta}, "info": {}, "metrics": metrics}
    (run / "metrics.json").write_text(json.dumps(doc))
    (run / ".hydra").mkdir()
    (run / ".hydra" / "config.yaml").write_text("seed: 0\n")  # Hydra's own copy: not a run


@pytest.fixture
def sweep(tmp_path):
    # seed 0: glm prefers δ = 1, nn prefers δ = 10; seed 1: both prefer δ = 1
    fake_run(tmp_path, "a", 0, 1.0, {"glm": 0.2, "nn": 0.9}, {"glm": 0.25, "nn": 0.95})
    fake_run(tmp_path, "b", 0, 10.0, {"glm": 0.3, "nn": 0.5}, {"glm": 0.35, "nn": 0.55})
    fake_run(tmp_path, "c", 1, 1.0, {"glm": 0.1, "nn": 0.4}, {"glm": 0.15, "nn": 0.45})
    fake_run(tmp_path, "d", 1, 10.0, {"glm": 0.6, "nn": 0.7}, {"glm": 0.65, "nn": 0.75})
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "config.yaml").write_text("seed: 0\n")
    (tmp_path / "e" / "metrics.json").write_text('{"run": {')  # truncated: an unfinished run
    return tmp_path


def test_run_directories_are_found_without_hydra_folders(sweep):
    assert [p.name for p in find_runs([sweep])] == ["a", "b", "c", "d", "e"]


def test_delta_is_selected_per_predictive_and_seed_then_averaged(sweep):
    frame = select_by_valid_nll(collect([sweep]))
    table = summarize(frame, "test", ["predictive"]).set_index("predictive")
    assert table.loc["glm", "nll"] == pytest.approx((0.25 + 0.15) / 2)
    assert table.loc["nn", "nll"] == pytest.approx((0.55 + 0.45) / 2)
    assert table.loc["nn", "nll_se"] == pytest.approx(pd.Series([0.55, 0.45]).sem())
    assert table.loc["glm", "n"] == 2


def test_report_writes_three_formats_and_skips_unfinished_runs(sweep, tmp_path):
    paths = write_report([sweep], tmp_path / "out", select_by="valid_nll")
    assert [p.name for p in paths] == ["table.csv", "table.md", "table.tex"]
    md = (tmp_path / "out" / "table.md").read_text()
    assert "0.2000 ± 0.0500" in md  # glm: mean of 0.25 and 0.15, standard error 0.05
    assert r"\pm" in (tmp_path / "out" / "table.tex").read_text()


def test_runs_from_different_code_versions_are_reported(sweep, caplog):
    doc = json.loads((sweep / "a" / "metrics.json").read_text())
    doc["run"]["version"] = "0.2.0"
    (sweep / "a" / "metrics.json").write_text(json.dumps(doc))
    with caplog.at_level("WARNING"):
        collect([sweep])
    assert "different code versions (0.1.0, 0.2.0)" in caplog.text
