"""Result files: written atomically (a temporary file in the same directory, then a rename), read back verified.

Stored tensors carry a checksum: ``save_checked`` writes a one-line header with the sha256 of the payload, and
``load_checked`` refuses a file whose bytes do not match it (a flipped bit, a truncated or empty write) with
``CorruptFile``. Loading never runs code: tensors are read with ``weights_only=True``.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import math
import os
import re
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch

CHECKED_MAGIC = b"bnnpred-sha256:"


class CorruptFile(ValueError):
    """A stored file whose bytes do not verify (named in the message with the reason)."""


# a temporary file's name: .<target>~<host>~<pid>~<random>.tmp, so that one left by a killed writer is known as such
ORPHAN = re.compile(r"^\..*~(?P<host>[^~]+)~(?P<pid>\d+)~[^~]*\.tmp$")


def atomic_write(path: Path, write: Callable[[IO[bytes]], None]) -> Path:
    """Call ``write(file)`` on a temporary file beside ``path`` and rename it to ``path`` once complete; the
    temporary files that killed writers of this machine left in that folder are removed first. The writer holds an
    ``flock`` on its temporary file until the rename, so a live writer's file is never taken for an orphan."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_orphans(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}~{socket.gethostname()}~{os.getpid()}~",
                               suffix=".tmp")
    os.fchmod(fd, 0o666 & ~_umask())
    try:
        with os.fdopen(fd, "wb") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            write(f)
            f.flush()
            os.fsync(f.fileno())
            os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def remove_orphans(folder: Path) -> None:
    """Remove the temporary files in ``folder`` that a killed writer of this machine left: its process is gone and
    nothing holds the file's lock (another PID namespace's live writer holds it). Other machines' files, and
    anything that is not a regular file, are left."""
    host = socket.gethostname()
    for entry in os.scandir(folder):
        match = ORPHAN.match(entry.name)
        if not match or match["host"] != host or not entry.is_file(follow_symlinks=False):
            continue
        if _running(int(match["pid"])):
            continue
        try:
            with open(entry.path, "rb") as f:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held by a live writer: BlockingIOError
                os.unlink(entry.path)
        except OSError:  # locked, or gone meanwhile
            continue


def _running(pid: int) -> bool:
    """Whether a process of this id runs here (an id no process can have counts as running: the file is kept)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):  # another user's process; an impossible id
        return True
    return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_bytes(path: Path, data: bytes) -> Path:
    return atomic_write(path, lambda f: f.write(data))


def write_text(path: Path, text: str) -> Path:
    return write_bytes(path, text.encode())


def strict_json(obj: Any) -> str:
    """``obj`` as strict JSON (RFC 8259): raises ``ValueError`` on NaN or infinity instead of writing them."""
    return json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n"


def write_json(path: Path, obj: Any) -> Path:
    return write_text(path, strict_json(obj))


def non_finite_to_null(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float replaced by ``None`` (JSON ``null``)."""
    if isinstance(obj, dict):
        return {k: non_finite_to_null(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [non_finite_to_null(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def save_torch(path: Path, obj: Any) -> Path:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return write_bytes(path, buffer.getvalue())


def load_torch(path: Path, map_location: str | torch.device = "cpu") -> Any:
    """A ``save_torch`` file read with ``weights_only=True`` (no code runs); ``CorruptFile`` if it does not load."""
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as e:  # torch.load raises many types on bad bytes (unpickling, zip, EOF errors)
        raise CorruptFile(f"{path} does not load as a tensor file ({type(e).__name__})") from e


def save_checked(path: Path, obj: Any) -> Path:
    """``obj`` (tensors, numbers, strings, lists and dicts of them) with a sha256 header, written atomically."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    payload = buffer.getvalue()
    return write_bytes(path, CHECKED_MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)


def load_checked(path: Path, map_location: str | torch.device = "cpu") -> Any:
    """A ``save_checked`` file, verified; ``CorruptFile`` naming the reason when its bytes do not match."""
    data = Path(path).read_bytes()
    header, _, payload = data.partition(b"\n")
    if not header.startswith(CHECKED_MAGIC):
        raise CorruptFile(f"{path} has no checksum header ({len(data)} bytes)")
    if hashlib.sha256(payload).hexdigest().encode() != header[len(CHECKED_MAGIC):]:
        raise CorruptFile(f"{path} does not match its checksum")
    try:
        return torch.load(io.BytesIO(payload), map_location=map_location, weights_only=True)
    except Exception as e:  # whatever the safe loader refuses (a pickle of code, a truncated zip), it is not ours
        raise CorruptFile(f"{path} matches its checksum but does not load ({type(e).__name__})") from e


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return write_bytes(path, buffer.getvalue())


def read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def sha256_file(path: Path, opener: Callable[..., IO[bytes]] = open) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks; ``opener`` (e.g. ``gzip.open``) says how its bytes are
    read."""
    digest = hashlib.sha256()
    with opener(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()
