"""bench/gpu/campaign.sh in its CPU mode (issue 38): the study runs in a session of its own, is stopped whole at its
budget, and what comes back is one archive of the study's page folder and records, never a weight or prediction;
a run cut off leaves no record."""

import gzip
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.data
def test_the_campaign_stops_at_its_budget_and_returns_the_records_it_finished(tmp_path, data_root):
    env = {**os.environ, "DEVICE": "cpu", "TIER": "quick", "OUT": str(tmp_path / "out"), "RUNS": str(tmp_path / "runs"),
           "PYTHON": sys.executable, "BNNPRED_COMMIT": "test"}
    out = subprocess.run(["bench/gpu/campaign.sh", "notes004_table2", "12", "1"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    log = gzip.decompress((tmp_path / "out" / "campaign.log.gz").read_bytes()).decode()
    assert "campaign: budget of 12s spent; stopping the study" in log and "0 records written" in log
    left = subprocess.run(["pgrep", "-f", str(tmp_path / "runs")], capture_output=True, text=True)
    assert left.stdout == ""  # the sweep's workers were stopped with the study
    with tarfile.open(tmp_path / "out" / "notes004_table2.tar.gz") as archive:
        names = archive.getnames()
    assert "outputs/notes004_table2" in names
    assert not [n for n in names if n.endswith((".pt", ".npz"))]
    archived = {n for n in names if "/runs/cpu/" in n and n.endswith("manifest.json")}
    committed = {str(p.relative_to(REPO)) for p in (REPO / "outputs/notes004_table2/runs/cpu").rglob("manifest.json")}
    # 12 s do not finish the first run of the quick tier (data, training, four predictives): the archive holds the
    # checkout's committed CPU records and no new one
    assert archived == committed and not (tmp_path / "runs" / "notes004_table2" / "fashion_mnist" / "kron" / "delta1.0"
                                      / "manifest.json").exists()
