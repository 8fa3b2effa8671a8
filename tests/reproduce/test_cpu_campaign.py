"""bench/cpu/notes004_campaign.py (issue 38): a set of notes004_table2 continued on the CPU one δ at a time, each run
started only when earlier records of its commit say it ends inside the budget, its record written as it ends, at
one commit, in a worktree at that commit."""

import csv
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bnnpred.reproduce import notes004_table2

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "cpu" / "notes004_campaign.py"


def campaign(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The script in a process of its own (the runs it trains)."""
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env={**os.environ, **(env or {})})


@pytest.fixture
def planned(monkeypatch, capsys):
    """The script's ``main`` in this process (a plan or a refusal, nothing trained): its exit status and output."""
    spec = importlib.util.spec_from_file_location("notes004_campaign", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.chdir(REPO)

    def run(*args: str) -> subprocess.CompletedProcess:
        status = script.main(list(args))
        out = capsys.readouterr()
        return subprocess.CompletedProcess(args, status, out.out, out.err)

    return run


def commit(of: str = "HEAD") -> str:
    return subprocess.run(["git", "rev-parse", "--short", of], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout.strip()


def fake_record(records: Path, posterior: str, delta: float, seconds: float, training: dict | None,
                at: str | None = None, name: str = "mnist", **run: float | str) -> None:
    folder = records / name / posterior / f"delta{delta}"
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({"run": {"commit": at or commit(), "seconds": seconds,
                                                             "training": training, **run}}))


def plan_lines(out: str) -> list[str]:
    return [line.split(" ", 2)[2] for line in out.splitlines() if line.startswith("notes004_campaign: 2")]


def test_the_plan_skips_recorded_runs_and_times_each_from_the_records_of_its_commit(tmp_path, planned):
    records, head = tmp_path / "records", commit()
    fake_record(records, "kron", 1.0, 100.0, {"seconds": 60.0})  # 40 s after its network
    fake_record(records, "kron_dampened", 10.0, 30.0, {"seconds": 60.0, "from_fit_cache": 1.0})  # none trained
    # another set's records: of the same commit they time this set's runs, of another commit they do not
    fake_record(records, "kron", 1.0, 9999.0, None, at=commit("HEAD~1"), name="fashion_mnist")
    fake_record(records, "kron", 10.0, 130.0, {"seconds": 60.0}, name="fashion_mnist")  # 70 s after its network
    dry = ("mnist", "--dry", "--records", str(records), "--workdir", str(tmp_path), "--deltas", "1", "10", "100")
    out = planned(*dry, "--hours", "1")
    assert out.returncode == 0, out.stderr
    assert plan_lines(out.stdout) == [
        f"mnist kron_dampened δ=1 (about 90 s) at {head}",  # its network is not on this machine: trained again
        f"mnist kron δ=10 (about 130 s) at {head}",  # δ = 10's dampened run is recorded
        f"mnist kron δ=100 (about 130 s) at {head}",
        f"mnist kron_dampened δ=100 (about 30 s) at {head}"]  # the network of δ = 100's kron run, from the cache
    out = planned(*dry, "--hours", str(150 / 3600))
    assert plan_lines(out.stdout) == [f"mnist kron_dampened δ=1 (about 90 s) at {head}"]
    assert "notes004_campaign: kron δ=10 passed over: about 130 s, 60 s of the budget left" in out.stdout
    # a run whose network this machine has (a finished run of its δ in the run folders) is timed without training
    (tmp_path / "runs" / "notes004_table2" / "mnist" / "kron" / "delta1.0").mkdir(parents=True)
    (tmp_path / "runs" / "notes004_table2" / "mnist" / "kron" / "delta1.0" / "metrics.json").write_text("{}")
    out = planned(*dry, "--hours", "1")
    assert plan_lines(out.stdout)[0] == f"mnist kron_dampened δ=1 (about 30 s) at {head}"


def test_a_step_that_does_not_fit_is_passed_over_and_re_evaluations_come_after_a_deltas_runs(tmp_path, planned):
    """Fashion-MNIST's set, nothing recorded at δ = 1 and 10: the guesses time kron (3000 s of training + 2200),
    the dampened and last-layer runs on its network (1200 each) and each of kron's 5 re-evaluations (450, M = 50,
    100, 200, 400, 1600: 800 is its own GP); a record
    of another δ times the diagonal run at 5000 s. A budget of 8050 s: kron, the dampened run, the diagonal run passed
    over (5000 > 1650 left), the last-layer run (450 left), one re-evaluation, the other 4 passed over; nothing of
    δ = 10 fits in the 0 s left."""
    records, head = tmp_path / "records", commit()
    fake_record(records, "diag", 100.0, 5000.0, {"seconds": 60.0, "from_fit_cache": 1.0}, name="fashion_mnist")
    out = planned("fashion_mnist", "--dry", "--records", str(records), "--workdir", str(tmp_path), "--deltas", "1",
                  "10", "--hours", str(8050 / 3600))
    assert out.returncode == 0, out.stderr
    assert plan_lines(out.stdout) == [
        f"fashion_mnist kron δ=1 (about 5200 s) at {head}",
        f"fashion_mnist kron_dampened δ=1 (about 1200 s) at {head}",
        f"fashion_mnist last_layer δ=1 (about 1200 s) at {head}",
        f"fashion_mnist kron δ=1 re-evaluation predictive.kinds=[gp] predictive.gp_subset_size=50 (about 450 s) at "
        f"{head}"]
    assert "notes004_campaign: diag δ=1 passed over: about 5000 s, 1650 s of the budget left" in out.stdout
    assert "notes004_campaign: 4 re-evaluations of kron δ=1 passed over: about 450 s for the next, 0 s of the budget " \
        "left" in out.stdout
    assert "notes004_campaign: kron δ=10 passed over: about 5200 s, 0 s of the budget left" in out.stdout
    out = planned("fashion_mnist", "--dry", "--records", str(records), "--workdir", str(tmp_path), "--deltas", "1",
                  "10", "--hours", str((5200 + 2 * 1200 + 5000 + 5 * 450 + 5200 + 100) / 3600))
    assert plan_lines(out.stdout)[-2:] == [  # δ = 1 whole, δ = 10 begun
        f"fashion_mnist kron δ=1 re-evaluation predictive.kinds=[gp] predictive.gp_subset_size=1600 (about 450 s) "
        f"at {head}",
        f"fashion_mnist kron δ=10 (about 5200 s) at {head}"]
    assert "kron_dampened δ=10 passed over: about 1200 s, 100 s of the budget left" in out.stdout


def test_a_re_evaluation_on_more_points_than_any_recorded_is_timed_in_proportion_to_m(tmp_path, planned,
                                                                                       monkeypatch):
    """Recorded re-evaluations of Fashion-MNIST's kron runs at M = 200 (300 s) and 400 (500 s) time every M up to 400
    by the longest (500 s) and M = 1600 at 1600 / 400 x 500 s: the GP's cost per test point grows with M. An M that
    notes004_table2.TRIED names at the campaign's commit is left out, at another commit it is not."""
    records, head = tmp_path / "records", commit()
    fake_record(records, "kron", 100.0, 100.0, {"seconds": 60.0}, name="fashion_mnist")
    for M, seconds in ((200, 300.0), (400, 500.0)):
        folder = records / "fashion_mnist" / "kron" / "delta100.0" / "evals" / f"m{M}"
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_text("{}")
        (folder / "metrics.json").write_text(json.dumps({
            "run": {"changes": {"predictive.gp_subset_size": M}},
            "metrics": {"valid": {"gp": {"seconds": seconds - 100}}, "test": {"gp": {"seconds": 50.0,
                                                                                       "ood_seconds": 50.0}}}}))
    out = planned("fashion_mnist", "--dry", "--records", str(records), "--workdir", str(tmp_path), "--deltas", "1",
                  "--hours", "10")
    assert out.returncode == 0, out.stderr
    assert [line for line in plan_lines(out.stdout) if "re-evaluation" in line] == [
        f"fashion_mnist kron δ=1 re-evaluation predictive.kinds=[gp] predictive.gp_subset_size={M} (about {s} s) at "
        f"{head}" for M, s in ((50, 500), (100, 500), (200, 500), (400, 500), (1600, 2000))]
    # an M tried at this commit and not made there (the page states what happened) is not tried again
    monkeypatch.setattr(notes004_table2, "TRIED", {1600: notes004_table2.Tried(commit("HEAD")[:7], "killed")})
    out = planned("fashion_mnist", "--dry", "--records", str(records), "--workdir", str(tmp_path), "--deltas", "1",
                  "--hours", "10")
    assert [line.split("gp_subset_size=")[1].split(" ")[0] for line in plan_lines(out.stdout)
            if "re-evaluation" in line] == ["50", "100", "200", "400"]
    monkeypatch.setattr(notes004_table2, "TRIED", {1600: notes004_table2.Tried("0000000", "killed elsewhere")})
    out = planned("fashion_mnist", "--dry", "--records", str(records), "--workdir", str(tmp_path), "--deltas", "1",
                  "--hours", "10")
    assert "predictive.gp_subset_size=1600" in out.stdout


def test_a_later_delta_that_fits_is_begun_after_a_run_passed_over(tmp_path, planned):
    """MNIST's set: records time kron at 3000 s of training + 100 and the dampened run at 5000 s. A budget of 6500 s:
    δ = 1's kron (3400 s left), its dampened run passed over (5000 > 3400), δ = 10's kron (300 left), its dampened run
    passed over: the budget is filled, not left idle at the first run that does not fit."""
    records, head = tmp_path / "records", commit()
    fake_record(records, "kron", 100.0, 3100.0, {"seconds": 3000.0}, fit_seconds=3050.0)
    fake_record(records, "kron_dampened", 100.0, 5000.0, {"seconds": 3000.0, "from_fit_cache": 1.0})
    out = planned("mnist", "--dry", "--records", str(records), "--workdir", str(tmp_path), "--deltas", "1", "10",
                  "--hours", str(6500 / 3600))
    assert out.returncode == 0, out.stderr
    assert plan_lines(out.stdout) == [f"mnist kron δ=1 (about 3100 s) at {head}",
                                      f"mnist kron δ=10 (about 3100 s) at {head}"]
    assert "notes004_campaign: kron_dampened δ=1 passed over: about 5000 s, 3400 s of the budget left" in out.stdout
    assert "notes004_campaign: kron_dampened δ=10 passed over: about 5000 s, 300 s of the budget left" in out.stdout


def test_only_the_network_of_maps_chosen_delta_is_re_evaluated(tmp_path, planned):
    """Fig 5.10 re-evaluates the network of MAP's δ alone (the lowest validation NLL of the MAP predictive): a kron
    run on this machine whose MAP another δ's record beats (0.30 against 0.20) is not re-evaluated; the same run
    beating every other record would be (its re-evaluations, checked by the slow test, need a real run)."""
    records, head = tmp_path / "records", commit()

    def kron(delta: float, nll: float, folder: Path) -> None:
        folder.mkdir(parents=True)
        (folder / "metrics.json").write_text(json.dumps({"run": {"commit": head, "seconds": 10.0, "training": None},
                                                         "metrics": {"valid": {"map": {"nll": nll}}}}))

    for delta, nll in ((1.0, 0.30), (10.0, 0.20)):
        kron(delta, nll, records / "fashion_mnist" / "kron" / f"delta{delta}")
    kron(1.0, 0.30, tmp_path / "runs" / "notes004_table2" / "fashion_mnist" / "kron" / "delta1.0")  # made here
    out = planned("fashion_mnist", "--dry", "--records", str(records), "--workdir", str(tmp_path), "--deltas", "1",
                  "--hours", "0.001")
    assert out.returncode == 0, out.stderr
    assert ("notes004_campaign: kron δ=1 not re-evaluated: its MAP's validation NLL 0.3000 is above δ=10's 0.2000 "
            "(Fig 5.10 re-evaluates the network of MAP's chosen δ)") in out.stdout
    assert plan_lines(out.stdout) == []
    script = importlib.util.module_from_spec(spec := importlib.util.spec_from_file_location("campaign", SCRIPT))
    spec.loader.exec_module(script)
    assert script.outdone(records / "fashion_mnist" / "kron" / "delta10.0", records / "fashion_mnist" / "kron") is None


def test_records_of_this_call_time_the_runs_after_them(tmp_path, planned):
    """A record finished since the call began (here: one dated in the future) times the runs after it, this machine
    under its load now, in place of the longest of the older records: kron's 100 s after its network and 1,000 s of
    training, not an older 5,000 s and 3,000 s; the dampened run (no recent record) keeps its older 800 s."""
    records, head = tmp_path / "records", commit()
    old, recent = "2026-01-01T00:00:00+00:00", "2999-01-01T00:00:00+00:00"
    fake_record(records, "kron", 100.0, 8000.0, {"seconds": 3000.0}, fit_seconds=5000.0, finished=old)
    fake_record(records, "kron", 10.0, 1100.0, {"seconds": 1000.0}, fit_seconds=1050.0, finished=recent)
    fake_record(records, "kron_dampened", 100.0, 800.0, {"seconds": 3000.0, "from_fit_cache": 1.0})
    out = planned("mnist", "--dry", "--records", str(records), "--workdir", str(tmp_path), "--deltas", "1",
                  "--hours", "9")
    assert plan_lines(out.stdout) == [f"mnist kron δ=1 (about 1100 s) at {head}",
                                      f"mnist kron_dampened δ=1 (about 800 s) at {head}"]


def test_a_record_resumed_mid_training_does_not_time_the_stages_after_it(tmp_path, planned):
    records = tmp_path / "records"
    fake_record(records, "kron", 1.0, 500.0, {"seconds": 3000.0})  # seconds of its last process only
    # its last process trained for less than the training's clock says (fit_seconds: training and posterior)
    fake_record(records, "kron", 100.0, 5000.0, {"seconds": 2000.0}, fit_seconds=1000.0)
    out = planned("mnist", "--dry", "--records", str(records), "--workdir", str(tmp_path), "--deltas", "10",
                   "--hours", "9")
    assert plan_lines(out.stdout)[0] == f"mnist kron δ=10 (about 5200 s) at {commit()}"  # the guesses: 3000 + 2200


def test_a_set_is_one_campaign_at_one_commit_and_bad_input_is_one_line(tmp_path, planned):
    records = tmp_path / "records"
    cases = [(("--commit", "nosuchcommit"), "git rev-parse --short nosuchcommit^{commit}:"),
             ((), "no CPU records of mnist"), (("--hours", "nan"), "--hours nan: give a positive number of hours"),
             (("--deltas", "1", "1"), "give distinct positive prior precisions"),
             (("--threads", "0"), "--threads 0: give at least 1")]
    for extra, message in cases:
        out = planned("mnist", "--dry", "--records", str(records), *extra)
        assert out.returncode == 2 and message in out.stderr and out.stderr.count("\n") == 1, (extra, out.stderr)
    out = planned("mnist", "--tier", "quick", "--dry", "--commit", commit())
    assert out.returncode == 2 and "give --records" in out.stderr
    fake_record(records, "kron", 1.0, 100.0, None)
    out = planned("mnist", "--dry", "--records", str(records), "--commit", commit("HEAD~1"))
    assert out.returncode == 2 and f"made at {commit()}, not {commit('HEAD~1')}" in out.stderr
    full = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    assert planned("mnist", "--dry", "--records", str(records), "--commit", full).returncode == 0  # any spelling
    fake_record(records, "kron", 10.0, 100.0, None, at=commit("HEAD~1"))
    out = planned("mnist", "--dry", "--records", str(records))
    assert out.returncode == 2 and "name several commits" in out.stderr


@pytest.fixture
def worktree(tmp_path):
    """A clean worktree of the checkout at HEAD, removed afterwards."""
    folder = tmp_path / "worktree"
    subprocess.run(["git", "worktree", "add", "--detach", str(folder), "HEAD"], cwd=REPO, check=True,
                   capture_output=True)
    yield folder
    subprocess.run(["git", "worktree", "remove", "--force", str(folder)], cwd=REPO, capture_output=True)


@pytest.mark.slow
@pytest.mark.data
def test_a_delta_of_a_set_trains_each_posterior_once_and_writes_its_records(tmp_path, data_root, worktree):
    """Fashion-MNIST at the quick tier's size, one δ: the Kronecker run trains the network, the dampened, diagonal
    and last-layer runs take it from the fit cache, and the Kronecker run is re-evaluated for Fig 5.10 where its
    posterior is (the GP on M = 10; M = 20 is its own GP) after every run's record is written, its record holding
    the re-evaluation. No file of the records names this machine's folders. A session that ended among the
    re-evaluations (caused: the re-evaluation deleted from the record and the run folder) has the next call make that
    re-evaluation alone, to the same numbers; where the run folder is gone, the call reports it and trains nothing."""
    records, work = tmp_path / "records", tmp_path / "work"
    work.mkdir()
    args = ("fashion_mnist", "--tier", "quick", "--worktree", str(worktree), "--workdir", str(work), "--records",
            str(records), "--commit", "HEAD", "--deltas", "1", "--threads", "1", "--hours", "3")
    out = campaign(*args, env={"BNNPRED_DATA_DIR": str(data_root)})
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    posteriors = ("kron", "kron_dampened", "diag", "last_layer")
    made = {p: json.loads((records / "fashion_mnist" / p / "delta1.0" / "metrics.json").read_text())["run"]
            for p in posteriors}
    assert {run["commit"] for run in made.values()} == {commit()}
    assert made["kron"]["training"].get("from_fit_cache") is None
    for posterior in posteriors[1:]:  # the δ's network trained once
        assert made[posterior]["training"]["from_fit_cache"] == 1.0
        assert made[posterior]["theta_sha256"] == made["kron"]["theta_sha256"]
    evals = [json.loads(p.read_text()) for p in (records / "fashion_mnist" / "kron" / "delta1.0").glob(
        "evals/*/metrics.json")]
    assert [d["run"]["changes"]["predictive.gp_subset_size"] for d in evals] == [10]
    assert {"accuracy", "nll", "ood_auc"} <= set(evals[0]["metrics"]["test"]["gp"])
    for posterior in posteriors:
        with open(records / "fashion_mnist" / posterior / "index.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        assert [(row["status"], row["run_dir"]) for row in rows] == [("trained", "delta1.0")]
    files = [p for p in records.rglob("*") if p.is_file()]
    assert not [p for p in files if p.suffix in (".pt", ".npz")]
    assert not [p for p in files if str(tmp_path) in p.read_text(errors="replace")]
    lines = out.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if "re-evaluation " in line)
    assert [line for line in lines[:first] if "records of fashion_mnist" in line][-1].startswith(
        "notes004_campaign: 1 records of fashion_mnist last_layer")  # every run's record before the re-evaluation
    again = campaign(*args, env={"BNNPRED_DATA_DIR": str(data_root)})  # every run recorded: nothing to do
    assert again.returncode == 0 and again.stdout == "" and again.stderr == ""
    # the run's folder without the re-evaluation its record holds (as where it was trained again to the record's
    # posterior bytes): the record's counts, nothing is re-evaluated
    kron = Path("runs") / "notes004_table2" / "fashion_mnist" / "kron" / "delta1.0"
    record = records / "fashion_mnist" / "kron" / "delta1.0"
    before = {p: p.read_bytes() for p in record.rglob("*") if p.is_file()}
    shutil.rmtree(work / kron / "evals")
    again = campaign(*args, env={"BNNPRED_DATA_DIR": str(data_root)})
    assert again.returncode == 0 and again.stdout == "" and again.stderr == ""
    assert {p: p.read_bytes() for p in record.rglob("*") if p.is_file()} == before
    # a session ended among the re-evaluations: the run's record without it, its posterior still on this machine
    shutil.rmtree(record / "evals")  # the run folder's went above
    again = campaign(*args, env={"BNNPRED_DATA_DIR": str(data_root)})
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert [line.split(" ", 2)[2] for line in again.stdout.splitlines() if line.startswith("notes004_campaign: 2")] \
        == [f"fashion_mnist kron δ=1 re-evaluation predictive.kinds=[gp] predictive.gp_subset_size=10 (about "
            f"450 s) at {commit()}"]  # no run trained again
    remade = [json.loads(p.read_text()) for p in (records / "fashion_mnist" / "kron" / "delta1.0").glob(
        "evals/*/metrics.json")]
    assert [d["metrics"]["test"]["gp"]["nll"] for d in remade] == [d["metrics"]["test"]["gp"]["nll"] for d in evals]
    # elsewhere (no run folder) such a record is reported, not retrained
    shutil.rmtree(records / "fashion_mnist" / "kron" / "delta1.0" / "evals")
    shutil.rmtree(work / "runs")
    again = campaign(*args, env={"BNNPRED_DATA_DIR": str(data_root)})
    assert again.returncode == 0 and again.stdout == ""
    assert again.stderr.startswith("notes004_campaign: kron δ=1's record lacks 1 of its re-evaluations (M = 10); "
                                   "only a machine with its posterior can make them")


def test_a_failed_run_stops_the_campaign_and_leaves_the_records_alone(tmp_path, worktree):
    records, work = tmp_path / "records", tmp_path / "work"
    work.mkdir()
    out = campaign("mnist", "--tier", "quick", "--worktree", str(worktree), "--workdir", str(work), "--records",
                   str(records), "--commit", "HEAD", "--deltas", "1", "--hours", "3",
                   env={"BNNPRED_DATA_DIR": str(tmp_path / "no data")})
    assert out.returncode == 1 and "mnist kron δ=1" in out.stdout and "kron δ=1 failed (exit status" in out.stderr
    assert "kron_dampened" not in out.stdout and not records.exists()


def test_no_data_root_is_refused_in_one_line_before_the_worktree_is_made(tmp_path, planned, monkeypatch):
    monkeypatch.delenv("BNNPRED_DATA_DIR", raising=False)
    records, folder = tmp_path / "records", tmp_path / "worktree"
    fake_record(records, "kron", 1.0, 100.0, None)
    out = planned("mnist", "--records", str(records), "--worktree", str(folder), "--deltas", "10")
    assert out.returncode == 2 and out.stderr == (
        "error: no data root: set BNNPRED_DATA_DIR or dataset.root=PATH (bnnpred data fetch NAME downloads into it)\n")
    assert not folder.exists() and out.stdout == ""
