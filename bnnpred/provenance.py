"""The identity of the code that computes a run: a digest of the package source, and the git commit.

A run's key includes the digest, so a change to any module that computes results (a trainer, a curvature, a
predictive, a metric) gives new run keys and a sweep never reuses a result of other code. The page builders in
``bnnpred/reproduce/`` only read runs, so they are left out: editing a page's text keeps its runs.
"""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
# Subpackages that read finished runs but never compute one.
NOT_COMPUTING = ("reproduce",)


def source_files(root: Path = PACKAGE) -> list[Path]:
    """The package's Python sources and data files (checksum lists) that a run's numbers depend on, sorted."""
    files = [p for p in root.rglob("*") if p.is_file() and p.suffix in (".py", ".sha256")
             and "__pycache__" not in p.parts and p.relative_to(root).parts[0] not in NOT_COMPUTING]
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


@functools.cache
def code_digest(root: Path = PACKAGE) -> str:
    """16 hex digits of the sha256 over every source file's relative path and bytes."""
    digest = hashlib.sha256()
    for path in source_files(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


# The commit a campaign states it runs at (``bench/gpu/campaign.sh``: a checkout copied to another machine, whose git
# folder, if it travels at all, may stand at another commit: the device tool's copy stood at the last landed one
# with the session's commits as changes). It takes precedence over git; a run still records its own code digest,
# which is what identifies its code.
COMMIT_VARIABLE = "BNNPRED_COMMIT"


@functools.cache
def code_commit(root: Path = PACKAGE) -> str | None:
    """``$BNNPRED_COMMIT`` when set, else the git commit of the source tree (``+dirty`` with uncommitted changes),
    or None outside git."""
    if stated := os.environ.get(COMMIT_VARIABLE):
        return stated
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "."], cwd=root, capture_output=True,
                               text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
