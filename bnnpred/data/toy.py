"""Low-dimensional datasets: two moons, the step, cubic and counts toys, Snelson (real and generated with a gap)
and banana.

Each dataset has one config dataclass (omegaconf-compatible; ``seed`` follows the run seed through the
interpolation ``${seed}``) and one loader ``load_<name>(cfg, root) -> Dataset``. Loaders that read files
take the data root (see :mod:`bnnpred.data.root`); the others ignore it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from omegaconf import II

from bnnpred.data.base import Dataset, Task
from bnnpred.data.root import data_root, require_file
from bnnpred.data.splits import standardized, stratified_split, stratified_take
from bnnpred.errors import BnnpredError

SNELSON_FILE = "snelson/snelson.npz"
BANANA_FILE = "banana/banana.csv"


@dataclass
class TwoMoonsConfig:
    """Two moons as scikit-learn draws them (notes-000 §8 item 3): noise 0.3, 150 train points, 1000 test points.

    The three splits use ``random_state`` = ``3*seed``, ``3*seed+1`` and ``3*seed+2`` (train, valid, test),
    so they are independent draws and no two run seeds share a split.
    """

    name: str = "two_moons"
    seed: int = II("seed")
    n_train: int = 150
    n_valid: int = 150
    n_test: int = 1000
    noise: float = 0.3


@dataclass
class SnelsonConfig:
    """The real 200 Snelson points, split by a seeded permutation.

    ``gap = [lo, hi]`` drops training points with ``lo < x < hi`` (validation and test keep them).
    """

    name: str = "snelson"
    root: str | None = None
    seed: int = II("seed")
    valid_fraction: float = 0.1
    test_fraction: float = 0.1
    gap: list[float] | None = None


@dataclass
class SnelsonGapConfig:
    """Snelson-with-gap generated from a smooth interpolant of the real data (notes-000 §8 item 2).

    ``x ~ U[x_low, x_high]``, ``y = f(x) + N(0, noise_std^2)`` where ``f`` is the GP posterior mean of the
    real 200 points (RBF kernel, ``interp_lengthscale``, signal variance 1, ``interp_noise``, constant
    mean = data mean). Training points in the open ``gap`` are rejected and redrawn; validation and test
    points are drawn over the whole interval unless ``gap_in_test``.
    """

    name: str = "snelson_gap"
    root: str | None = None
    seed: int = II("seed")
    n_train: int = 150
    n_valid: int = 150
    n_test: int = 1000
    noise_std: float = 0.3
    x_low: float = 0.059167804
    x_high: float = 5.9657729
    gap: list[float] | None = field(default_factory=lambda: [1.5, 2.4])
    gap_in_test: bool = False
    interp_lengthscale: float = 0.5
    interp_noise: float = 0.08


@dataclass
class BananaConfig:
    """Raetsch's banana set (5300 points, labels {1, 2} mapped to {0, 1}), split stratified and seeded.

    ``n_train`` optionally subsamples the training split (stratified) for quick runs; with ``standardize``
    the features are scaled by the mean and std of the final training split.
    """

    name: str = "banana"
    root: str | None = None
    seed: int = II("seed")
    valid_fraction: float = 0.15
    test_fraction: float = 0.15
    standardize: bool = True
    n_train: int | None = None


# ---------------------------------------------------------------------------------------------------------
# Validation


def _check_seed(dataset: str, seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise BnnpredError(
            f"dataset '{dataset}': seed must be a non-negative integer, got {seed!r}; set seed=N"
        )
    return seed


def _check_counts(dataset: str, **counts: int) -> None:
    for key, value in counts.items():
        if value < 1:
            raise BnnpredError(
                f"dataset '{dataset}': {key} must be positive, got {value}; set dataset.{key}=N"
            )


def _check_positive(dataset: str, **values: float) -> None:
    for key, value in values.items():
        if not value > 0:
            raise BnnpredError(f"dataset '{dataset}': {key} must be positive, got {value}; set dataset.{key}")


def _uniform_and_grid(rng: np.random.Generator, n_train: int, train_max: float, n_test: int,
                      test_max: float) -> tuple[np.ndarray, np.ndarray]:
    """1-D training inputs ``~ U[-train_max, train_max]`` ``[n_train]`` and test inputs on an even grid over
    ``[-test_max, test_max]`` ``[n_test]``."""
    return rng.uniform(-train_max, train_max, n_train), np.linspace(-test_max, test_max, n_test)


def _check_fractions(dataset: str, valid_fraction: float, test_fraction: float) -> None:
    for key, value in (("valid_fraction", valid_fraction), ("test_fraction", test_fraction)):
        if not 0.0 <= value < 1.0:
            raise BnnpredError(f"dataset '{dataset}': {key} must be in [0, 1), got {value}")
    if valid_fraction + test_fraction >= 1.0:
        raise BnnpredError(
            f"dataset '{dataset}': valid_fraction + test_fraction must be < 1, got "
            f"{valid_fraction} + {test_fraction}; lower one of them"
        )


def _check_gap(dataset: str, gap: list[float] | None) -> tuple[float, float] | None:
    if gap is None:
        return None
    if len(gap) != 2 or not gap[0] < gap[1]:
        raise BnnpredError(
            f"dataset '{dataset}': gap must be [lo, hi] with lo < hi, got {list(gap)}; "
            "set dataset.gap=[LO,HI] or dataset.gap=null"
        )
    return float(gap[0]), float(gap[1])


def _check_finite(dataset: str, source: str, fix: str, **arrays: np.ndarray) -> None:
    for what, values in arrays.items():
        if not np.isfinite(values).all():
            raise BnnpredError(f"dataset '{dataset}': NaN or inf in {what} from {source}; {fix}")


# ---------------------------------------------------------------------------------------------------------
# Helpers


def _in_gap(x: np.ndarray, gap: tuple[float, float] | None) -> np.ndarray:
    """Boolean mask ``[N]`` of the points strictly inside ``gap`` (all False without a gap)."""
    if gap is None:
        return np.zeros(x.shape, dtype=bool)
    return (gap[0] < x) & (x < gap[1])


def _regression_split(x: np.ndarray, y: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """``x [N]`` and ``y [N]`` (real values or counts) as float64 tensors ``[N, 1]`` and ``[N]``."""
    return torch.from_numpy(np.ascontiguousarray(x, np.float64).reshape(-1, 1)), torch.from_numpy(
        np.ascontiguousarray(y, np.float64)
    )


def _classification_split(x: np.ndarray, y: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """``x [N, d]`` and labels ``y [N]`` as float64 and int64 tensors."""
    return torch.from_numpy(np.ascontiguousarray(x, np.float64)), torch.from_numpy(
        np.ascontiguousarray(y, np.int64)
    )


def _dataset(
    name: str,
    task: Task,
    n_classes: int,
    input_shape: tuple[int, ...],
    splits: list[tuple[torch.Tensor, torch.Tensor]],
) -> Dataset:
    (X_train, y_train), (X_valid, y_valid), (X_test, y_test) = splits
    return Dataset(name, task, n_classes, input_shape, X_train, y_train, X_valid, y_valid, X_test, y_test)


# ---------------------------------------------------------------------------------------------------------
# Two moons


def load_two_moons(cfg: TwoMoonsConfig, root: Path | None = None) -> Dataset:
    """Two interleaved half circles with Gaussian noise; binary labels.

    Returns:
        Dataset with X ``[N, 2]`` float64 and y ``[N]`` int64 in {0, 1}.
    """
    seed = _check_seed(cfg.name, cfg.seed)
    _check_counts(cfg.name, n_train=cfg.n_train, n_valid=cfg.n_valid, n_test=cfg.n_test)
    if cfg.noise < 0:
        raise BnnpredError(f"dataset '{cfg.name}': noise must be >= 0, got {cfg.noise}")
    splits = []
    for offset, n in enumerate((cfg.n_train, cfg.n_valid, cfg.n_test)):
        x, y = moons(n, cfg.noise, np.random.RandomState(3 * seed + offset))
        _check_finite(cfg.name, "two moons", "check dataset.noise", inputs=x)
        splits.append(_classification_split(x, y))
    return _dataset("two_moons", Task.binary, 2, (2,), splits)


def moons(n: int, noise: float, generator: np.random.RandomState) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points of two interleaved half circles, shuffled, plus N(0, noise²) on each coordinate: X ``[n, 2]``,
    y ``[n]`` (the outer circle's ``n // 2`` points are class 0). Draws exactly what scikit-learn's
    ``make_moons(n, shuffle=True, noise=noise, random_state=generator)`` draws, without its import (about 2 s of a
    run's start); the test holds the two equal."""
    n_outer, n_inner = n // 2, n - n // 2
    outer, inner = np.linspace(0, np.pi, n_outer), np.linspace(0, np.pi, n_inner)
    x = np.stack([np.append(np.cos(outer), 1 - np.cos(inner)), np.append(np.sin(outer), 1 - np.sin(inner) - 0.5)], 1)
    y = np.append(np.zeros(n_outer, dtype=np.intp), np.ones(n_inner, dtype=np.intp))
    order = np.arange(n)
    generator.shuffle(order)
    return x[order] + generator.normal(scale=noise, size=(n, 2)), y[order]


@dataclass
class StepConfig:
    """The GLM-predictive paper's 1-D step data (notes-004 §3.1; size and range not given): ``x ~ U[-x_max,
    x_max]`` with ``y = 1[x ≥ 0]``; test points on an even grid over ``[-x_max, x_max]``."""

    name: str = "step"
    seed: int = II("seed")
    n_train: int = 30
    n_test: int = 200
    x_max: float = 3.0


def load_step(cfg: StepConfig, root: Path | None = None) -> Dataset:
    """Dataset with X ``[N, 1]`` float64 and y ``[N]`` int64 in {0, 1}; no validation split."""
    seed = _check_seed(cfg.name, cfg.seed)
    _check_counts(cfg.name, n_train=cfg.n_train, n_test=cfg.n_test)
    _check_positive(cfg.name, x_max=cfg.x_max)
    x_train, x_test = _uniform_and_grid(np.random.default_rng(seed), cfg.n_train, cfg.x_max, cfg.n_test, cfg.x_max)
    splits = [_classification_split(x.reshape(-1, 1), (x >= 0).astype(np.int64))
              for x in (x_train, x_train[:0], x_test)]
    return _dataset("step", Task.binary, 2, (1,), splits)


@dataclass
class CubicConfig:
    """The SLANG paper's toy regression (notes-002 §3.4, Fig. 8): ``x ~ U[-x_max, x_max]``, ``y = x³ + ε`` with
    ``ε ~ N(0, noise_var)``, unnormalised; test points on an even grid over ``[-test_max, test_max]``, which
    reaches beyond the data (the figure shows ``|x| ≤ 6``), with noisy targets."""

    name: str = "cubic"
    seed: int = II("seed")
    n_train: int = 30
    n_test: int = 241
    x_max: float = 4.0
    test_max: float = 6.0
    noise_var: float = 9.0


def load_cubic(cfg: CubicConfig, root: Path | None = None) -> Dataset:
    """Dataset with X ``[N, 1]`` and y ``[N]`` float64; no validation split."""
    seed = _check_seed(cfg.name, cfg.seed)
    _check_counts(cfg.name, n_train=cfg.n_train, n_test=cfg.n_test)
    _check_positive(cfg.name, x_max=cfg.x_max, test_max=cfg.test_max, noise_var=cfg.noise_var)
    rng = np.random.default_rng(seed)
    x_train, x_test = _uniform_and_grid(rng, cfg.n_train, cfg.x_max, cfg.n_test, cfg.test_max)
    splits = [_regression_split(x, x**3 + np.sqrt(cfg.noise_var) * rng.standard_normal(len(x)))
              for x in (x_train, x_train[:0], x_test)]
    return _dataset("cubic", Task.regression, 1, (1,), splits)


@dataclass
class CountsConfig:
    """A 1-D count regression toy for the Poisson likelihood: ``x ~ U[-x_max, x_max]`` (train and validation),
    ``y ~ Poisson(exp(1 + sin 2x))`` (rates from 1 to e² ≈ 7.4); test points on an even grid over the same
    interval, with sampled counts."""

    name: str = "counts"
    seed: int = II("seed")
    n_train: int = 150
    n_valid: int = 50
    n_test: int = 200
    x_max: float = 3.0


def load_counts(cfg: CountsConfig, root: Path | None = None) -> Dataset:
    """Dataset with X ``[N, 1]`` float64 and counts y ``[N]`` as float64 whole numbers."""
    seed = _check_seed(cfg.name, cfg.seed)
    _check_counts(cfg.name, n_train=cfg.n_train, n_valid=cfg.n_valid, n_test=cfg.n_test)
    _check_positive(cfg.name, x_max=cfg.x_max)
    rng = np.random.default_rng(seed)
    x_train, x_test = _uniform_and_grid(rng, cfg.n_train, cfg.x_max, cfg.n_test, cfg.x_max)
    x_valid = rng.uniform(-cfg.x_max, cfg.x_max, cfg.n_valid)
    splits = [_regression_split(x, rng.poisson(np.exp(1 + np.sin(2 * x)))) for x in (x_train, x_valid, x_test)]
    return _dataset("counts", Task.count, 1, (1,), splits)


# ---------------------------------------------------------------------------------------------------------
# Snelson


def _read_snelson(root: Path) -> tuple[np.ndarray, np.ndarray]:
    """The real Snelson training points ``x [200]`` and ``y [200]`` (float64)."""
    path = require_file(root, "snelson", SNELSON_FILE)
    with np.load(path, allow_pickle=False) as npz:
        x = np.asarray(npz["x_train"], np.float64)
        y = np.asarray(npz["y_train"], np.float64)
    _check_finite("snelson", str(path), "run: bnnpred data fetch snelson --force", inputs=x, targets=y)
    return x, y


def load_snelson(cfg: SnelsonConfig, root: Path | None = None) -> Dataset:
    """The real 200 Snelson points split into train / valid / test by a permutation seeded with ``seed``.

    Returns:
        Regression Dataset with X ``[N, 1]`` and y ``[N]`` (float64); the splits hold 200 points in total
        minus the training points dropped by ``gap``.
    """
    seed = _check_seed(cfg.name, cfg.seed)
    _check_fractions(cfg.name, cfg.valid_fraction, cfg.test_fraction)
    gap = _check_gap(cfg.name, cfg.gap)
    x, y = _read_snelson(root if root is not None else data_root(cfg.root))
    order = np.random.default_rng(seed).permutation(x.size)
    n_test, n_valid = round(cfg.test_fraction * x.size), round(cfg.valid_fraction * x.size)
    test, valid, train = np.split(order, [n_test, n_test + n_valid])
    train = train[~_in_gap(x[train], gap)]
    if train.size == 0:
        raise BnnpredError(
            f"dataset '{cfg.name}': no training points left; lower the fractions or narrow gap"
        )
    splits = [_regression_split(x[idx], y[idx]) for idx in (train, valid, test)]
    return _dataset("snelson", Task.regression, 1, (1,), splits)


def _rbf(a: np.ndarray, b: np.ndarray, lengthscale: float) -> np.ndarray:
    """RBF kernel with unit signal variance between ``a [N]`` and ``b [M]``; returns ``[N, M]``."""
    return np.exp(-0.5 * ((a[:, None] - b[None, :]) / lengthscale) ** 2)


def _gp_posterior_mean(
    x: np.ndarray, y: np.ndarray, lengthscale: float, noise: float
) -> Callable[[np.ndarray], np.ndarray]:
    """Posterior mean of GP regression on ``x [N]``, ``y [N]`` with an RBF kernel and constant mean."""
    mean = y.mean()
    weights = np.linalg.solve(_rbf(x, x, lengthscale) + noise * np.eye(x.size), y - mean)

    def f(x_new: np.ndarray) -> np.ndarray:
        x_new = np.asarray(x_new, np.float64)
        return (mean + _rbf(x_new.reshape(-1), x, lengthscale) @ weights).reshape(x_new.shape)

    return f


def snelson_function(root: Path, cfg: SnelsonGapConfig) -> Callable[[np.ndarray], np.ndarray]:
    """The true function of ``snelson_gap``: a smooth interpolant of the real Snelson data.

    notes-000 §8 item 2: the thesis generates Snelson-with-gap from a function fitted to the original
    data; we use the GP posterior mean (deterministic given the data and the ``interp_*`` settings).

    Returns:
        ``f`` mapping float64 inputs of any shape to float64 outputs of the same shape.
    """
    if cfg.interp_lengthscale <= 0 or cfg.interp_noise <= 0:
        raise BnnpredError(
            f"dataset '{cfg.name}': interp_lengthscale and interp_noise must be positive, got "
            f"{cfg.interp_lengthscale} and {cfg.interp_noise}"
        )
    x, y = _read_snelson(root)
    return _gp_posterior_mean(x, y, cfg.interp_lengthscale, cfg.interp_noise)


def _uniform_outside_gap(
    rng: np.random.Generator, n: int, low: float, high: float, gap: tuple[float, float] | None
) -> np.ndarray:
    """``n`` draws ``[n]`` from U[low, high], redrawing those strictly inside ``gap``."""
    kept = np.empty(0)
    while kept.size < n:
        draws = rng.uniform(low, high, size=n)
        kept = np.concatenate([kept, draws[~_in_gap(draws, gap)]])
    return kept[:n]


def _check_snelson_gap(cfg: SnelsonGapConfig) -> tuple[float, float] | None:
    _check_counts(cfg.name, n_train=cfg.n_train, n_valid=cfg.n_valid, n_test=cfg.n_test)
    if not cfg.x_low < cfg.x_high:
        raise BnnpredError(f"dataset '{cfg.name}': need x_low < x_high, got {cfg.x_low} and {cfg.x_high}")
    if cfg.noise_std < 0:
        raise BnnpredError(f"dataset '{cfg.name}': noise_std must be >= 0, got {cfg.noise_std}")
    gap = _check_gap(cfg.name, cfg.gap)
    if gap is not None and gap[0] <= cfg.x_low and gap[1] >= cfg.x_high:
        raise BnnpredError(
            f"dataset '{cfg.name}': gap {list(gap)} covers the whole interval [{cfg.x_low}, {cfg.x_high}]; "
            "narrow the gap"
        )
    return gap


def load_snelson_gap(cfg: SnelsonGapConfig, root: Path | None = None) -> Dataset:
    """Snelson-with-gap (notes-000 §8 item 2): ``n_train`` noisy draws outside the gap, valid and test draws.

    Train, valid and test use independent numpy streams spawned from ``SeedSequence(seed)``, so changing
    one split's size leaves the others unchanged.

    Returns:
        Regression Dataset with X ``[N, 1]`` and y ``[N]`` (float64).
    """
    seed = _check_seed(cfg.name, cfg.seed)
    gap = _check_snelson_gap(cfg)
    f = snelson_function(root if root is not None else data_root(cfg.root), cfg)
    held_out_gap = gap if cfg.gap_in_test else None
    streams = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3)]
    splits = []
    for rng, n, split_gap in zip(
        streams, (cfg.n_train, cfg.n_valid, cfg.n_test), (gap, held_out_gap, held_out_gap), strict=True
    ):
        x = _uniform_outside_gap(rng, n, cfg.x_low, cfg.x_high, split_gap)
        y = f(x) + cfg.noise_std * rng.standard_normal(n)
        _check_finite(cfg.name, "the generator", "check noise_std and the interp_* settings", targets=y)
        splits.append(_regression_split(x, y))
    return _dataset("snelson_gap", Task.regression, 1, (1,), splits)


# ---------------------------------------------------------------------------------------------------------
# Banana


def _read_banana(root: Path) -> tuple[np.ndarray, np.ndarray]:
    """Banana inputs ``[5300, 2]`` (float64) and labels ``[5300]`` mapped {1, 2} -> {0, 1} (int64)."""
    path = require_file(root, "banana", BANANA_FILE)
    table = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
    x, labels = table[:, :2], table[:, 2]
    _check_finite("banana", str(path), "run: bnnpred data fetch banana --force", inputs=x, targets=labels)
    if not np.isin(labels, (1.0, 2.0)).all():
        raise BnnpredError(
            f"dataset 'banana': labels in {path} must be 1 or 2; run: bnnpred data fetch banana --force"
        )
    return x, (labels == 2.0).astype(np.int64)


def load_banana(cfg: BananaConfig, root: Path | None = None) -> Dataset:
    """Banana binary classification with seeded stratified train / valid / test splits.

    Returns:
        Dataset with X ``[N, 2]`` float64 (standardised with training statistics if ``standardize``) and
        y ``[N]`` int64 in {0, 1}.
    """
    seed = _check_seed(cfg.name, cfg.seed)
    _check_fractions(cfg.name, cfg.valid_fraction, cfg.test_fraction)
    x, y = _read_banana(root if root is not None else data_root(cfg.root))
    train, valid, test = stratified_split(cfg.name, y, cfg.valid_fraction, cfg.test_fraction, seed)
    if cfg.n_train is not None:
        _check_counts(cfg.name, n_train=cfg.n_train)
        if cfg.n_train > train.size:
            raise BnnpredError(
                f"dataset '{cfg.name}': n_train={cfg.n_train} exceeds the training split ({train.size}); "
                "lower n_train or set dataset.n_train=null"
            )
        if cfg.n_train < train.size:
            _, train = stratified_take(cfg.name, train, y, cfg.n_train, seed)
    if cfg.standardize:
        x = standardized(x, train)
    splits = [_classification_split(x[idx], y[idx]) for idx in (train, valid, test)]
    return _dataset("banana", Task.binary, 2, (2,), splits)
