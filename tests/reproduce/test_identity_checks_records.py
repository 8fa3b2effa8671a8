"""The run-record items (notes-000 #21, notes-001 #11, notes-004 #11) as claims: every field holds on runs made by
the runner, and each claim fails, naming the field, when its run's record lacks one; a field that is null, NaN or
empty is not recorded; a run on absent data is not applicable, and any other failure is raised."""

from __future__ import annotations

import copy
import math

import pytest
from helpers import verdicts

from bnnpred.errors import BnnpredError
from bnnpred.reproduce.identity_checks import records
from bnnpred.reproduce.identity_checks.records import Field, RunFiles
from tests.helpers import real_data_root

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def runs(one_thread) -> records.Runs:
    with pytest.MonkeyPatch.context() as patch:  # one of the runs reads a real set
        patch.setenv("BNNPRED_DATA_DIR", str(real_data_root()))
        return records.make_runs()


def test_every_field_is_recorded_by_the_runs(runs):
    claims = records.claims_of(runs)  # records.claims(), on the runs the other tests break
    assert verdicts(claims) == ["holds"] * len(claims), [(str(c.item), c.numbers) for c in claims]
    assert [str(c.item) for c in claims] == ["notes-000 #21"] * 2 + ["notes-001 #11"] * 2 + ["notes-004 #11"] * 2
    assert [c.numbers.split(":")[0] for c in claims] == ["6/6", "9/9", "10/10", "9/9", "21/21", "6/6"]
    assert claims[0].numbers == "6/6: seed, P, δ, Monte Carlo samples (config), σ², final MAP gradient norm"


def without(runs: records.Runs, run: str, file: str, key: str) -> records.Runs:
    """``runs`` with ``key`` (a dotted path) of ``run``'s ``file`` (``metrics`` or ``config``) deleted."""
    broken = copy.deepcopy(runs)
    *parents, last = key.split(".")
    node = getattr(getattr(broken, run), file)
    for part in parents:
        node = node[part]
    del node[last]
    return broken


@pytest.mark.parametrize(("position", "run", "file", "key", "missing"), [
    (0, "laplace", "metrics", "info.grad_norm", "final MAP gradient norm (metrics.json: info.grad_norm)"),
    (1, "voggn", "metrics", "info.converged", "convergence status (metrics.json: info.converged)"),
    (2, "vl", "metrics", "run.training", "time per epoch (metrics.json: run.training.seconds_per_epoch)"),
    (3, "vl_fixed", "config", "inference.fixed_sigma2", "σ² (config.yaml: inference.fixed_sigma2)"),
    (4, "table1", "metrics", "metrics.valid.glm", "glm valid nll (metrics.json: metrics.valid.glm.nll)"),
    (5, "ood", "metrics", "metrics.test.gp.ood_auc", "gp test ood_auc (metrics.json: metrics.test.gp.ood_auc)"),
])
def test_a_record_without_a_field_fails_its_claim_and_names_the_field(runs, position, run, file, key, missing):
    claims = records.claims_of(without(runs, run, file, key))
    assert [c.verdict.value == "holds" for c in claims] == [i != position for i in range(len(claims))]
    assert claims[position].numbers.endswith(f"; missing: {missing}")


def test_the_laplace_fields_on_a_voggn_run_miss_the_noise_and_the_map_gradient(runs):
    """A classification run has no σ², and VOGGN no MAP: the Laplace list is not satisfied by any run."""
    claim = records.notes000_claims(runs.voggn, runs.voggn)[0]
    assert claim.verdict.value == "does not hold"
    assert claim.numbers.endswith("; missing: σ² (metrics.json: run.sigma2), "
                                  "final MAP gradient norm (metrics.json: info.grad_norm)")


FILES = RunFiles(metrics={"run": {"seed": 0, "sigma2": None, "training": {}, "tags": []},
                          "info": {"grad_norm": math.nan, "converged": 0.0}},
                 config={"inference": {"gamma": 0.001, "name": ""}})


@pytest.mark.parametrize(("field", "held"), [
    (Field("seed", "metrics.json", "run.seed"), True),  # 0 is a value
    (Field("convergence status", "metrics.json", "info.converged"), True),  # so is 0.0
    (Field("σ²", "metrics.json", "run.sigma2"), False),  # null
    (Field("gradient norm", "metrics.json", "info.grad_norm"), False),  # NaN
    (Field("training", "metrics.json", "run.training"), False),  # empty
    (Field("tags", "metrics.json", "run.tags"), False),  # empty
    (Field("method", "config.yaml", "inference.name"), False),  # empty
    (Field("P", "metrics.json", "run.n_params"), False),  # absent
    (Field("a key below a number", "metrics.json", "run.seed.x"), False),
    (Field("γ", "config.yaml", "inference.gamma"), True),
    (Field("γ in the other file", "metrics.json", "inference.gamma"), False),
])
def test_a_field_is_recorded_only_with_a_value_in_its_file(field, held):
    assert FILES.holds(field) is held


def test_a_run_on_absent_data_is_not_applicable_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("BNNPRED_DATA_DIR", str(tmp_path))
    run, reason = records.data_run(records.UCI_TABLE1)
    assert run is None and reason.startswith("no data: missing data file")
    table1, ood = records.notes004_claims(None, None, (reason, reason))
    assert verdicts([table1, ood]) == ["not applicable"] * 2 and reason in table1.numbers


def test_any_other_failure_of_a_data_run_is_raised():
    with pytest.raises(BnnpredError, match="inference.structure"):
        records.data_run([*records.UCI_TABLE1, "inference.structure=nonsense"])
