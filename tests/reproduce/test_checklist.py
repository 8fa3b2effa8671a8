"""The checklist index (bnnpred/reproduce/checklist.py): all 86 items of notes-000..004, each answered by a page
or given a reason, verdicts only from the pages' claims.json."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from bnnpred.io import write_json
from bnnpred.reproduce import STUDIES, VERDICTS_END, VERDICTS_START, index, update_readme, verdicts_block
from bnnpred.reproduce.base import Study
from bnnpred.reproduce.checklist import checklist_page, entries
from bnnpred.reproduce.claims import Compare, claim, claims_json, departs, every, item, items

OUTPUTS = Path(__file__).resolve().parents[2] / "outputs"
DECLARED = {(i.notes, i.number) for s in STUDIES.values() for i in s.items}


def test_the_checklist_holds_every_item_of_the_five_notes_once_in_order():
    counts = Counter(e.item.notes for e in entries())
    assert counts == {"notes-000": 21, "notes-001": 11, "notes-002": 26, "notes-003": 17, "notes-004": 11}
    for notes, count in counts.items():
        assert [e.item.number for e in entries() if e.item.notes == notes] == list(range(1, count + 1))
    assert all(e.text for e in entries())


def test_an_item_has_a_page_or_a_reason_never_both():
    on_pages = [e for e in entries() if (e.item.notes, e.item.number) in DECLARED]
    assert not [str(e.item) for e in on_pages if e.reason]
    assert not [str(e.item) for e in entries() if e not in on_pages and not e.reason]
    assert DECLARED <= {(e.item.notes, e.item.number) for e in entries()}


def test_the_committed_index_is_the_generated_one():
    assert (OUTPUTS / "checklist.md").read_text() == checklist_page(OUTPUTS, STUDIES)


def test_the_committed_page_index_and_the_readmes_verdicts_table_are_the_generated_ones():
    """Issue 19: the README's and outputs/README.md's verdict counts come from the pages' claims.json."""
    assert (OUTPUTS / "README.md").read_text() == index(OUTPUTS)
    assert verdicts_block(OUTPUTS) in (OUTPUTS.parent / "README.md").read_text()


def test_the_readme_verdicts_table_counts_each_pages_claims_and_only_it_is_rewritten(tmp_path):
    out = tmp_path / "outputs"
    name = next(iter(STUDIES))
    shown = [claim(item(4, 6, "a"), Compare("glm NLL", "<", "bnn NLL"), (0.2, 0.4)),
             claim(item(4, 6, "b"), Compare("glm NLL", "<", "bnn NLL"), (0.3, 0.4)),
             claim(item(4, 6, "c"), Compare("glm NLL", "<", "bnn NLL"), (0.5, 0.4)),
             claim(item(4, 6, "d"), Compare("glm NLL", "<", "bnn NLL"), (0.6, 0.4)),
             departs(claim(item(4, 6, "e"), Compare("glm NLL", "<", "bnn NLL", margin=0.1), (0.45, 0.4)),
                     claim(item(4, 6, "e"), Compare("glm NLL", "<", "bnn NLL"), (0.45, 0.4)), "a CPU tolerance")]
    write_json(out / name / "claims.json", {"study": name, "tier": "quick", "claims": claims_json(shown)})
    (out / name / "README.md").write_text("# page\n")
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n\n{VERDICTS_START}\nstale\n{VERDICTS_END}\n\nrest\n")
    update_readme(out)
    failing = "\n".join(f"- [{name}](outputs/{name}/README.md), notes-004 #6{part}: glm NLL < bnn NLL ({v} vs 0.4)"
                        for part, v in (("c", 0.5), ("d", 0.6)))
    failing += (f"\n- [{name}](outputs/{name}/README.md), notes-004 #6e: glm NLL < bnn NLL (as the notes write it; "
                "the page's glm NLL < bnn NLL + 0.1 holds: a CPU tolerance) (0.45 vs 0.4)")
    assert readme.read_text() == (f"intro\n\n{VERDICTS_START}\n| page | verdicts |\n|---|---|\n"
                                  f"| [{name}](outputs/{name}/README.md) | 3 hold (1 of them not as the notes "
                                  "write it), 2 do not hold (tier quick) |\n\n"
                                  "Every claim that does not hold (the pages say what was tried and why):\n\n"
                                  f"{failing}\n{VERDICTS_END}\n\nrest\n")  # each failure listed, none that holds
    (out / name / "claims.json").unlink()
    update_readme(out)
    assert "| not recorded as data (the page predates claims.json) |" in readme.read_text()
    readme.write_text("a user's own README\n")  # no markers: never touched
    update_readme(out)
    assert readme.read_text() == "a user's own README\n"


def fake(name: str, *numbers: int) -> Study:
    return Study(name=name, title=name, make=lambda r: "", cpu_cost="none", items=items(4, *numbers))


def test_verdicts_come_from_claims_json_and_their_absence_is_said(tmp_path):
    studies = {"built": fake("built", 6), "old": fake("old", 6, 7), "unbuilt": fake("unbuilt", 7)}
    shown = [claim(item(4, 6, "a"), Compare("glm NLL", "<", "bnn NLL"), (0.2, 0.4)),
             claim(item(4, 6, "b"), Compare("glm NLL", "≤", "MFVI NLL"), (0.5, 0.4)),
             claim(item(4, 6, "c"), Compare("glm refine NLL", "≤", "glm NLL"), (0.1, 0.2)),
             every(item(4, 6, "e"), Compare("bnn NLL", "≥", "others"), {}, over="set")]
    write_json(tmp_path / "built" / "claims.json", {"study": "built", "tier": "cpu", "claims": claims_json(shown)})
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "README.md").write_text("# an old page\n")
    page = checklist_page(tmp_path, studies)
    assert "| 6 | Table 1 (UCI classification)" in page
    six = next(line for line in page.splitlines() if line.startswith("| 6 | Table 1 (UCI"))
    assert "[built](built/README.md), [old](old/README.md)" in six
    assert "built: 2 hold, 1 does not hold, 1 not applicable" in six
    assert "old: verdict not yet recorded as data (page predates claims.json)" in six
    seven = next(line for line in page.splitlines() if line.startswith("| 7 | Fig. 5"))
    assert "unbuilt: page not built yet (`bnnpred reproduce unbuilt`)" in seven
    nine = next(line for line in page.splitlines() if line.startswith("| 9 | Fig. 6"))
    assert "not reproduced here | GPU only and data unavailable" in nine
    one = next(line for line in page.splitlines() if line.startswith("| 1 | linearisation"))  # no study here
    assert "not reproduced here | no page answers it (no reason in checklist.yaml)" in one
    assert "86 items: 2 on a page (1 with verdicts recorded as data), 84 on none." in page
    assert [line for line in page.splitlines() if line.startswith("## ")] == [
        "## notes-000", "## notes-001", "## notes-002", "## notes-003", "## notes-004"]


def test_an_item_a_built_page_does_not_answer_yet_has_no_verdict_and_is_not_counted_as_one(tmp_path):
    """A study that declares an item its committed page predates (notes004_table2's notes-003 rows, issue 17):
    the row names the page but gives no verdict, and the count of items with verdicts leaves it out."""
    studies = {"grown": fake("grown", 6, 7)}
    shown = [claim(item(4, 6, "a"), Compare("glm NLL", "<", "bnn NLL"), (0.2, 0.4))]
    write_json(tmp_path / "grown" / "claims.json", {"study": "grown", "tier": "cpu", "claims": claims_json(shown)})
    page = checklist_page(tmp_path, studies)
    seven = next(line for line in page.splitlines() if line.startswith("| 7 | Fig. 5"))
    assert "[grown](grown/README.md)" in seven
    assert "grown: no verdict yet (the page was built before its study answered this item; rerun it)" in seven
    assert "86 items: 2 on a page (1 with verdicts recorded as data), 84 on none." in page
