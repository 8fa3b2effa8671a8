"""A result folder's files: staged per process, committed atomically, verified against a manifest, locked per run.

A result folder (a run directory, or a re-evaluation under ``<run>/evals/<key>/``) holds the result files and
``manifest.json``, the sha256 of each of them, written last. Names starting with ``.`` and Hydra's ``*.log`` are
not part of a result (Hydra's ``.hydra/`` and log live in the run directory beside it).

Commit protocol, so that a process killed at any moment leaves either the previous result or the new one:

1. the new files are written into a private ``.stage-<pid>-<random>/`` with their manifest;
2. the stage is renamed to ``.replacing``: the commit point;
3. the previous result's files that the new one does not replace are removed, the staged files are moved in (the
   manifest last, replacing the previous one in one rename) and ``.replacing`` is removed.

Whoever finds a ``.replacing`` left by a killed commit finishes step 3 (:func:`recover`) before reading or
writing the run. Writers of one run directory take its lock (:func:`locked`), an ``flock`` on the directory that
the kernel releases when the holder dies, so a second sweep waits for a run in progress instead of training it
again.
"""

from __future__ import annotations

import errno
import fcntl
import gzip
import logging
import os
import secrets
import shutil
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bnnpred.io import read_json, sha256_file, write_json

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
# Marks a run's record (:mod:`bnnpred.app.run_record`): its small files and manifest, its large files left on the
# machine that made it; ``{"absent": [names]}``. Not part of a result: a new result committed into the folder
# removes it.
RECORD = "record.json"
REPLACING = ".replacing"
EVALS = "evals"  # re-evaluations of a run (bnnpred eval): <run>/evals/<key>/
STAGE_PREFIX = ".stage-"
TRACE = "trace.csv"  # the training trace: most of a record's bytes, kept only where a page reads it
# A record keeps these listed files gzipped, as NAME.gz (a trace: 2.5x smaller); the manifest's checksum stays that
# of NAME's own bytes, so the file is verified as the run wrote it.
PACKED_FILES = (TRACE,)
PACKED = ".gz"


def is_result_file(name: str) -> bool:
    """Whether an entry of a result folder belongs to the result (not a dot-file, Hydra's log or a record's
    marker)."""
    return not name.startswith(".") and not name.endswith(".log") and name != RECORD


def stored(folder: Path, name: str) -> Path:
    """Where the listed file ``name`` of the result in ``folder`` is: ``folder/name``, or ``folder/name.gz`` where a
    record keeps it gzipped (one of :data:`PACKED_FILES`)."""
    path, packed = folder / name, folder / f"{name}{PACKED}"
    return packed if name in PACKED_FILES and not path.exists() and packed.is_file() else path


def content_digest(path: Path) -> str:
    """The sha256 of the file that ``path`` holds: of its bytes, or of the bytes a :data:`PACKED` one decompresses
    to."""
    return sha256_file(path, gzip.open if path.name.endswith(PACKED) else open)


def problems(folder: Path, required: Iterable[str], absent_ok: Iterable[str] = ()) -> str | None:
    """Why ``folder`` does not hold a complete, intact result with the ``required`` files, or None if it does; a
    listed file named in ``absent_ok`` may be missing (a run's record keeps its large files' checksums only), but
    when present it must match its checksum too."""
    try:
        manifest = read_json(folder / MANIFEST)
        files = manifest["files"]
        if not isinstance(files, dict):
            raise TypeError
    except FileNotFoundError:
        return f"no {MANIFEST}"
    except (OSError, ValueError, KeyError, TypeError):
        return f"{MANIFEST} is unreadable"
    if missing := sorted(set(required) - set(files)):
        return f"{MANIFEST} lists no {', '.join(missing)}"
    for name, digest in sorted(files.items()):
        path = stored(folder, name)
        try:
            if content_digest(path) != digest:
                return f"{name} does not match its checksum"
        except (gzip.BadGzipFile, EOFError, zlib.error):  # a packed file whose bytes were changed
            return f"{name} does not match its checksum ({path.name} does not decompress)"
        except FileNotFoundError:
            if name in absent_ok:
                continue
            return f"{name} is missing"
        except OSError as e:
            return f"{name} is unreadable ({e.strerror})"
    return None


@contextmanager
def locked(run_dir: Path, wait: bool = True) -> Iterator[None]:
    """Hold the run directory's exclusive lock (the directory is created if needed). While another process holds
    it: wait, saying so, or with ``wait=False`` raise ``BlockingIOError``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN) or not wait:
                raise
            log.info("waiting for another process working on %s", run_dir)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


@contextmanager
def staged(run_dir: Path) -> Iterator[Path]:
    """A private staging folder; on success its files (with a new manifest) replace the result in ``run_dir`` by
    the commit protocol, on failure it is removed. Call it holding ``locked(run_dir)``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    remove_dead_stages(run_dir)
    stage = run_dir / f"{STAGE_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    stage.mkdir()
    try:
        yield stage
        write_manifest(stage)
        recover(run_dir)
        os.rename(stage, run_dir / REPLACING)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    recover(run_dir)


def write_manifest(folder: Path) -> None:
    files = {p.name: sha256_file(p) for p in sorted(folder.iterdir())
             if p.is_file() and is_result_file(p.name) and p.name != MANIFEST}
    write_json(folder / MANIFEST, {"files": files})


def recover(run_dir: Path) -> None:
    """Finish a commit that a killed process left in ``.replacing`` (step 3). Call it holding the lock.

    Only files that the previous manifest lists (and the previous result's re-evaluations) are removed, never
    other files of the folder. The new manifest replaces the old one last, in one rename: until then every step
    can be done again, and a reader that finds ``.replacing`` finishes the commit before it reads."""
    replacing = run_dir / REPLACING
    if not replacing.is_dir():
        return
    if not (replacing / MANIFEST).is_file():  # the manifest moved in last: only the empty folder is left
        shutil.rmtree(replacing)
        return
    incoming = read_json(replacing / MANIFEST)["files"]
    previous = _listed(run_dir / MANIFEST)
    if previous is not None:
        for name in set(previous) - set(incoming):
            (run_dir / name).unlink(missing_ok=True)
        for name in previous:  # a record's packed copies: a new result writes its files as they are
            (run_dir / f"{name}{PACKED}").unlink(missing_ok=True)
        shutil.rmtree(run_dir / EVALS, ignore_errors=True)  # re-evaluations of the previous result
    (run_dir / RECORD).unlink(missing_ok=True)  # the folder holds a whole result from here on, not a record
    for new in sorted(replacing.iterdir(), key=lambda p: p.name == MANIFEST):
        os.replace(new, run_dir / new.name)
    replacing.rmdir()


def _listed(manifest: Path) -> dict[str, str] | None:
    """The files a manifest lists, or None when there is none (or it is unreadable)."""
    try:
        files = read_json(manifest)["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return files if isinstance(files, dict) else None


def remove_dead_stages(run_dir: Path) -> None:
    """Remove staging folders whose process has died (a killed run's half-written files)."""
    for stage in run_dir.glob(f"{STAGE_PREFIX}*"):
        pid = stage.name[len(STAGE_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or not process_alive(int(pid)):
            shutil.rmtree(stage, ignore_errors=True)


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (anyone's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
