"""A page names the commits and code digests of the runs it reads: a page rebuilt with --report-only is built by
other code than its runs, and its provenance line alone would hide that."""

import json
from pathlib import Path

from bnnpred.reproduce.base import Reproduction, Tier
from bnnpred.run_files import write_manifest


def finished_run(folder: Path, run: dict) -> Path:
    """A finished run (every run file, verified by its manifest) that records ``run`` in its metrics.json."""
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text("seed: 0\n")
    (folder / "metrics.json").write_text(json.dumps({"run": run, "info": {}, "metrics": {}}))
    (folder / "posterior.pt").write_bytes(b"0")
    write_manifest(folder)
    return folder


def test_the_runs_section_counts_the_runs_read_by_commit_and_code(tmp_path):
    r = Reproduction(runs=tmp_path, out=tmp_path / "out", tier=Tier.cpu, jobs=1, report_only=True)
    assert r.runs_section() == ""
    sweep = tmp_path / "sweep"
    for name in ("a", "b"):
        finished_run(sweep / name, {"commit": "2d2c33d", "code": "9ede33ae"})
    (sweep / "unfinished").mkdir()  # no manifest: not read
    single = finished_run(tmp_path / "single", {"commit": "a701e8e", "code": "1234abcd"})
    old = finished_run(tmp_path / "old", {})
    r.sweep(sweep, "${seed}")
    r.sweep(sweep, "${seed}")  # read twice, counted once
    r.train_once(single)
    r.train_once(old)
    assert r.runs_section() == ("## Runs\n\nThe page reads 4 finished runs and re-evaluations: 2 at commit 2d2c33d "
                                "(code 9ede33ae), 1 at commit a701e8e (code 1234abcd), 1 that record no commit.\n")
