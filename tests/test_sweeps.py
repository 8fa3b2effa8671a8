"""Sweeps that resume: runs keyed by their config, a sweep killed with SIGKILL and started again, and the same
sweep serially and with the joblib launcher giving byte-identical tables."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from omegaconf import OmegaConf

from bnnpred.app.compose import compose
from bnnpred.app.config import run_key
from bnnpred.app.run_files import write_manifest
from bnnpred.app.saved_runs import finished_run
from bnnpred.cli import LedgerEntry, progress_line
from tests.helpers import TINY, bnnpred

SWEEP = [*TINY, "predictive.kinds=[map,glm]", "plot.enabled=false", "threads=1", "seed=0,1", "prior.delta=1,3"]


def test_the_run_key_ignores_display_settings_and_survives_saving():
    cfg = compose(TINY)
    assert run_key(cfg) == run_key(compose([*TINY, "progress=true", "force=true", "threads=1"]))
    assert run_key(cfg) != run_key(compose([*TINY, "seed=1"]))
    saved = OmegaConf.create(OmegaConf.to_yaml(cfg, resolve=True))  # what config.yaml holds
    assert run_key(saved) == run_key(cfg)


def test_a_run_is_finished_only_with_its_key_and_every_file_intact(tmp_path):
    cfg = compose(TINY)
    summary = {"dataset": "two_moons", "task": "binary", "model": "mlp", "inference": "laplace_ggn", "seed": 0}
    document = {"run": {**summary, "key": run_key(cfg)}, "info": {}, "metrics": {}}
    (tmp_path / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    (tmp_path / "posterior.pt").write_bytes(b"tensors")
    (tmp_path / "metrics.json").write_text('{"run": {"seed"')
    assert finished_run(tmp_path, run_key(cfg)) is None  # truncated, and no manifest
    (tmp_path / "metrics.json").write_text(json.dumps(document))
    assert finished_run(tmp_path, run_key(cfg)) is None  # no manifest: never committed
    write_manifest(tmp_path)
    assert finished_run(tmp_path, run_key(cfg)) == document
    assert finished_run(tmp_path, run_key(compose([*TINY, "seed=5"]))) is None
    (tmp_path / "posterior.pt").write_bytes(b"tensorz")
    assert finished_run(tmp_path, run_key(cfg)) is None
    (tmp_path / "posterior.pt").write_bytes(b"tensors")
    del document["run"]["task"]  # a record missing a field, its manifest made to agree (issue 37)
    (tmp_path / "metrics.json").write_text(json.dumps(document))
    write_manifest(tmp_path)
    assert finished_run(tmp_path, run_key(cfg)) is None


def test_progress_line_counts_and_estimates():
    ledger = [LedgerEntry("trained", 10, ""), LedgerEntry("skipped", 0, ""), LedgerEntry("failed", 2, "x")]
    assert progress_line(ledger, 7, elapsed=120.0) == (
        "sweep: 3/7 runs (1 trained, 1 skipped, 1 failed), 4 left, about 4.0 min left")


def table(tmp_path: Path, sweep: Path, name: str) -> bytes:
    out = bnnpred("report", str(sweep), "--out", str(tmp_path / name), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return (tmp_path / name / "table.csv").read_bytes()


def test_a_killed_sweep_resumes_without_redoing_runs_and_matches_a_parallel_one(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))  # where the sweeps' ledgers go
    (tmp_path / "tmp").mkdir()
    parallel = bnnpred("train", "-m", *SWEEP, "task_name=parallel", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
                       cwd=tmp_path)
    assert parallel.returncode == 0, parallel.stderr
    serial = tmp_path / "runs" / "serial"
    command = [sys.executable, "-m", "bnnpred.cli", "train", "-m", *SWEEP, "task_name=serial"]
    first = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    deadline = time.time() + 240
    while len(list(serial.glob("*/manifest.json"))) < 2 and time.time() < deadline:
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    done = {p.parent: p.stat().st_mtime_ns for p in serial.glob("*/manifest.json")}
    assert 2 <= len(done) < 4, "the sweep must be killed part-way"
    assert [p.name.split("-")[2] for p in (tmp_path / "tmp").glob("bnnpred-sweep-*")] == [str(first.pid)]

    resumed = bnnpred("train", "-m", *SWEEP, "task_name=serial", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f"sweep: 4/4 runs ({4 - len(done)} trained, {len(done)} skipped, 0 failed), 0 left" in resumed.stderr
    assert all(run.joinpath("manifest.json").stat().st_mtime_ns == stamp for run, stamp in done.items())
    assert not list((tmp_path / "tmp").glob("bnnpred-sweep-*"))  # the killed sweep's ledger removed by the next
    assert not list(serial.glob("*/.stage-*")) and not list(serial.glob("*/.replacing"))
    assert table(tmp_path, serial, "serial") == table(tmp_path, tmp_path / "runs" / "parallel", "parallel")


def test_the_slurm_launcher_composes_and_fails_clearly_without_a_cluster(tmp_path):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from bnnpred.app.compose import CONF_DIR
    from bnnpred.app.config import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = hydra_compose(config_name="config", overrides=["hydra/launcher=slurm", "hydra.launcher.partition=gpu"],
                            return_hydra_config=True)
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher")
    assert (launcher.partition, launcher.timeout_min, launcher.gpus_per_node) == ("gpu", 240, 0)
    out = bnnpred("train", "-m", *TINY, "seed=0,1", "hydra/launcher=slurm", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip() == ("error: hydra/launcher=slurm needs a SLURM cluster, but sbatch is not on PATH "
                                  "here; use hydra/launcher=local to run the sweep on this machine")
    assert not (tmp_path / "runs").exists()
