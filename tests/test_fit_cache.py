"""The shared store of point estimates: a hit returns the same MAP and generator state without training again."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from bnnpred.inference import Session
from bnnpred.inference import map as map_module
from bnnpred.inference.map import MapConfig, train_map
from tests.helpers import tiny_problem

MINIBATCH = MapConfig(steps=30, batch_size=4, lr=1e-2)


def cached_problem(tmp_path, delta: float = 0.7):
    problem, _ = tiny_problem("bernoulli", delta=delta)
    return dataclasses.replace(problem, session=Session(fit_cache=tmp_path / "cache"))


def monitored(problem, monitor):
    return dataclasses.replace(problem, session=dataclasses.replace(problem.session, monitor=monitor))


def refuse_training(problem, cfg):
    raise AssertionError("trained although the cache holds this MAP")


def test_hit_returns_the_same_map_and_generator_state(tmp_path, monkeypatch):
    first = cached_problem(tmp_path)
    fit = train_map(first, MINIBATCH)
    assert list((tmp_path / "cache" / "map").glob("*.pt"))
    monkeypatch.setattr(map_module, "_adam", refuse_training)
    second = cached_problem(tmp_path)
    assert not torch.equal(second.generator.get_state(), first.generator.get_state())  # minibatches drew numbers
    hit = train_map(second, MINIBATCH)
    assert torch.equal(hit.theta, fit.theta)
    assert hit.trace == fit.trace and hit.info == fit.info
    assert hit.timing == {**fit.timing, "from_fit_cache": 1.0} and fit.timing["seconds"] > 0  # never null
    assert torch.equal(second.generator.get_state(), first.generator.get_state())


@pytest.mark.parametrize("change", ["delta", "steps"])
def test_other_prior_or_settings_miss(tmp_path, monkeypatch, change):
    train_map(cached_problem(tmp_path), MINIBATCH)
    monkeypatch.setattr(map_module, "_adam", refuse_training)
    problem = cached_problem(tmp_path, delta=0.8 if change == "delta" else 0.7)
    cfg = dataclasses.replace(MINIBATCH, steps=31) if change == "steps" else MINIBATCH
    with pytest.raises(AssertionError, match="trained although"):
        train_map(problem, cfg)


def test_a_run_monitoring_other_splits_does_not_take_anothers_trace(tmp_path, monkeypatch):
    """A stored MAP's trace holds the monitored splits' metrics: a run whose monitor sees other validation rows
    misses (and trains), one with the same monitor hits and gets the same trace."""
    def monitor_of(rows: torch.Tensor):
        return lambda theta: {"valid_probe": float((rows @ theta[: rows.shape[1]]).sum())}

    valid = torch.randn(5, 2, generator=torch.Generator().manual_seed(3))
    first = monitored(cached_problem(tmp_path), monitor_of(valid))
    fit = train_map(first, MINIBATCH)
    assert "valid_probe" in fit.trace[-1]
    monkeypatch.setattr(map_module, "_adam", refuse_training)
    same = monitored(cached_problem(tmp_path), monitor_of(valid.clone()))
    assert train_map(same, MINIBATCH).trace == fit.trace
    other = monitored(cached_problem(tmp_path), monitor_of(valid[:4]))
    with pytest.raises(AssertionError, match="trained although"):
        train_map(other, MINIBATCH)


def test_a_valid_entry_of_another_problem_under_this_name_is_moved_aside_and_computed_again(tmp_path, caplog):
    """Issue 37: an entry names its problem and stage; another problem's (another prior), copied under this
    problem's name, is refused and this problem's MAP trained."""
    own = train_map(cached_problem(tmp_path / "own"), MINIBATCH)
    train_map(cached_problem(tmp_path, delta=0.8), MINIBATCH)
    (theirs,) = (tmp_path / "cache" / "map").glob("*.pt")
    (mine,) = (tmp_path / "own" / "cache" / "map").glob("*.pt")
    theirs.rename(theirs.parent / mine.name)
    with caplog.at_level("WARNING"):
        again = train_map(cached_problem(tmp_path), MINIBATCH)
    assert "holds the entry of another problem or stage" in caplog.text
    assert (theirs.parent / mine.name).with_suffix(".corrupt").is_file()
    assert torch.equal(again.theta, own.theta)
