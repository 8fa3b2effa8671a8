"""A content-addressed store of point estimates, so runs that share a stage (e.g. one MAP under a full Laplace, a
diagonal Laplace and two refinements) compute it once.

The key hashes everything the stage reads: the training data, prior precision, start point, random-generator state,
the network's architecture and starting buffers, the likelihood, the stage's settings and the digest of the
package's code (:mod:`bnnpred.provenance`). A hit returns the stored ``Fit`` on the problem's device and leaves the
generator and the network's buffers (batch-norm statistics) where the computation left them, so later stages see
the same state either way. Entries carry a checksum: one that does not verify (a flipped bit, a truncated or empty
file) is moved aside with a warning and computed again. Entries are written atomically, so parallel runs computing
the same stage at once both succeed and leave one valid entry; a store that cannot be written costs a warning,
not the run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bnnpred.inference.base import Fit, Problem
from bnnpred.io import CorruptFile, load_checked, save_checked
from bnnpred.provenance import code_digest

log = logging.getLogger(__name__)


def problem_digest(problem: Problem) -> hashlib._Hash:
    """sha256 over the code, the problem's data, prior, start point, generator state, network and likelihood, and
    the monitor's metrics at the start point: a stored trace's validation and test columns are those of the splits
    the monitor evaluates, so runs that monitor other splits do not share an entry."""
    digest = hashlib.sha256(f"bnnpred code {code_digest()}|{repr(getattr(problem.model, 'module', problem.model))}|"
                            f"{type(problem.likelihood).__name__}{sorted(vars(problem.likelihood).items())}|"
                            f"{problem.augment!r}".encode())
    digest.update(json.dumps(problem.monitored(problem.theta0), sort_keys=True).encode())
    buffers = getattr(problem.model, "buffer_state", dict)()
    fixed = getattr(problem.model, "fixed", {})  # a SubsetModel's other parameters, held at θ*
    for tensor in (problem.X, problem.y, problem.prior_precision, problem.theta0, problem.generator.get_state(),
                   *buffers.values(), *fixed.values()):
        digest.update(f"{tensor.dtype}{tuple(tensor.shape)}{tensor.device.type}".encode())
        digest.update(tensor.detach().cpu().reshape(-1).contiguous().view(torch.uint8).numpy().tobytes())
    return digest


def stage_digest(problem: Problem, stage: str, settings: Any) -> str:
    """20 hex digits identifying a stage (``settings``: its dataclass) on ``problem`` with this code: the key of
    its fit-cache entry and of its checkpoints."""
    digest = problem_digest(problem)
    digest.update(f"|{stage}|{json.dumps(dataclasses.asdict(settings), sort_keys=True, default=str)}".encode())
    return digest.hexdigest()[:20]


def cached_fit(problem: Problem, stage: str, settings: Any, compute: Callable[[], Fit]) -> Fit:
    """``compute()``, or the stored result of the same ``stage`` with the same ``settings`` (a dataclass) on the
    same problem from its session's ``fit_cache``; no store when that is ``None``."""
    if problem.session.fit_cache is None:
        return compute()
    identity = stage_digest(problem, stage, settings)
    path = Path(problem.session.fit_cache) / stage / f"{identity}.pt"
    if (stored := _load(path, identity)) is not None:
        log.info("%s reused from %s", stage, path)
        problem.generator.set_state(stored["generator"])
        problem.model.load_buffers(stored["buffers"])
        theta = stored["theta"].to(problem.theta0.device)
        timing = {**stored["timing"], "from_fit_cache": 1.0} if stored.get("timing") else {}
        return Fit(theta=theta, posterior=None, info=stored["info"], trace=stored["trace"], timing=timing)
    fit = compute()
    if fit.posterior is not None:
        raise ValueError(f"cached_fit stores point estimates; {stage} returned a posterior")
    try:
        save_checked(path, {"identity": identity, "theta": fit.theta.detach().cpu(), "info": fit.info,
                            "trace": fit.trace, "timing": fit.timing, "generator": problem.generator.get_state(),
                            "buffers": problem.model.buffer_state()})
    except OSError as e:
        log.warning("fit cache: could not store %s (%s); the run goes on without it", path, e.strerror or e)
    return fit


def _load(path: Path, identity: str) -> dict[str, Any] | None:
    """The verified entry at ``path`` of the stage ``identity`` names; None when absent, or (moved aside to
    ``*.corrupt``, with a warning) when it does not verify or is another problem's (a valid file under this name)."""
    try:
        stored = load_checked(path)
        if stored.get("identity") != identity:
            raise CorruptFile(f"{path} holds the entry of another problem or stage ({stored.get('identity')})")
        return stored
    except FileNotFoundError:
        return None
    except CorruptFile as e:
        aside = path.with_suffix(".corrupt")
        try:
            path.replace(aside)
            log.warning("fit cache: %s; moved to %s and computing it again", e, aside.name)
        except OSError:
            log.warning("fit cache: %s; computing it again", e)
        return None
    except OSError as e:
        log.warning("fit cache: could not read %s (%s); computing it again", path, e.strerror or e)
        return None
