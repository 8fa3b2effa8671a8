"""Numbers a page computes from a run's large files (its posterior, its stored predictions): a predictive on a grid,
a posterior's marginals. Where only the run's record is (a fresh clone), they
cannot be computed again, so each is kept beside the page as JSON with the checksums of the large files it came
from, as the run's manifest lists them (issue 38: a page rebuilt from its records alone, figures included).

Wherever the run's own large files are (those the record lists), the numbers are computed again and the kept file
rewritten; elsewhere, or beside a local run of other files, the kept file is read, and refused when edited, when its
checksums are not those of the record the page reads (the run was trained again since) or when it was computed for
other inputs (a grid, a margin) than the page asks. The page reads the numbers back from the JSON in both cases, so
it is the same to the byte on every machine.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bnnpred.app.report.run_figures import predictive_figure_data
from bnnpred.app.run_evaluation import predictors
from bnnpred.app.run_files import MANIFEST
from bnnpred.app.run_record import ALWAYS_RECORDED, RECORDED, RUN_FILES, NotFinished, read_finished
from bnnpred.app.run_setup import typed
from bnnpred.app.saved_runs import eval_config, restore
from bnnpred.data import load_dataset
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


def training_points(read: Path) -> dict[str, torch.Tensor]:
    """The training inputs (``x`` ``[N]`` for a 1-D set, ``[N, D]`` else) and targets ``y`` ``[N]`` of the run or
    record in ``read``, float64, loaded as its config names them and in its dtype, as its set-up held them: a real
    set from the data root (:class:`~bnnpred.data.root.MissingDataError` without it), a synthetic one from its
    generator and seed. Data is never kept beside a page (nor committed with it)."""
    config = typed(eval_config(read_finished(read, ALWAYS_RECORDED), None))
    data = load_dataset(config.dataset)
    X, y = data.X_train.to(config.dtype.torch).double(), data.y_train.to(config.dtype.torch).double()
    return {"x": X[:, 0] if X.shape[1] == 1 else X, "y": y}


def predictive_band(kind: str, x: torch.Tensor) -> Callable[[Path], dict[str, torch.Tensor]]:
    """A run's ``kind`` predictive (its own samples and seed) at inputs ``x`` ``[G, D]``: ``{"mean", "std"}``
    ``[G]`` each, single-output."""
    def band(run: Path) -> dict[str, torch.Tensor]:
        s, ctx = restore(run)
        prediction = predictors(s, ctx)[kind](x.to(s.dtype))
        return {"mean": prediction.mean.reshape(-1), "std": prediction.variance.reshape(-1).sqrt()}
    return band


def tensors(data: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """Kept numbers back as float64 tensors by name (JSON keeps every float64 exactly; a null is NaN again)."""
    return {name: torch.from_numpy(np.array(value, dtype=np.float64)) for name, value in data.items()}


def scalars(data: Mapping[str, Any]) -> dict[str, Any]:
    """Kept numbers (single, or lists of them) back as floats by name (a null is NaN again)."""
    def number(value: Any) -> Any:
        return [number(v) for v in value] if isinstance(value, list) else float("nan") if value is None else float(
            value)
    return {name: number(value) for name, value in data.items()}


def kept(read: Path, run: Path, store: Path, compute: Callable[[Path], Mapping[str, Any]],
         inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The numbers ``compute(run)`` gives for ``inputs`` (what it depends on beyond the run: a grid, a margin),
    computed again where ``run`` holds the large files that ``read`` (the folder the page reads: the run, or its
    record) lists, and kept in ``store`` with the inputs, their checksums and their own sha256; elsewhere those kept
    in ``store``, refused when edited, computed from other files or for other inputs."""
    sources, given = large_files(read), plain(inputs)
    if holds_large_files(run) and large_files(run) == sources:
        body = {"data": plain(compute(run)), "inputs": given}
        write_text(store, compact({**body, "sources": sources, "sha256": digest(body)}) + "\n")
    elif not store.is_file():
        raise BnnpredError(f"the page needs {store.stem} computed from the large files of {read}, which are not here "
                           "(they stayed on the machine that made the run); rebuild the page there, or train the run "
                           "again here")
    document = read_json(store)
    body = {"data": document["data"], "inputs": document["inputs"]}
    if digest(body) != document["sha256"]:
        raise BnnpredError(f"{store} does not match its checksum (edited or cut short); restore it with git checkout "
                           f"-- {store}, or rebuild the page where the run is")
    if document["sources"] != sources:
        raise BnnpredError(f"{store} was computed from other files than those of {read} (the run was trained again "
                           "since); rebuild the page where the run is, or remove the record to train it again")
    if document["inputs"] != given:
        raise BnnpredError(f"{store} was computed for other inputs than the page asks now (its grid or settings "
                           "changed); rebuild the page where the run is")
    return document["data"]


def compact(data: Any) -> str:
    """``data`` as strict (no NaN), key-sorted JSON on one line: the kept numbers of a 100 x 100 grid are 0.2 MB."""
    return json.dumps(data, sort_keys=True, allow_nan=False, separators=(",", ":"))


def digest(data: Any) -> str:
    """The sha256 of ``data`` as :func:`compact` JSON."""
    return hashlib.sha256(compact(data).encode()).hexdigest()


FIGURE_DIGITS = 4  # significant digits kept of a figure's numbers: finer than a drawing resolves
FIGURE_GRID = 50  # grid points per axis of a page's predictive figures (four times as many in 1-D)


def figure_data(grid_points: int, figures: Collection[str]) -> Callable[[Path], dict[str, Any]]:
    """The numbers of the predictive figures named in ``figures`` (``predictive_<kind>``, ``predictive_means``,
    ``blr_uncertainty``) of a run (:func:`~bnnpred.app.report.run_figures.predictive_figure_data`, its own
    predictives, samples and seed) on ``grid_points`` per axis, to :data:`FIGURE_DIGITS` significant digits and
    without what those figures do not draw (a 50 x 50 map is then about 17 kB) or the training points (data, which
    :func:`training_points` reads); drawn again by :func:`~bnnpred.app.report.run_figures.predictive_drawings`."""
    def data(run: Path) -> dict[str, Any]:
        s, ctx = restore(run)
        predict = {kind: fn for kind, fn in predictors(s, ctx).items()
                   if "predictive_means" in figures or f"predictive_{kind}" in figures}
        found = predictive_figure_data(s, ctx, predict, grid_points, blr="blr_uncertainty" in figures)
        if found is None:
            raise BnnpredError(f"{run} has no predictive figure (its inputs are neither 1-D regression nor 2-D binary)")
        del found["X"], found["y"]  # data: read again from the data root with the numbers (:func:`training_points`)
        found["kinds"] = [drawn if f"predictive_{drawn['kind']}" in figures else
                          {"kind": drawn["kind"], "prob": drawn["prob"]}  # predictive_means draws the mean alone
                          for drawn in found["kinds"]]
        return rounded(plain(found), FIGURE_DIGITS)
    return data


def rounded(value: Any, digits: int) -> Any:
    """Every float of plain JSON data ``value`` to ``digits`` significant digits (None, strings, ints kept)."""
    if isinstance(value, float):
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v, digits) for v in value]
    return value
