"""The SLANG paper's logistic-regression sets (notes-002 §3.1, Table 8) from the data root's ``logreg/`` folder:
Australian and Breast-cancer (LIBSVM ``*_scale``), USPS 3 vs 5 (the GPML resampled USPS) and a1a (LIBSVM, with its
official train / test split). Labels become 0/1 (Breast-cancer's 2/4, the others' −1/+1; USPS: 5 is the positive
class); features are used as stored (already scaled to [−1, 1] or binary). Twenty random 50/50 train / test splits,
seeded by the split index as in the reference code; a1a has its one official split.
"""

from __future__ import annotations

import gzip
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from scipy.io import loadmat

from bnnpred.data.base import Dataset, Task
from bnnpred.data.root import require_file
from bnnpred.errors import BnnpredError, unknown_choice

FILES = {"australian": "logreg/australian_scale/australian_scale.mat",
         "breast_cancer": "logreg/breast_cancer_scale/breast_cancer_scale.mat",
         "usps_3vs5": "logreg/usps_3vs5/usps_resampled.mat.gz", "a1a": "logreg/a1a/a1a.mat"}
N_SPLITS = 20


@dataclass
class LogRegConfig:
    name: str = "logreg"
    dataset: str = "australian"  # australian, breast_cancer, usps_3vs5, a1a
    split: int = 0  # 0..19 (a1a: 0 only, its official split)
    root: str | None = None


def _dense(matrix) -> np.ndarray:
    return np.asarray(matrix.toarray() if hasattr(matrix, "toarray") else matrix, dtype=np.float64)


def _read(root: Path, name: str) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    """Features, 0/1 labels and, for a1a, the official test set."""
    path = require_file(root, "logreg", FILES[name])
    if name == "usps_3vs5":
        mat = loadmat(io.BytesIO(gzip.open(path).read()))
        images = np.concatenate([mat["train_patterns"], mat["test_patterns"]], axis=1).T
        digits = np.concatenate([mat["train_labels"], mat["test_labels"]], axis=1).argmax(0)
        keep = (digits == 3) | (digits == 5)
        return images[keep], (digits[keep] == 5).astype(np.int64), None
    mat = loadmat(path)
    X, y = _dense(mat["X"]), np.asarray(mat["y"]).reshape(-1)
    if name == "a1a":
        X_te, y_te = _dense(mat["X_te"]), np.asarray(mat["y_te"]).reshape(-1)
        X = np.pad(X, ((0, 0), (0, X_te.shape[1] - X.shape[1])))  # libsvmread stopped at the train set's last index
        return X, (y > 0).astype(np.int64), (X_te, (y_te > 0).astype(np.int64))
    return X, (y == y.max()).astype(np.int64), None


def load_logreg(cfg: LogRegConfig, root: Path) -> Dataset:
    if cfg.dataset not in FILES:
        raise unknown_choice("logistic-regression set", cfg.dataset, FILES)
    splits = 1 if cfg.dataset == "a1a" else N_SPLITS
    if not 0 <= cfg.split < splits:
        raise BnnpredError(f"dataset.split must be in 0..{splits - 1} for {cfg.dataset}, got {cfg.split}")
    X, y, official_test = _read(root, cfg.dataset)
    if official_test is None:
        order = np.random.default_rng(cfg.split).permutation(len(X))
        train, test = np.sort(order[: len(X) // 2]), np.sort(order[len(X) // 2 :])
        (X_tr, y_tr), (X_te, y_te) = (X[train], y[train]), (X[test], y[test])
    else:
        (X_tr, y_tr), (X_te, y_te) = (X, y), official_test

    def t(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(a)

    empty = torch.zeros(0, X.shape[1], dtype=torch.float64)
    return Dataset(name=f"logreg/{cfg.dataset}", task=Task.binary, n_classes=2, input_shape=(X.shape[1],),
                   X_train=t(X_tr), y_train=t(y_tr), X_valid=empty, y_valid=torch.zeros(0, dtype=torch.int64),
                   X_test=t(X_te), y_test=t(y_te))
