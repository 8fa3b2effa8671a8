"""Structured config schemas registered in Hydra's ConfigStore, so typos and wrong types fail at start.

The root schema types the fixed nodes (prior, likelihood, predictive, selection, plot); each dataset, model
and inference method registers its own dataclass under ``schema/<group>/<name>``, which the group's YAML
extends (``defaults: [/schema/<group>/<name>@_here_, _self_]``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np
import torch
from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from bnnpred._version import __version__
from bnnpred.data import dataset_schemas
from bnnpred.inference import METHODS
from bnnpred.models import MODELS
from bnnpred.predictive import GPSubset, PredictiveKind
from bnnpred.prior import PriorConfig
from bnnpred.provenance import code_digest
from bnnpred.selection import SelectionConfig


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class DType(str, Enum):
    float32 = "float32"
    float64 = "float64"

    @property
    def torch(self) -> torch.dtype:
        """The torch dtype of that name."""
        return getattr(torch, self.value)


class Split(str, Enum):
    train = "train"
    valid = "valid"
    test = "test"


class SweepObjective(str, Enum):
    """What a run returns to a Hydra sweeper that optimises (Optuna, Nevergrad), which is told its direction."""

    log_marglik = "log_marglik"  # the Laplace-GGN log evidence of the chosen fit (maximize)
    valid_nll = "valid_nll"  # the validation NLL of the first predictive (minimize)
    cv_nll = "cv_nll"  # the K-fold cross-validated NLL of selection=cv_nll's chosen point (minimize)

    @property
    def maximized(self) -> bool:
        """Whether a sweeper should maximise the objective (the evidence) rather than minimise it (an NLL)."""
        return self is SweepObjective.log_marglik


@dataclass
class LikelihoodConfig:
    sigma2: float = 0.1  # Gaussian noise variance (regression only)
    # noise precision τ on the original target scale (SLANG's UCI setup, notes-002 §3.5): replaces sigma2 by
    # 1/(τ·s²) on targets standardised by s; null: sigma2 as it is
    noise_precision: float | None = None


@dataclass
class PredictiveConfig:
    kinds: list[PredictiveKind] = field(default_factory=lambda: [PredictiveKind.glm])
    # the splits every predictive is evaluated on (image runs skip the training set)
    splits: list[Split] = field(default_factory=lambda: list(Split))
    n_samples: int = 1000
    gp_subset_size: int | None = None  # None: all N training points
    gp_subset: GPSubset = GPSubset.random
    # prior precision δ·N/M·factor for the subset GP, the factor chosen by validation NLL (notes-004 §2.4; the
    # reference uses ${logspace:-1,3,13}); None: δ as it is
    gp_prior_factors: list[float] | None = None
    # only same-class kernel pairs k_c(x, x') = J_c S₀ J_cᵀ (the reference's multi-class GP; kernel products 1/C)
    gp_per_class: bool = False


class PlotFormat(str, Enum):
    png = "png"
    pdf = "pdf"
    svg = "svg"


@dataclass
class PlotConfig:
    enabled: bool = True  # figures for 1-D and 2-D inputs
    format: PlotFormat = PlotFormat.png  # the run's figure files (vector formats for papers)
    grid_points: int = 100  # per axis
    n_function_samples: int = 3


@dataclass
class Config:
    dataset: Any = MISSING
    ood: Any = None  # an out-of-distribution dataset (config group ood): OOD-AUC by predictive entropy
    model: Any = MISSING
    inference: Any = MISSING
    predictive: PredictiveConfig = field(default_factory=PredictiveConfig)
    selection: SelectionConfig = field(default_factory=SelectionConfig)
    prior: PriorConfig = field(default_factory=PriorConfig)
    likelihood: LikelihoodConfig = field(default_factory=LikelihoodConfig)
    plot: PlotConfig = field(default_factory=PlotConfig)
    seed: int = 0
    device: Device = Device.auto
    dtype: DType = DType.float64
    progress: bool = True
    force: bool = False  # rerun even when the run directory holds a finished run of this config
    # CPU threads per run (None: torch's default; joblib workers get cores / n_jobs). BLAS sums depend on it in
    # the last bits, so fix it for bitwise-identical numbers across launchers.
    threads: int | None = None
    task_name: str = "train"
    tags: list[str] = field(default_factory=list)
    # Folder of point estimates shared between runs (a MAP computed once serves the full and diagonal Laplace and
    # the refinements of the same data, prior and seed; keyed by content). null: train every run's own.
    fit_cache: str | None = "runs/fit_cache"
    # A fit that diverged (ended worse than it started, a MAP whose gradient norm did not fall) or metrics that are
    # not finite fail the run; true keeps such a run, flagged in metrics.json and in every table.
    keep_unhealthy: bool = False
    objective: SweepObjective = SweepObjective.log_marglik  # the value a run returns to an optimising sweeper
    # seconds between two checkpoints of a long training (taken at epoch boundaries; a killed run resumes from
    # its last one and ends with the same numbers)
    checkpoint_seconds: float = 300.0


def logspace(start: float, stop: float, num: int) -> list[float]:
    """``${logspace:-2,2,9}`` in a config: ``num`` values from ``10**start`` to ``10**stop``."""
    return [float(v) for v in np.logspace(float(start), float(stop), int(num))]


def logspace_sweep(start: float, stop: float, num: int) -> str:
    """``${logspace_sweep:-2,2,9}`` in ``hydra.sweeper.params``: the same values as a sweep string."""
    return ",".join(f"{v:.6g}" for v in logspace(start, stop, num))


# Settings that change how a run is shown, named or scheduled, not its results: left out of the run key.
NOT_IN_RUN_KEY = ("hydra", "progress", "force", "threads", "task_name", "tags", "fit_cache", "objective",
                  "checkpoint_seconds")


def run_key(cfg: Any) -> str:
    """The identity of a run: 12 hex digits of the sha256 of its resolved config (without ``NOT_IN_RUN_KEY``)
    and the digest of the code that computes it (:mod:`bnnpred.provenance`). Run directories are named by it, so a
    sweep started again finds its finished runs, and a sweep after a code change trains them again."""
    kept = OmegaConf.masked_copy(cfg, [k for k in cfg if k not in NOT_IN_RUN_KEY])
    identity = OmegaConf.to_container(kept, resolve=True, enum_to_str=True)
    text = json.dumps(identity, sort_keys=True) + f"|bnnpred {__version__}|code {code_digest()}"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _run_key_resolver(*, _root_: Any) -> str:
    """``${run_key:}`` in ``hydra.run.dir`` / ``hydra.sweep.subdir``: the key of the job's config."""
    return run_key(_root_)


_STORED: dict[tuple[str | None, str], type] = {}  # what register_configs put in the ConfigStore, by (group, name)


def register_configs() -> None:
    """Register the root schema, every group's schemas and the resolvers (idempotent: a schema already stored under
    its name is not stored again, which made each compose about a third slower)."""
    for name, resolver in [("logspace", logspace), ("logspace_sweep", logspace_sweep), ("run_key", _run_key_resolver)]:
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, resolver)
    groups: dict[str | None, dict[str, type]] = {
        None: {"bnnpred_schema": Config},
        "schema/dataset": dataset_schemas(),
        "schema/model": {name: schema for name, (schema, _) in MODELS.items()},
        "schema/inference": {name: schema for name, (schema, _) in METHODS.items()},
    }
    for group, schemas in groups.items():
        for name, schema in schemas.items():
            if _STORED.get((group, name)) is not schema:
                ConfigStore.instance().store(group=group, name=name, node=schema)
                _STORED[group, name] = schema


def retyped(saved: Any) -> Any:
    """A saved (plain, resolved) run config merged back onto its schemas, looked up by each node's ``name``."""
    from bnnpred.errors import unknown_choice

    registries = {"dataset": dataset_schemas(), "ood": dataset_schemas(),
                  "model": {name: schema for name, (schema, _) in MODELS.items()},
                  "inference": {name: schema for name, (schema, _) in METHODS.items()}}
    cfg = OmegaConf.merge(OmegaConf.structured(Config), {k: v for k, v in saved.items() if k not in registries})
    for group, schemas in registries.items():
        if saved.get(group) is None:  # no OOD set
            continue
        name = saved[group]["name"]
        if name not in schemas:
            raise unknown_choice(group, name, schemas)
        cfg[group] = OmegaConf.merge(OmegaConf.structured(schemas[name]), saved[group])
    return cfg
