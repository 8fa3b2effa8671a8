"""UCI regression sets with the standard 20 (protein: 5) train/test splits of Hernández-Lobato & Adams (2015),
as distributed by Gal & Ghahramani (2016): ``<root>/uci_regression/<set>/{data.txt, index_features.txt,
index_target.txt, index_train_<k>.txt, index_test_<k>.txt}``.

Inputs and targets are standardised with the mean and std of the training part of the split: ``nll`` and ``rmse``
are in standardised target units, ``nll_original`` and ``rmse_original`` in the data's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from omegaconf import II

from bnnpred.data.base import Dataset, Task
from bnnpred.data.root import require_file
from bnnpred.data.splits import standardized, stratified_split
from bnnpred.errors import BnnpredError, unknown_choice

UCI_REGRESSION_SPLITS = {
    "bostonHousing": 20, "concrete": 20, "energy": 20, "kin8nm": 20, "naval-propulsion-plant": 20,
    "power-plant": 20, "protein-tertiary-structure": 5, "wine-quality-red": 20, "yacht": 20,
}


@dataclass
class UCIRegressionConfig:
    """One UCI regression set and split; ``valid_fraction`` of the training part is held out (seeded)."""

    name: str = "uci_regression"
    dataset: str = "wine-quality-red"
    split: int = 0
    root: str | None = None
    seed: int = II("seed")
    valid_fraction: float = 0.0


def _indices(root: Path, rel: str) -> np.ndarray:
    return np.loadtxt(require_file(root, "uci_regression", rel), dtype=np.int64, ndmin=1)


def _check(cfg: UCIRegressionConfig) -> None:
    if cfg.dataset not in UCI_REGRESSION_SPLITS:
        raise unknown_choice("UCI regression set (dataset.dataset)", cfg.dataset, UCI_REGRESSION_SPLITS)
    n_splits = UCI_REGRESSION_SPLITS[cfg.dataset]
    if not 0 <= cfg.split < n_splits:
        raise BnnpredError(f"dataset.split must be in 0..{n_splits - 1} for {cfg.dataset}, got {cfg.split}")
    if not 0.0 <= cfg.valid_fraction < 1.0:
        raise BnnpredError(f"dataset.valid_fraction must be in [0, 1), got {cfg.valid_fraction}")


def load_uci_regression(cfg: UCIRegressionConfig, root: Path) -> Dataset:
    """Train / valid / test of split ``cfg.split``: X ``[N, D]`` and y ``[N]``, float64, standardised on train."""
    _check(cfg)
    folder = f"uci_regression/{cfg.dataset}"
    data = np.loadtxt(require_file(root, "uci_regression", f"{folder}/data.txt"), dtype=np.float64, ndmin=2)
    features = _indices(root, f"{folder}/index_features.txt")
    target = int(_indices(root, f"{folder}/index_target.txt")[0])
    train = _indices(root, f"{folder}/index_train_{cfg.split}.txt")
    test = _indices(root, f"{folder}/index_test_{cfg.split}.txt")
    order = np.random.default_rng(cfg.seed).permutation(len(train))
    n_valid = int(round(cfg.valid_fraction * len(train)))
    valid, train = train[order[:n_valid]], train[np.sort(order[n_valid:])]
    X, y = data[:, features], data[:, target]
    X = standardized(X, train)  # constant features (e.g. in naval) stay zero
    scale = float(y[train].std())
    y = (y - y[train].mean()) / scale

    def part(rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.from_numpy(np.ascontiguousarray(X[rows])), torch.from_numpy(y[rows])

    (X_tr, y_tr), (X_va, y_va), (X_te, y_te) = part(train), part(valid), part(test)
    return Dataset(f"uci_regression/{cfg.dataset}", Task.regression, 1, (X.shape[1],), X_tr, y_tr, X_va, y_va,
                   X_te, y_te, target_scale=scale)



# notes-004 §2.5 (Immer et al. 2021): the reference implementation's split seeds, one per split index.
UCI_CLASSIFICATION_SEEDS = (711, 1, 75, 359, 17, 420, 129, 666, 69, 36)
_PRESPLIT = {"australian": "australian_presplit/australian_scale", "breast_cancer":
             "breast_cancer_scale_presplit/breast_cancer_scale"}
_XY = {"glass", "vehicle", "waveform", "satellite"}
UCI_CLASSIFICATION = sorted([*_PRESPLIT, *_XY, "ionosphere", "digits"])


@dataclass
class UCIClassificationConfig:
    """One UCI / LIBSVM classification set of Immer et al. (2021) and one of its 10 seeded stratified splits
    (70 / 15 / 15), features standardised with training statistics (notes-004 §2.5)."""

    name: str = "uci_classification"
    dataset: str = "australian"
    split: int = 0
    root: str | None = None
    train_fraction: float = 0.70
    valid_fraction: float = 0.15
    test_fraction: float = 0.15


def _read_classification(root: Path, dataset: str) -> tuple[np.ndarray, np.ndarray]:
    """Features ``[N, D]`` and raw labels ``[N]`` of one set (the presplit sets joined, to be split again)."""
    folder = "uci_classification"
    if dataset == "digits":
        from sklearn.datasets import load_digits

        digits = load_digits()
        return digits.data.astype(np.float64), digits.target
    if dataset in _PRESPLIT:
        stem = f"{folder}/{_PRESPLIT[dataset]}"
        parts = [np.loadtxt(require_file(root, folder, f"{stem}_{v}_{s}.csv"), ndmin=2 if v == "X" else 1)
                 for s in ("tr", "te") for v in ("X", "y")]
        return np.concatenate(parts[0::2]), np.concatenate(parts[1::2])
    if dataset == "ionosphere":
        raw = np.loadtxt(require_file(root, folder, f"{folder}/ionosphere/ionosphere.data"), delimiter=",",
                         dtype=str)
        return raw[:, :-1].astype(np.float64), raw[:, -1]
    x = np.loadtxt(require_file(root, folder, f"{folder}/{dataset}/X.txt"), ndmin=2)
    return x, np.loadtxt(require_file(root, folder, f"{folder}/{dataset}/Y.txt"))


def load_uci_classification(cfg: UCIClassificationConfig, root: Path) -> Dataset:
    """Train / valid / test of split ``cfg.split``: X ``[N, D]`` float64, labels ``[N]`` int64 in ``0..C-1``
    (in the order of the sorted raw labels); binary sets have one logit (``Task.binary``)."""
    if cfg.dataset not in UCI_CLASSIFICATION:
        raise unknown_choice("UCI classification set (dataset.dataset)", cfg.dataset, UCI_CLASSIFICATION)
    if not 0 <= cfg.split < len(UCI_CLASSIFICATION_SEEDS):
        raise BnnpredError(f"dataset.split must be in 0..{len(UCI_CLASSIFICATION_SEEDS) - 1}, got {cfg.split}")
    fractions = (cfg.train_fraction, cfg.valid_fraction, cfg.test_fraction)
    if min(fractions) < 0 or abs(sum(fractions) - 1) > 1e-9:
        raise BnnpredError(f"dataset train/valid/test fractions must be non-negative and sum to 1, got "
                           f"{' + '.join(map(str, fractions))} = {sum(fractions):g}")
    x, raw = _read_classification(root, cfg.dataset)
    classes, y = np.unique(raw, return_inverse=True)
    if len(classes) < 2:
        raise BnnpredError(f"dataset '{cfg.dataset}': only one class in the labels")
    train, valid, test = stratified_split(cfg.dataset, y, cfg.valid_fraction, cfg.test_fraction,
                                          UCI_CLASSIFICATION_SEEDS[cfg.split])
    x = standardized(x, train)

    def part(rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.from_numpy(np.ascontiguousarray(x[rows])), torch.from_numpy(y[rows].astype(np.int64))

    task = Task.binary if len(classes) == 2 else Task.multiclass
    return Dataset(f"uci_classification/{cfg.dataset}", task, len(classes), (x.shape[1],), *part(train),
                   *part(valid), *part(test))
