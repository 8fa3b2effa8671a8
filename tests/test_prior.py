"""The prior as one object: groups, fan-in scales, a fixed bias precision, and moving the free groups."""

import math

import pytest
import torch
from torch import nn

from bnnpred.curvature.functional import FlatModel
from bnnpred.errors import BnnpredError
from bnnpred.prior import BIAS_GROUP, Prior, PriorConfig, PriorGroups, PriorScale


def net() -> FlatModel:
    """P = 11: 0.weight [2, 3], 0.bias [2], 2.weight [1, 2], 2.bias [1]."""
    return FlatModel(nn.Sequential(nn.Linear(3, 2), nn.Tanh(), nn.Linear(2, 1)))


def test_fan_in_scales_the_weights_and_a_bias_precision_is_fixed():
    prior = Prior.from_config(net(), PriorConfig(delta=0.5, scale=PriorScale.fan_in, bias_delta=1e-5))
    assert prior.precision().tolist() == pytest.approx([1.5] * 6 + [1e-5] * 2 + [1.0] * 2 + [1e-5])
    assert prior.names == ("all", BIAS_GROUP) and prior.free == (True, False)
    moved = prior.at(2.0)  # the grid moves the free group only
    assert moved.precision().tolist() == pytest.approx([6.0] * 6 + [1e-5] * 2 + [4.0] * 2 + [1e-5])
    assert Prior.from_config(net(), PriorConfig(delta=0.5)).precision().tolist() == [0.5] * 11


@pytest.mark.parametrize(("groups", "names"), [
    (PriorGroups.shared, ("all",)),
    (PriorGroups.layer, ("0", "2")),
    (PriorGroups.tensor, ("0.weight", "0.bias", "2.weight", "2.bias")),
])
def test_groups_give_one_delta_each(groups, names):
    prior = Prior.from_config(net(), PriorConfig(delta=0.5, groups=groups))
    assert prior.names == names
    values = torch.arange(1.0, len(names) + 1, dtype=torch.float64)
    moved = prior.with_free_log_delta(values.log())
    assert moved.deltas() == pytest.approx(dict(zip(names, values.tolist(), strict=True)))
    sizes = {"all": 11, "0": 8, "2": 3, "0.weight": 6, "0.bias": 2, "2.weight": 2, "2.bias": 1}
    expected = torch.cat([torch.full((sizes[n],), float(v)) for n, v in zip(names, values, strict=True)])
    assert moved.precision().tolist() == pytest.approx(expected.tolist())
    assert moved.delta == pytest.approx(math.exp(float(values.log().mean())))  # the geometric mean


def test_a_bare_linear_layer_is_one_layer():
    prior = Prior.from_config(FlatModel(nn.Linear(3, 2)), PriorConfig(groups=PriorGroups.layer))
    assert prior.names == ("(network)",) and prior.group.tolist() == [0] * 8


def test_the_precision_is_differentiable_in_log_delta_and_the_state_round_trips():
    prior = Prior.from_config(net(), PriorConfig(delta=0.5, groups=PriorGroups.layer))
    log_delta = prior.free_log_delta().clone().requires_grad_(True)
    prior.precision_at(log_delta).sum().backward()
    assert log_delta.grad.tolist() == pytest.approx([0.5 * 8, 0.5 * 3])  # ∂/∂log δ_g Σ_p δ_g = δ_g · |g|
    again = Prior.from_state(prior.state())
    assert torch.equal(again.precision(), prior.precision()) and again.names == prior.names


def test_a_non_positive_precision_is_one_error():
    with pytest.raises(BnnpredError, match="prior precisions must be positive"):
        Prior.from_config(net(), PriorConfig(delta=0.0))
    with pytest.raises(BnnpredError, match="must be positive with shape"):
        Prior.from_precision(torch.zeros(3))
