"""bench/cpu/notes004_campaign.py (issue 38): a set of notes004_table2 continued on the CPU one δ at a time, each run
started only when earlier records say it ends inside the budget, its record written as it ends, at one commit."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "cpu" / "notes004_campaign.py"


def campaign(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env={**os.environ, **(env or {})})


def fake_record(records: Path, posterior: str, delta: float, seconds: float, training: dict | None,
                commit: str = "c0ffee0") -> None:
    folder = records / "mnist" / posterior / f"delta{delta}"
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({"run": {"commit": commit, "seconds": seconds,
                                                             "training": training}}))


def plan_lines(out: str) -> list[str]:
    return [line.split(" ", 2)[2] for line in out.splitlines() if line.startswith("notes004_campaign: 2")]


def test_the_plan_skips_recorded_runs_and_times_each_from_the_records(tmp_path):
    records = tmp_path / "records"
    fake_record(records, "kron", 1.0, 100.0, {"seconds": 60.0})  # 40 s after its network
    fake_record(records, "kron_dampened", 10.0, 30.0, {"seconds": 60.0, "from_fit_cache": 1.0})  # none trained
    out = campaign("mnist", "--dry", "--records", str(records), "--deltas", "1", "10", "100", "--hours", "1")
    assert out.returncode == 0, out.stderr
    assert plan_lines(out.stdout) == [
        "mnist kron_dampened δ=1 (about 90 s) at c0ffee0",  # its network is not on this machine: trained again
        "mnist kron δ=10 (about 100 s) at c0ffee0",  # δ = 10's dampened run is recorded
        "mnist kron δ=100 (about 100 s) at c0ffee0",
        "mnist kron_dampened δ=100 (about 30 s) at c0ffee0"]  # the network of δ = 100's kron run, from the cache
    out = campaign("mnist", "--dry", "--records", str(records), "--deltas", "1", "10", "100", "--hours",
                   str(150 / 3600))
    assert plan_lines(out.stdout) == ["mnist kron_dampened δ=1 (about 90 s) at c0ffee0"]
    assert "notes004_campaign: kron δ=10 not started: about 100 s, 60 s of the budget left" in out.stdout


def test_a_set_is_one_campaign_at_one_commit(tmp_path):
    records = tmp_path / "records"
    out = campaign("mnist", "--dry", "--records", str(records))
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0
    assert "no CPU records of mnist" in out.stderr and "--commit" in out.stderr
    fake_record(records, "kron", 1.0, 100.0, None)
    out = campaign("mnist", "--dry", "--records", str(records), "--commit", "deadbee")
    assert out.returncode == 2 and "made at c0ffee0, not deadbee" in out.stderr and "Traceback" not in out.stderr
    fake_record(records, "kron", 10.0, 100.0, None, commit="deadbee")
    out = campaign("mnist", "--dry", "--records", str(records))
    assert out.returncode == 2 and "several commits (c0ffee0, deadbee)" in out.stderr


@pytest.mark.data
def test_a_delta_of_a_set_trains_each_posterior_once_and_writes_its_records(tmp_path, data_root):
    records, runs = tmp_path / "records", tmp_path / "runs"
    args = ("mnist", "--tier", "quick", "--worktree", str(REPO), "--runs", str(runs), "--records", str(records),
            "--commit", "test", "--deltas", "1", "--threads", "1", "--hours", "3")
    env = {"BNNPRED_COMMIT": "test", "BNNPRED_DATA_DIR": str(data_root)}
    out = campaign(*args, env=env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    made = {p: json.loads((records / "mnist" / p / "delta1.0" / "metrics.json").read_text())["run"]
            for p in ("kron", "kron_dampened")}
    assert {run["commit"] for run in made.values()} == {"test"}
    assert made["kron_dampened"]["training"]["from_fit_cache"] == 1.0  # the δ's network trained once
    assert made["kron_dampened"]["theta_sha256"] == made["kron"]["theta_sha256"]
    for posterior in made:
        with open(records / "mnist" / posterior / "index.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        assert [(row["status"], row["run_dir"]) for row in rows] == [("trained", "delta1.0")]  # no machine's path
    assert not list(records.rglob("*.pt")) and not list(records.rglob("*.npz"))
    again = campaign(*args, env=env)  # every run recorded: nothing to train
    assert again.returncode == 0 and again.stdout == ""
