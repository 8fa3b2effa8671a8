"""Numbers a page computes from a run's large files (its posterior, its stored predictions): a predictive on a grid,
a posterior's marginals, the training points a figure draws. Where only the run's record is (a fresh clone), they
cannot be computed again, so each is kept beside the page as JSON with the checksums of the large files it came
from, as the run's manifest lists them (issue 38: a page rebuilt from its records alone, figures included).

Wherever the run's large files are, the numbers are computed again and the kept file rewritten; elsewhere the kept
file is read, and refused when its checksums are not those of the record the page reads (the run was trained again
since). The page reads the numbers back from the JSON in both cases, so it is the same to the byte on every machine.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bnnpred.app.run_files import MANIFEST
from bnnpred.app.run_record import RECORDED, RUN_FILES, NotFinished, read_finished
from bnnpred.errors import BnnpredError
from bnnpred.io import non_finite_to_null, read_json, write_text


def large_files(folder: Path) -> dict[str, str]:
    """``{name: sha256}`` of the files the run (or record) in ``folder`` lists beyond a record's small ones."""
    listed = read_json(Path(folder) / MANIFEST)["files"]
    return {name: digest for name, digest in sorted(listed.items()) if name not in RECORDED}


def holds_large_files(run: Path) -> bool:
    """Whether ``run`` is a finished run with its large files here (not a record)."""
    try:
        return not read_finished(run, RUN_FILES).record
    except NotFinished:
        return False


def plain(value: Any) -> Any:
    """``value`` as JSON: tensors and arrays as (nested) lists of Python numbers, NaN and infinities as null."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray | np.generic):
        value = value.tolist()
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return non_finite_to_null(value)


def tensors(data: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """Kept numbers back as float64 tensors, in their order (JSON keeps every float64 exactly)."""
    return {name: torch.tensor(value, dtype=torch.float64) for name, value in data.items()}


def kept(read: Path, run: Path, store: Path, compute: Callable[[Path], Mapping[str, Any]]) -> dict[str, Any]:
    """The numbers ``compute(run)`` gives (computed again where ``run`` holds its large files, and kept in
    ``store`` with their own sha256), else those kept in ``store``, checked against that sha256 and against the
    large files' checksums in ``read``, the folder the page reads (the run, or its record)."""
    sources = large_files(read)
    if holds_large_files(run):
        data = plain(compute(run))
        write_text(store, compact({"sources": sources, "data": data, "sha256": digest(data)}) + "\n")
    elif not store.is_file():
        raise BnnpredError(f"the page needs {store.stem} computed from the large files of {read}, which stayed on the "
                           "machine that made the run; rebuild the page there, or train the run again here")
    document = read_json(store)
    if digest(document["data"]) != document["sha256"]:
        raise BnnpredError(f"{store} does not match its checksum (edited or cut short); restore it with git checkout "
                           f"-- {store}, or rebuild the page where the run is")
    if document["sources"] != sources:
        raise BnnpredError(f"{store} was computed from other files than those of {read} (the run was trained again "
                           "since); rebuild the page where the run is, or remove the record to train it again")
    return document["data"]


def compact(data: Any) -> str:
    """``data`` as strict (no NaN), key-sorted JSON on one line: the kept numbers of a 100 x 100 grid are 0.2 MB."""
    return json.dumps(data, sort_keys=True, allow_nan=False, separators=(",", ":"))


def digest(data: Any) -> str:
    """The sha256 of ``data`` as :func:`compact` JSON."""
    return hashlib.sha256(compact(data).encode()).hexdigest()
