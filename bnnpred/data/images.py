"""MNIST and Fashion-MNIST from the data root (IDX files), with the papers' validation split.

Pixels are scaled to [0, 1] (notes-004 §3.4: no other normalisation for (F)MNIST); ``standardize`` uses the
training mean and standard deviation instead. The validation set is a seeded half of the official test set
(notes-004 §3.4, as the reference code did), or none. ``classes`` keeps a subset relabelled ``0..K-1`` in the
given order, e.g. ``[4, 9]`` for the thesis's MNIST 4 vs 9 (notes-000 §6.4: 9 -> 1, 4 -> 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import numpy as np
import torch
from omegaconf import II

from bnnpred.data.base import Dataset, Task
from bnnpred.data.idx import read_idx
from bnnpred.data.root import data_root, require_file
from bnnpred.errors import BnnpredError

FOLDERS = {"mnist": "mnist", "fashion_mnist": "fashion-mnist"}


class ValidSplit(str, Enum):
    test_half = "test_half"
    none = "none"


@dataclass
class MNISTConfig:
    name: str = "mnist"
    root: str | None = None
    seed: int = II("seed")
    classes: list[int] | None = None  # None: all ten digits
    n_train: int | None = None  # a seeded random subset of the training images
    valid: ValidSplit = ValidSplit.test_half
    standardize: bool = False


@dataclass
class FashionMNISTConfig(MNISTConfig):
    name: str = "fashion_mnist"


def _read_split(root: Path, name: str, stem: str) -> tuple[np.ndarray, np.ndarray]:
    folder = FOLDERS[name]
    images = read_idx(require_file(root, name, f"{folder}/{stem}-images-idx3-ubyte.gz"))
    labels = read_idx(require_file(root, name, f"{folder}/{stem}-labels-idx1-ubyte.gz"))
    if len(images) != len(labels):
        raise BnnpredError(f"dataset '{name}': {len(images)} {stem} images but {len(labels)} labels")
    return images, labels


def _keep_classes(images: np.ndarray, labels: np.ndarray, classes: list[int] | None) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose label is in ``classes``, relabelled by position in ``classes``."""
    if classes is None:
        return images, labels.astype(np.int64)
    lookup = np.full(256, -1, dtype=np.int64)
    lookup[np.asarray(classes)] = np.arange(len(classes))
    new = lookup[labels]
    keep = new >= 0
    return images[keep], new[keep]


def _check(cfg: MNISTConfig) -> None:
    if cfg.classes is not None and (len(cfg.classes) < 2 or len(set(cfg.classes)) != len(cfg.classes)
                                    or not all(0 <= c <= 9 for c in cfg.classes)):
        raise BnnpredError(f"dataset.classes must be at least two distinct digits 0-9, got {list(cfg.classes)}")
    if cfg.n_train is not None and cfg.n_train < 1:
        raise BnnpredError(f"dataset.n_train must be >= 1 or null, got {cfg.n_train}")


def load_mnist(cfg: MNISTConfig, root: Path | None = None) -> Dataset:
    """MNIST-like images ``[N, 1, 28, 28]`` float64 in [0, 1] (or standardised) and int64 labels."""
    _check(cfg)
    root = root or data_root(cfg.root)
    rng = np.random.default_rng(cfg.seed)
    X_tr, y_tr = _keep_classes(*_read_split(root, cfg.name, "train"), cfg.classes)
    X_te, y_te = _keep_classes(*_read_split(root, cfg.name, "t10k"), cfg.classes)
    if cfg.n_train is not None:
        if cfg.n_train > len(X_tr):
            raise BnnpredError(f"dataset.n_train={cfg.n_train} exceeds the {len(X_tr)} training images")
        rows = np.sort(rng.permutation(len(X_tr))[: cfg.n_train])
        X_tr, y_tr = X_tr[rows], y_tr[rows]
    order = rng.permutation(len(X_te))
    half = len(X_te) // 2 if cfg.valid is ValidSplit.test_half else 0
    valid_rows, test_rows = np.sort(order[:half]), np.sort(order[half:])
    mean, std = (X_tr.mean() / 255, X_tr.std() / 255) if cfg.standardize else (0.0, 1.0)

    def tensor(images: np.ndarray) -> torch.Tensor:
        return ((torch.from_numpy(images.astype(np.float64)) / 255 - mean) / std).unsqueeze(1)

    n_classes = 10 if cfg.classes is None else len(cfg.classes)
    return Dataset(
        name=cfg.name, task=Task.binary if n_classes == 2 else Task.multiclass, n_classes=n_classes,
        input_shape=(1, 28, 28),
        X_train=tensor(X_tr), y_train=torch.from_numpy(y_tr),
        X_valid=tensor(X_te[valid_rows]), y_valid=torch.from_numpy(y_te[valid_rows]),
        X_test=tensor(X_te[test_rows]), y_test=torch.from_numpy(y_te[test_rows]),
    )
