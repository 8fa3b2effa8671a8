"""notes-003 items 1-4 measured (bnnpred.reproduce.identity_checks.notes003): every claim holds, the claims cover
exactly those items, and the comparisons fail on broken inputs."""

import pytest
import torch
from helpers import afresh

from bnnpred.predictive import gp_condition, gp_latent
from bnnpred.reproduce.claims import Verdict
from bnnpred.reproduce.identity_checks import notes003

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def measured():
    return afresh(notes003)


def test_every_claim_holds(measured):
    failed = [f"{c.item} {c.text}: {c.verdict.value} ({c.numbers})" for c in measured if c.verdict is not Verdict.holds]
    assert not failed, "\n".join(failed)


def test_the_claims_cover_items_1_to_4_in_order(measured):
    assert [str(c.item) for c in measured] == ["notes-003 #1"] * 2 + ["notes-003 #2"] * 3 + ["notes-003 #3"] + [
        "notes-003 #4"] * 2


def test_a_second_call_gives_the_same_numbers_whatever_the_default_dtype(measured):
    """The fixture measured under torch's default float32, this test runs under float64 (tests/conftest.py)."""
    assert torch.get_default_dtype() is torch.float64
    assert torch.equal(notes003.two_moons.__wrapped__().theta, notes003.two_moons().theta)  # the MAP afresh
    assert [c.numbers for c in notes003.item2()] == [c.numbers for c in measured[2:5]]


def test_a_perturbed_ggn_or_a_dropped_residual_term_does_not_hold():
    good = notes003.ggn_and_hessians(notes003.two_moons())
    perturbed = {**good, "ggn": good["ggn"] * (1 + 1e-6)}
    dropped = {**good, "residual": torch.zeros_like(good["residual"])}
    assert [c.verdict for c in notes003.ggn_claims({"two moons": good})] == [Verdict.holds] * 2
    assert notes003.ggn_claims({"two moons": perturbed})[0].verdict is Verdict.fails
    assert notes003.ggn_claims({"two moons": dropped})[1].verdict is Verdict.fails


def test_a_gp_on_a_wrong_prior_or_a_moved_blr_mean_does_not_hold():
    """The GP form with the prior variance doubled (a kernel 2 J Jᵀ / δ) and a BLR mean off by 1e-3 of ‖w*‖."""
    trained = notes003.two_moons()
    ctx = notes003.laplace_context(trained)
    weight, _ = notes003.glm_and_gp_variances(trained)
    _, doubled = gp_latent(ctx, trained.X_test, gp_condition(ctx, torch.arange(len(ctx.X_train)), prior_scale=0.5))
    w = trained.theta
    moved = w + 1e-3 * w.norm() / len(w) ** 0.5
    claims = notes003.equivalence_claims({"two moons": (weight, doubled[:, 0, 0])}, {"two moons": (moved, w)},
                                         {"two moons": trained.grad_norm})
    assert [c.verdict for c in claims] == [Verdict.fails] * 3


def test_an_evidence_off_by_a_millinat_a_voggn_step_without_the_prior_or_a_falling_elbo_does_not_hold():
    assert notes003.evidence_claims(-24.9, -24.901, 30)[0].verdict is Verdict.fails
    step, laplace = notes003.voggn_step_precision(notes003.two_moons())
    without_prior = step - notes003.DELTA * torch.eye(len(step), dtype=step.dtype)
    claims = notes003.voggn_claims(without_prior, laplace, [(10, -2.0), (20, -2.1), (30, -2.2), (40, -2.3)])
    assert [c.verdict for c in claims] == [Verdict.fails] * 2


def test_the_elbo_slope_is_taken_over_the_last_half_of_the_iterations():
    trace = [(10, 5.0), (20, 4.0), (30, 1.0), (40, 2.0)]  # falls, then rises over iterations 30 and 40
    assert notes003.slope_over_last_half(trace) == pytest.approx(0.1)
