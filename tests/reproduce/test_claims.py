"""The claim type (bnnpred/reproduce/claims.py): criteria written once, verdicts, no pass on an empty set, and the
one rendering pages use."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bnnpred.errors import BnnpredError
from bnnpred.reproduce import base
from bnnpred.reproduce.checklist import tally, verdicts
from bnnpred.reproduce.claims import (
    Between,
    Compare,
    Ordered,
    Trend,
    Verdict,
    added,
    all_of,
    any_of,
    at_least,
    claim,
    claims_json,
    claims_table,
    departs,
    every,
    guarded,
    item,
    standardised,
)

ITEM = item(4, 6, "a")


def test_an_item_names_its_notes_number_and_part():
    assert str(item(4, 10)) == "notes-004 #10"
    assert str(ITEM) == "notes-004 #6a"


def test_a_comparison_renders_its_text_from_the_fields_it_tests():
    criterion = Compare("test MSE at δ*", "≤", "the minimum", factor=1.05, margin=-0.5)
    assert criterion.text == "test MSE at δ* ≤ 1.05 × the minimum − 0.5"
    assert claim(ITEM, criterion, (1.0, 1.4)).verdict is Verdict.fails  # 1.0 > 1.05 · 1.4 − 0.5 = 0.97
    assert claim(ITEM, criterion, (0.97, 1.4)).verdict is Verdict.holds
    assert claim(ITEM, criterion, (1.0, 1.4)).numbers == "1 vs 1.4"


def test_a_comparison_holds_exactly_when_its_inequality_does():
    below = Compare("glm NLL", "<", "bnn NLL")
    assert claim(ITEM, below, (0.2, 0.3)).verdict is Verdict.holds
    assert claim(ITEM, below, (0.3, 0.3)).verdict is Verdict.fails
    threshold = Compare("ECE", "≤", 0.03)
    assert threshold.text == "ECE ≤ 0.03"
    assert [claim(ITEM, threshold, v).verdict for v in (0.03, 0.0301)] == [Verdict.holds, Verdict.fails]
    assert claim(ITEM, threshold, 0.0301, note="soft").text == "ECE ≤ 0.03 (soft)"
    assert Compare("train ℓℓ", ">", -0.05).text == "train ℓℓ > −0.05"


def test_an_unknown_operator_is_a_one_line_error():
    with pytest.raises(BnnpredError, match="unknown operator '=<'"):
        Compare("a", "=<", "b")


def test_a_missing_number_is_not_applicable_never_a_verdict():
    result = claim(ITEM, Compare("glm NLL", "<", "bnn NLL"), (math.nan, 0.3))
    assert result.verdict is Verdict.not_applicable
    assert result.numbers == "no number vs 0.3"
    alone = claim(ITEM, Between("δ", 0.02, 2), math.nan)
    assert (alone.verdict, alone.numbers) == (Verdict.not_applicable, "no number")
    assert claim(ITEM, Trend("KL", "strictly falls", "L"), []).numbers == "no number"


@pytest.mark.parametrize("quantifier", [
    lambda c, v: every(ITEM, c, v, over="set"),
    lambda c, v: at_least(ITEM, c, v, (6, 8), over="set"),  # at_least's noun is plural; here as every's
])
def test_an_empty_set_never_passes(quantifier):
    result = quantifier(Compare("glm NLL", "<", "bnn NLL"), {})
    assert result.verdict is Verdict.not_applicable
    assert result.numbers == "no set to check"


def test_every_needs_every_value_and_names_them():
    criterion = Compare("glm NLL", "<", "bnn NLL")
    held = every(ITEM, criterion, {"glass": (0.8, 1.4), "digits": (0.2, 0.9)}, over="set")
    assert (held.verdict, held.text) == (Verdict.holds, "glm NLL < bnn NLL on every set")
    assert held.numbers == "2/2: glass: 0.8 vs 1.4, digits: 0.2 vs 0.9"
    failed = every(ITEM, criterion, {"glass": (0.8, 1.4), "digits": (0.95, 0.9)}, over="set")
    assert (failed.verdict, failed.numbers[:4]) == (Verdict.fails, "1/2:")
    missing = every(ITEM, criterion, {"glass": (0.8, 1.4), "digits": (math.nan, 0.9)}, over="set")
    assert (missing.verdict, missing.numbers) == (Verdict.not_applicable, "no number for 1: digits")


def test_every_over_many_values_lists_only_the_failures():
    values = {f"set{i}": (float(i), 5.0) for i in range(10)}
    result = every(ITEM, Compare("x", "<", "y"), values, over="set")
    assert result.verdict is Verdict.fails
    assert result.numbers == "5/10: not: set5: 5 vs 5, set6: 6 vs 5, set7: 7 vs 5, set8: 8 vs 5, set9: 9 vs 5"


@pytest.mark.parametrize("passing, total, verdict", [(6, 8, Verdict.holds), (5, 8, Verdict.fails),
                                                     (3, 4, Verdict.holds), (2, 4, Verdict.fails)])
def test_at_least_scales_its_share_to_the_values_there_are(passing, total, verdict):
    values = {f"s{i}": (0.0 if i < passing else 1.0, 0.5) for i in range(total)}
    result = at_least(ITEM, Compare("glm NLL", "≤", "MFVI NLL"), values, (6, 8), over="sets")
    assert result.text == "glm NLL ≤ MFVI NLL on ≥ 6/8 of the sets"
    assert result.verdict is verdict
    assert result.numbers.startswith(f"{passing}/{total}:")


def test_at_least_counts_a_value_without_a_number_as_not_passing():
    """6 of 8 with two sets missing needs 6 passes among the 6 with numbers, not 4.5 of 6 rescaled."""
    values = {f"s{i}": (0.0 if i < 5 else 1.0, 0.5) for i in range(6)} | {"s6": (math.nan, 0.5), "s7": (math.nan, 0.5)}
    result = at_least(ITEM, Compare("glm NLL", "≤", "MFVI NLL"), values, (6, 8), over="sets")
    assert result.verdict is Verdict.fails and result.numbers.startswith("5/8 (2 without a number):")
    values["s5"] = (0.0, 0.5)
    assert at_least(ITEM, Compare("glm NLL", "≤", "MFVI NLL"), values, (6, 8), over="sets").verdict is Verdict.holds


def test_a_trend_counts_its_exceptions():
    falls = Trend("KL", "strictly falls", "L = 1, 2, 5, 10")
    assert falls.text == "KL strictly falls over L = 1, 2, 5, 10"
    assert claim(ITEM, falls, [4.0, 3.0, 2.0, 1.0]).verdict is Verdict.holds
    assert claim(ITEM, falls, [4.0, 3.0, 3.0, 1.0]).verdict is Verdict.fails
    loose = Trend("train MSE", "does not fall", "δ", allowed=2)
    result = claim(ITEM, loose, [1.0, 0.9, 1.2, 1.1, 1.3])
    assert (result.verdict, result.numbers) == (Verdict.holds, "1 ≤ 0.9 ≤ 1.2 ≤ 1.1 ≤ 1.3 (2 exceptions)")
    assert claim(ITEM, loose, [1.0, 0.9, 0.8, 0.7]).verdict is Verdict.fails
    assert claim(ITEM, falls, [1.0]).verdict is Verdict.not_applicable  # one value shows no trend


def test_a_trend_with_a_net_move_does_not_pass_a_flat_sequence():
    """A sequence the variable had no effect on "does not fall" on its ties; with ``net`` the trend must also move its
    way by more than ``net`` from the first value to the last."""
    rises = Trend("train MSE", "does not fall", "δ", allowed=2, net=0.01)
    assert rises.text == "train MSE does not fall over δ (≤ 2 exceptions), rising by > 0.01 from first to last"
    result = claim(ITEM, rises, [0.30, 0.29, 0.31, 0.35])
    assert (result.verdict, result.numbers) == (Verdict.holds,
                                                "0.3 ≤ 0.29 ≤ 0.31 ≤ 0.35 (1 exceptions; first to last +0.05)")
    assert claim(ITEM, rises, [0.3] * 5).verdict is Verdict.fails  # constant: no exception, no rise
    assert claim(ITEM, rises, [0.3, 0.301, 0.302, 0.305]).verdict is Verdict.fails  # within the noise
    assert claim(ITEM, rises, [0.3, 0.2, 0.1, 0.0, 0.5]).verdict is Verdict.fails  # rises, with 3 exceptions
    assert claim(ITEM, Trend("train MSE", "does not fall", "δ"), [0.3] * 5).verdict is Verdict.holds  # no net: ties
    falls = Trend("KL", "does not rise", "L", net=0.5)
    assert falls.text == "KL does not rise over L, falling by > 0.5 from first to last"
    assert claim(ITEM, falls, [2.0, 1.0, 1.0]).verdict is Verdict.holds
    assert claim(ITEM, falls, [2.0, 2.0, 1.8]).verdict is Verdict.fails
    assert claim(ITEM, falls, [2.0, 1.0]).numbers == "2 ≥ 1 (first to last -1)"
    assert claim(ITEM, falls, []).verdict is Verdict.not_applicable


def test_an_added_claim_is_marked_in_its_record_and_left_out_of_its_items_verdicts():
    """A criterion a page adds beside the notes' own for an item is shown, recorded with ``added``, and not counted
    toward the item's verdict in the checklist index (outputs/checklist.md); the page's own tally still counts it."""
    notes = [claim(item(4, 10), Compare("glm NLL", "≤", "MAP NLL"), (0.2, 0.3)),
             claim(item(4, 10), Compare("glm accuracy", "≥", "MAP accuracy"), (90.0, 91.0))]
    extra = added(claim(item(4, 10), Compare("dampened bnn accuracy", "≥", "MAP accuracy"), (91.5, 91.0)), "§7")
    assert extra.text == "dampened bnn accuracy ≥ MAP accuracy (added: §7)" and extra.verdict is Verdict.holds
    assert extra.to_json()["added"] is True and "added" not in notes[0].to_json()
    records = claims_json([*notes, extra])
    assert verdicts(records, item(4, 10)) == ("1 holds, 1 does not hold (not counted: added beside the notes' "
                                              "criteria, 1 holds)")
    assert verdicts(records[:2], item(4, 10)) == "1 holds, 1 does not hold"
    assert verdicts(records[2:], item(4, 10)) == ("none of the notes' criteria (not counted: added beside the notes' "
                                                  "criteria, 1 holds)")
    assert tally(records) == "2 hold, 1 does not hold"  # a page's own count is of every claim it shows
    with pytest.raises(BnnpredError, match="added beside the notes"):
        all_of(notes[0], extra)


def test_an_ordering_counts_every_pair_out_of_order_not_only_neighbours():
    rises = Ordered("VI final ELBO", "multipliers 1, 3, 10, 30", allowed=1)
    assert rises.text == "VI final ELBO does not fall over multipliers 1, 3, 10, 30 (≤ 1 inversion: pairs out of order)"
    swapped = claim(ITEM, rises, [-0.64, -0.55, -0.56, -0.5])  # one pair of neighbours swapped
    assert (swapped.verdict, swapped.numbers) == (Verdict.holds, "-0.64 ≤ -0.55 ≤ -0.56 ≤ -0.5 (1 inversion)")
    # a collapse at the end is one exception of a Trend but three inversions: below every earlier value
    collapsed = [-0.64, -0.6, -0.56, -6.3]
    assert claim(ITEM, Trend("VI final ELBO", "does not fall", "multipliers", allowed=1), collapsed).verdict \
        is Verdict.holds
    assert claim(ITEM, rises, collapsed).numbers == "-0.64 ≤ -0.6 ≤ -0.56 ≤ -6.3 (3 inversions)"
    assert claim(ITEM, rises, collapsed).verdict is Verdict.fails
    assert claim(ITEM, rises, [-0.64, math.nan, -0.5]).verdict is Verdict.not_applicable  # a run without an ELBO
    assert claim(ITEM, rises, [-0.64]).verdict is Verdict.not_applicable


def test_conjunction_and_disjunction():
    yes = claim(ITEM, Compare("a", "<", 1), 0.5)
    no = claim(ITEM, Compare("b", "<", 1), 2.0)
    unknown = claim(ITEM, Compare("c", "<", 1), math.nan)
    assert all_of(yes, yes).verdict is Verdict.holds
    assert all_of(yes, unknown).verdict is Verdict.not_applicable
    assert all_of(unknown, no).verdict is Verdict.fails
    assert all_of(yes, no).text == "a < 1 and b < 1"
    assert all_of(yes, no).numbers == "0.5; 2"
    assert any_of(no, yes).verdict is Verdict.holds
    assert any_of(no, unknown).verdict is Verdict.fails
    assert any_of(unknown, unknown).verdict is Verdict.not_applicable
    assert any_of(yes, all_of(yes, no)).text == "a < 1 or (a < 1 and b < 1)"
    with pytest.raises(BnnpredError, match="several checklist items"):
        all_of(yes, claim(item(4, 7), Compare("a", "<", 1), 0.5))


def test_a_departure_shows_the_notes_own_verdict_beside_the_coded_one():
    coded = claim(item(4, 4), Compare("true P(w < 0)", "<", 0.01), 0.004)
    written = claim(item(4, 4), Compare("true P(w < 0)", "≤", 0.001), 0.004)
    c = departs(coded, written, "a grid of 801 points resolves no less")
    assert (c.verdict, c.as_written.verdict) == (Verdict.holds, Verdict.fails)
    assert c.to_json()["as_written"] == {"text": "true P(w < 0) ≤ 0.001", "verdict": "does not hold",
                                         "why": "a grid of 801 points resolves no less"}
    assert "departs from the notes' true P(w < 0) ≤ 0.001, which does not hold (a grid" in claims_table([c])
    assert "as_written" not in coded.to_json()  # a claim as written: its record unchanged
    with pytest.raises(BnnpredError, match="answers notes-004 #4, the notes' criterion notes-004 #5"):
        departs(coded, claim(item(4, 5), Compare("x", "<", 1), 0.0), "why")
    with pytest.raises(BnnpredError, match="join the parts first"):
        all_of(c, coded)


def test_a_guarded_criterion_carries_the_notes_criterion_alone_beside_the_join():
    """A mechanism the notes leave implicit, joined to their criterion: the page's verdict is the join's, and the
    notes' criterion alone is shown beside it, so that a degenerate method (here a glm that is MAP's copy, tying it)
    reads "does not hold" as coded and "holds" as the notes write it."""
    ties = claim(ITEM, Compare("glm NLL", "≤", "MAP NLL"), (0.33, 0.33))
    still = claim(ITEM, Compare("|glm NLL − MAP NLL|", ">", 1e-3), 0.0)
    c = guarded(ties, still, "a glm that never moved ties MAP")
    assert (c.verdict, c.as_written.verdict) == (Verdict.fails, Verdict.holds)
    assert c.text == "glm NLL ≤ MAP NLL and |glm NLL − MAP NLL| > 0.001" and c.numbers == "0.33 vs 0.33; 0"
    assert (c.as_written.text, c.as_written.why) == ("glm NLL ≤ MAP NLL", "a glm that never moved ties MAP")
    moved = guarded(ties, claim(ITEM, Compare("|glm NLL − MAP NLL|", ">", 1e-3), 0.01), "why")
    assert (moved.verdict, moved.as_written.verdict) == (Verdict.holds, Verdict.holds)
    # a criterion without a number: no number as written either, and the join not a pass
    unknown = guarded(claim(ITEM, Compare("glm NLL", "≤", "MAP NLL"), (math.nan, 0.33)), still, "why")
    assert (unknown.verdict, unknown.as_written.verdict) == (Verdict.fails, Verdict.not_applicable)
    with pytest.raises(BnnpredError, match="join the parts first"):  # a part that departs already
        guarded(c, still, "why")
    with pytest.raises(BnnpredError, match="several checklist items"):
        guarded(ties, claim(item(4, 7), Compare("x", "<", 1), 0.0), "why")


def test_standardised_difference():
    assert standardised(0.3, 0.1) == pytest.approx(3.0)
    assert standardised(0.3, 0.0) == math.inf
    assert standardised(0.0, 0.0) == 0.0
    assert math.isnan(standardised(0.3, math.nan))  # one seed: no standard error


def test_pages_render_claims_in_one_table_with_pipes_escaped():
    claims = [claim(item(2, 12), Compare("|ΔELBO|", "≤", 0.004), 0.0026),
              every(ITEM, Compare("glm NLL", "<", "bnn NLL"), {}, over="set")]
    assert claims_table(claims) == "\n".join([
        "| checklist item | claim (pass criterion) | result | numbers |", "|---|---|---|---|",
        r"| notes-002 #12 | \|ΔELBO\| ≤ 0.004 | holds | 0.0026 |",
        "| notes-004 #6a | glm NLL < bnn NLL on every set | not applicable | no set to check |"])
    assert claims_json(claims)[0] == {"notes": "notes-002", "number": 12, "part": "", "text": "|ΔELBO| ≤ 0.004",
                                      "verdict": "holds", "numbers": "0.0026"}


def test_a_study_records_the_claims_its_page_shows_in_claims_json(tmp_path, monkeypatch):
    import bnnpred.reproduce as reproduce_package

    shown = [claim(item(4, 4), Compare("glm |Δ|", "<", "bnn's"), (0.01, 0.04))]

    def make(r: base.Reproduction) -> str:
        return f"# fake\n\n{r.table(shown)}\n"

    fake = base.Study(name="fake", title="a fake study", make=make, cpu_cost="none", items=(item(4, 4),))
    monkeypatch.setattr(reproduce_package, "STUDIES", {"fake": fake})
    reproduce_package.reproduce([], base.Tier.quick, tmp_path / "runs", tmp_path / "out", 1, report_only=True)
    recorded = json.loads((tmp_path / "out" / "fake" / "claims.json").read_text())
    assert recorded["claims"] == claims_json(shown)
    assert "| notes-004 #4 | glm \\|Δ\\| < bnn's | holds | 0.01 vs 0.04 |" in Path(
        tmp_path / "out" / "fake" / "README.md").read_text()
    index = (tmp_path / "out" / "checklist.md").read_text()
    assert "| 4 | Fig. 3 (step toy)" in index and "fake (tier quick): 1 holds" in index


@pytest.mark.parametrize("tier, expected", [(base.Tier.quick, 1), (base.Tier.cpu, 3), (base.Tier.full, 20)])
def test_a_study_picks_its_settings_by_tier_in_one_way(tier, expected, tmp_path):
    r = base.Reproduction(runs=tmp_path, out=tmp_path, tier=tier, jobs=1)
    assert r.pick(quick=1, cpu=3, full=20) == expected
    assert r.pick(quick=1, cpu=3) == (1 if tier is base.Tier.quick else 3)  # full takes the CPU tier's by default
