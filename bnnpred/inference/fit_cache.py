"""A content-addressed store of point estimates, so runs that share a stage (e.g. one MAP under a full Laplace, a
diagonal Laplace and two refinements) compute it once.

The key hashes everything the stage reads: the training data, prior precision, start point, random-generator state,
the network's architecture and starting buffers, the likelihood, the stage's settings, the package version and the
source file of the stage's trainer. A hit returns the stored ``Fit`` on the
problem's device and leaves the generator and the network's buffers (batch-norm statistics) where the computation
left them, so later stages see the same state either way; entries are written atomically, so parallel runs computing
the same stage at once both succeed and leave one valid entry.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bnnpred import __version__
from bnnpred.inference.base import Fit, Problem
from bnnpred.io import save_torch

log = logging.getLogger(__name__)


def problem_digest(problem: Problem) -> hashlib._Hash:
    """sha256 over the problem's data, prior, start point, generator state, network and likelihood."""
    digest = hashlib.sha256(f"bnnpred {__version__}|{repr(getattr(problem.model, 'module', problem.model))}|"
                            f"{type(problem.likelihood).__name__}{sorted(vars(problem.likelihood).items())}|"
                            f"{problem.augment!r}".encode())
    buffers = getattr(problem.model, "buffer_state", dict)()
    for tensor in (problem.X, problem.y, problem.prior_precision, problem.theta0, problem.generator.get_state(),
                   *buffers.values()):
        digest.update(f"{tensor.dtype}{tuple(tensor.shape)}{tensor.device.type}".encode())
        digest.update(tensor.detach().cpu().reshape(-1).contiguous().view(torch.uint8).numpy().tobytes())
    return digest


def cached_fit(problem: Problem, stage: str, settings: Any, compute: Callable[[], Fit]) -> Fit:
    """``compute()``, or the stored result of the same ``stage`` with the same ``settings`` (a dataclass) on the
    same problem from ``problem.fit_cache``; no store when ``problem.fit_cache`` is ``None``."""
    if problem.fit_cache is None:
        return compute()
    digest = problem_digest(problem)
    digest.update(f"|{stage}|{json.dumps(dataclasses.asdict(settings), sort_keys=True, default=str)}".encode())
    digest.update(Path(sys.modules[compute.__module__].__file__).read_bytes())  # the trainer's own source
    path = Path(problem.fit_cache) / stage / f"{digest.hexdigest()[:20]}.pt"
    if path.exists():
        log.info("%s reused from %s", stage, path)
        stored = torch.load(path, map_location="cpu", weights_only=True)
        problem.generator.set_state(stored["generator"])
        problem.model.load_buffers(stored["buffers"])
        theta = stored["theta"].to(problem.theta0.device)
        return Fit(theta=theta, posterior=None, info=stored["info"], trace=stored["trace"])
    fit = compute()
    if fit.posterior is not None:
        raise ValueError(f"cached_fit stores point estimates; {stage} returned a posterior")
    save_torch(path, {"theta": fit.theta.detach(), "info": fit.info, "trace": fit.trace,
                      "generator": problem.generator.get_state(), "buffers": problem.model.buffer_state()})
    return fit
