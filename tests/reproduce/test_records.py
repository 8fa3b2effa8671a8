"""Run records (issue 38): a study built from records writes each finished run's small files beside its page, rebuilds
the page from them alone on a fresh clone, and a campaign continued elsewhere trains only the runs they lack. A
record that fails its checksum, misses a field or was made by other code is refused or retrained, never read as
this code's result; the records of a CPU and of a GPU are kept apart."""

import csv
import dataclasses
import gzip
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch

import bnnpred.reproduce as reproduce_module
from bnnpred import cli
from bnnpred.app.records import export_record, export_records, same_fit, same_run, seed_from_record, verify_record
from bnnpred.app.report.tables import collect, find_runs
from bnnpred.app.run_evaluation import predictors
from bnnpred.app.run_files import MANIFEST, PACKED, RECORD, locked, staged, stored, write_manifest
from bnnpred.app.run_record import EVAL_FILES, RECORDED, TRACE
from bnnpred.app.saved_runs import restore
from bnnpred.errors import BnnpredError, MissingDataError
from bnnpred.io import read_json, sha256_file, write_json
from bnnpred.reproduce import base, budget, reproduce
from bnnpred.reproduce.base import Reproduction, Study, Tier, document, read_trace
from bnnpred.reproduce.derived import compact, digest, kept, plain, tensors
from tests.helpers import TINY, bnnpred, found_data_root

RUN = [*TINY, "plot.enabled=false", "threads=1"]


def map_at_two_points(run: Path) -> dict[str, object]:
    """Numbers only the run's saved weights give: the map predictive's class-1 probability at two inputs."""
    s, ctx = restore(run)
    return {"p": predictors(s, ctx)["map"](s.data.X_test[:2]).probs[:, 1]}


def make(r: Reproduction) -> str:
    """A page from a sweep of two runs, a single run and a re-evaluation of it, every number through records, and
    numbers from the single run's weights kept beside the page (:meth:`Reproduction.derived`)."""
    sweep = r.sweep(r.runs / "tiny" / "sweep", "delta${prior.delta}", *RUN, "predictive.kinds=[map,glm]",
                    "prior.delta=1,3")
    single = r.train_once(r.runs / "tiny" / "single", *RUN, "predictive.kinds=[map]")
    evaluation = r.evaluate(single, "predictive.kinds=[nn]", "predictive.n_samples=5")
    test = collect([sweep]).query("split == 'test'")
    rows = [f"| {d:g} | {k} | {nll!r} |" for d, k, nll in zip(test["delta"], test["predictive"], test["nll"],
                                                                strict=True)]
    return "\n".join(["# tiny", "", r.provenance("bnnpred reproduce tiny"), "", *rows,
                      f"single map {document(single)['metrics']['test']['map']['nll']!r}",
                      f"its nn {document(evaluation, EVAL_FILES)['metrics']['test']['nn']['nll']!r}",
                      f"map at two points {r.derived(single, 'map', map_at_two_points)['p']!r}"])


STUDY = Study(name="tiny", title="a tiny study built from records", make=make, cpu_cost="seconds", items=(),
              from_records=True)


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(reproduce_module, "STUDIES", {"tiny": STUDY})


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The tiny study made once (three runs trained) in a folder of its own; each test works on a copy."""
    home = tmp_path_factory.mktemp("records")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(home)
        patch.setattr(reproduce_module, "STUDIES", {"tiny": STUDY})
        build(home, "runs")
    assert len(trained(home / "runs")) == 3
    return home


def build(tmp_path: Path, runs: str, report_only: bool = False, device: str | None = None,
          hours: float | None = None) -> str:
    reproduce(["tiny"], Tier.cpu, tmp_path / runs, tmp_path / "outputs", jobs=1, report_only=report_only,
              device=device, hours=hours)
    return (tmp_path / "outputs" / "tiny" / "README.md").read_text()


def trained(runs: Path) -> list[Path]:
    """The runs trained here: a record seeded into a run folder has no posterior.pt."""
    return sorted(p.parent for p in runs.rglob("posterior.pt"))


@pytest.fixture
def made(tmp_path, tiny, built) -> str:
    for folder in ("runs", "outputs"):
        shutil.copytree(built / folder, tmp_path / folder, symlinks=True)
    return (tmp_path / "outputs" / "tiny" / "README.md").read_text()


def records(tmp_path: Path) -> Path:
    return tmp_path / "outputs" / "tiny" / "runs" / "cpu" / "tiny"


def derived(tmp_path: Path) -> Path:
    return tmp_path / "outputs" / "tiny" / "derived" / "cpu" / "tiny" / "single" / "map.json"


def test_a_page_is_rebuilt_from_its_records_alone_to_the_byte(tmp_path, made):
    claims = (tmp_path / "outputs" / "tiny" / "claims.json").read_text()
    assert json.loads(claims)["device"] == "cpu"
    kept = sorted(p.relative_to(records(tmp_path)).as_posix() for p in records(tmp_path).rglob("*") if p.is_file())
    assert "sweep/delta1.0/metrics.json" in kept and "single/evals" in "".join(kept)
    assert not [p for p in kept if p.endswith((".pt", ".npz", ".png"))]  # never weights, predictions or figures
    assert "map at two points [0." in made and derived(tmp_path).is_file()
    with open(records(tmp_path) / "sweep" / "index.csv", newline="") as f:  # run folders named relative to the sweep
        assert sorted(row["run_dir"] for row in csv.DictReader(f)) == ["delta1.0", "delta3.0"]
    shutil.rmtree(tmp_path / "runs")  # a fresh clone: the committed records only
    assert build(tmp_path, "elsewhere", report_only=True) == made
    assert (tmp_path / "outputs" / "tiny" / "claims.json").read_text() == claims
    assert not (tmp_path / "elsewhere").exists()


def test_a_campaign_continued_on_another_machine_trains_nothing_its_records_hold(tmp_path, made):
    shutil.rmtree(tmp_path / "runs")
    assert build(tmp_path, "elsewhere") == made
    assert trained(tmp_path / "elsewhere") == []
    assert (tmp_path / "elsewhere" / "tiny" / "sweep" / "delta1.0" / RECORD).is_file()


def test_a_study_whose_runs_are_finished_starts_no_process_and_one_whose_run_is_broken_retrains_it(
        tmp_path, made, monkeypatch):
    """Each run, sweep and re-evaluation the runner would skip (its key found, its files verified) is not started
    at all; a run whose weights fail their checksum is, and trains again, giving the same page."""
    started = []
    launch = base._bnnpred
    monkeypatch.setattr(base, "_bnnpred", lambda *args, **kw: (started.append(args[:2]), launch(*args, **kw)))
    assert build(tmp_path, "runs") == made and started == []
    weights = tmp_path / "runs" / "tiny" / "sweep" / "delta3.0" / "posterior.pt"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    before = weights.stat().st_mtime_ns
    assert build(tmp_path, "runs") == made
    assert started == [("train", "-m")] and weights.stat().st_mtime_ns != before


def rekey(record: Path) -> None:
    """Give a record the run key of other code (or config), its manifest re-checksummed to match."""
    document_ = json.loads((record / "metrics.json").read_text())
    document_["run"]["key"] = "0123456789ab"
    write_json(record / "metrics.json", document_)
    manifest = json.loads((record / "manifest.json").read_text())
    manifest["files"]["metrics.json"] = sha256_file(record / "metrics.json")
    write_json(record / "manifest.json", manifest)


def test_a_record_of_other_code_is_trained_again_and_replaced(tmp_path, made):
    record = records(tmp_path) / "sweep" / "delta3.0"
    rekey(record)
    shutil.rmtree(tmp_path / "runs")
    assert build(tmp_path, "elsewhere") == made  # the same numbers from the same code and config
    assert trained(tmp_path / "elsewhere") == [tmp_path / "elsewhere" / "tiny" / "sweep" / "delta3.0"]
    assert not (tmp_path / "elsewhere" / "tiny" / "sweep" / "delta3.0" / RECORD).exists()  # a whole run now
    assert json.loads((record / "metrics.json").read_text())["run"]["key"] != "0123456789ab"


@pytest.mark.parametrize("report_only", [True, False])
def test_a_record_with_a_flipped_byte_is_refused_naming_it(tmp_path, made, report_only):
    metrics = records(tmp_path) / "sweep" / "delta1.0" / "metrics.json"
    data = bytearray(metrics.read_bytes())
    data[10] ^= 1
    metrics.write_bytes(bytes(data))
    shutil.rmtree(tmp_path / "runs")
    with pytest.raises(BnnpredError, match=r"the record .*sweep/delta1\.0 is corrupt \(its record's metrics\.json does "
                                           r"not match its checksum\); restore it with git checkout"):
        build(tmp_path, "elsewhere", report_only=report_only)
    assert trained(tmp_path / "elsewhere") == []


def test_a_record_missing_a_field_is_refused(tmp_path, made):
    record = records(tmp_path) / "single"
    document_ = json.loads((record / "metrics.json").read_text())
    del document_["metrics"]
    write_json(record / "metrics.json", document_)
    manifest = json.loads((record / "manifest.json").read_text())
    manifest["files"]["metrics.json"] = sha256_file(record / "metrics.json")
    write_json(record / "manifest.json", manifest)
    with pytest.raises(BnnpredError, match=r"single is corrupt \(config.yaml or metrics.json does not hold a run\)"):
        build(tmp_path, "elsewhere", report_only=True)


def test_runs_only_another_device_made_are_read_from_its_records_and_never_trained_here(tmp_path, made):
    """A CPU campaign continued on a GPU (or the reverse) reads what the CPU made and trains only what neither made:
    here nothing, and this machine has no CUDA, so a run trained for device=cuda would fail the build."""
    shutil.rmtree(tmp_path / "runs")
    page = build(tmp_path, "elsewhere", device="cuda")
    assert trained(tmp_path / "elsewhere") == [] and not (tmp_path / "outputs" / "tiny" / "runs" / "cuda").exists()
    assert page.replace("device cuda", "device cpu") == made  # the numbers, and the folder it names: runs/cpu/
    assert json.loads((tmp_path / "outputs" / "tiny" / "claims.json").read_text())["device"] == "cuda"


def test_runs_another_device_made_at_other_code_or_config_are_trained_here(tmp_path, made, capsys):
    record = records(tmp_path) / "sweep" / "delta3.0"
    rekey(record)
    shutil.rmtree(tmp_path / "runs")
    with pytest.raises(BnnpredError, match="no finished runs in .*runs/cuda/tiny/sweep"):  # no CUDA on this machine
        build(tmp_path, "elsewhere", device="cuda")
    assert "lack 1 of its 2 runs at this code and config: trained on cuda" in capsys.readouterr().out


def test_a_page_names_every_device_whose_records_it_read_and_prefers_its_own(tmp_path, made):
    cpu, cuda = (tmp_path / "outputs" / "tiny" / "runs" / device for device in ("cpu", "cuda"))
    shutil.copytree(cpu / "tiny" / "sweep", cuda / "tiny" / "sweep")  # the sweep made on both devices
    good = (cuda / "tiny" / "sweep" / "delta1.0" / "metrics.json").read_bytes()
    (cuda / "tiny" / "sweep" / "delta1.0" / "metrics.json").write_text("{}")  # so reading cuda's fails loudly
    with pytest.raises(BnnpredError, match=r"runs/cuda/tiny/sweep/delta1\.0 is corrupt"):
        build(tmp_path, "elsewhere", report_only=True, device="cuda")
    (cuda / "tiny" / "sweep" / "delta1.0" / "metrics.json").write_bytes(good)
    (cpu / "tiny" / "sweep" / "delta3.0" / "metrics.json").write_text("{}")  # and reading cpu's sweep would fail
    page = build(tmp_path, "elsewhere", report_only=True, device="cuda")
    assert "from the records of its runs, `runs/cpu/` and `runs/cuda/` beside this page" in page  # cpu's single
    assert page.count("| glm |") == 2 and "Not read" not in page  # the sweep read from cuda's records alone


def test_a_rebuild_shows_another_devices_whole_sweep_while_its_own_campaign_is_under_way(tmp_path, made):
    """A campaign on one device that makes a sweep another device made whole commits its records as its runs end:
    until they are whole the page shows the other device's sweep and names the campaign's, never a table of fewer
    δ; with no whole sweep anywhere the campaign's is read as far as it goes (here: refused, as it is broken)."""
    cpu, cuda = (tmp_path / "outputs" / "tiny" / "runs" / device for device in ("cpu", "cuda"))
    shutil.copytree(cpu / "tiny" / "sweep" / "delta1.0", cuda / "tiny" / "sweep" / "delta1.0")  # 1 of its 2 runs
    (cuda / "tiny" / "sweep" / "delta1.0" / "metrics.json").write_text("{}")  # reading it would fail loudly
    page = build(tmp_path, "elsewhere", report_only=True, device="cuda")
    assert page.replace("device cuda", "device cpu").split("## Runs")[0] == made.split("## Runs")[0]
    assert "`runs/cpu/` beside this page" in page and page.count("| glm |") == 2
    passed_over = ("Not read: the records of sweeps that are not whole yet (campaigns under way), each shown from "
                   "another device's whole sweep until they are: `cuda/tiny/sweep` (1 of its 2 runs).")
    assert passed_over in page
    assert passed_over in build(tmp_path, "elsewhere", report_only=True)  # named on the other device's page too
    shutil.rmtree(cpu / "tiny" / "sweep")  # no whole sweep elsewhere: its own is read, short as it is
    with pytest.raises(BnnpredError, match=r"runs/cuda/tiny/sweep/delta1\.0 is corrupt"):
        build(tmp_path, "elsewhere", report_only=True, device="cuda")


def test_a_record_cannot_be_restored_or_re_evaluated(tmp_path, made):
    record = records(tmp_path) / "single"
    with pytest.raises(BnnpredError, match="holds the run's record only: its posterior.pt stayed on the machine"):
        restore(record)
    out = bnnpred("eval", f"run_dir={record}", "predictive.n_samples=7", cwd=tmp_path)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "train it again here with the same config and force=true" in out.stderr


def test_a_record_keeps_the_trace_only_where_the_page_reads_it_and_says_what_it_left(tmp_path, made):
    run_dir, record = tmp_path / "runs" / "tiny" / "single", records(tmp_path) / "single"
    assert (run_dir / TRACE).is_file() and not (record / TRACE).exists()  # the tiny page reads no trace
    assert TRACE in json.loads((record / RECORD).read_text())["absent"]
    export_record(run_dir, record, RECORDED)  # a study whose page reads traces: gzipped, the run's bytes inside
    packed = record / f"{TRACE}{PACKED}"
    assert gzip.decompress(packed.read_bytes()) == (run_dir / TRACE).read_bytes() and not (record / TRACE).exists()
    assert packed.stat().st_size < (run_dir / TRACE).stat().st_size and stored(record, TRACE) == packed
    assert read_trace(record).equals(pd.read_csv(run_dir / TRACE)) and verify_record(record).record
    assert packed.read_bytes()[3:8] == bytes(5)  # no file name, no time: the same run packs to the same bytes
    export_record(record, tmp_path / "again", RECORDED)  # exported again (a campaign's next stop): kept as it is
    assert (tmp_path / "again" / packed.name).read_bytes() == packed.read_bytes()
    export_record(record, record)  # a record exported again with less to keep is trimmed, and still reads
    assert not packed.exists() and not (record / TRACE).exists() and verify_record(record).record
    with pytest.raises(BnnpredError, match=r"single holds no training trace \(trace\.csv\); a record keeps it only"):
        read_trace(record)
    with pytest.raises(ValueError, match="a record keeps"):
        export_record(run_dir, record, ("config.yaml", "metrics.json"))
    marker = json.loads((record / RECORD).read_text())
    write_json(record / RECORD, {"absent": [*marker["absent"], "selection.csv"]})  # a record that dropped rows
    with pytest.raises(BnnpredError, match=r"record .*single is corrupt \(its record.json is unreadable\)"):
        verify_record(record)


@pytest.mark.parametrize("offset", [-3, 30])  # the gzip trailer's checksum, or the compressed data
def test_a_gzipped_trace_with_a_flipped_byte_is_refused_naming_it(tmp_path, made, offset):
    record = records(tmp_path) / "single"
    export_record(tmp_path / "runs" / "tiny" / "single", record, RECORDED)
    packed = record / f"{TRACE}{PACKED}"
    data = bytearray(packed.read_bytes())
    data[offset] ^= 1
    packed.write_bytes(bytes(data))
    with pytest.raises(BnnpredError, match=r"record .*single is corrupt \(its record's trace\.csv does not match its "
                                           r"checksum"):
        verify_record(record)


def test_a_run_trained_again_over_its_seeded_record_keeps_no_packed_trace(tmp_path, made):
    """A record seeded into a run folder, then the run trained there again (another machine, force=true): the new
    result's trace is the one read, and the record's gzipped copy is gone with the rest of the record."""
    run_dir, record = tmp_path / "elsewhere" / "single", records(tmp_path) / "single"
    export_record(tmp_path / "runs" / "tiny" / "single", record, RECORDED)
    assert seed_from_record(record, run_dir) and stored(run_dir, TRACE).name == f"{TRACE}{PACKED}"
    with locked(run_dir), staged(run_dir) as stage:
        for name in ("config.yaml", "metrics.json", "posterior.pt"):
            shutil.copyfile(tmp_path / "runs" / "tiny" / "single" / name, stage / name)
        (stage / TRACE).write_text("step,elbo\n1,-2.0\n")
    assert sorted(p.name for p in run_dir.iterdir() if not p.name.startswith(".")) == [
        "config.yaml", MANIFEST, "metrics.json", "posterior.pt", TRACE]
    assert read_trace(run_dir)["elbo"].tolist() == [-2.0]


def test_a_record_seeded_over_a_broken_runs_trace_reads_its_own(tmp_path, made):
    """A folder whose run broke before it was finished keeps that run's trace.csv; the seeded record's gzipped
    trace replaces it, so the folder reads as the record, not as a checksum mismatch."""
    run_dir, record = tmp_path / "elsewhere" / "single", records(tmp_path) / "single"
    export_record(tmp_path / "runs" / "tiny" / "single", record, RECORDED)
    run_dir.mkdir(parents=True)
    (run_dir / TRACE).write_text("step,elbo\n1,-9.0\n")  # no manifest: not a finished run
    assert seed_from_record(record, run_dir) and not (run_dir / TRACE).exists()
    assert read_trace(run_dir).equals(read_trace(record)) and verify_record(run_dir).record


def test_only_a_trace_may_stand_gzipped_for_its_file(tmp_path, made):
    """A record's metrics.json replaced by a gzip of itself is a missing file, not a record that reads: the readers
    of every other file open it by its own name."""
    record = records(tmp_path) / "single"
    metrics = record / "metrics.json"
    metrics.with_name(f"metrics.json{PACKED}").write_bytes(gzip.compress(metrics.read_bytes()))
    metrics.unlink()
    with pytest.raises(BnnpredError, match=r"single is corrupt \(its record's metrics\.json is missing\)"):
        verify_record(record)


def test_a_budget_starts_only_what_the_earlier_runs_say_ends_in_time(tmp_path, made, capsys):
    """``--hours``: on a fresh machine with one sweep record gone, the sweep's other run says how long the missing
    one takes; a budget shorter than that trains nothing and leaves the page as it was, a longer one trains just
    that run."""
    shutil.rmtree(tmp_path / "runs")
    shutil.rmtree(records(tmp_path) / "sweep" / "delta3.0")
    page = tmp_path / "outputs" / "tiny" / "README.md"
    page.write_text("the page as it was")
    seconds = json.loads((records(tmp_path) / "sweep" / "delta1.0" / "metrics.json").read_text())["run"]["seconds"]
    made_ = reproduce(["tiny"], Tier.cpu, tmp_path / "elsewhere", tmp_path / "outputs", jobs=1, report_only=False,
                      hours=seconds / 3600 / 2)
    out = capsys.readouterr().out
    assert "tiny: stopped before " in out, out
    assert re.search(r"sweep: 1 run to make, about \d+ (s|min) with 1 worker \(its longest earlier run took", out)
    assert made_.stopped == ["tiny"] and made_.pages == []
    assert trained(tmp_path / "elsewhere") == [] and page.read_text() == "the page as it was"
    assert build(tmp_path, "elsewhere", hours=1.0) == made
    assert trained(tmp_path / "elsewhere") == [tmp_path / "elsewhere" / "tiny" / "sweep" / "delta3.0"]


def test_a_budget_starts_nothing_that_no_earlier_run_can_time_and_nothing_when_all_is_held(tmp_path, made, capsys):
    shutil.rmtree(tmp_path / "runs")
    assert build(tmp_path, "elsewhere", hours=1e-9) == made  # every run held by its record: nothing to start
    shutil.rmtree(tmp_path / "elsewhere")
    shutil.rmtree(next((records(tmp_path) / "single" / "evals").iterdir()))  # the single run's re-evaluation
    build(tmp_path, "elsewhere", hours=1.0)
    assert "(predictive.kinds=[nn] predictive.n_samples=5): 1 re-evaluation to make, and no earlier " \
           "re-evaluation of it says how long one takes" in capsys.readouterr().out
    shutil.rmtree(tmp_path / "elsewhere")
    shutil.rmtree(records(tmp_path) / "sweep")
    build(tmp_path, "elsewhere", hours=1.0)
    assert "sweep: 2 runs to make, and no earlier run of it says how long one takes; start it once without " \
           "--hours" in capsys.readouterr().out
    assert trained(tmp_path / "elsewhere") == []


def test_a_re_evaluation_is_timed_by_its_predictives_not_by_its_runs_training(made, tmp_path):
    evaluation = next((records(tmp_path) / "single" / "evals").iterdir())
    document_ = json.loads((evaluation / "metrics.json").read_text())
    predictives = sum(m["seconds"] for split in document_["metrics"].values() for m in split.values())
    assert budget.longest_evaluation([evaluation]) == pytest.approx(predictives) and predictives > 0
    assert document_["run"]["seconds"] == budget.longest_seconds([records(tmp_path) / "single"])  # the run's


def later(r: Reproduction) -> str:
    """A campaign's page whose second sweep may not be made yet (``missing_ok``)."""
    r.sweep(r.runs / "tiny" / "sweep", "delta${prior.delta}", *RUN, "predictive.kinds=[map,glm]", "prior.delta=1,3")
    second = r.sweep(r.runs / "tiny" / "later", "delta${prior.delta}", *RUN, "prior.delta=5", missing_ok=True)
    return "# later\n\n" + ("later: not yet run" if second is None else "later: made")


def test_a_budget_leaves_a_campaigns_sweep_it_cannot_time_for_the_page_to_list(tmp_path, made, monkeypatch,
                                                                                 capsys):
    monkeypatch.setattr(reproduce_module, "STUDIES", {"tiny": dataclasses.replace(STUDY, make=later)})
    shutil.rmtree(tmp_path / "runs")
    made_ = reproduce(["tiny"], Tier.cpu, tmp_path / "elsewhere", tmp_path / "outputs", jobs=1, report_only=False,
                      hours=1.0)
    assert made_.stopped == [] and "later: not yet run" in made_.pages[0].read_text()
    assert "+ not started, the page lists what it lacks: " in capsys.readouterr().out
    assert trained(tmp_path / "elsewhere") == []


def test_the_command_stopped_by_its_budget_exits_with_status_3(monkeypatch, capsys):
    monkeypatch.setattr(reproduce_module, "reproduce", lambda *args: reproduce_module.Made(stopped=["tiny"]))
    with pytest.raises(SystemExit) as stop:
        cli.main(["reproduce", "tiny", "--hours", "1"])
    assert stop.value.code == cli.STOPPED_FOR_TIME == 3 and "stopped for time: tiny" in capsys.readouterr().out


def test_a_study_whose_page_predates_records_is_built_from_them_with_the_flag_and_continued_elsewhere(
        tmp_path, monkeypatch, built):
    """``reproduce --from-records`` (issue 33's reruns of pages made before records): a study not marked so writes
    the records of its finished runs and reads its page from them, and a rerun on a new machine (no run folders)
    trains nothing they hold; without the flag it writes none."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(reproduce_module, "STUDIES", {"tiny": dataclasses.replace(STUDY, from_records=False)})
    page = build(tmp_path, "plain")
    assert not (tmp_path / "outputs" / "tiny" / "runs").exists() and "from the records" not in page
    shutil.copytree(built / "runs", tmp_path / "first", symlinks=True)  # finished runs of this device: not retrained
    cli.main(["reproduce", "tiny", "--from-records", "--jobs", "1", "--runs", "first", "--out", "outputs"])
    page = (tmp_path / "outputs" / "tiny" / "README.md").read_text()
    assert "from the records of its runs" in page and len(find_runs([records(tmp_path)])) == 3
    cli.main(["reproduce", "tiny", "--from-records", "--jobs", "1", "--runs", "second", "--out", "outputs"])
    assert trained(tmp_path / "second") == [] and (tmp_path / "outputs" / "tiny" / "README.md").read_text() == page


@pytest.mark.parametrize("args", [["--hours", "0"], ["--hours", "2", "--report-only"]])
def test_a_budget_that_is_not_positive_or_with_a_rebuild_is_one_line(tmp_path, args):
    out = bnnpred("reproduce", "identities", "--out", str(tmp_path / "outputs"), *args, cwd=tmp_path)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "give a positive budget for training, and none with --report-only" in out.stderr
    assert not (tmp_path / "outputs").exists()


COMMITTED = Path(__file__).resolve().parents[2] / "outputs"
RECORDS_BUDGET = 20 * 2**20  # issue 38: all committed records together well under 20 MB


def test_the_committed_records_stay_within_their_budget():
    sizes = {study.name: sum(p.stat().st_size for p in (COMMITTED / study.name / "runs").rglob("*") if p.is_file())
             for study in reproduce_module.STUDIES.values()}
    assert sizes["notes004_table2"] > 0 and sum(sizes.values()) < RECORDS_BUDGET, sizes


def test_the_numbers_kept_beside_the_pages_hold_no_data():
    """The training points a figure draws are read from the data root (or a synthetic set's generator) when the
    page is built, never committed: not as a file of their own, nor inside a figure's numbers."""
    kept = list(COMMITTED.glob("*/derived/**/*.json"))
    assert kept and not [p for p in kept if p.name == "training_points.json"]
    figures = [read_json(p)["data"] for p in kept if p.name == "figures.json"]
    assert figures and not [data for data in figures if {"X", "y"} & set(data)]


@pytest.mark.parametrize("name", [name for name, study in reproduce_module.STUDIES.items()
                                  if study.from_records and (COMMITTED / name / "claims.json").is_file()])
def test_every_committed_page_built_from_records_is_rebuilt_from_them_to_the_byte(tmp_path, name, monkeypatch):
    """A fresh clone: no run folder, the committed page and its records only; nothing trains. A page that draws
    a real set's points or images (its figures' training points, thesis_fig5_6's images: data is never kept beside
    a page) needs the real data root."""
    if (root := found_data_root()) is not None:
        monkeypatch.setenv("BNNPRED_DATA_DIR", str(root))
    shutil.copytree(COMMITTED / name, tmp_path / "outputs" / name)
    tier = Tier(json.loads((COMMITTED / name / "claims.json").read_text())["tier"])
    try:
        reproduce([name], tier, tmp_path / "runs", tmp_path / "outputs", jobs=1, report_only=True)
    except MissingDataError as e:
        pytest.skip(f"{name} draws points or images of a real set: {e}")
    for page in ("README.md", "claims.json"):
        assert (tmp_path / "outputs" / name / page).read_bytes() == (COMMITTED / name / page).read_bytes(), page
    assert not (tmp_path / "runs").exists()


def test_a_rebuild_reads_the_records_and_never_writes_them(tmp_path, made):
    before = {p: p.read_bytes() for p in records(tmp_path).rglob("*") if p.is_file()}
    shutil.rmtree(tmp_path / "runs" / "tiny" / "sweep" / "delta3.0")  # a local run folder gone: its record stays
    assert build(tmp_path, "runs", report_only=True) == made
    assert {p: p.read_bytes() for p in records(tmp_path).rglob("*") if p.is_file()} == before


def test_a_record_never_replaces_a_run_that_holds_its_large_files(tmp_path, made):
    run_dir = tmp_path / "runs" / "tiny" / "single"
    posterior = (run_dir / "posterior.pt").read_bytes()
    assert not seed_from_record(records(tmp_path) / "single", run_dir)
    assert (run_dir / "posterior.pt").read_bytes() == posterior and not (run_dir / RECORD).exists()


def test_a_run_trained_again_to_its_records_bytes_adds_its_re_evaluations_to_the_record(tmp_path, made):
    """The single run trained again on another machine (here: its folder with other times in its metrics, its
    posterior unchanged, its re-evaluation not made there) is the record's fit by another training: its export keeps
    the record (the run that made it, its times) and adds the re-evaluation the record lacks, of the same posterior
    bytes. One byte of the posterior otherwise, and the record is replaced by the run's, as any other export."""
    run_dir, record = tmp_path / "runs" / "tiny" / "single", records(tmp_path) / "single"
    document = read_json(run_dir / "metrics.json")
    write_json(run_dir / "metrics.json", {**document, "run": {**document["run"], "seconds": 1e6}})
    write_manifest(run_dir)
    shutil.rmtree(run_dir / "evals")
    assert same_fit(run_dir, record) and not same_run(run_dir, record)
    out = bnnpred("eval", f"run_dir={run_dir}", "predictive.kinds=[nn]", "predictive.n_samples=6", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    added = next((run_dir / "evals").iterdir()).name
    before = {p.relative_to(record): p.read_bytes() for p in record.rglob("*") if p.is_file()}
    assert export_records(tmp_path / "runs" / "tiny", records(tmp_path), "cpu") == [
        records(tmp_path) / name for name in ("single", "sweep/delta1.0", "sweep/delta3.0")]
    after = {p.relative_to(record): p.read_bytes() for p in record.rglob("*") if p.is_file()}
    assert {name: data for name, data in after.items() if name.parts[:2] != ("evals", added)} == before
    assert verify_record(record) and read_json(record / "evals" / added / "metrics.json")["metrics"]["test"]["nn"]
    assert build(tmp_path, "runs", report_only=True) == made
    fit = torch.load(run_dir / "posterior.pt")  # trained to other bytes: the record is replaced by the run's
    torch.save({**fit, "other": torch.zeros(1)}, run_dir / "posterior.pt")
    write_manifest(run_dir)
    assert not same_fit(run_dir, record)
    export_records(tmp_path / "runs" / "tiny", records(tmp_path), "cpu")
    assert read_json(record / "metrics.json")["run"]["seconds"] == 1e6
    assert sorted(p.name for p in (record / "evals").iterdir()) == [added]


def test_a_rebuild_lists_a_re_evaluation_its_records_lack_and_a_run_here_makes_it(tmp_path, made):
    """:meth:`Reproduction.evaluate_where_possible`: rebuilding the page, a re-evaluation that the records lack is
    None (a grid point the page lists as not run) and one they hold is read; a study run where its runs are makes
    the missing one."""
    single = records(tmp_path) / "single"
    rebuild = Reproduction(runs=tmp_path / "runs", out=tmp_path / "outputs" / "tiny", tier=Tier.cpu, jobs=1,
                           from_records=True, report_only=True)
    held = rebuild.evaluate_where_possible(single, "predictive.kinds=[nn]", "predictive.n_samples=5")
    assert held is not None and held.parent == single / "evals"
    assert rebuild.evaluate_where_possible(single, "predictive.kinds=[nn]", "predictive.n_samples=6") is None
    run = Reproduction(runs=tmp_path / "runs", out=tmp_path / "outputs" / "tiny", tier=Tier.cpu, jobs=1,
                       from_records=True)
    made_here = run.evaluate_where_possible(single, "predictive.kinds=[nn]", "predictive.n_samples=6")
    assert (made_here / "metrics.json").is_file() and made_here.parent == single / "evals"


def test_an_export_cut_short_leaves_dot_folders_that_readers_skip_and_the_next_export_removes(tmp_path, made):
    record = records(tmp_path) / "sweep" / "delta1.0"
    shutil.copytree(record, record.parent / ".delta1.0.partial")  # killed after copying, before the renames
    shutil.move(record, record.parent / ".delta1.0.old")  # killed between the two renames: neither in place
    assert [p.name for p in find_runs([record.parent])] == ["delta3.0"]
    export_record(tmp_path / "runs" / "tiny" / "sweep" / "delta1.0", record)
    assert sorted(p.name for p in record.parent.iterdir()) == ["delta1.0", "delta3.0", "index.csv"]
    assert build(tmp_path, "runs", report_only=True) == made


def test_a_sweep_that_never_started_leaves_its_records_as_they_are(tmp_path, made):
    """A sweep refused before it made its folder (a mistyped override: exit 2, as a sweep with failed runs) has no
    finished run, which must not read as every record being stale."""
    r = Reproduction(runs=tmp_path / "elsewhere", out=tmp_path / "outputs" / "tiny", tier=Tier.cpu, jobs=1,
                     from_records=True)
    before = {p: p.read_bytes() for p in records(tmp_path).rglob("*") if p.is_file()}
    assert r.mirror(tmp_path / "elsewhere" / "tiny" / "sweep") == records(tmp_path) / "sweep"
    assert {p: p.read_bytes() for p in records(tmp_path).rglob("*") if p.is_file()} == before


def test_numbers_kept_from_a_posterior_that_were_edited_or_never_kept_are_one_error(tmp_path, made):
    shutil.rmtree(tmp_path / "runs")  # a fresh clone: the records and the kept numbers only
    path = derived(tmp_path)
    kept = json.loads(path.read_text())
    kept["data"]["p"][0] += 1e-9
    path.write_text(json.dumps(kept))
    with pytest.raises(BnnpredError, match=r"map\.json does not match its checksum \(edited or cut short\)"):
        build(tmp_path, "runs", report_only=True)
    path.unlink()
    with pytest.raises(BnnpredError, match=r"the page needs map computed from the large files of .*single, which "
                                           r"are not here \(they stayed on the machine that made the run\)"):
        build(tmp_path, "runs", report_only=True)


def test_numbers_kept_from_another_posterior_than_the_records_are_refused(tmp_path, made):
    shutil.rmtree(tmp_path / "runs")
    path = derived(tmp_path)
    kept = json.loads(path.read_text())
    kept["sources"]["posterior.pt"] = "0" * 64  # kept from a run trained again since
    path.write_text(json.dumps(kept))
    with pytest.raises(BnnpredError, match=r"map\.json was computed from other files than those of .*single"):
        build(tmp_path, "runs", report_only=True)


def test_numbers_kept_from_a_posterior_are_computed_again_where_the_run_is(tmp_path, made):
    """Where the run's files are, its kept numbers are recomputed from them (an edited copy is overwritten)."""
    path = derived(tmp_path)
    before = path.read_bytes()
    path.write_text("{}")
    assert build(tmp_path, "runs", report_only=True) == made
    assert path.read_bytes() == before


def test_a_local_run_other_than_the_record_is_never_the_source_of_its_kept_numbers(tmp_path, made):
    """A run folder here that is not the record's run (other large files: the record came from another machine)
    is left alone: the page reads the numbers kept from the record's own run."""
    run = tmp_path / "runs" / "tiny" / "single"
    manifest = json.loads((run / MANIFEST).read_text())
    (run / "posterior.pt").write_bytes(b"another run's posterior")
    manifest["files"]["posterior.pt"] = sha256_file(run / "posterior.pt")
    (run / MANIFEST).write_text(json.dumps(manifest))
    before = derived(tmp_path).read_bytes()
    assert build(tmp_path, "runs", report_only=True) == made
    assert derived(tmp_path).read_bytes() == before


def test_numbers_kept_for_other_inputs_are_refused(tmp_path, made):
    record = records(tmp_path) / "single"
    with pytest.raises(BnnpredError, match=r"map\.json was computed for other inputs than the page asks now"):
        kept(record, tmp_path / "nowhere", derived(tmp_path), map_at_two_points, {"points": 3})


def test_kept_numbers_come_back_as_float64_with_nan_where_they_were_not_finite():
    back = tensors(json.loads(compact(plain({"v": torch.tensor([0.1, float("nan"), float("inf")],
                                                              dtype=torch.float32)}))))["v"]
    assert back.dtype == torch.float64 and back[0] == float(torch.tensor(0.1, dtype=torch.float32))
    assert back[1:].isnan().all()


@pytest.mark.slow
@pytest.mark.data
def test_a_page_that_reads_predictions_and_posteriors_is_rebuilt_from_its_records_and_kept_numbers(
        tmp_path, data_root, monkeypatch):
    """notes002_mnist at its smoke tier, built from records: its BBB control's variances come from the posterior and
    the paired standard errors from two runs' stored predictions (kept beside the page, the first run's files named
    among the inputs of the second's numbers); with the runs deleted the page is rebuilt to the byte, and kept
    numbers of another first run are refused."""
    import dataclasses

    from bnnpred.reproduce import notes002_mnist

    monkeypatch.setattr(reproduce_module, "STUDIES", {
        "notes002_mnist": dataclasses.replace(notes002_mnist.STUDY, from_records=True)})

    def made(runs: str, report_only: bool) -> tuple[bytes, bytes]:
        reproduce(["notes002_mnist"], Tier.quick, tmp_path / runs, tmp_path / "outputs", jobs=1,
                  report_only=report_only)
        page = tmp_path / "outputs" / "notes002_mnist"
        return (page / "README.md").read_bytes(), (page / "claims.json").read_bytes()

    first = made("runs", report_only=False)
    kept = tmp_path / "outputs" / "notes002_mnist" / "derived" / "cpu" / "notes002_mnist"
    assert sorted(p.relative_to(kept).as_posix() for p in kept.rglob("*.json")) == [
        "bbb_60k/variance_change.json", "slang_60k_L32/paired_se_to_slang_60k_L1.json",
        "slang_60k_L8/paired_se_to_slang_60k_L1.json"]
    shutil.rmtree(tmp_path / "runs")
    assert made("elsewhere", report_only=True) == first
    paired = kept / "slang_60k_L8" / "paired_se_to_slang_60k_L1.json"
    document = json.loads(paired.read_text())
    document["inputs"]["first"]["predictions.npz"] = "0" * 64  # as if L = 1 had been trained again since
    document["sha256"] = digest({"data": document["data"], "inputs": document["inputs"]})
    paired.write_text(compact(document) + "\n")
    with pytest.raises(BnnpredError, match="computed for other inputs"):
        made("elsewhere", report_only=True)
