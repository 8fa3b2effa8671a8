"""A fitted posterior in one file (:meth:`bnnpred.api.Fitted.save`, :func:`bnnpred.api.load`): tensors, numbers
and strings only, read back with ``torch.load(weights_only=True)`` so that loading runs no code from the file.

Layout: one header line ``bnnpred-fit <sha256 of the rest> bnnpred <version> torch <version>`` then the
``torch.save`` payload. The checksum makes an edited or truncated file an error rather than another posterior; the
network's parameter names and shapes, saved in the payload, make a file of another network one too.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import torch

from bnnpred._version import __version__
from bnnpred.curvature.functional import FlatModel
from bnnpred.errors import BnnpredError
from bnnpred.inference import EVIDENCE_METHODS
from bnnpred.io import atomic_write

MAGIC = "bnnpred-fit"
KEYS = frozenset({"method", "task", "theta", "posterior", "info", "log_evidence", "trace", "sigma2", "prior",
                  "network", "buffers"})  # the payload's, as Fitted.save writes them


def network_signature(model: FlatModel) -> list[list[Any]]:
    """``[[name, shape], ...]`` of the network's parameters, in θ's order."""
    return [[name, list(shape)] for name, shape in zip(model.names, model.shapes, strict=True)]


def write(path: Path, state: dict[str, Any]) -> Path:
    """Write ``state`` (tensors moved to the CPU) to ``path`` whole or not at all (:func:`bnnpred.io.atomic_write`)."""
    buffer = io.BytesIO()
    torch.save(_moved(state, torch.device("cpu")), buffer)
    payload = buffer.getvalue()
    header = f"{MAGIC} {hashlib.sha256(payload).hexdigest()} bnnpred {__version__} torch {torch.__version__}\n"
    return atomic_write(path, lambda f: f.write(header.encode() + payload))


def read(path: Path, device: torch.device) -> dict[str, Any]:
    """The state in ``path``, its tensors on ``device``; an error naming the file when it is missing, not a saved
    fit, or edited."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise BnnpredError(f"cannot read the saved fit {path}: {e.strerror or e}") from e
    header, _, payload = data.partition(b"\n")
    fields = header.decode(errors="replace").split()
    if len(fields) < 2 or fields[0] != MAGIC:
        raise BnnpredError(f"{path} is not a fit saved by Fitted.save (no '{MAGIC}' header)")
    if hashlib.sha256(payload).hexdigest() != fields[1]:
        raise BnnpredError(f"{path} does not match its checksum (edited or cut short); save the fit again")
    state = torch.load(io.BytesIO(payload), weights_only=True)
    if not isinstance(state, dict):
        raise BnnpredError(f"{path} is not a fit saved by Fitted.save (its payload is no state)")
    state = _with_evidence_apart(state)
    if missing := sorted(KEYS - state.keys()):
        raise BnnpredError(f"{path} was written by a bnnpred that saved no {', '.join(missing)} "
                           f"({' '.join(fields[2:])}); fit and save it again with this one")
    return _moved(state, device)


def _with_evidence_apart(state: dict[str, Any]) -> dict[str, Any]:
    """A fit saved while the log evidence travelled in ``info["log_marglik"]`` (until 2026-11-27) as one saved
    since: the evidence of a method that has one as ``log_evidence`` (a GLM refinement's was its start's: dropped)."""
    if "log_evidence" in state or "info" not in state:
        return state
    info = dict(state["info"])
    value = info.pop("log_marglik", None)
    return {**state, "info": info, "log_evidence": value if state.get("method") in EVIDENCE_METHODS else None}


def check_network(path: Path, saved: list[list[Any]], model: FlatModel, theta: torch.Tensor) -> None:
    """Refuse a model whose parameters differ from those the fit was saved with (``theta``), naming the first
    difference: names, shapes, or the dtype (a float64 fit on a float32 network would run in float64 silently)."""
    if theta.dtype != (own := model.theta().dtype):
        raise BnnpredError(f"{path} holds a {str(theta.dtype).removeprefix('torch.')} fit and this network is "
                           f"{str(own).removeprefix('torch.')}; convert the network (e.g. model.double()) first")
    here = network_signature(model)
    if saved == here:
        return
    for (name, shape), (own, own_shape) in zip(saved, here, strict=False):
        if (name, shape) != (own, own_shape):
            raise BnnpredError(f"{path} was saved from another network: its parameter {name} {shape} is {own} "
                               f"{own_shape} here; load it onto the network it was fitted on")
    raise BnnpredError(f"{path} was saved from another network: {len(saved)} parameter tensors there, {len(here)} "
                       "here; load it onto the network it was fitted on")


def _moved(state: Any, device: torch.device) -> Any:
    """``state`` with every tensor, nested ones too, detached on ``device``."""
    if isinstance(state, torch.Tensor):
        return state.detach().to(device)
    if isinstance(state, dict):
        return {key: _moved(value, device) for key, value in state.items()}
    if isinstance(state, list | tuple):
        return type(state)(_moved(value, device) for value in state)
    return state
