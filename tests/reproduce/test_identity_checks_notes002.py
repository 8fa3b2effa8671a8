"""notes-002 (SLANG) items 1-7 as claims: every verdict holds on the library's code, and the comparisons reject a
perturbed solve, a mean-field sampler factor, a mis-scaled eigen-factor, a low-rank run passed off as VOGN, rows in
the wrong order and the N/M scaling."""

from __future__ import annotations

import pytest
import torch
from helpers import measured, verdicts

from bnnpred.reproduce.claims import Claim
from bnnpred.reproduce.identity_checks import notes002
from bnnpred.reproduce.identity_checks.notes002 import EigCase, GradientCase, ScalingCase


@pytest.fixture(scope="module")
def claims() -> list[Claim]:
    return measured(notes002)


def test_every_claim_holds_and_the_items_are_notes_002_1_to_7(claims):
    assert verdicts(claims) == ["holds"] * len(claims), [(str(c.item), c.numbers) for c in claims]
    parts = ["1", "2a", "2b", "2c", "3a", "3b", "4", "5a", "5b", "6a", "6b", "7"]
    assert [str(c.item) for c in claims] == [f"notes-002 #{part}" for part in parts]


def test_a_solve_off_by_1e_8_relative_fails_item_1():
    y, reference = notes002.woodbury_solve()
    assert notes002.fast_inverse_claim(y * (1 + 1e-8), reference).verdict.value == "does not hold"


def test_the_mean_field_factor_fails_item_2_unless_u_is_zero():
    """T = diag(d)^{-1/2} ignores U: a factor of the covariance only for U ≡ 0."""
    factors = {name: (torch.diag(post.d.rsqrt()), post.U @ post.U.T + torch.diag(post.d))
               for name, post in notes002.sampler_posteriors(20).items()}
    post = notes002.sampler_posteriors(20)["random U"]
    literal = (notes002.literal_algorithm3_factor(post), post.U @ post.U.T + torch.diag(post.d))
    claim = notes002.fast_sample_claims(factors, {}, literal)[0]
    assert claim.verdict.value == "does not hold"
    assert claim.numbers.startswith("1/3")  # only U ≡ 0 passes


def test_the_librarys_sampler_passed_off_as_the_literal_algorithm_3_fails_item_2c():
    """Item 2c holds when the printed algorithm fails: the library's correct factor in its place does not hold."""
    post = notes002.sampler_posteriors(20)["random U"]
    precision = post.U @ post.U.T + torch.diag(post.d)
    literal = (notes002.literal_algorithm3_factor(post), precision)
    assert notes002.fast_sample_claims({}, {}, literal)[2].verdict.value == "holds"
    correct = (notes002.sampler_factor(post), precision)
    assert notes002.fast_sample_claims({}, {}, correct)[2].verdict.value == "does not hold"


def test_eigenvalues_off_by_0_1_percent_fail_item_3a_but_not_3b():
    gen = torch.Generator().manual_seed(0)
    Q, _ = torch.linalg.qr(torch.randn(50, 4, generator=gen, dtype=torch.float64))
    values = torch.tensor([8.0, 4.0, 2.0, 1.0], dtype=torch.float64)
    U = Q * (values * 1.001).sqrt()
    a, b = notes002.fast_eig_claims(EigCase(U, values, Q))
    assert (a.verdict.value, b.verdict.value) == ("does not hold", "holds")
    assert notes002.fast_eig_claims(EigCase(Q * values.sqrt(), values, Q))[0].verdict.value == "holds"


def test_a_rank_3_run_is_not_vogn_but_keeps_its_diagonal():
    """Item 5 fails on the L = 3 run (its off-diagonals are low rank); item 4 fails once one diagonal entry of one
    step is off by 1e-9 relative."""
    seq = notes002.ef_sequence()
    low_rank, vogn = notes002.slang_run(seq, rank=3), notes002.vogn_run(seq)
    assert verdicts(notes002.full_rank_claims(low_rank, vogn)) == ["does not hold", "does not hold"]
    nudged = low_rank.precisions.clone()
    nudged[10, 4, 4] *= 1 + 1e-9
    assert notes002.diagonal_claim(notes002.Trajectory(nudged, low_rank.means), vogn).verdict.value == "does not hold"


def test_rows_out_of_draw_order_fail_item_6a_and_sums_off_by_1e_9_fail_6b():
    case = notes002.gradient_case()
    swapped = case.rows.roll(16, dims=0)  # draw 3's rows first: example-aligned but at the wrong θ_s
    a, b = notes002.per_example_claims(GradientCase(swapped, *case[1:]))
    assert (a.verdict.value, b.verdict.value) == ("does not hold", "holds")
    a, b = notes002.per_example_claims(case._replace(sums=case.sums * (1 + 1e-9), rows=case.rows * (1 + 1e-9)))
    assert (a.verdict.value, b.verdict.value) == ("does not hold", "does not hold")


def test_the_n_over_m_convention_fails_item_7():
    case = notes002.scaling_case()
    N, M, S = 40, 8, 3
    assert case.scale == N / (M * S)
    wrong = ScalingCase(case.precision, case.outer, N / M, case.prior)
    assert notes002.scaling_claim(wrong).verdict.value == "does not hold"
