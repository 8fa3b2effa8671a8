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


def test_a_sweeps_index_merged_into_its_records_keeps_the_jobs_of_earlier_machines(tmp_path):
    """A campaign continued run by run on a new machine has only that machine's jobs in its sweep's index: merging
    it into the records keeps the rows they hold (relative run folders, in the order the jobs ended), so a job that
    failed on the first machine and was trained again on the second is no longer a failure, and a failure of the
    first machine stays listed; a plain copy (a sweep made whole on one machine) holds the sweep's rows alone."""
    common = {"seconds": 1.0, "code": "c", "commit": "x", "sweep": "s", "message": ""}
    first, second, records = tmp_path / "first", tmp_path / "second", tmp_path / "records"
    append(second, key="b", status="trained", overrides="prior.delta=10", run_dir=str(second / "delta10.0"),
           ended="2026-11-27T12:00:00+00:00", **common)  # appended first, ended last
    for key, status, delta, ended in (("a", "trained", 1, "09"), ("b", "failed", 10, "10"), ("c", "failed", 100, "11")):
        append(first, key=key, status=status, overrides=f"prior.delta={delta}", run_dir=str(first / f"delta{delta}.0"),
               ended=f"2026-11-27T{ended}:00:00+00:00", **common)
    copy_relative(first, records, merge=True)
    copy_relative(second, records, merge=True)
    copy_relative(second, records, merge=True)  # twice: nothing doubled
    rows = (records / "index.csv").read_text().splitlines()
    assert len(rows) == 1 + 4 and [row.split(",")[1:3] for row in rows[1:]] == [
        ["a", "trained"], ["b", "failed"], ["c", "failed"], ["b", "trained"]]
    assert [f["run_dir"] for f in failed_runs(records)] == ["delta100.0"]
    copy_relative(second, records)
    assert failed_runs(records) == [] and len((records / "index.csv").read_text().splitlines()) == 1 + 1


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
