"""A sweep's failed runs are left out of a page and listed on it with their reason, never silently dropped."""

from pathlib import Path

import pytest
from helpers import finished_run

from bnnpred.app.run_index import append, copy_relative, failed_runs
from bnnpred.errors import BnnpredError
from bnnpred.reproduce.base import Reproduction, Tier


def test_failed_runs_are_those_whose_latest_job_failed(tmp_path):
    common = {"seconds": 1.0, "code": "c", "commit": "x", "sweep": "s"}
    append(tmp_path, key="a", status="trained", overrides="prior.delta=1", run_dir=str(tmp_path / "a"), message="",
           **common)
    append(tmp_path, key="b", status="failed", overrides="prior.delta=100", run_dir=str(tmp_path / "b"),
           message="the gradient norm did not fall | at δ = 100", **common)
    append(tmp_path, key="c", status="failed", overrides="prior.delta=10", run_dir=str(tmp_path / "c"),
           message="crash", **common)
    append(tmp_path, key="c", status="trained", overrides="prior.delta=10", run_dir=str(tmp_path / "c"), message="",
           **common)  # trained again later: no longer a failure
    assert failed_runs(tmp_path) == [{"run_dir": str(tmp_path / "b"), "overrides": "prior.delta=100",
                                      "message": "the gradient norm did not fall | at δ = 100"}]
    assert failed_runs(tmp_path / "none") == []


def test_a_sweeps_index_copied_into_its_records_keeps_the_jobs_of_earlier_machines(tmp_path):
    """A campaign continued on a new machine has only that machine's jobs in its sweep's index: copying it into the
    records merges them with the rows the records hold (relative run folders, in the order they ended), so a job
    that failed on the first machine and was trained again on the second is no longer a failure, and a failure of
    the first machine stays listed."""
    common = {"seconds": 1.0, "code": "c", "commit": "x", "sweep": "s", "message": ""}
    first, second, records = tmp_path / "first", tmp_path / "second", tmp_path / "records"
    append(first, key="a", status="trained", overrides="prior.delta=1", run_dir=str(first / "delta1.0"), **common)
    append(first, key="b", status="failed", overrides="prior.delta=10", run_dir=str(first / "delta10.0"), **common)
    append(first, key="c", status="failed", overrides="prior.delta=100", run_dir=str(first / "delta100.0"), **common)
    copy_relative(first, records)
    append(second, key="b", status="trained", overrides="prior.delta=10", run_dir=str(second / "delta10.0"),
           **common)
    copy_relative(second, records)
    copy_relative(second, records)  # twice: nothing doubled
    rows = (records / "index.csv").read_text().splitlines()
    assert len(rows) == 1 + 4 and [row.split(",")[1] for row in rows[1:]] == ["a", "b", "c", "b"]
    assert [f["run_dir"] for f in failed_runs(records)] == ["delta100.0"]


def test_a_page_lists_its_sweeps_failed_runs_and_a_sweep_without_finished_runs_is_an_error(tmp_path):
    r = Reproduction(runs=tmp_path, out=tmp_path / "out", tier=Tier.cpu, jobs=1, report_only=True)
    assert r.failures_section() == ""
    sweep = tmp_path / "sweep"
    finished_run(sweep / "a", {"commit": "x", "code": "c"})
    append(sweep, key="b", status="failed", overrides="prior.delta=100 seed=68", run_dir=str(sweep / "b"),
           message="broken | fit", seconds=1.0, code="c", commit="x", sweep="s")
    assert r.sweep(sweep, "${seed}") == sweep
    section = r.failures_section()
    assert "## Failed runs" in section
    assert "| b | `prior.delta=100 seed=68` | broken / fit |" in section  # a | would split the table's cell
    with pytest.raises(BnnpredError, match="no finished runs in"):
        r.sweep(Path(tmp_path / "empty"), "${seed}")
