"""Datasets: a config schema and a loader per name (:mod:`bnnpred.data.registry`), the data files with their
checksums (:mod:`bnnpred.data.root`).

The registry's names are imported from it on first use (PEP 562), so that ``bnnpred data`` reads the file table
without the loaders' torch (about 3 s)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bnnpred.data.registry import DATASETS, Dataset, Task, dataset_schemas, load_dataset

__all__ = ["DATASETS", "Dataset", "Task", "dataset_schemas", "load_dataset"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'bnnpred.data' has no attribute '{name}'")
    from bnnpred.data import registry

    return getattr(registry, name)
