"""Dataset registry: config schema and loader per dataset name, and ``load_dataset`` for a config node."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from bnnpred.data.base import Dataset, Task
from bnnpred.data.images import (
    CIFAR10Config,
    CIFAR100Config,
    FashionMNISTConfig,
    MNISTConfig,
    SVHNConfig,
    load_images,
)
from bnnpred.data.logreg import LogRegConfig, load_logreg
from bnnpred.data.root import data_root
from bnnpred.data.toy import (
    BananaConfig,
    CountsConfig,
    CubicConfig,
    SnelsonConfig,
    SnelsonGapConfig,
    StepConfig,
    TwoMoonsConfig,
    load_banana,
    load_counts,
    load_cubic,
    load_snelson,
    load_snelson_gap,
    load_step,
    load_two_moons,
)
from bnnpred.data.uci import (
    UCIClassificationConfig,
    UCIRegressionConfig,
    load_uci_classification,
    load_uci_regression,
)
from bnnpred.errors import BnnpredError, unknown_choice

__all__ = ["DATASETS", "Dataset", "Task", "dataset_schemas", "load_dataset"]

DATASETS: dict[str, tuple[type, Callable[..., Dataset]]] = {
    "two_moons": (TwoMoonsConfig, load_two_moons),
    "snelson": (SnelsonConfig, load_snelson),
    "snelson_gap": (SnelsonGapConfig, load_snelson_gap),
    "banana": (BananaConfig, load_banana),
    "step": (StepConfig, load_step),
    "cubic": (CubicConfig, load_cubic),
    "counts": (CountsConfig, load_counts),
    "mnist": (MNISTConfig, load_images),
    "fashion_mnist": (FashionMNISTConfig, load_images),
    "cifar10": (CIFAR10Config, load_images),
    "cifar100": (CIFAR100Config, load_images),
    "svhn": (SVHNConfig, load_images),
    "uci_regression": (UCIRegressionConfig, load_uci_regression),
    "uci_classification": (UCIClassificationConfig, load_uci_classification),
    "logreg": (LogRegConfig, load_logreg),
}


def dataset_schemas() -> dict[str, type]:
    """Config dataclass of every dataset, by name (for registering structured configs)."""
    return {name: schema for name, (schema, _) in DATASETS.items()}


def _needs_data_root(schema: type) -> bool:
    """A dataset reads files exactly when its config has a ``root`` field."""
    return any(f.name == "root" for f in dataclasses.fields(schema))


def _config_values(cfg: Any) -> dict[str, Any]:
    """Plain values of a DictConfig (interpolations resolved) or of a dataclass instance."""
    if isinstance(cfg, DictConfig):
        try:
            return OmegaConf.to_container(cfg, resolve=True)
        except OmegaConfBaseException as e:
            first_line = str(e).splitlines()[0]
            raise BnnpredError(
                f"cannot resolve the dataset config (its seed is the run seed ${{seed}}): {first_line}"
            ) from e
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return dataclasses.asdict(cfg)
    raise BnnpredError(f"dataset config must be a DictConfig or a dataclass, got {type(cfg).__name__}")


def _as_schema(schema: type, cfg: Any) -> Any:
    """``cfg`` as an instance of ``schema``; keys the schema does not know are an error."""
    if isinstance(cfg, schema):
        return cfg
    values = _config_values(cfg)
    known = {f.name for f in dataclasses.fields(schema)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise BnnpredError(
            f"unknown key(s) {', '.join(unknown)} for dataset '{values['name']}'; "
            f"valid keys: {', '.join(sorted(known))}"
        )
    return schema(**values)


def load_dataset(cfg: Any) -> Dataset:
    """Load the dataset named by ``cfg.name`` with the settings in ``cfg``.

    Args:
        cfg: a DictConfig (e.g. the ``dataset`` node of the run config, whose ``seed`` interpolates the run
            seed) or a config dataclass instance.

    Returns:
        The dataset; datasets with files read them from ``data_root(cfg.root)``.

    Raises:
        BnnpredError: for an unknown name or key, invalid settings, or missing / corrupt data files.
    """
    name = getattr(cfg, "name", None)
    if name is None:
        raise BnnpredError(f"dataset config has no name; set dataset.name to one of: {', '.join(DATASETS)}")
    if name not in DATASETS:
        raise unknown_choice("dataset", name, DATASETS)
    schema, loader = DATASETS[name]
    config = _as_schema(schema, cfg)
    root = data_root(config.root) if _needs_data_root(schema) else None
    return loader(config, root)
