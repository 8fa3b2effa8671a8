"""notes-004 items 1-3 measured (bnnpred.reproduce.identity_checks.notes004): every claim holds, the claims cover
exactly those items, and the comparisons fail on broken inputs."""

import pytest
import torch
from helpers import measured, measurement

from bnnpred.predictive import gp_condition, gp_latent
from bnnpred.reproduce.claims import Verdict
from bnnpred.reproduce.identity_checks import notes004
from bnnpred.reproduce.identity_checks.shared import ggn_and_hessian, reference_jacobians, table_2_1

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def claims():
    return measured(notes004)


def test_the_checks_leave_the_global_random_state_alone():
    """They seed generators of their own: a page measured after other work gives the same numbers."""
    assert not measurement(notes004).moved_random_state


def test_every_claim_holds(claims):
    failed = [f"{c.item} {c.text}: {c.verdict.value} ({c.numbers})" for c in claims if c.verdict is not Verdict.holds]
    assert not failed, "\n".join(failed)


def test_the_claims_cover_items_1_to_3_in_order(claims):
    expected = ["1a", "1b", "1c", "1c", "1d", "2a", "2b", "2c", "2d", "2e", "2e", "2f", "3a", "3b"]
    assert [str(c.item) for c in claims] == [f"notes-004 #{part}" for part in expected]


def test_a_second_call_gives_the_same_numbers_whatever_the_default_dtype(claims):
    """The fixture measured under torch's default float32, this test runs under float64 (tests/conftest.py)."""
    assert torch.get_default_dtype() is torch.float64
    assert [c.numbers for c in notes004.claims()] == [c.numbers for c in claims]


def test_a_wrong_jacobian_or_a_network_with_a_hidden_layer_does_not_hold():
    """f_lin off by 1e-9 of its scale, finite differences over 2ε read as over ε, glm draws off by 0.1 %, a glm
    latent covariance without the prior (Σ = GGN⁺ would be wrong; here 1.001 Σ), and the GGN of a network with hidden
    layers (which is not its Hessian)."""
    deep = notes004.tiny("softmax", depth=2, n=12, seed=0)
    f_lin, reference = notes004.linearisation_at_shifted_theta(deep)
    J, differences = notes004.jacobians_and_differences(deep)
    linear = notes004.tiny("softmax", depth=0, n=12, seed=1)
    glm, bnn = notes004.glm_and_bnn_samples(linear)
    (mean, cov), dense = notes004.glm_latent_and_dense(linear)
    p = deep.problem
    minus_ggn, hessian = ggn_and_hessian(p.model, table_2_1()[notes004.KINDS["softmax"]], deep.theta, p.X, p.y)
    good = notes004.linearisation_claims((f_lin, reference), (J, differences), {"softmax": (glm, bnn)},
                                         {"softmax": ((mean, cov), dense)}, {"softmax": (minus_ggn, minus_ggn)})
    assert [c.verdict for c in good] == [Verdict.holds] * 5
    shifted = f_lin + 1e-9 * reference.abs().max()
    claims = notes004.linearisation_claims((shifted, reference), (J, 2 * differences), {"softmax": (glm * 1.001, bnn)},
                                           {"softmax": ((mean, cov * 1.001), dense)},
                                           {"2x5 tanh": (minus_ggn, hessian)})
    assert [c.verdict for c in claims] == [Verdict.fails] * 5


def test_the_closed_form_jacobian_of_a_model_without_hidden_layer_is_autograds():
    t = notes004.tiny("softmax", depth=0, n=12, seed=1)
    _, J = reference_jacobians(t.problem.model, t.theta, t.X_test)
    assert torch.allclose(notes004.linear_model_jacobians(t, t.X_test), J, rtol=0, atol=1e-15)


def test_a_ggn_without_the_softmax_cross_term_or_a_wrong_prior_treatment_does_not_hold():
    """Λ = diag(p) instead of diag(p) − ppᵀ; exact-prior samples against the dampened covariance and the reverse."""
    t = notes004.tiny("softmax", depth=2, n=12, seed=2)
    full, diag, _ = notes004.ggn_paths(t)
    f, J = reference_jacobians(t.problem.model, t.theta, t.problem.X)
    no_cross = torch.einsum("ncp,nc,ncq->pq", J, torch.softmax(f, dim=1), J)
    two = notes004.tiny("softmax", depth=1, n=2, seed=3)  # Kronecker factors of two examples are not the GGN's
    exact = notes004.reference_ggn(two)
    blocks = {f"θ[{b.start}:{b.stop}]": (torch.kron(b.B, b.A), exact[b.start : b.stop, b.start : b.stop])
              for b in notes004.kron_blocks(two) if b.dense is None}
    k = notes004.tiny("softmax", depth=1, n=30, seed=4)
    posteriors = notes004.kron_posteriors(k)
    dense = {name: notes004.dense_kron_covariance(post.blocks, notes004.DELTA, post.dampen)
             for name, post in posteriors.items()}
    exact_samples = notes004.sample_covariance(posteriors["exact"], seed=0)
    swapped = {"exact": (exact_samples, dense["dampened"]),
               "dampened": (notes004.sample_covariance(posteriors["dampened"], seed=1), dense["exact"])}
    exact_var, damped_var = notes004.weight_variances(posteriors)
    assert float(((exact_var - damped_var) / damped_var).min()) > 1e-3  # so the swap below fails by far
    # the library's marginal variances are the dense covariances' diagonals
    weights = torch.cat([torch.arange(b.start, b.stop) for b in posteriors["exact"].blocks if b.dense is None])
    for name, variance in zip(("exact", "dampened"), (exact_var, damped_var), strict=True):
        torch.testing.assert_close(variance, dense[name].diagonal()[weights], rtol=1e-12, atol=0)
    variances = (damped_var, exact_var)
    claims = notes004.curvature_claims({"softmax": (full, diag * 1.01, no_cross)}, blocks, swapped,
                                       (dense["exact"], dense["dampened"]), variances)
    assert [c.verdict for c in claims] == [Verdict.fails] * 7


def test_a_gp_on_another_prior_or_apart_predictives_do_not_hold():
    t = notes004.tiny("logistic", depth=1, n=20, seed=5)
    ctx = t.context(notes004.laplace(t))
    _, weight = notes004.gp_and_weight_space(t)
    _, scaled = gp_latent(ctx, t.X_test, gp_condition(ctx, torch.arange(20), prior_scale=1.01))
    difference, se = notes004.gp_and_glm_probabilities(t)
    claims = notes004.function_space_claims((scaled[:, 0, 0], weight), (difference + 0.01, se))
    assert [c.verdict for c in claims] == [Verdict.fails] * 2
