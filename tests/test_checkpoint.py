"""Long runs survive interruption: a MAP training killed at any step resumes from its last checkpoint and ends
bit for bit where an uninterrupted one ends; corrupt checkpoints are passed over; other configs never resume."""

from __future__ import annotations

import dataclasses
import fractions
import json
import math
import os
import random
import signal
import subprocess
import sys
import time

import pytest
import torch

from bnnpred.inference import Session
from bnnpred.inference import map as map_module
from bnnpred.inference.base import TrainingClock
from bnnpred.inference.map import MapConfig, train_map
from bnnpred.io import CorruptFile, load_checked, load_torch, save_checked
from tests.helpers import tiny_problem

MINIBATCH = MapConfig(steps=60, batch_size=4, lr=1e-2, schedule="cosine")  # 3 steps an epoch


def problem_in(tmp_path, delta: float = 0.7):
    problem, _ = tiny_problem("bernoulli", delta=delta)
    return dataclasses.replace(problem, session=Session(checkpoints=tmp_path / "ckpt", checkpoint_seconds=0.0))


class Interrupted(Exception):
    pass


def interrupted_at(monkeypatch, tmp_path, step: int, delta: float = 0.7) -> None:
    """Train until the loss of ``step`` is being computed, then stop as a kill would."""
    calls = []
    real = map_module.neg_log_joint

    def counting(*args, **kwargs):
        calls.append(1)
        if len(calls) == step:
            raise Interrupted
        return real(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(map_module, "neg_log_joint", counting)
        with pytest.raises(Interrupted):
            train_map(problem_in(tmp_path, delta), MINIBATCH)


@pytest.fixture
def uninterrupted(tmp_path_factory):
    return train_map(problem_in(tmp_path_factory.mktemp("whole")), MINIBATCH)


@pytest.mark.parametrize("step", [2, 4, 7, 31, 59, 60])
def test_a_resumed_training_ends_bit_for_bit_where_an_uninterrupted_one_ends(tmp_path, monkeypatch, step,
                                                                             uninterrupted):
    interrupted_at(monkeypatch, tmp_path, step)
    resumed = train_map(problem_in(tmp_path), MINIBATCH)
    assert torch.equal(resumed.theta, uninterrupted.theta)
    assert resumed.trace == uninterrupted.trace and resumed.info == uninterrupted.info


def test_a_resumed_training_counts_the_seconds_its_checkpoint_carries(tmp_path, monkeypatch):
    """The training clock goes on from the checkpoint's seconds: a killed process's training time is not lost from
    the run's time per epoch."""
    interrupted_at(monkeypatch, tmp_path, 31)
    newest = next(p for p in (tmp_path / "ckpt").glob("*.pt") if ".prev" not in p.name)
    state = load_checked(newest)
    assert state["seconds"] > 0
    save_checked(newest, {**state, "seconds": 1000.0})
    timing = train_map(problem_in(tmp_path), MINIBATCH).timing
    assert 1000 < timing["seconds"] < 1060 and timing["epochs"] == 20  # 60 steps of 3 an epoch
    assert timing["seconds_per_epoch"] == timing["seconds"] / 20
    assert math.isnan(TrainingClock().timing(0)["seconds_per_epoch"])  # no epoch: no time per epoch


@pytest.mark.parametrize("damage", ["newest", "both"])
def test_a_corrupt_checkpoint_is_passed_over_for_the_previous_one_or_a_fresh_start(tmp_path, monkeypatch, caplog,
                                                                                  damage, uninterrupted):
    interrupted_at(monkeypatch, tmp_path, 20)
    files = sorted((tmp_path / "ckpt").glob("*.pt"))
    assert len(files) == 2  # the newest and the previous one
    for path in files if damage == "both" else [p for p in files if ".prev" not in p.name]:
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])  # truncated
    with caplog.at_level("INFO"):
        resumed = train_map(problem_in(tmp_path), MINIBATCH)
    assert "ignored: " in caplog.text and "does not match its checksum" in caplog.text
    assert ("resuming from" in caplog.text) == (damage == "newest")
    assert torch.equal(resumed.theta, uninterrupted.theta)


def test_a_checkpoint_of_another_config_is_never_resumed(tmp_path, monkeypatch, caplog):
    interrupted_at(monkeypatch, tmp_path, 20, delta=0.7)
    with caplog.at_level("INFO"):
        other = train_map(problem_in(tmp_path, delta=0.8), MINIBATCH)
    assert "resuming" not in caplog.text
    assert torch.equal(other.theta, train_map(problem_in(tmp_path / "fresh", delta=0.8), MINIBATCH).theta)


TRAIN = ["dataset.n_train=30", "dataset.n_valid=20", "dataset.n_test=40", "model=mlp", "model.width=8",
         "selection=none", "inference=map", "predictive=map", "inference.map.steps=3000",
         "inference.map.batch_size=5", "inference.map.lr=0.01", "plot.enabled=false", "progress=false",
         "threads=1", "fit_cache=null", "checkpoint_seconds=0"]


def train_command(run_dir) -> list[str]:
    return [sys.executable, "-m", "bnnpred", "train", *TRAIN, f"hydra.run.dir={run_dir}"]


def test_a_run_killed_with_sigkill_resumes_and_ends_with_the_numbers_of_an_uninterrupted_one(tmp_path):
    whole = subprocess.run(train_command(tmp_path / "whole"), cwd=tmp_path, capture_output=True, text=True,
                           timeout=600)
    assert whole.returncode == 0, whole.stderr
    killed = tmp_path / "killed"
    process = subprocess.Popen(train_command(killed), cwd=tmp_path, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not list((killed / ".checkpoints").glob("*.pt")) and time.time() < deadline:
        time.sleep(0.02)
    time.sleep(random.Random(0).uniform(0.1, 1.0))  # somewhere in the middle of training
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert not (killed / "manifest.json").exists(), "the run must be killed before it ends"
    resumed = subprocess.run(train_command(killed), cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming from map-" in (killed / "run.log").read_text()
    thetas = [load_torch(d / "posterior.pt")["theta"] for d in (killed, tmp_path / "whole")]
    assert torch.equal(*thetas)
    metrics = [json.loads((d / "metrics.json").read_text())["metrics"] for d in (killed, tmp_path / "whole")]
    for doc in metrics:
        for by_kind in doc.values():
            for values in by_kind.values():
                values.pop("seconds")
    assert metrics[0] == metrics[1]
    assert not (killed / ".checkpoints").exists()  # removed with the finished run


def test_a_mean_field_training_resumes_bit_for_bit(tmp_path, monkeypatch):
    """Bayes-by-Backprop draws its noise from the problem's generator, which the checkpoint carries."""
    from bnnpred.inference import mean_field
    from bnnpred.inference.bbb import BBBConfig, fit_bbb

    cfg = BBBConfig(steps=45, batch_size=4, lr=1e-2)
    whole = fit_bbb(problem_in(tmp_path / "whole"), cfg)
    real, calls = mean_field.kl_to_prior, []

    def counting(*args, **kwargs):
        calls.append(1)
        if len(calls) == 20:
            raise Interrupted
        return real(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(mean_field, "kl_to_prior", counting)
        with pytest.raises(Interrupted):
            fit_bbb(problem_in(tmp_path / "killed"), cfg)
    resumed = fit_bbb(problem_in(tmp_path / "killed"), cfg)
    assert torch.equal(resumed.theta, whole.theta)
    assert torch.equal(resumed.posterior.precision, whole.posterior.precision)
    assert resumed.trace == whole.trace


def interrupt_ngvi_at(monkeypatch, step: int, fit) -> None:
    """Run ``fit()`` until the natural-gradient step ``step`` is being taken, then stop as a kill would."""
    from bnnpred.inference import ngvi

    real, calls = ngvi._step, []

    def counting(*args, **kwargs):
        calls.append(1)
        if len(calls) == step:
            raise Interrupted
        return real(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(ngvi, "_step", counting)
        with pytest.raises(Interrupted):
            fit()


@pytest.mark.parametrize("structure", ["full", "diag"])
def test_a_natural_gradient_run_resumes_bit_for_bit(tmp_path, monkeypatch, structure):
    """VOGGN on minibatches with Monte Carlo draws and a MAP warm start: the precision state (low-rank or
    diagonal), mean, momentum, trace and generator come back from the checkpoint; the warm start is not redone."""
    from bnnpred.curvature.ggn import Structure
    from bnnpred.inference.ngvi import Start
    from bnnpred.inference.voggn import VOGGNConfig, fit_voggn

    cfg = VOGGNConfig(structure=Structure(structure), gamma=0.3, iterations=24, batch_size=4, n_samples=2, momentum=0.5,
                      log_every=5, tol=0.0, start=Start.map, map=MapConfig(steps=30, lr=1e-2))
    whole = fit_voggn(problem_in(tmp_path / "whole"), cfg)
    interrupt_ngvi_at(monkeypatch, 14, lambda: fit_voggn(problem_in(tmp_path / "killed"), cfg))
    assert len(list((tmp_path / "killed" / "ckpt").glob("voggn-*.pt"))) == 2
    resumed = fit_voggn(problem_in(tmp_path / "killed"), cfg)
    assert torch.equal(resumed.theta, whole.theta)
    assert torch.equal(resumed.posterior.dense_precision(), whole.posterior.dense_precision())
    assert resumed.trace == whole.trace and resumed.info == whole.info


def test_a_natural_gradient_run_found_finished_in_its_checkpoint_reports_the_same_info(tmp_path):
    """A run killed after its last step (during its predictives) loads the last step's checkpoint and takes no
    step: its info, the last relative change of the mean included, is the uninterrupted run's."""
    from bnnpred.inference.voggn import VOGGNConfig, fit_voggn

    cfg = VOGGNConfig(gamma=0.3, iterations=12, batch_size=4, n_samples=2, log_every=5, tol=0.0)
    first = fit_voggn(problem_in(tmp_path), cfg)
    again = fit_voggn(problem_in(tmp_path), cfg)
    assert math.isfinite(first.info["rel_change"]) and again.info == first.info and again.trace == first.trace


def test_the_plateau_is_tested_on_the_log_cadences_rows_not_on_the_last_steps():
    """The last iteration's trace row (22, between the cadence's 20 and 24) does not stop a run the cadence's rows
    never found on a plateau."""
    from bnnpred.inference.voggn import VOGGNConfig, fit_voggn

    problem, _ = tiny_problem("bernoulli", n=12)
    fit = fit_voggn(problem, VOGGNConfig(iterations=22, log_every=4, gamma=0.3, tol=0.0, plateau_window=3,
                                         plateau_tol=0.2))  # the last row would make the plateau's sixth row
    assert [row["step"] for row in fit.trace][-2:] == [20, 22]
    assert (fit.info["converged"], fit.info["plateau"]) == (0.0, 0.0)


def test_a_glm_refinement_resumes_bit_for_bit(tmp_path, monkeypatch):
    """The refinement's checkpoint is keyed by the linearised problem, the same in a new process (no object
    addresses in its digest)."""
    from bnnpred.inference.glm_refine import GLMRefineConfig, fit_glm_refine

    cfg = GLMRefineConfig(iterations=12, gamma=0.5, n_samples=2, map=MapConfig(steps=30, lr=1e-2))
    whole = fit_glm_refine(problem_in(tmp_path / "whole"), cfg)
    interrupt_ngvi_at(monkeypatch, 7, lambda: fit_glm_refine(problem_in(tmp_path / "killed"), cfg))
    resumed = fit_glm_refine(problem_in(tmp_path / "killed"), cfg)
    assert torch.equal(resumed.posterior.dense_precision(), whole.posterior.dense_precision())
    assert torch.equal(resumed.posterior.mean, whole.posterior.mean) and resumed.trace == whole.trace


def test_the_kronecker_factors_resume_bit_for_bit(tmp_path, monkeypatch):
    """A Kronecker fit killed between batches goes on from its saved partial sums; the resumed factors equal an
    uninterrupted accumulation's exactly (same sums in the same order)."""
    from bnnpred.curvature import kron
    from bnnpred.curvature.ggn import Structure
    from bnnpred.inference.laplace_ggn import LaplaceGGNConfig, fit_laplace_ggn

    cfg = LaplaceGGNConfig(structure=Structure.kron, kron_batch_size=2, map=MapConfig(steps=20, lr=1e-2))
    whole = fit_laplace_ggn(problem_in(tmp_path / "whole"), cfg)
    real, calls = kron.back_propagated, []

    def counting(*args, **kwargs):
        calls.append(1)
        if len(calls) == 4:
            raise Interrupted
        return real(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(kron, "back_propagated", counting)
        with pytest.raises(Interrupted):
            fit_laplace_ggn(problem_in(tmp_path / "killed"), cfg)
    assert list((tmp_path / "killed" / "ckpt").glob("kron-*.pt"))
    resumed_calls = []
    with monkeypatch.context() as patch:
        patch.setattr(kron, "back_propagated", lambda *a, **k: resumed_calls.append(1) or real(*a, **k))
        resumed = fit_laplace_ggn(problem_in(tmp_path / "killed"), cfg)
    assert len(resumed_calls) == 3  # 6 batches of 2; 3 were saved
    assert torch.equal(resumed.posterior.dense_precision(), whole.posterior.dense_precision())
    assert resumed.info == whole.info


def test_a_run_interrupted_during_its_predictives_keeps_the_finished_ones(tmp_path, monkeypatch):
    """An interruption in the third (predictive, split) pair: the restart computes only what was not finished and
    ends with the metrics of an uninterrupted run; the kept predictions go with the finished run."""
    from bnnpred import metrics as metrics_module
    from bnnpred.app import runner
    from bnnpred.app.compose import compose
    from bnnpred.app.runner import train

    overrides = ["dataset.n_train=40", "dataset.n_test=30", "selection=none", "predictive.kinds=[map,glm]",
                 "predictive.n_samples=10", "inference.map.steps=200", "plot.enabled=false", "progress=false",
                 "fit_cache=null", "checkpoint_seconds=0"]
    real, calls = metrics_module.evaluate, []
    with monkeypatch.context() as patch:  # count the metric calls: the training trace's monitor makes some too
        patch.setattr(metrics_module, "evaluate", lambda *a, **k: calls.append(1) or real(*a, **k))
        whole = train(compose(overrides), tmp_path / "whole").document["metrics"]
    interrupt_at = len(calls) - 6 + 3  # the third of the 6 (predictive, split) pairs: 2 kinds x 3 splits
    calls.clear()

    def evaluate(*args, **kwargs):
        calls.append(1)
        if len(calls) == interrupt_at:
            raise Interrupted
        return real(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(metrics_module, "evaluate", evaluate)
        with pytest.raises(Interrupted):
            train(compose(overrides), tmp_path / "killed")
    kept = sorted(p.name.split("-", 2)[2] for p in (tmp_path / "killed" / ".checkpoints").glob("predictive-*"))
    assert kept == ["map-test.pt", "map-train.pt", "map-valid.pt"]  # predicted before the metrics failed
    computed = []
    real_predictors = runner.predictors

    def counting_predictors(*args, **kwargs):
        return {kind: (lambda X, kind=kind, f=f: computed.append(kind) or f(X))
                for kind, f in real_predictors(*args, **kwargs).items()}

    with monkeypatch.context() as patch:
        patch.setattr(runner, "predictors", counting_predictors)
        resumed = train(compose(overrides), tmp_path / "killed").document["metrics"]
    assert computed == ["glm"] * 3  # train, valid, test: map's three were kept
    for doc in (whole, resumed):
        for by_kind in doc.values():
            for values in by_kind.values():
                values.pop("seconds")
    assert resumed == whole
    assert not (tmp_path / "killed" / ".checkpoints").exists()


def test_every_prediction_type_round_trips_through_the_stored_predictions(tmp_path):
    """``StoredPredictions`` keeps a prediction as its type's name and its fields; each type comes back equal."""
    from bnnpred.app.stored_predictions import TYPES, StoredPredictions
    from bnnpred.prediction import ClassPrediction, CountPrediction, RegPrediction

    gen = torch.Generator().manual_seed(0)
    examples = [ClassPrediction(torch.rand(4, 3, generator=gen), torch.rand(4, generator=gen),
                                torch.rand(4, generator=gen)),
                RegPrediction(torch.randn(5, 4, generator=gen), torch.rand(5, 4, generator=gen)),
                CountPrediction(torch.rand(5, 4, generator=gen), torch.full((5,), -math.log(5)))]
    assert {type(p).__name__ for p in examples} == set(TYPES)
    stored = StoredPredictions(tmp_path, "k" * 16)
    for pred in examples:
        stored.put(type(pred).__name__, "test", pred, 1.5)
        back, seconds = stored.get(type(pred).__name__, "test", torch.device("cpu"))
        assert type(back) is type(pred) and seconds == 1.5
        assert all(torch.equal(a, b) for a, b in zip(back, pred, strict=True))


def test_a_slang_run_resumes_bit_for_bit(tmp_path, monkeypatch):
    """SLANG's low-rank-plus-diagonal state, momentum, trace and generator (its Monte Carlo draws and the
    randomised eigendecomposition's) come back from the checkpoint at an epoch boundary."""
    from bnnpred.inference import slang
    from bnnpred.inference.slang import SLANGConfig, fit_slang

    cfg = SLANGConfig(rank=2, n_samples=2, batch_size=4, iterations=18, log_every=3, lr=0.05)
    whole = fit_slang(problem_in(tmp_path / "whole"), cfg)
    real, calls = slang.slang_step, []

    def counting(*args, **kwargs):
        calls.append(1)
        if len(calls) == 11:
            raise Interrupted
        return real(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(slang, "slang_step", counting)
        with pytest.raises(Interrupted):
            fit_slang(problem_in(tmp_path / "killed"), cfg)
    resumed = fit_slang(problem_in(tmp_path / "killed"), cfg)
    assert torch.equal(resumed.theta, whole.theta)
    assert torch.equal(resumed.posterior.U, whole.posterior.U) and torch.equal(resumed.posterior.d, whole.posterior.d)
    assert resumed.trace == whole.trace


def test_a_valid_checkpoint_of_another_problem_under_this_name_is_never_resumed(tmp_path, monkeypatch, caplog,
                                                                               uninterrupted):
    """Issue 37: a checkpoint names its problem; one of another problem (another prior here), renamed to this
    problem's file, is passed over."""
    interrupted_at(monkeypatch, tmp_path / "other", 20, delta=0.8)
    interrupted_at(monkeypatch, tmp_path, 20)
    others = sorted((tmp_path / "other" / "ckpt").glob("*.pt"))
    ours = sorted((tmp_path / "ckpt").glob("*.pt"))
    for theirs, mine in zip(others, ours, strict=True):  # the same order: newest then .prev
        mine.write_bytes(theirs.read_bytes())
    with caplog.at_level("INFO"):
        resumed = train_map(problem_in(tmp_path), MINIBATCH)
    assert caplog.text.count("is of another problem or stage") == 2 and "resuming" not in caplog.text
    assert torch.equal(resumed.theta, uninterrupted.theta)


def test_a_checksummed_checkpoint_the_safe_loader_refuses_falls_back_to_the_previous_one(tmp_path, monkeypatch,
                                                                                        caplog, uninterrupted):
    """Issue 37: a file whose checksum holds but whose content ``weights_only`` refuses (a pickled object) is a
    corrupt file like any other: the previous checkpoint is resumed, with a warning naming the file."""
    interrupted_at(monkeypatch, tmp_path, 20)
    newest = next(p for p in (tmp_path / "ckpt").glob("*.pt") if ".prev" not in p.name)
    save_checked(newest, {"step": 1, "hook": fractions.Fraction(1, 3)})  # an object weights_only does not load
    with pytest.raises(CorruptFile, match="matches its checksum but does not load"):
        load_checked(newest)
    with caplog.at_level("INFO"):
        resumed = train_map(problem_in(tmp_path), MINIBATCH)
    assert f"checkpoint {newest.name} ignored" in caplog.text and "resuming from" in caplog.text
    assert torch.equal(resumed.theta, uninterrupted.theta)
