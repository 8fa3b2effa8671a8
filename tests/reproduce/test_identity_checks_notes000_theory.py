"""notes000_theory's claims (notes-000 checklist items 1-5): all hold on the code at hand, they answer exactly those
items in order, and the comparing functions turn a wrong input (a dropped term, a perturbed matrix, a wrong
architecture, a wrong scale) into a failing claim."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from helpers import measured, verdicts

from bnnpred.curvature.functional import FlatModel
from bnnpred.likelihoods import Gaussian
from bnnpred.models import build_model
from bnnpred.models.mlp import MLPConfig
from bnnpred.reproduce.claims import Claim
from bnnpred.reproduce.identity_checks import notes000_theory as theory

pytestmark = pytest.mark.usefixtures("one_thread")

HOLDS, FAILS = "holds", "does not hold"
ITEMS = ["notes-000 #1a", "notes-000 #1b", "notes-000 #2a", "notes-000 #2b", "notes-000 #3a", "notes-000 #3b",
         "notes-000 #3c", "notes-000 #4a", "notes-000 #4b", "notes-000 #4c", "notes-000 #4c", "notes-000 #5a",
         "notes-000 #5b"]


@pytest.fixture(scope="module")
def claims() -> list[Claim]:
    return measured(theory)


def test_every_claim_holds_and_the_claims_are_items_1_to_5_in_order(claims):
    assert [str(c.item) for c in claims] == ITEMS
    assert [(str(c.item), c.numbers) for c in claims if c.verdict.value != HOLDS] == []


def test_the_numbers_are_the_same_on_every_call_and_leave_the_global_rng_alone():
    def items_1_and_2() -> list[str]:
        measured_claims = theory.derivative_claims(theory.derivative_errors()) + theory.ggn_claims(
            theory.linear_model_curvatures(), theory.mlp_ggns())
        return [c.numbers for c in measured_claims]

    state = torch.get_rng_state()
    first = items_1_and_2()
    assert torch.equal(torch.get_rng_state(), state)
    torch.manual_seed(123)  # another global state: the same numbers
    assert items_1_and_2() == first
    torch.set_rng_state(state)


class ResidualWithoutNoise(Gaussian):
    """A Gaussian whose residual forgets to divide by σ² (Table 2.1: r = (y − f)/σ²)."""

    def residual(self, f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return y.unsqueeze(1) - f


def test_a_residual_without_its_noise_scaling_fails_item_1a_only():
    case = theory.table_2_1()["Gaussian σ²=0.1"]
    broken = {"Gaussian σ²=0.1": dataclasses.replace(case, likelihood=ResidualWithoutNoise(0.1))}
    assert verdicts(theory.derivative_claims(theory.derivative_errors(broken))) == [FAILS, HOLDS]


def test_a_hessian_off_by_1e_8_or_an_indefinite_ggn_fails_item_2():
    pairs = theory.linear_model_curvatures()
    ggns = theory.mlp_ggns()
    perturbed = {name: (ggn, hess * (1 + 1e-8)) for name, (ggn, hess) in pairs.items()}
    negated = {name: -G for name, G in ggns.items()}
    assert verdicts(theory.ggn_claims(pairs, ggns)) == [HOLDS, HOLDS]
    assert verdicts(theory.ggn_claims(perturbed, negated)) == [FAILS, FAILS]


def test_four_hidden_layers_instead_of_five_fails_item_3():
    counts = {**theory.parameter_counts(), "MLP(1→…→1)": 2026}
    assert verdicts(theory.parameter_count_claims(counts)) == [FAILS, HOLDS, HOLDS]


def tiny_blr() -> tuple[theory.PseudoBLR, float]:
    """The dense pseudo-data BLR of a small Bernoulli MLP at its initial θ (no MAP needed to test a comparison)."""
    case = theory.table_2_1()["Bernoulli"]
    gen = torch.Generator().manual_seed(7)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        model = FlatModel(build_model(MLPConfig(depth=1, width=6), (2,), 1).double())
    X = torch.randn(12, 2, generator=gen, dtype=torch.float64)
    y = torch.bernoulli(torch.full((12,), 0.5, dtype=torch.float64), generator=gen).long()
    X_test = torch.randn(4, 2, generator=gen, dtype=torch.float64)
    delta = 0.7
    return theory.pseudo_data_blr(case, model, model.theta(), X, y, delta, X_test), delta


def test_a_posterior_without_its_prior_a_latent_variance_off_by_two_or_a_shifted_reference_evidence_fails_item_4():
    ref, delta = tiny_blr()
    exact = theory.Equivalence(posterior=(ref.mean, ref.precision), latent=(ref.test_variance, ref.test_variance),
                               evidence=(ref.evidence_318, ref.evidence_319), reference=ref, grad_norm=0.0)
    no_prior = dataclasses.replace(exact, posterior=(ref.mean, ref.precision - delta * torch.eye(len(ref.mean))))
    doubled = dataclasses.replace(exact, latent=(ref.test_variance, 2 * ref.test_variance))
    # the dense eq 3.19 evidence off by 1e-3 nats: the reference-consistency claim fails, the library's holds
    inconsistent = dataclasses.replace(exact, reference=dataclasses.replace(ref, evidence_319=ref.evidence_319 + 1e-3))
    assert verdicts(theory.equivalence_claims({"Bernoulli": exact})) == [HOLDS] * 4
    assert verdicts(theory.equivalence_claims({"Bernoulli": no_prior}))[0] == FAILS
    assert verdicts(theory.equivalence_claims({"Bernoulli": doubled}))[1] == FAILS
    assert verdicts(theory.equivalence_claims({"Bernoulli": inconsistent})) == [HOLDS, HOLDS, HOLDS, FAILS]


def test_a_glm_variance_without_the_noise_fails_item_5b():
    mean, variance = torch.tensor([0.1, -0.4, 0.9]), torch.tensor([0.15, 0.2, 0.6])
    exact = theory.GaussianBLR(evidence=-12.0, exact_evidence=-12.0, glm=(mean, variance), blr=(mean, variance),
                               exact=(mean, variance))
    no_noise = dataclasses.replace(exact, glm=(mean, variance - 0.1))
    assert verdicts(theory.gaussian_blr_claims(exact)) == [HOLDS, HOLDS]
    assert verdicts(theory.gaussian_blr_claims(no_noise)) == [HOLDS, FAILS]
