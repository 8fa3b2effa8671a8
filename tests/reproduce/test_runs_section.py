"""A page names the commits and code digests of the runs it reads: a page rebuilt with --report-only is built by
other code than its runs, and its provenance line alone would hide that. It counts what the tables read: a sweep's
runs of its newest code (as ``collect`` keeps them), the single runs and the re-evaluations."""

from helpers import finished_run

import bnnpred.reproduce as reproduce_module
import bnnpred.reproduce.base as base_module
from bnnpred.provenance import COMMIT_VARIABLE, code_commit
from bnnpred.reproduce import reproduce
from bnnpred.reproduce.base import Reproduction, Study, Tier, one_spelling


def test_the_runs_section_counts_the_runs_read_by_commit_and_code(tmp_path):
    r = Reproduction(runs=tmp_path, out=tmp_path / "out", tier=Tier.cpu, jobs=1, report_only=True)
    assert r.runs_section() == ""
    sweep = tmp_path / "sweep"
    finished_run(sweep / "stale", {"commit": "1111111", "code": "old"}, finished_at=1.0)
    for name in ("a", "b"):
        finished_run(sweep / name, {"commit": "2d2c33d", "code": "new", "device_name": "x86_64 (AMD EPYC)"},
                     finished_at=2.0)
    (sweep / "unfinished").mkdir()  # no manifest: not read
    (finished_run(sweep / "damaged", {"commit": "2d2c33d", "code": "new"}, 2.0) / "metrics.json").write_text("{")
    single = finished_run(tmp_path / "single", {"commit": "a701e8e", "code": "other",
                                                "device_name": "NVIDIA H100 80GB HBM3"})
    untracked = finished_run(tmp_path / "untracked", {"code": "other"})
    r.sweep(sweep, "${seed}")
    r.sweep(sweep, "${seed}")  # read twice, counted once
    r.train_once(single)
    r.train_once(untracked)
    assert r.runs_of(sweep) == [sweep / "a", sweep / "b"]  # the stale and the damaged run: collect leaves them out
    assert r.runs_section() == ("## Runs\n\nThe page reads 4 finished runs: 2 at commit 2d2c33d (code new), 1 at "
                                "commit a701e8e (code other), 1 with no recorded commit (code other). Made on (each "
                                "run records its machine; the same run may round differently on another processor): "
                                "2 on x86_64 (AMD EPYC), 1 on NVIDIA H100 80GB HBM3, 1 with no recorded machine.\n")


def test_a_re_evaluation_is_counted_and_one_run_is_singular(tmp_path, monkeypatch):
    r = Reproduction(runs=tmp_path, out=tmp_path / "out", tier=Tier.cpu, jobs=1, report_only=True)
    run = finished_run(tmp_path / "run", {"commit": "2d2c33d", "code": "new"})
    r.train_once(run)
    assert "reads 1 finished run: 1 at commit 2d2c33d" in r.runs_section()
    evaluation = finished_run(run / "evals" / "key", {"commit": "52fb789", "code": "newer"})
    monkeypatch.setattr(base_module, "eval_folder", lambda run_dir, overrides: evaluation)
    assert r.evaluate(run, "predictive.n_samples=10") == evaluation
    assert r.runs_section().endswith("reads 2 finished runs: 1 at commit 2d2c33d (code new), 1 at commit 52fb789 "
                                     "(code newer). Made on (each run records its machine; the same run may round "
                                     "differently on another processor): 2 with no recorded machine.\n")


def test_a_page_ends_with_its_runs_then_its_failures(tmp_path, monkeypatch):
    run = finished_run(tmp_path / "runs" / "one", {"commit": "2d2c33d", "code": "new"})

    def make(r: Reproduction) -> str:
        r.train_once(run)
        r.failures.append({"run_dir": str(tmp_path / "runs" / "two"), "overrides": "seed=1", "message": "diverged"})
        return "# page\n\ntext\n"

    study = Study(name="fake", title="a fake study", make=make, cpu_cost="none", items=())
    monkeypatch.setattr(reproduce_module, "STUDIES", {"fake": study})
    reproduce(["fake"], Tier.cpu, tmp_path / "runs", tmp_path / "outputs", jobs=1, report_only=True)
    page = (tmp_path / "outputs" / "fake" / "README.md").read_text()
    assert page.startswith("# page\n\ntext\n\n## Runs\n\nThe page reads 1 finished run: 1 at commit 2d2c33d (code "
                           "new). Made on (each run records its machine; the same run may round differently on "
                           "another processor): 1 with no recorded machine.\n\n## Failed runs\n")
    assert page.endswith("| two | `seed=1` | diverged |\n") and not page.endswith("\n\n")


def test_a_sweep_the_page_leaves_out_is_counted_nowhere(tmp_path):
    """A sweep read but not shown (notes004_table2's incomplete δ grids) leaves the Runs section and the failures."""
    r = Reproduction(runs=tmp_path, out=tmp_path / "out", tier=Tier.cpu, jobs=1, report_only=True)
    shown, dropped = tmp_path / "shown", tmp_path / "dropped"
    finished_run(shown / "a", {"commit": "2d2c33d", "code": "new"})
    finished_run(dropped / "b", {"commit": "1111111", "code": "old"})
    r.sweep(shown, "${seed}")
    r.sweep(dropped, "${seed}")
    r.failures.append({"run_dir": "c", "overrides": "seed=3", "message": "diverged", "sweep": str(dropped)})
    r.forget(dropped)
    assert r.runs_section() == ("## Runs\n\nThe page reads 1 finished run: 1 at commit 2d2c33d (code new). Made on "
                                "(each run records its machine; the same run may round differently on another "
                                "processor): 1 with no recorded machine.\n")
    assert r.failures_section() == ""


def test_the_header_says_which_runs_uncommitted_code_made(tmp_path):
    """Issue 33 item 5: runs made by a working tree with uncommitted changes are named in the page's header, with
    the clean commit whose runs have the same code digest where there is one."""
    r = Reproduction(runs=tmp_path, out=tmp_path / "out", tier=Tier.cpu, jobs=1, report_only=True)
    for name, commit, code in (("a", "2d2c33d", "new"), ("b", "2d2c33d+dirty", "new"), ("c", "52fb789+dirty", "odd")):
        r.train_once(finished_run(tmp_path / name, {"commit": commit, "code": code}))
    assert r.uncommitted() == (" 2 of the 3 runs it reads were made by a working tree with uncommitted changes "
                               "(commit …+dirty: code new, the code of commit 2d2c33d; code odd, which no run of a "
                               "clean commit here has); rerunning them at a clean commit replaces them.")
    assert r.provenance("bnnpred reproduce x").endswith(r.uncommitted())
    clean = Reproduction(runs=tmp_path, out=tmp_path / "out", tier=Tier.cpu, jobs=1, report_only=True)
    clean.train_once(tmp_path / "a")
    assert clean.uncommitted() == "" and clean.provenance("bnnpred reproduce x").endswith("Runs section).")


def test_the_provenance_line_says_whether_the_page_was_measured_or_rebuilt_from_runs(tmp_path):
    def made(report_only: bool, *runs) -> str:
        r = Reproduction(runs=tmp_path, out=tmp_path / "out", tier=Tier.cpu, jobs=1, report_only=report_only)
        for run in runs:
            r.train_once(run)
        return r.provenance("bnnpred reproduce fake")

    run = finished_run(tmp_path / "run", {"commit": "2d2c33d", "code": "new"})
    for report_only in (True, False):  # a page that reads no runs measured every number itself, whatever the flag
        assert "it reads no runs: every number is measured when the page is made" in made(report_only)
    assert made(True, run).endswith("page rebuilt from the runs (the commits that made them: the Runs section).")


def test_a_page_measured_by_uncommitted_code_says_so_in_its_header(tmp_path, monkeypatch):
    """A page whose every number is measured when it is made (identities) names the code that measured them: the
    commit, ``+dirty`` where the working tree had uncommitted changes (:func:`~bnnpred.provenance.code_commit`)."""
    for stated in ("2d2c33d", "2d2c33d+dirty"):
        monkeypatch.setenv(COMMIT_VARIABLE, stated)
        code_commit.cache_clear()
        r = Reproduction(runs=tmp_path, out=tmp_path / "out", tier=Tier.cpu, jobs=1)
        assert f"(tier cpu) at commit {stated} on " in r.provenance("bnnpred reproduce identities")
    code_commit.cache_clear()


def test_one_commit_abbreviated_to_different_lengths_is_counted_once(tmp_path):
    """git abbreviates a hash to as many digits as its clone needs: the notes-004 campaign's records name 1a823577
    in four runs and 1a82357 in one, the same commit, which the page once counted as two."""
    r = Reproduction(runs=tmp_path, out=tmp_path / "out", tier=Tier.cpu, jobs=1, report_only=True)
    for name, commit in (("a", "1a823577"), ("b", "1a82357"), ("c", "1a82357+dirty"), ("d", "1a8235")):
        r.train_once(finished_run(tmp_path / name, {"commit": commit, "code": "same"}))
    assert "reads 4 finished runs: 3 at commit 1a823577 (code same), 1 at commit 1a82357+dirty (code same)" \
        in r.runs_section()
    assert "the code of commit 1a823577)" in r.uncommitted()


def test_two_commits_a_short_spelling_could_name_are_left_apart():
    assert one_spelling(["1a8235", "1a823577", "1a8235ff", "unrecorded"]) == {
        "1a8235": "1a8235", "1a823577": "1a823577", "1a8235ff": "1a8235ff", "unrecorded": "unrecorded"}


def test_records_of_another_device_kept_beside_the_page_and_not_read_are_named_in_its_header(tmp_path):
    """notes004_table2 keeps the GPU's Fashion-MNIST sweeps (runs/cuda/) beside the CPU's that its tables show: the
    header says they are there and not read, never leaving them unmentioned or mixing them into a table."""
    r = Reproduction(runs=tmp_path, out=tmp_path / "out", tier=Tier.cpu, jobs=1, report_only=True, from_records=True)
    assert r.provenance("bnnpred reproduce x").endswith("rebuilds this page from them on any machine).")
    for device in ("cpu", "cuda"):
        (tmp_path / "out" / "runs" / device).mkdir(parents=True)
    assert r.provenance("bnnpred reproduce x").endswith(
        "on any machine). The records in `runs/cuda/` are kept and not read here: each table shows one device's whole "
        "sweeps, and `--device cuda` builds the page from that device's first.")
    r.passed_over.append((tmp_path / "out" / "runs" / "cuda" / "tiny" / "sweep", 1, 2))  # a campaign under way there
    assert r.provenance("bnnpred reproduce x").endswith("on any machine).")  # its Runs section names the sweep
    on_cuda = Reproduction(runs=tmp_path, out=tmp_path / "out", tier=Tier.cpu, jobs=1, report_only=True,
                           from_records=True, device="cuda")
    assert "`runs/cuda/` are kept" not in on_cuda.provenance("bnnpred reproduce x")  # its own device's: not "unread"
