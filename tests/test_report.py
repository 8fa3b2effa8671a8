"""Tables over run directories: per-predictive δ selection by validation NLL, mean ± s.e., unfinished, corrupt,
flagged and mixed-code runs."""

import json
import os

import pandas as pd
import pytest

from bnnpred.app.report.tables import collect, find_runs, latex, select_by_valid_nll, summarize, write_report
from bnnpred.app.run_files import write_manifest
from bnnpred.errors import BnnpredError


def fake_run(root, name, seed, delta, valid_nll, test_nll, **run_fields):
    """A finished run directory (config, metrics for predictives ``glm`` and ``nn``, posterior, manifest)."""
    run = root / name
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("seed: 0\n")
    metrics = {split: {kind: {"nll": values[kind]} for kind in values}
               for split, values in [("valid", valid_nll), ("test", test_nll)]}
    doc = {"run": {"dataset": "toy", "task": "binary", "model": "mlp", "inference": "laplace_ggn",
                   "structure": "full", "selection": "none", "seed": seed, "delta": delta, "code": "c0de",
                   "key": f"key-{name}", **run_fields}, "info": {},
           "metrics": metrics}
    (run / "metrics.json").write_text(json.dumps(doc))
    (run / "posterior.pt").write_bytes(b"tensors")
    write_manifest(run)
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


def rewrite_metrics(run, change):
    doc = json.loads((run / "metrics.json").read_text())
    change(doc["run"])
    (run / "metrics.json").write_text(json.dumps(doc))
    write_manifest(run)


def test_runs_of_different_code_are_refused_kept_apart_or_narrowed_to_the_newest(sweep, caplog):
    rewrite_metrics(sweep / "a", lambda run: run.update(code="5ca1e"))
    with pytest.raises(BnnpredError, match=r"2 code versions \(c0de: 3 run\(s\), 5ca1e: 1 run\(s\)\)"):
        collect([sweep], mixed_code="refuse")
    os.utime(sweep / "a" / "manifest.json", (2e9, 2e9))  # run a finished last: its code is the newest
    with caplog.at_level("WARNING"):
        assert set(collect([sweep])["run_dir"]) == {str(sweep / "a")}
    assert "only the 1 run(s) of the newest code (5ca1e) are used" in caplog.text
    with caplog.at_level("WARNING"):
        frame = collect([sweep], mixed_code="mark")
    assert "2 code versions" in caplog.text
    table = summarize(frame, "test", ["predictive", "code", "delta"])
    assert table[(table["predictive"] == "glm") & (table["delta"] == 1.0)]["n"].tolist() == [1, 1]


@pytest.mark.parametrize("damage", ["config", "duplicate_key", "empty_metrics", "non_utf8", "missing_posterior",
                                    "edited"])
def test_a_broken_run_is_skipped_with_its_reason(sweep, caplog, damage):
    run = sweep / "a"
    if damage == "config":
        (run / "config.yaml").write_text("seed: [unclosed\n")
        write_manifest(run)  # even with checksums that match, an invalid config is not a run
    elif damage == "duplicate_key":  # YAML that OmegaConf refuses when a reader asks for the config
        (run / "config.yaml").write_text((run / "config.yaml").read_text() + "seed: 3\n")
        write_manifest(run)
    elif damage == "empty_metrics":
        (run / "metrics.json").write_text("{}")
        write_manifest(run)
    elif damage == "non_utf8":
        (run / "metrics.json").write_bytes(b"\xff\xfe{")
        write_manifest(run)
    elif damage == "missing_posterior":
        (run / "posterior.pt").unlink()
    else:  # a file changed after the run finished
        (run / "metrics.json").write_text((run / "metrics.json").read_text().replace("0.25", "0.05"))
    with caplog.at_level("WARNING"):
        frame = collect([sweep])
    assert str(run) not in set(frame["run_dir"])
    reason = {"config": "config.yaml is not a readable config",
              "duplicate_key": "config.yaml is not a readable config", "empty_metrics": "does not hold a run",
              "non_utf8": "metrics.json is not readable JSON", "missing_posterior": "posterior.pt is missing",
              "edited": "metrics.json does not match its checksum"}[damage]
    assert f"skipping {run}: " in caplog.text and reason in caplog.text


def test_flagged_runs_are_counted_in_the_table(sweep, tmp_path):
    rewrite_metrics(sweep / "a", lambda run: run.update(flags=["the fit ended worse than it started"]))
    write_report([sweep], tmp_path / "out", by=["predictive", "delta"])
    table = pd.read_csv(tmp_path / "out" / "table.csv")
    assert table.set_index(["predictive", "delta"]).loc[("glm", 1.0), "flagged"] == 1
    assert table.set_index(["predictive", "delta"]).loc[("glm", 10.0), "flagged"] == 0
    assert "flagged" in (tmp_path / "out" / "table.md").read_text().splitlines()[0]


def test_latex_escapes_every_special_character_once():
    table = pd.DataFrame({"set_name": ["a&b 50%", "x_1 {y} $5 #3", "~^\\"], "nll": ["0.3 ± 0.1", "1", "2"]})
    text = latex(table)
    assert r"set\_name & nll \\" in text
    assert r"a\&b 50\% & 0.3 $\pm$ 0.1 \\" in text
    assert r"x\_1 \{y\} \$5 \#3 & 1 \\" in text
    assert r"\textasciitilde{}\textasciicircum{}\textbackslash{} & 2 \\" in text
