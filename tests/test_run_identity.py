"""Every stored run knows whose it is (issue 37): a table counts a run once however it is reached, a run folder that
is a link is never written through, and ``eval`` never creates the folder of a mistyped path."""

from __future__ import annotations

import os
import shutil

import pytest
import torch

from bnnpred import memory
from bnnpred.app.compose import check_job
from bnnpred.app.report.tables import collect
from bnnpred.errors import BnnpredError
from tests.helpers import TINY_IN_PROCESS as TINY
from tests.helpers import bnnpred, trained


@pytest.fixture
def two_runs(tmp_path):
    for seed in (0, 1):
        trained(tmp_path / "runs" / f"seed{seed}", f"seed={seed}")
    return tmp_path / "runs"


def test_a_run_reached_twice_is_counted_once(tmp_path, two_runs, caplog):
    os.symlink(two_runs / "seed0", two_runs / "latest")  # runs/latest -> seed0, as `report runs/*` would reach it
    shutil.copytree(two_runs / "seed1", tmp_path / "backup")  # a backup copy: the same run key
    relative = os.path.relpath(two_runs, tmp_path)
    frame = collect([two_runs, tmp_path / relative, two_runs / "latest", tmp_path / "backup"])
    assert frame.drop_duplicates("run_dir")["seed"].sort_values().tolist() == [0, 1]
    assert "is the run in" in caplog.text


def test_a_run_folder_that_is_a_link_is_refused_and_its_target_kept(tmp_path, two_runs):
    target = two_runs / "seed0"
    before = {p.name: p.read_bytes() for p in target.iterdir() if p.is_file()}
    os.symlink(target, tmp_path / "link")
    with pytest.raises(BnnpredError, match="is a link to .*seed0; a run folder must be a real folder"):
        trained(tmp_path / "link", "seed=5")
    assert {p.name: p.read_bytes() for p in target.iterdir() if p.is_file()} == before


@pytest.mark.parametrize("kind", ["missing", "file", "broken link"])
def test_eval_of_a_path_that_is_no_folder_is_one_line_and_creates_nothing(tmp_path, kind):
    path = tmp_path / "typo" / "run"
    if kind == "file":
        path.parent.mkdir()
        path.write_text("not a run")
    if kind == "broken link":
        path.parent.mkdir()
        os.symlink(tmp_path / "nowhere", path)
    out = bnnpred("eval", f"run_dir={path}", "predictive.n_samples=3", cwd=tmp_path)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "is not a folder (missing, a file, a broken link or a link loop)" in out.stderr
    assert not (tmp_path / "nowhere").exists() and (kind != "missing" or not (tmp_path / "typo").exists())


@pytest.mark.parametrize(("files", "expected"), [
    ({"memory.max": "1000000000\n", "memory.current": "400000000\n"}, 600_000_000),  # cgroup v2
    ({"memory.max": "max\n", "memory.current": "400000000\n"}, None),
    ({"memory/memory.limit_in_bytes": "9223372036854771712\n", "memory/memory.usage_in_bytes": "5\n"}, None),  # v1
    ({"memory/memory.limit_in_bytes": "2000\n", "memory/memory.usage_in_bytes": "3000\n"}, 0),
    ({}, None),
])
def test_the_memory_a_job_may_still_use_is_its_cgroups_limit_less_its_usage(tmp_path, files, expected):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert memory.cgroup_available(tmp_path) == expected


def test_a_gp_beyond_the_jobs_memory_limit_is_refused_before_anything_trains(tmp_path, monkeypatch):
    """Issue 37: under a job's limit (a container's or SLURM's --mem cgroup) that the machine's free memory does not
    show, the GP check refuses the run in one line before training, naming the largest M that fits."""
    (tmp_path / "cgroup").mkdir()
    (tmp_path / "cgroup" / "memory.max").write_text("11000000\n")  # 11 MB, 1 MB of them free
    (tmp_path / "cgroup" / "memory.current").write_text("10000000\n")
    monkeypatch.setattr(memory, "CGROUP", tmp_path / "cgroup")
    assert memory.available_bytes(torch.device("cpu")) == 1_000_000
    with pytest.raises(BnnpredError, match=r"predictive.gp_subset_size=30 needs about .* but 0.0 GB are free on "
                                           r"cpu; use at most \d+"):
        check_job([*TINY, "predictive.kinds=[gp]", "predictive.gp_subset_size=30", "model.width=2000"])
