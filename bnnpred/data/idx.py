"""LeCun's IDX format (MNIST, Fashion-MNIST): a magic ``0x00 0x00 0x08 ndim``, ``ndim`` big-endian uint32
dimensions, then unsigned bytes in C order. Files may be gzipped."""

from __future__ import annotations

import gzip
import math
import struct
from pathlib import Path

import numpy as np

from bnnpred.errors import BnnpredError

UNSIGNED_BYTE = 0x08


def read_idx(path: Path) -> np.ndarray:
    """The array stored in an unsigned-byte IDX file (``.gz`` is decompressed); dtype ``uint8``.

    Raises:
        BnnpredError: if the header is not unsigned-byte IDX or the payload size does not match it.
    """
    path = Path(path)
    with (gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")) as f:
        data = f.read()
    if len(data) < 4 or data[:2] != b"\x00\x00" or data[2] != UNSIGNED_BYTE:
        raise BnnpredError(f"{path} is not an unsigned-byte IDX file (bad magic number)")
    ndim = data[3]
    header = 4 + 4 * ndim
    dims = struct.unpack(f">{ndim}I", data[4:header])
    if len(data) - header != math.prod(dims):
        raise BnnpredError(f"{path}: header says {dims} ({math.prod(dims)} bytes), payload has {len(data) - header}")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims)
