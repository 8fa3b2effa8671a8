"""The package as a user installs it: a wheel (not an editable install) carries its configs, and the command line
works from any folder."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(*command: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    out = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    return out


def test_a_wheel_installed_without_editable_mode_runs_from_another_folder(tmp_path):
    source = tmp_path / "source"  # a copy, so the build leaves nothing in the repository
    shutil.copytree(REPO / "bnnpred", source / "bnnpred", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    run(sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-q",
        "-w", str(tmp_path / "wheels"), cwd=tmp_path)
    (wheel,) = (tmp_path / "wheels").glob("bnnpred-*.whl")
    run(sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(tmp_path / "site"), str(wheel),
        cwd=tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    where = run(sys.executable, "-c", "import bnnpred; print(bnnpred.__file__)", cwd=elsewhere, env=env)
    assert where.stdout.startswith(str(tmp_path / "site"))
    shown = run(sys.executable, "-m", "bnnpred", "train", "--cfg", "job", "dataset=banana", "inference=vogn",
                cwd=elsewhere, env={**env, "BNNPRED_DATA_DIR": str(tmp_path / "no_data")})
    assert "name: banana" in shown.stdout and "\ninference:\n" in shown.stdout
    assert list(elsewhere.iterdir()) == []  # showing the config writes nothing
    version = run(sys.executable, "-m", "bnnpred", "--version", cwd=elsewhere, env=env)
    assert version.stdout.startswith("bnnpred 0.1.0 (code ")
