"""notes-000 items 6-10 as claims: one NGVI step is the BLR posterior of eq. 4.13, OGGN's precision converges to
δI + GGN(θ*) (at γ = 0.999 read literally its mean leaves the repelling fixed point and its precision follows: the
notes' two criteria that do not hold), GLM
sampling matches its references, and the toy sets are as Fig. 5.1 describes; the comparisons reject a noise
without its S/γ inflation, a precision without the prior, a biased or too narrow regression sampler, a regression
std without σ², unbalanced or noise-free moons and a shifted generating function."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch
from helpers import measured, verdicts

from bnnpred.data import Dataset
from bnnpred.data.toy import TwoMoonsConfig, load_two_moons
from bnnpred.errors import BnnpredError
from bnnpred.reproduce.claims import Claim
from bnnpred.reproduce.identity_checks import notes000_methods as m

pytestmark = pytest.mark.usefixtures("one_thread")

HOLDS, FAILS, NA = "holds", "does not hold", "not applicable"


@pytest.fixture(scope="module")
def claims() -> list[Claim]:
    """Measured with ``BNNPRED_DATA_DIR`` as the environment sets it (no Snelson file: item 9 not applicable)."""
    return measured(m)


def test_the_items_are_notes_000_6_to_10_in_order(claims):
    assert [str(c.item) for c in claims] == ["notes-000 #6", *["notes-000 #7"] * 2, *["notes-000 #8"] * 4,
                                             *["notes-000 #9"] * 5, *["notes-000 #10"] * 5]


def test_every_claim_holds_but_the_oggn_mean_at_gamma_0999_read_literally(claims):
    """With the runner's recipe (conf/inference/oggn.yaml: γ = 1, mean step ρ = 0.02) OGGN stays at the MAP; each
    of its rows carries the notes' γ = 0.999 read literally beside it. At γ = ρ = 0.999 the mean step is an
    undamped Gauss-Newton step, which repels from a MAP where the Hessian exceeds twice the GGN in some direction:
    the measured radius is above 1 and the drift after 20 steps is far above 1e-4 ‖θ*‖, and the precision, read at
    the same end, is off δI + GGN(θ*) by more than 1e-3."""
    snelson = [c for c in claims if c.item.number == 9]
    others = [c for c in claims if c.item.number != 9]
    recipe = others[1:3]
    assert "oggn.yaml" in recipe[0].text and verdicts(recipe) == [HOLDS, HOLDS]
    literal = [c.as_written for c in recipe]
    assert "read literally" in literal[0].text and "spectral radius" in literal[0].text
    assert [w.verdict.value for w in literal] == [FAILS, FAILS] and "β = 0.999" in literal[0].why
    rest = [others[0], *others[3:]]
    assert verdicts(rest) == [HOLDS] * len(rest), [(str(c.item), c.numbers) for c in rest]
    assert set(verdicts(snelson)) in ({HOLDS}, {NA})  # not applicable only without the Snelson file


@pytest.mark.data
def test_the_snelson_claims_hold_with_the_data_and_reject_a_shifted_function(data_root):
    numbers, reason = m.snelson_gap_numbers()
    assert reason == "" and verdicts(m.snelson_claims(numbers)) == [HOLDS] * 5
    # residuals around f − 0.3 instead of f: mean (y − f + 0.3)² ≈ 0.09 + 0.09, above 0.117
    shifted = dict(numbers, residual_var=numbers["residual_var"] + 0.09)
    assert verdicts(m.snelson_claims(shifted))[3] == FAILS


def test_no_data_root_is_not_applicable_with_the_reason(monkeypatch):
    monkeypatch.delenv("BNNPRED_DATA_DIR", raising=False)
    claims = m.snelson_claims(*m.snelson_gap_numbers())
    assert verdicts(claims) == [NA] * 5 and "no data" in claims[0].numbers


@pytest.mark.parametrize("method,inflation", [("OGGN", 1.0), ("VOGGN", 1 / m.STEP_GAMMA)])
def test_a_pseudo_noise_without_its_inflation_fails_item_6(method, inflation):
    """Noise V[Y | f̂] = Λ instead of (S/γ)Λ (OGGN, S = 1), or (1/γ)Λ without the S copies (VOGGN, S = 3)."""
    step = m.ngvi_step("bernoulli", method)
    right = m.step_error(step, m.thm41_blr("bernoulli", method))
    wrong = m.step_error(step, m.thm41_blr("bernoulli", method, inflation=inflation))
    assert m.thm41_claim({method: right}).verdict.value == HOLDS
    assert m.thm41_claim({method: wrong}).verdict.value == FAILS


def test_a_precision_reference_without_the_prior_fails_item_7(claims):
    theta_map = m.laplace_fit("bernoulli")[1].theta
    run = m.oggn_run("bernoulli", 1.0, 0.02)
    precision, final = run[-1].dense_precision(), run[-1].mean
    ggn_only = m.laplace_precision_reference("bernoulli", theta_map) - m.DELTA * torch.eye(len(theta_map))
    drift = {"bernoulli": m.relative_error(final, theta_map)}
    error = {"bernoulli": m.relative_error(precision, ggn_only)}
    assert verdicts(m.fixed_point_claims("γ = 1, ρ = 0.02", drift, error)) == [HOLDS, FAILS]


def test_the_precision_converges_when_read_at_the_runs_end_not_after_5_steps():
    """notes-000 #7's "the precision converges": read after the run's 20 steps. Read literally (γ = ρ = 0.999) the
    precision is δI + GGN(θ*) to ~1e-12 after 5 steps, then follows the mean's drift off θ* (1e-3 to 1e-2 at 20):
    the early reading passes, the end does not; the recipe's (γ = 1, ρ = 0.02) holds at the end."""
    theta_map = m.laplace_fit("gaussian")[1].theta
    reference = m.laplace_precision_reference("gaussian", theta_map)

    def precision_claim(gamma: float, mean_gamma: float, step: int) -> Claim:
        run = m.oggn_run("gaussian", gamma, mean_gamma)
        precision, final = run[step].dense_precision(), run[-1].mean
        return m.fixed_point_claims("γ, ρ", {"gaussian": m.relative_error(final, theta_map)},
                                    {"gaussian": m.relative_error(precision, reference)})[1]

    assert "after the same T = 20 steps" in precision_claim(1.0, 0.02, m.OGGN_STEPS).text
    assert precision_claim(1.0, 0.02, m.OGGN_STEPS).verdict.value == HOLDS
    early = precision_claim(m.LITERAL_GAMMA, m.LITERAL_GAMMA, m.EARLY_STEPS)
    end = precision_claim(m.LITERAL_GAMMA, m.LITERAL_GAMMA, m.OGGN_STEPS)
    assert (early.verdict.value, end.verdict.value) == (HOLDS, FAILS)
    assert 1e-3 < float(end.numbers.split(": ")[-1]) < 1e-1
    assert len(m.oggn_run("gaussian", 1.0, 0.02)) == m.OGGN_STEPS + 1  # the start and each step's posterior


def test_the_literal_precision_row_shows_its_end_and_its_5_step_numbers(claims):
    note = claims[2].as_written.text
    assert "at T: gaussian " in note and "after 5 steps, before the mean's drift grows, not convergence" in note


def test_the_recipe_precision_row_says_it_is_an_identity_at_gamma_1(claims):
    assert "identity after one step" in claims[2].text and "identity" not in claims[2].as_written.text


@pytest.fixture(scope="module")
def glm_inputs() -> tuple[tuple[torch.Tensor, torch.Tensor], m.RegressionMoments]:
    """Item 8's measured inputs: the classification probabilities (MC, reference) and the sampled regression
    moments."""
    probs = (m.glm_monte_carlo("bernoulli").probs[:, 1], m.reference_probs())
    return probs, m.sampled_moments(m.glm_monte_carlo("gaussian"))


def test_a_closed_form_without_the_noise_or_shifted_probabilities_fail_item_8(glm_inputs):
    probs, sampled = glm_inputs
    assert verdicts(m.glm_claims(probs, sampled, m.closed_form())) == [HOLDS] * 4
    assert verdicts(m.glm_claims(probs, sampled, m.closed_form(noise=0.0)))[3] == FAILS
    assert verdicts(m.glm_claims((probs[0] + 0.05, probs[1]), sampled, m.closed_form()))[0] == FAILS


def test_a_sampler_biased_by_a_quarter_of_the_latent_std_fails_item_8(glm_inputs):
    """A sampler whose mean is off by 0.08 predictive std (≈ 0.25-0.3 latent std): with |mean| of 0.7-2.5 from the
    targets' offset this is < 5 % of |mean|, which the old relative-to-|mean| reading let pass."""
    probs, sampled = glm_inputs
    exact = m.closed_form()
    biased = sampled._replace(mean=sampled.mean + 0.08 * exact.std)
    assert float(((biased.mean - exact.mean) / exact.mean).abs().max()) < 0.05
    assert verdicts(m.glm_claims(probs, biased, exact)) == [HOLDS, FAILS, HOLDS, HOLDS]


def test_a_sampler_with_a_latent_spread_too_narrow_by_a_fifth_fails_item_8_on_the_latent_std(glm_inputs):
    """The predictive std is dominated by σ² = 0.09, so a latent spread 20 % too narrow hides in it: only the
    latent claim sees it."""
    probs, sampled = glm_inputs
    exact = m.closed_form()
    latent_std = 0.8 * sampled.latent_std
    narrow = sampled._replace(latent_std=latent_std, std=(latent_std.square() + m.SIGMA2).sqrt())
    assert verdicts(m.glm_claims(probs, narrow, exact))[:3] == [HOLDS, HOLDS, FAILS]


def unbalanced(data: Dataset, flipped: int) -> Dataset:
    """``data`` with the first ``flipped`` training points of class 0 relabelled 1."""
    y = data.y_train.clone()
    y[torch.nonzero(y == 0)[:flipped, 0]] = 1
    return dataclasses.replace(data, y_train=y)


def test_noise_free_or_unbalanced_moons_fail_item_10():
    moons = load_two_moons(TwoMoonsConfig(seed=0))
    numbers = m.two_moons_numbers(load_two_moons(TwoMoonsConfig(seed=0, noise=0.0)))
    assert numbers["nn_error"] == 0.0
    assert verdicts(m.two_moons_claims(numbers)) == [HOLDS, HOLDS, HOLDS, FAILS, HOLDS]
    # 75/75 → 81/69: |n₁ − n₀| = 12 > 10, though n₁ = 81 is inside N/2 ± 10
    assert verdicts(m.two_moons_claims(m.two_moons_numbers(unbalanced(moons, 6))))[2] == FAILS
    assert verdicts(m.two_moons_claims(m.two_moons_numbers(unbalanced(moons, 5))))[2] == HOLDS


def test_an_unknown_toy_problem_kind_is_an_error():
    with pytest.raises(BnnpredError, match="unknown toy problem kind"):
        m.toy_problem("poisson")


def test_the_checks_leave_the_global_random_state_and_dtype_alone():
    state, dtype = torch.random.get_rng_state(), torch.get_default_dtype()
    m.ngvi_step("gaussian", "LGVA")
    assert torch.equal(torch.random.get_rng_state(), state) and torch.get_default_dtype() == dtype


def test_the_mean_must_stay_near_the_map_at_every_step_not_only_the_last(monkeypatch):
    """notes-000 #7's "keeps µ within 1e-4·‖θ*‖ of θ*": a mean that leaves θ* by 1e-2 at step 3 and returns by the
    run's end fails, read over every step; the precision is read at the end."""
    def run(kind: str, gamma: float, mean_gamma: float) -> list[SimpleNamespace]:
        theta_map = m.laplace_fit(kind)[1].theta
        reference = m.laplace_precision_reference(kind, theta_map)
        away = theta_map + 1e-2 * theta_map.norm() / len(theta_map) ** 0.5
        return [SimpleNamespace(mean=away if t == 3 else theta_map, dense_precision=lambda: reference)
                for t in range(m.OGGN_STEPS + 1)]

    monkeypatch.setattr(m, "oggn_run", run)
    found = m.oggn_fixed_point(1.0, 0.02)
    assert found.drift["gaussian"] == pytest.approx(1e-2, rel=1e-12)  # the largest, at step 3
    assert found.errors["gaussian"] == 0.0 and found.early_drift["gaussian"] == pytest.approx(1e-2, rel=1e-12)
    assert verdicts(m.fixed_point_claims("γ, ρ", found.drift, found.errors)) == [FAILS, HOLDS]
