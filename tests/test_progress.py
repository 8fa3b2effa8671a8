"""Progress off a terminal: ETA lines in the log at a steady interval; the task folder's run index."""

import csv

import pytest

from bnnpred import progress
from bnnpred.app.compose import compose
from bnnpred.app.runner import train
from tests.helpers import TINY, bnnpred


def test_eta_lines_extrapolate_the_rate():
    assert progress.eta_line("MAP", 1200, 10000, 90.0) == "MAP: 1200/10000 (12 %), 1.5 min elapsed, about 11.0 min left"
    assert progress.duration(30) == "30 s" and progress.duration(7200) == "2.0 h"


def test_a_run_without_a_terminal_logs_its_progress(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(progress, "LOG_EVERY", 0.0)  # every step, instead of every 30 s
    monkeypatch.setattr("sys.stderr.isatty", lambda: False)
    with caplog.at_level("INFO", logger="bnnpred"):
        train(compose([*TINY, "progress=true", "plot.enabled=false"]), tmp_path / "run")
    lines = [r.getMessage() for r in caplog.records
             if r.name == "bnnpred.progress" and r.getMessage().startswith("MAP")]
    assert len(lines) == 100 and lines[0].startswith("MAP: 1/100 (1 %), ") and lines[-1].endswith("about 0 s left")
    assert any(r.getMessage().startswith("Jacobians of 30 inputs (chunks): 1/1") for r in caplog.records)  # GGN
    assert "predictive 1/1 (glm) on test: 40 inputs" in caplog.text


@pytest.mark.parametrize("fmt", ["pdf", "svg"])
def test_figures_in_a_vector_format(tmp_path, fmt):
    train(compose([*TINY, f"plot.format={fmt}"]), tmp_path / "run")
    assert (tmp_path / "run" / f"predictive_glm.{fmt}").stat().st_size > 1000
    assert not list((tmp_path / "run").glob("*.png"))


def test_the_task_index_lists_every_run_of_a_sweep_and_report_prints_its_table(tmp_path):
    out = bnnpred("train", "-m", *TINY, "prior.delta=1,3", "plot.enabled=false", "task_name=indexed", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    folder = tmp_path / "runs" / "indexed"
    rows = list(csv.DictReader((folder / "index.csv").read_text().splitlines()))
    assert [r["status"] for r in rows] == ["trained", "trained"]
    assert {r["overrides"].split("prior.delta=")[1].split()[0] for r in rows} == {"1", "3"}
    assert len({r["sweep"] for r in rows}) == 1 and (folder / f"multirun-{rows[0]['sweep']}.yaml").is_file()
    assert all((tmp_path / r["run_dir"]).name == r["key"] and (tmp_path / r["run_dir"]).is_dir() for r in rows)
    report = bnnpred("report", str(folder), "--out", str(tmp_path / "report"), cwd=tmp_path)
    table = report.stdout.splitlines()
    assert table[0].startswith("| dataset | predictive | delta | n | accuracy |") and len(table) == 2 + 2 + 2
    assert table[-1].startswith("written: ")


def test_inner_loops_log_instead_of_drawing_bars(caplog, monkeypatch):
    monkeypatch.setattr(progress, "LOG_EVERY", 0.0)
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    with caplog.at_level("INFO", logger="bnnpred.progress"):
        assert list(progress.progress(range(3), 3, "chunks", bar=False)) == [0, 1, 2]
    assert [r.getMessage().split(",")[0] for r in caplog.records] == ["chunks: 1/3 (33 %)", "chunks: 2/3 (67 %)",
                                                                      "chunks: 3/3 (100 %)"]
