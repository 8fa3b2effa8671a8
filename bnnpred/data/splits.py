"""Seeded stratified train / validation / test splits and standardisation with training statistics."""

from __future__ import annotations

import numpy as np

from bnnpred.errors import BnnpredError


def stratified_take(dataset: str, idx: np.ndarray, y: np.ndarray, n_take: int,
                    seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Split ``idx`` into ``(rest, taken)`` with ``n_take`` taken points, stratified by ``y[idx]``."""
    if n_take == 0:
        return idx, idx[:0]
    try:
        from sklearn.model_selection import train_test_split  # deferred: scikit-learn's import takes ~1 s

        rest, taken = train_test_split(idx, test_size=n_take, stratify=y[idx], random_state=seed)
    except ValueError as e:
        raise BnnpredError(
            f"dataset '{dataset}': cannot take a stratified subset of {n_take} from {idx.size} points (every class "
            "needs a member on both sides); change the split fractions or n_train"
        ) from e
    return rest, taken


def stratified_split(dataset: str, y: np.ndarray, valid_fraction: float, test_fraction: float,
                     seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row indices ``(train, valid, test)`` of labels ``y [N]``: test first, then validation, both stratified."""
    n = y.size
    rest, test = stratified_take(dataset, np.arange(n), y, round(test_fraction * n), seed)
    train, valid = stratified_take(dataset, rest, y, round(valid_fraction * n), seed)
    return train, valid, test


def standardized(x: np.ndarray, train: np.ndarray) -> np.ndarray:
    """``x [N, D]`` scaled by the mean and std of the rows ``train`` (constant features only centred)."""
    mean, std = x[train].mean(axis=0), x[train].std(axis=0)
    return (x - mean) / np.where(std > 0, std, 1.0)
