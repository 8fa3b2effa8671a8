"""Results a researcher can trust, tested by causing each fault: stale code, a process killed while its files move
in, corrupt run files, diverging fits, jittered precisions, concurrent sweeps and Ctrl-C."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from bnnpred.app import run_files
from bnnpred.app.compose import compose
from bnnpred.app.health import fit_problems, stationarity_flags
from bnnpred.app.run_record import NotFinished, read_finished
from bnnpred.app.runner import train
from bnnpred.errors import BnnpredError
from bnnpred.inference import METHODS
from bnnpred.inference.base import Fit
from bnnpred.inference.contract import HealthObjective
from bnnpred.inference.objective import Objective
from bnnpred.io import load_checked, strict_json
from bnnpred.likelihoods import Bernoulli, Categorical, Gaussian, Poisson
from bnnpred.posteriors import DiagPosterior
from tests.helpers import REPO, bnnpred, trained
from tests.helpers import TINY_IN_PROCESS as TINY


def numbers(document: dict) -> dict:
    """The metrics of a run without their timings."""
    return {split: {kind: {k: v for k, v in values.items() if k != "seconds"} for kind, values in by_kind.items()}
            for split, by_kind in document["metrics"].items()}


# ---------------------------------------------------------------- stale code


def key_in_tree(tree: Path) -> str:
    code = ("from bnnpred.app.compose import compose; from bnnpred.app.config import run_key; "
            "print(run_key(compose([])))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(tree)})
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_change_to_computing_code_changes_the_run_key_and_a_page_builder_does_not(tmp_path):
    trees = {}
    for name in ("same", "trainer", "page"):
        trees[name] = tmp_path / name
        shutil.copytree(REPO / "bnnpred", trees[name] / "bnnpred", ignore=shutil.ignore_patterns("__pycache__"))
    with open(trees["trainer"] / "bnnpred" / "inference" / "map.py", "a") as f:
        f.write("\n# a change to the MAP trainer\n")
    with open(trees["page"] / "bnnpred" / "reproduce" / "toys.py", "a") as f:
        f.write("\n# a change to a page's text\n")
    keys = {name: key_in_tree(tree) for name, tree in trees.items()}
    assert keys["trainer"] != keys["same"]
    assert keys["page"] == keys["same"]


def test_a_finished_run_of_other_code_is_trained_again(tmp_path, monkeypatch):
    first = trained(tmp_path)
    monkeypatch.setattr("bnnpred.app.config.code_digest", lambda: "0ther")
    outcome = train(compose(TINY), tmp_path)
    assert outcome.trained and outcome.document["run"]["key"] != first["run"]["key"]


# ---------------------------------------------------------------- a kill while the files move in


class Killer:
    """Counts the file-system operations of a commit (from its manifest on) and SIGKILLs the process at the
    ``at``-th; ``at`` beyond the last lets the commit finish and exits."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, at: int):
        self.at, self.count, self.armed = at, 0, False
        write_manifest = run_files.write_manifest

        def arming(folder: Path) -> None:
            write_manifest(folder)
            self.armed = True

        monkeypatch.setattr(run_files, "write_manifest", arming)
        for name in ("replace", "rename", "unlink", "rmdir"):
            monkeypatch.setattr(os, name, self.counted(getattr(os, name)))

    def counted(self, operation):
        def wrapper(*args, **kwargs):
            if self.armed:
                self.count += 1
                if self.count == self.at:
                    os.kill(os.getpid(), signal.SIGKILL)
            return operation(*args, **kwargs)
        return wrapper


def replace_in_child(run_dir: Path, new_files: Path, at: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """Fork a process that replaces ``run_dir``'s result by ``new_files`` and is killed at operation ``at``;
    returns its wait status."""
    pid = os.fork()
    if pid == 0:  # the child: no pytest machinery, just the commit
        try:
            Killer(monkeypatch, at)
            with run_files.locked(run_dir), run_files.staged(run_dir) as stage:
                for path in new_files.iterdir():
                    shutil.copyfile(path, stage / path.name)
        finally:
            os._exit(0)
    return os.waitpid(pid, 0)[1]


def test_sigkill_at_any_step_of_a_force_replace_leaves_the_old_or_the_new_run(tmp_path, monkeypatch):
    old_run, new_run = tmp_path / "old", tmp_path / "new"
    old = trained(old_run, "prior.delta=1")
    new = trained(new_run, "prior.delta=3")
    (old_run / "old_figure.png").write_bytes(b"only in the old result")
    run_files.write_manifest(old_run)
    (old_run / "notes.txt").write_text("a user's file, in no manifest")  # never removed by a commit
    new_files = tmp_path / "new_files"
    new_files.mkdir()
    for path in new_run.iterdir():
        if path.is_file() and run_files.is_result_file(path.name) and path.name != run_files.MANIFEST:
            shutil.copyfile(path, new_files / path.name)
    seen, at = set(), 1
    while True:
        run_dir = tmp_path / f"kill{at}"
        shutil.copytree(old_run, run_dir)
        status = replace_in_child(run_dir, new_files, at, monkeypatch)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        with run_files.locked(run_dir):  # the next writer completes or drops the commit
            run_files.recover(run_dir)
            run_files.remove_dead_stages(run_dir)
        document = read_finished(run_dir).document
        assert document in (old, new), at
        names = {p.name for p in run_dir.iterdir()}
        assert ("old_figure.png" in names) == (document == old), at  # no file of the other result left behind
        assert "notes.txt" in names, at
        assert not [n for n in names if n.startswith(".stage-") or n == run_files.REPLACING], at
        seen.add("old" if document == old else "new")
        if not killed:
            break
        at += 1
    assert at > 5 and seen == {"old", "new"}  # killed at every step of the commit, and both outcomes occurred


def test_a_reader_sees_the_new_result_while_its_commit_is_unfinished(tmp_path):
    run_dir = tmp_path / "run"
    old = trained(run_dir, "prior.delta=1")
    new = trained(tmp_path / "new", "prior.delta=3")
    shutil.copytree(tmp_path / "new", run_dir / run_files.REPLACING, ignore=shutil.ignore_patterns(".*", "*.log"))
    assert read_finished(run_dir).document == new  # the commit point passed: the new result is the run
    with run_files.locked(run_dir):
        run_files.recover(run_dir)
    assert read_finished(run_dir).document == new != old
    assert not (run_dir / run_files.REPLACING).exists()


# ---------------------------------------------------------------- corrupt run files


@pytest.mark.parametrize("damage", ["config.yaml", "metrics.json", "posterior.pt"])
def test_a_corrupt_file_in_a_finished_run_is_trained_again_and_reported_skipped(tmp_path, damage, caplog):
    run_dir = tmp_path / "run"
    first = trained(run_dir)
    path = run_dir / damage
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(NotFinished, match=f"{damage} does not match its checksum"):
        read_finished(run_dir)
    with caplog.at_level("WARNING"):
        outcome = train(compose(TINY), run_dir)
    assert outcome.trained and "holds a result that is not used" in caplog.text
    assert numbers(read_finished(run_dir).document) == numbers(first)  # retrained bit for bit


def test_a_run_of_a_missing_posterior_is_not_finished(tmp_path):
    run_dir = tmp_path / "run"
    trained(run_dir)
    (run_dir / "posterior.pt").unlink()
    assert train(compose(TINY), run_dir).trained


# ---------------------------------------------------------------- numerical health


def test_a_diverging_map_fails_with_its_reason_and_writes_nothing(tmp_path):
    with pytest.raises(BnnpredError, match=r"the fit ended worse than it started \(negative log joint per example"):
        trained(tmp_path / "run", "inference.map.lr=1e6", "inference.map.schedule=constant")
    assert list((tmp_path / "run").iterdir()) == []


def test_a_kept_unhealthy_run_is_flagged_in_metrics_and_tables(tmp_path):
    document = trained(tmp_path / "run", "inference.map.lr=1e6", "inference.map.schedule=constant",
                       "keep_unhealthy=true")
    assert any("ended worse than it started" in flag for flag in document["run"]["flags"])
    rows = pd.read_csv(tmp_path / "run" / "selection.csv")
    assert rows["objective_end"].iloc[0] > rows["objective_start"].iloc[0]
    out = bnnpred("report", str(tmp_path / "run"), "--out", str(tmp_path / "report"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert pd.read_csv(tmp_path / "report" / "table.csv")["flagged"].tolist() == [1]


def test_a_healthy_map_records_its_start_and_end(tmp_path):
    document = trained(tmp_path)
    rows = pd.read_csv(tmp_path / "selection.csv")
    assert rows["objective_end"].iloc[0] < rows["objective_start"].iloc[0]
    assert rows["grad_norm"].iloc[0] < rows["grad_norm_start"].iloc[0]
    assert document["run"]["flags"] == []


def test_a_rising_gradient_norm_fails_a_full_batch_map_and_not_a_minibatch_one():
    """A full-batch MAP aims at a stationary point, so a gradient norm above the start's is broken; a minibatch MAP's
    last steps leave gradient noise (3c3d: 3.7e3 at the start, 1.0e4 at the end with the objective down), so only
    its objective is checked."""
    start, end = Objective(value=2.3, grad_norm=3.7e3), Objective(value=0.4, grad_norm=1.0e4)
    theta = torch.zeros(3)
    full, minibatch = ({"grad_norm": 1.0e4, "full_batch": flag} for flag in (1.0, 0.0))
    assert fit_problems(start, end, Fit(theta=theta, posterior=None, info=full), discrete=True) == [
        "the gradient norm did not fall (3.7e+03 at the start, 1e+04 at the end)"]
    assert fit_problems(start, end, Fit(theta=theta, posterior=None, info=minibatch), discrete=True) == []
    worse = Objective(value=2.5, grad_norm=1.0e4)
    assert fit_problems(start, worse, Fit(theta=theta, posterior=None, info=minibatch), discrete=True) == [
        "the fit ended worse than it started (negative log joint per example 2.3 → 2.5)"]


def test_a_mean_field_fit_is_checked_on_its_elbo_not_on_its_means_log_joint():
    """A mean-field mean need not improve the MAP objective (2x50 BBB on Australian at δ = 1: 0.708 → 0.720 per
    example, its predictive's test NLL 0.425): such a fit is healthy while its ELBO rose, and broken when the ELBO
    fell, is not finite or was never traced; a point estimate is still checked on the log joint."""
    start, worse = Objective(value=0.708, grad_norm=10.0), Objective(value=0.720, grad_norm=10.0)
    def fit(*elbo: float) -> Fit:
        return Fit(theta=torch.zeros(3), posterior=None, trace=[{"step": i, "elbo": e} for i, e in enumerate(elbo)])
    elbo = HealthObjective.elbo
    assert fit_problems(start, worse, fit(-0.9, -0.5, -0.4), elbo, discrete=True) == []
    assert fit_problems(start, worse, fit(-0.5, -0.9, -0.6), elbo, discrete=True) == [
        "its objective fell over the fit (the trace's ELBO per example -0.5 at the first row → -0.6)"]
    assert fit_problems(start, worse, fit(-0.5, float("nan")), elbo, discrete=True) == [
        "its objective (the trace's ELBO) is nan at the end"]
    assert fit_problems(start, worse, fit(), elbo, discrete=True) == ["the fit's trace has no ELBO to check it on"]
    broken = Objective(value=float("inf"), grad_norm=10.0)  # a non-finite L at θ* fails on every objective
    assert fit_problems(start, broken, fit(-0.9, -0.4), elbo, discrete=True) == [
        "the objective is inf at the fitted θ"]
    assert fit_problems(start, worse, fit(-0.9, -0.4), discrete=True) == [
        "the fit ended worse than it started (negative log joint per example 0.708 → 0.72)"]


def test_an_elbo_above_zero_fails_a_fit_on_a_discrete_likelihood_and_not_on_a_density():
    """notes-001's VL(H) on Fashion-MNIST: its objective climbed from 7.5e15 to 1.3e23 per example while its σ grew
    to e^17.7 times the prior's and its test accuracy fell to chance; rising, it passed the check on a fall. No ELBO
    of a probability mass can exceed 0 (E_q[log p] ≤ 0, KL ≥ 0); a Gaussian density's can (log p > 0 where
    σ² < 1/2π)."""
    start, end = Objective(value=2.3, grad_norm=1.0), Objective(value=2.3, grad_norm=1.0)
    climbed = Fit(theta=torch.zeros(3), posterior=None, trace=[{"elbo": 7.48e15}, {"elbo": 1.28e23}])
    expected = ["its objective is no ELBO: the trace's ELBO per example reached 1.28e+23, above the 0 that bounds "
                "every ELBO of a discrete likelihood"]
    assert fit_problems(start, end, climbed, HealthObjective.elbo, discrete=True) == expected
    assert fit_problems(start, end, climbed, HealthObjective.elbo, discrete=False) == []
    touched = Fit(theta=torch.zeros(3), posterior=None, trace=[{"elbo": -0.9}, {"elbo": 0.01}, {"elbo": -0.4}])
    assert fit_problems(start, end, touched, HealthObjective.elbo, discrete=True) == [
        expected[0].replace("1.28e+23", "0.01")]  # at any row: the objective left its bound on the way
    below = Fit(theta=torch.zeros(3), posterior=None, trace=[{"elbo": -0.9}, {"elbo": -1e-12}])
    assert fit_problems(start, end, below, HealthObjective.elbo, discrete=True) == []


@pytest.mark.parametrize("likelihood, y", [(Bernoulli(), torch.tensor([0.0, 1.0, 1.0])),
                                           (Categorical(), torch.tensor([0, 2, 1])),
                                           (Poisson(), torch.tensor([0.0, 3.0, 40.0])),
                                           (Gaussian(sigma2=0.01), torch.tensor([0.3, -1.0, 2.0]))])
def test_a_likelihood_is_discrete_exactly_when_its_log_probability_never_exceeds_zero(likelihood, y):
    """The ELBO bound above rests on it: a mass's log p is ≤ 0 at any output; a narrow Gaussian's is > 0 near y."""
    gen = torch.Generator().manual_seed(0)
    f = 30 * torch.randn(20_000, 3 if isinstance(likelihood, Categorical) else 1, generator=gen, dtype=torch.float64)
    best = likelihood.log_prob(f, y[torch.randint(len(y), (len(f),), generator=gen)]).max()
    assert (best <= 0) == likelihood.discrete, float(best)


def test_the_mean_field_methods_and_only_they_are_checked_on_the_elbo():
    """SLANG and the natural-gradient family stay on the log joint (contract.HealthObjective says why)."""
    on_elbo = {name for name, (config, _) in METHODS.items() if config.HEALTH is HealthObjective.elbo}
    assert on_elbo == {"bbb", "vl"}  # inference=vi is bbb's config (notes-001's VI)


# float32 and δ = 1e-7 on a network with more parameters (105) than data (30): the GGN has rank ≤ 30, so
# Π = GGN + δ I spans eight orders of magnitude and float32's Cholesky fails without jitter.
SINGULAR = ["dtype=float32", "prior.delta=1e-7"]


def test_a_jittered_precision_is_recorded_and_flagged(tmp_path):
    document = trained(tmp_path, *SINGULAR)
    assert document["info"]["jitter"] > 0 and document["info"]["log_marglik"] is None
    # the near-flat prior's posterior is wide: the 150-step MAP is also flagged as not stationary (λ 3.2)
    stationarity, jitter = document["run"]["flags"]
    assert jitter == f"jitter {document['info']['jitter']:g} x mean diagonal was added to the posterior precision"
    assert stationarity.startswith("the fit is not a stationary point: its Newton step to the mode is 3.2")


def test_a_laplace_posterior_away_from_its_mode_is_flagged():
    """Issue 37: the Newton decrement √(gᵀ Σ g) in posterior standard deviations; above 1 is flagged, after a
    full-batch MAP only (a minibatch MAP's gradient is noise)."""
    theta = torch.zeros(2)
    posterior = DiagPosterior(theta, torch.tensor([4.0, 1.0]))  # standard deviations 0.5 and 1

    def flags(g: list[float], full_batch: float = 1.0) -> list[str]:
        grad = torch.tensor(g)
        fit = Fit(theta=theta, posterior=posterior, info={"full_batch": full_batch})
        return stationarity_flags(Objective(value=0.0, grad_norm=float(grad.norm()), grad=grad), fit)

    assert flags([2.0, 0.0]) == [] and flags([0.0, 1.0]) == []  # exactly one standard deviation: kept
    assert flags([4.0, 0.0]) == ["the fit is not a stationary point: its Newton step to the mode is 2 posterior "
                                 "standard deviations (gradient norm 4); train longer or set inference.map.finish_tol"]
    assert flags([4.0, 0.0], full_batch=0.0) == []
    assert stationarity_flags(Objective(value=0.0, grad_norm=4.0, grad=torch.tensor([4.0, 0.0])),
                              Fit(theta=theta, posterior=None, info={"full_batch": 1.0})) == []  # no posterior


def test_a_map_oscillating_at_the_edge_of_the_prior_range_is_flagged(tmp_path):
    """Issue 37: δ = 1e8 with Adam at a constant step oscillates around 0 with an amplitude of the step: the
    objective fell and the gradient norm too (the health check passes), but the Laplace posterior (width 1e-4) is
    centred over ten of its widths from the mode (14.5 here)."""
    document = trained(tmp_path, "prior.delta=1e8", "inference.map.schedule=constant")
    (flag,) = document["run"]["flags"]
    decrement = float(flag.split("the mode is ")[1].split(" ")[0])
    assert flag.startswith("the fit is not a stationary point") and decrement > 10


def test_the_evidence_at_a_jittered_precision_is_kept_out_of_selection(tmp_path):
    document = trained(tmp_path, "dtype=float32", "selection=marglik_grid", "selection.delta_grid=[1e-7,1]")
    rows = pd.read_csv(tmp_path / "selection.csv")
    assert rows["jitter"].iloc[0] > 0 and pd.isna(rows["log_marglik"].iloc[0])
    assert document["run"]["delta"] == 1.0 and document["run"]["flags"] == []
    with pytest.raises(BnnpredError, match=r"no grid point gave a usable fit \(δ=1e-07: log_marglik = nan\)"):
        trained(tmp_path / "all", "dtype=float32", "selection=marglik_grid", "selection.delta_grid=[1e-7]")


def test_metrics_json_is_strict_json():
    with pytest.raises(ValueError):
        strict_json({"nll": float("inf")})
    assert json.loads(strict_json({"nll": 0.5})) == {"nll": 0.5}


@pytest.mark.parametrize("override,message", [
    ("prior.delta=1e12", "prior.delta = 1e+12 is outside the sane range [1e-08, 1e+08]"),
    ("likelihood.sigma2=1e-300", "likelihood.sigma2 = 1e-300 is outside the sane range [1e-08, 1e+08]"),
    ("selection.delta_grid=[1,1e9]", "selection.delta_grid = 1e+09 is outside the sane range"),
])
def test_out_of_range_hyperparameters_are_one_line(tmp_path, override, message):
    out = bnnpred("train", *TINY, override, "selection.method=marglik_grid" if "grid" in override else "seed=0",
                  f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.strip().startswith("error: ") and message in out.stderr
    assert "\n" not in out.stderr.strip() and not (tmp_path / "run").exists()


# ---------------------------------------------------------------- fit cache


def test_fit_cache_entries_that_do_not_verify_are_moved_aside_and_computed_again(tmp_path, caplog):
    first = trained(tmp_path / "a")
    (entry,) = Path("runs/fit_cache/map").glob("*.pt")
    original = load_checked(entry)
    for damage in ("flip", "truncate", "empty"):
        data = entry.read_bytes()
        entry.write_bytes({"flip": data[:-100] + bytes([data[-100] ^ 0x04]) + data[-99:],
                           "truncate": data[: len(data) // 2], "empty": b""}[damage])
        with caplog.at_level("WARNING"):
            again = trained(tmp_path / damage)
        assert "moved to" in caplog.text and entry.with_suffix(".corrupt").is_file()
        assert numbers(again) == numbers(first)
        recomputed = load_checked(entry)  # the same entry; only the training's wall time differs
        assert torch.equal(recomputed["theta"], original["theta"]) and recomputed["info"] == original["info"]
        assert recomputed["trace"] == original["trace"] and recomputed["identity"] == original["identity"]
        caplog.clear()


def test_a_fit_cache_that_cannot_be_written_costs_a_warning_not_the_run(tmp_path, caplog):
    (tmp_path / "not_a_folder").write_text("a file where the cache folder should be")
    with caplog.at_level("WARNING"):
        document = trained(tmp_path / "run", f"fit_cache={tmp_path / 'not_a_folder' / 'cache'}")
    assert "could not store" in caplog.text and document["metrics"]["test"]["glm"]["accuracy"] > 0.6


# ---------------------------------------------------------------- concurrent sweeps and interrupts

SWEEP = [*TINY, "predictive.kinds=[map,glm]", "seed=0,1,2", "prior.delta=1,3", "task_name=twice"]


def test_two_identical_sweeps_at_once_train_every_run_once(tmp_path):
    command = [sys.executable, "-m", "bnnpred.cli", "train", "-m", *SWEEP]
    sweeps = [subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
              for _ in range(2)]
    errors = [sweep.communicate(timeout=600)[1] for sweep in sweeps]
    assert [sweep.returncode for sweep in sweeps] == [0, 0], errors
    finals = [next(line for line in err.splitlines() if line.startswith("sweep: 6/6")) for err in errors]
    trained_counts = [int(line.split("(")[1].split(" trained")[0]) for line in finals]
    assert sum(trained_counts) == 6, finals
    runs = tmp_path / "runs" / "twice"
    for run_dir in [p for p in runs.iterdir() if p.is_dir()]:
        read_finished(run_dir)
        assert not [p for p in run_dir.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".stage-")]
    out = bnnpred("report", str(runs), "--out", str(tmp_path / "report"), cwd=tmp_path)
    assert out.returncode == 0 and "skipping" not in out.stderr, out.stderr
    assert pd.read_csv(tmp_path / "report" / "table.csv")["n"].tolist() == [3, 3, 3, 3]


def test_ctrl_c_is_one_line_ends_by_sigint_and_leaves_no_result(tmp_path):
    run_dir = tmp_path / "run"
    command = [sys.executable, "-m", "bnnpred.cli", "train", *TINY, "inference.map.steps=10000000",
               f"hydra.run.dir={run_dir}"]
    # a shell that starts jobs in the background ignores SIGINT for them; a user's terminal does not
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 300  # a loaded machine starts Python, torch and Hydra slowly
        while not (run_dir / "run.log").exists() and time.time() < deadline:
            time.sleep(0.1)
        assert (run_dir / "run.log").exists(), "the run never started: a signal now would land in the imports"
        time.sleep(3)  # training
        process.send_signal(signal.SIGINT)
        err = process.communicate(timeout=60)[1]
    finally:
        process.kill()
        process.wait()
    assert process.returncode == -signal.SIGINT  # a shell shows 130
    assert err.strip() == "error: interrupted; finished runs are kept, the run in progress left nothing"
    assert sorted(p.name for p in run_dir.iterdir()) == [".hydra", "run.log"]


@pytest.mark.parametrize("interrupt", ["raise KeyboardInterrupt", "exec('raise KeyboardInterrupt')"])
def test_an_interrupt_ends_by_sigint_wherever_it_landed(tmp_path, interrupt):
    """CPython ends a ``python -m`` process by SIGINT, whatever ``sys.exit`` said, once a KeyboardInterrupt has
    left an ``exec`` of a string (a dataclass being made during an import): the end is the same either way."""
    (tmp_path / "interrupted_cli.py").write_text(
        "import bnnpred.cli as cli\n"
        f"def interrupted(args):\n    {interrupt}\n"
        "cli.report_command = interrupted\n"
        "cli.main(['report'])\n")
    done = subprocess.run([sys.executable, "-m", "interrupted_cli"], cwd=tmp_path, capture_output=True, text=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert done.returncode == -signal.SIGINT, done.stderr
    assert done.stderr.strip() == "error: interrupted; finished runs are kept, the run in progress left nothing"


def test_an_unexpected_exception_in_one_job_fails_that_run_and_the_sweep_goes_on(tmp_path, monkeypatch, capsys):
    from bnnpred.app import runner
    from bnnpred.cli import main

    real, calls = runner.evaluate_all, []

    def failing_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a torch kernel failed")
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "evaluate_all", failing_once)
    sweep = tmp_path / "sweep"
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "-m", *TINY, "seed=0,1", f"hydra.sweep.dir={sweep}"])
    assert exit_info.value.code == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: 1 run(s) failed: RuntimeError: a torch kernel failed")
    finished = [d for d in sweep.iterdir() if (d / "manifest.json").is_file()]
    failed = [d for d in sweep.iterdir() if d.is_dir() and d not in finished]
    assert len(finished) == 1 and len(failed) == 1
    assert "RuntimeError: a torch kernel failed" in (failed[0] / "error.log").read_text()
    assert not [p for p in failed[0].iterdir() if run_files.is_result_file(p.name)]


def test_the_health_objective_is_the_maps_objective_over_chunks():
    """L(θ) is the MAP's per-example negative log joint and its gradient norm the MAP's ``grad_norm``, also when the
    data span several chunks (1,100 examples: 512 + 512 + 76)."""
    from bnnpred.inference.map import neg_log_joint
    from bnnpred.inference.objective import objective_at
    from tests.helpers import tiny_problem

    problem, _ = tiny_problem("categorical", depth=1, n=1100)
    objective = objective_at(problem, problem.theta0)
    theta = problem.theta0.clone().requires_grad_(True)
    whole = neg_log_joint(problem, theta, slice(None))  # all 1,100 examples in one pass
    (grad,) = torch.autograd.grad(whole * len(problem.X), theta)
    assert objective.value == pytest.approx(float(whole.detach()), rel=1e-12)
    assert objective.grad_norm == pytest.approx(float(grad.norm()), rel=1e-12)


def test_a_writer_killed_mid_write_leaves_a_temporary_file_that_the_next_write_beside_it_removes(tmp_path):
    """Issue 37's minor item: temporary files of killed writers (a fit-cache entry, a checkpoint) were never cleaned.
    A write removes those of dead writers of this machine, never a live writer's or another machine's."""
    from bnnpred.io import atomic_write

    script = ("import sys, time; from pathlib import Path; from bnnpred.io import atomic_write; "
              "atomic_write(Path(sys.argv[1]) / 'entry.pt', lambda f: (f.write(b'x'), f.flush(), time.sleep(60)))")
    writer = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    deadline = time.time() + 60
    while not list(tmp_path.glob(".entry.pt~*.tmp")) and time.time() < deadline:
        time.sleep(0.05)
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    (orphan,) = tmp_path.glob(".entry.pt~*.tmp")
    host = socket.gethostname()
    live = tmp_path / f".other.pt~{host}~{os.getpid()}~abc.tmp"  # this process: alive
    elsewhere = tmp_path / f".other.pt~another-machine~{writer.pid}~abc.tmp"
    impossible = tmp_path / f".other.pt~{host}~99999999999~abc.tmp"  # no such process id: kept, no crash
    locked = tmp_path / f".other.pt~{host}~{writer.pid}~def.tmp"  # a dead id, but its lock held (another namespace)
    for path in (live, elsewhere, impossible, locked):
        path.write_bytes(b"partial")
    with open(locked, "rb") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)
        atomic_write(tmp_path / "entry.pt", lambda f: f.write(b"whole"))
    assert not orphan.exists() and live.exists() and elsewhere.exists() and impossible.exists() and locked.exists()
    assert (tmp_path / "entry.pt").read_bytes() == b"whole"


def test_a_finished_run_keeps_no_checkpoints_left_by_a_kill_after_it_committed(tmp_path):
    trained(tmp_path / "run")
    left = tmp_path / "run" / ".checkpoints"
    left.mkdir()
    (left / "map-0123.pt").write_bytes(b"stale")
    trained(tmp_path / "run")  # skipped: finished
    assert not left.exists()


def test_a_broken_fit_advises_by_cause_not_only_a_lower_learning_rate(tmp_path):
    advice = r"; train longer if it stopped early \(inference.map.steps or epochs\), lower the learning rate if it"
    with pytest.raises(BnnpredError, match=r"numerically broken: .*" + advice):
        trained(tmp_path / "run", "inference.map.lr=1000", "inference.map.steps=20")
