"""The run-record items (notes-000 #21, notes-001 #11, notes-004 #11) as claims: every field holds on runs made by
the runner, and a record without a field, with a null or NaN in it, a selection record with a gap or no rows, or a
run on data that is absent, is caught."""

from __future__ import annotations

import copy
import math

import pandas as pd
import pytest
from helpers import measured, verdicts

from bnnpred.errors import BnnpredError
from bnnpred.reproduce.identity_checks import records
from bnnpred.reproduce.identity_checks.records import Field, RunFiles

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def claims():
    return measured(records)


def test_every_field_is_recorded_by_the_runs(claims):
    assert verdicts(claims) == ["holds"] * len(claims), [(str(c.item), c.numbers) for c in claims]
    assert [str(c.item) for c in claims] == ["notes-000 #21"] * 2 + ["notes-001 #11"] + ["notes-004 #11"] * 3
    assert [c.numbers.split(":")[0] for c in claims] == ["6/6", "9/9", "12/12", "20/20", "3", "4/4"]
    assert claims[0].numbers == "6/6: seed, P, δ, Monte Carlo samples, σ², final MAP gradient norm"


def files() -> RunFiles:
    return RunFiles(metrics={"run": {"seed": 0, "delta": 1.0, "sigma2": None}, "info": {"grad_norm": math.nan}},
                    config={"inference": {"gamma": 0.001}},
                    selection=pd.DataFrame({"delta": [0.1, 1.0], "valid_nll": [0.5, math.nan]}))


@pytest.mark.parametrize(("field", "held"), [
    (Field("seed", "metrics.json", "run.seed"), True),  # 0 is a value
    (Field("δ", "metrics.json", "run.delta"), True),
    (Field("σ²", "metrics.json", "run.sigma2"), False),  # null
    (Field("gradient norm", "metrics.json", "info.grad_norm"), False),  # NaN
    (Field("P", "metrics.json", "run.n_params"), False),  # absent
    (Field("a key below a number", "metrics.json", "run.seed.x"), False),
    (Field("γ", "config.yaml", "inference.gamma"), True),
    (Field("γ in the other file", "metrics.json", "inference.gamma"), False),
    (Field("δ per grid point", "selection.csv", "delta"), True),
    (Field("validation NLL per grid point", "selection.csv", "valid_nll"), False),  # a gap in one row
    (Field("a column that is not there", "selection.csv", "log_marglik"), False),
])
def test_a_field_is_recorded_only_with_a_value_in_its_file(field, held):
    assert files().holds(field) is held


def test_a_selection_record_without_rows_records_no_column():
    empty = RunFiles(metrics={}, config={}, selection=pd.DataFrame({"delta": []}))
    assert not empty.holds(Field("δ per grid point", "selection.csv", "delta"))


def test_a_record_missing_a_field_fails_its_item_and_names_it(claims):
    """The VOGGN run's record without its convergence status, and the Table 1 run's selection record cut to one
    row, fail notes-000 #21 and notes-004 #11."""
    voggn = records.make_run(records.VOGGN)
    assert verdicts(records.notes000_claims(voggn, voggn))[1] == "holds"
    broken = copy.deepcopy(voggn)
    del broken.metrics["info"]["converged"]
    claim = records.notes000_claims(voggn, broken)[1]
    assert claim.verdict.value == "does not hold"
    assert claim.numbers.endswith("; missing: convergence status (metrics.json: info.converged)")
    assert claim.numbers.startswith("8/9: seed, P, δ,")
    # the Laplace fields on the VOGGN run: no σ² (a classification run) and no MAP gradient norm
    assert records.notes000_claims(voggn, voggn)[0].numbers.endswith(
        "; missing: σ² (metrics.json: run.sigma2), final MAP gradient norm (metrics.json: info.grad_norm)")
    cut = RunFiles(voggn.metrics, voggn.config, voggn.selection.iloc[:1])
    assert verdicts(records.notes004_claims(cut, None, ("", "no data: x")))[1:] == ["does not hold", "not applicable"]


def test_a_run_on_absent_data_is_not_applicable_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("BNNPRED_DATA_DIR", str(tmp_path))
    run, reason = records.data_run(records.UCI_TABLE1)
    assert run is None and reason.startswith("no data: missing data file")
    table1, rows, ood = records.notes004_claims(None, None, (reason, reason))
    assert verdicts([table1, rows, ood]) == ["not applicable"] * 3 and reason in table1.numbers


def test_any_other_failure_of_a_data_run_is_raised():
    with pytest.raises(BnnpredError, match="inference.structure"):
        records.data_run([*records.UCI_TABLE1, "inference.structure=nonsense"])
