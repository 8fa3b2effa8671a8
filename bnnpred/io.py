"""Atomic result files: each is written to a temporary file in the same directory, then renamed."""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch


def atomic_write(path: Path, write: Callable[[IO[bytes]], None]) -> Path:
    """Call ``write(file)`` on a temporary file beside ``path`` and rename it to ``path`` once complete."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, 0o666 & ~_umask())
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path: Path, text: str) -> Path:
    return atomic_write(path, lambda f: f.write(text.encode()))


def write_json(path: Path, obj: Any) -> Path:
    return write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def save_torch(path: Path, obj: Any) -> Path:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return atomic_write(path, lambda f: f.write(buffer.getvalue()))


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return atomic_write(path, lambda f: f.write(buffer.getvalue()))


def read_json(path: Path) -> Any:
    with open(path) as f:
        return json.load(f)
