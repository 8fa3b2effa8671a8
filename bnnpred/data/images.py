"""Image classification sets from the data root, with the papers' validation split: MNIST and Fashion-MNIST (IDX
files), CIFAR-10 and CIFAR-100 (the python pickle batches inside the official ``.tar.gz``, read without unpacking)
and SVHN (the ``train_32x32.mat`` / ``test_32x32.mat`` files; label 10 is the digit 0).

Pixels are scaled to [0, 1] (notes-004 §3.4: no other normalisation for (F)MNIST); ``standardize`` subtracts the
per-channel training mean and divides by the standard deviation instead. The validation set is a seeded half of
the official test set (notes-004 §3.4, as the reference code did), or none. ``classes`` keeps a subset relabelled
``0..K-1`` in the given order, e.g. ``[4, 9]`` for the thesis's MNIST 4 vs 9 (notes-000 §6.4: 9 -> 1, 4 -> 0).
``augment`` (32x32 sets) makes trainers draw a random crop after zero padding by 4 and, for CIFAR, a horizontal
flip per training example and step (notes-001 §6 item 6).
"""

from __future__ import annotations

import io
import pickle
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from omegaconf import II
from scipy.io import loadmat
from scipy.io.matlab import MatReadError
from torch import Tensor

from bnnpred.data.base import Dataset, Task
from bnnpred.data.idx import read_idx
from bnnpred.data.root import data_root, require_file
from bnnpred.errors import BnnpredError

FOLDERS = {"mnist": "mnist", "fashion_mnist": "fashion-mnist"}
N_CLASSES = {"mnist": 10, "fashion_mnist": 10, "cifar10": 10, "cifar100": 100, "svhn": 10}
CIFAR = {"cifar10": ("cifar-10/cifar-10-python.tar.gz", "cifar-10-batches-py",
                     [f"data_batch_{i}" for i in range(1, 6)], "test_batch", b"labels"),
         "cifar100": ("cifar-100/cifar-100-python.tar.gz", "cifar-100-python", ["train"], "test", b"fine_labels")}

Arrays = tuple[np.ndarray, np.ndarray]  # uint8 images [N, C, H, W], int labels [N]


class ValidSplit(str, Enum):
    test_half = "test_half"
    none = "none"


@dataclass
class MNISTConfig:
    name: str = "mnist"
    root: str | None = None
    seed: int = II("seed")
    classes: list[int] | None = None  # None: every class
    n_train: int | None = None  # a seeded random subset of the training images
    n_test: int | None = None  # a seeded random subset of the official test images (before the validation split)
    valid: ValidSplit = ValidSplit.test_half
    standardize: bool = False
    augment: bool = False  # random crops (and CIFAR flips) while training; 32x32 sets only


@dataclass
class FashionMNISTConfig(MNISTConfig):
    name: str = "fashion_mnist"


@dataclass
class CIFAR10Config(MNISTConfig):
    name: str = "cifar10"
    standardize: bool = True


@dataclass
class CIFAR100Config(CIFAR10Config):
    name: str = "cifar100"


@dataclass
class SVHNConfig(CIFAR10Config):
    name: str = "svhn"


@dataclass(frozen=True)
class CropFlip:
    """Per-example random crop of the zero-padded image back to its size, and a horizontal flip with
    probability ½ if ``flip``: ``[B, C, H, W] -> [B, C, H, W]``."""

    pad: int = 4
    flip: bool = True

    def __call__(self, X: Tensor, generator: torch.Generator) -> Tensor:
        B, _, H, W = X.shape
        padded = F.pad(X, (self.pad,) * 4)
        dy, dx = (torch.randint(0, 2 * self.pad + 1, (2, B), generator=generator, device=generator.device)
                  .to(X.device))
        rows = (torch.arange(H, device=X.device) + dy[:, None])[:, None, :, None]  # [B, 1, H, 1]
        cols = (torch.arange(W, device=X.device) + dx[:, None])[:, None, None, :]  # [B, 1, 1, W]
        batch = torch.arange(B, device=X.device)[:, None, None, None]
        channels = torch.arange(X.shape[1], device=X.device)[None, :, None, None]
        out = padded[batch, channels, rows, cols]
        if self.flip:
            flipped = torch.rand(B, generator=generator, device=generator.device).to(X.device) < 0.5
            out = torch.where(flipped[:, None, None, None], out.flip(-1), out)
        return out


def _read_idx_sets(root: Path, name: str) -> tuple[Arrays, Arrays]:
    def split(stem: str) -> Arrays:
        folder = FOLDERS[name]
        images = read_idx(require_file(root, name, f"{folder}/{stem}-images-idx3-ubyte.gz"))
        labels = read_idx(require_file(root, name, f"{folder}/{stem}-labels-idx1-ubyte.gz"))
        if len(images) != len(labels):
            raise BnnpredError(f"dataset '{name}': {len(images)} {stem} images but {len(labels)} labels")
        return images[:, None], labels

    return split("train"), split("t10k")


def read_cifar_archive(path: Path, name: str) -> tuple[Arrays, Arrays]:
    """Train and test arrays from the pickled batches inside the official CIFAR archive at ``path`` (``data``
    ``[N, 3072]`` uint8 rows, channel-major), read without unpacking it."""
    _, folder, train_members, test_member, label_key = CIFAR[name]

    def batch(tar: tarfile.TarFile, member: str) -> Arrays:
        handle = tar.extractfile(f"{folder}/{member}")
        entry = pickle.load(io.BytesIO(handle.read()), encoding="bytes")  # trusted: the archive's sha256 matched
        return entry[b"data"].reshape(-1, 3, 32, 32), np.asarray(entry[label_key])

    try:
        with tarfile.open(path, "r:gz") as tar:
            train = [batch(tar, m) for m in train_members]
            test = batch(tar, test_member)
    except (tarfile.TarError, EOFError, OSError, KeyError, pickle.UnpicklingError) as e:
        raise BnnpredError(f"{path} is not a complete {name} archive ({e}); run: bnnpred data fetch {name} "
                           "--force") from e
    return (np.concatenate([x for x, _ in train]), np.concatenate([y for _, y in train])), test


def read_svhn_mat(path: Path) -> Arrays:
    """``X`` ``[32, 32, 3, N]`` and ``y`` ``[N, 1]`` in 1..10 (10 = the digit 0) of an SVHN ``.mat`` file."""
    try:
        mat = loadmat(path)
        return np.transpose(mat["X"], (3, 2, 0, 1)), mat["y"].reshape(-1).astype(np.int64) % 10
    except (ValueError, OSError, TypeError, KeyError, IndexError, MatReadError) as e:
        raise BnnpredError(f"{path} is not a readable SVHN .mat file ({e}); "
                           "run: bnnpred data fetch svhn --force") from e


def _read_cifar(root: Path, name: str) -> tuple[Arrays, Arrays]:
    return read_cifar_archive(require_file(root, name, CIFAR[name][0]), name)


def _read_svhn(root: Path, name: str) -> tuple[Arrays, Arrays]:
    return tuple(read_svhn_mat(require_file(root, name, f"svhn/{stem}_32x32.mat")) for stem in ("train", "test"))


READERS: dict[str, Callable[[Path, str], tuple[Arrays, Arrays]]] = {
    "mnist": _read_idx_sets, "fashion_mnist": _read_idx_sets, "cifar10": _read_cifar, "cifar100": _read_cifar,
    "svhn": _read_svhn}


def _keep_classes(images: np.ndarray, labels: np.ndarray, classes: list[int] | None) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose label is in ``classes``, relabelled by position in ``classes``."""
    if classes is None:
        return images, labels.astype(np.int64)
    lookup = np.full(max(256, int(labels.max()) + 1), -1, dtype=np.int64)
    lookup[np.asarray(classes)] = np.arange(len(classes))
    new = lookup[labels]
    keep = new >= 0
    return images[keep], new[keep]


def _check(cfg: MNISTConfig) -> None:
    n_classes = N_CLASSES[cfg.name]
    if cfg.classes is not None and (len(cfg.classes) < 2 or len(set(cfg.classes)) != len(cfg.classes)
                                    or not all(0 <= c < n_classes for c in cfg.classes)):
        raise BnnpredError(f"dataset.classes must be at least two distinct classes in 0..{n_classes - 1}, "
                           f"got {list(cfg.classes)}")
    for key in ("n_train", "n_test"):
        if getattr(cfg, key) is not None and getattr(cfg, key) < 1:
            raise BnnpredError(f"dataset.{key} must be >= 1 or null, got {getattr(cfg, key)}")


def _subset(X: np.ndarray, y: np.ndarray, n: int | None, rng: np.random.Generator, key: str,
            split: str) -> tuple[np.ndarray, np.ndarray]:
    """A seeded random ``n`` of the rows (in their order), or all of them for ``n`` None."""
    if n is None:
        return X, y
    if n > len(X):
        raise BnnpredError(f"dataset.{key}={n} exceeds the {len(X)} {split} images")
    rows = np.sort(rng.permutation(len(X))[:n])
    return X[rows], y[rows]


def load_images(cfg: MNISTConfig, root: Path | None = None) -> Dataset:
    """Images ``[N, C, H, W]`` float64 in [0, 1] (or standardised per channel) and int64 labels."""
    _check(cfg)
    root = root or data_root(cfg.root)
    (X_tr, y_tr), (X_te, y_te) = READERS[cfg.name](root, cfg.name)
    X_tr, y_tr = _keep_classes(X_tr, y_tr, cfg.classes)
    X_te, y_te = _keep_classes(X_te, y_te, cfg.classes)
    if cfg.augment and X_tr.shape[-1] != 32:
        raise BnnpredError(f"dataset.augment crops 32x32 images; {cfg.name} has {X_tr.shape[-1]}x{X_tr.shape[-1]}: "
                           "set dataset.augment=false")
    rng = np.random.default_rng(cfg.seed)
    X_tr, y_tr = _subset(X_tr, y_tr, cfg.n_train, rng, "n_train", "training")
    X_te, y_te = _subset(X_te, y_te, cfg.n_test, rng, "n_test", "test")
    order = rng.permutation(len(X_te))
    half = len(X_te) // 2 if cfg.valid is ValidSplit.test_half else 0
    valid_rows, test_rows = np.sort(order[:half]), np.sort(order[half:])
    scaled = X_tr.astype(np.float64) / 255
    mean, std = ((scaled.mean(axis=(0, 2, 3), keepdims=True), scaled.std(axis=(0, 2, 3), keepdims=True))
                 if cfg.standardize else (0.0, 1.0))

    def tensor(images: np.ndarray) -> torch.Tensor:
        return torch.from_numpy((images.astype(np.float64) / 255 - mean) / std)

    n_classes = N_CLASSES[cfg.name] if cfg.classes is None else len(cfg.classes)
    return Dataset(
        name=cfg.name, task=Task.binary if n_classes == 2 else Task.multiclass, n_classes=n_classes,
        input_shape=tuple(X_tr.shape[1:]),
        X_train=tensor(X_tr), y_train=torch.from_numpy(y_tr),
        X_valid=tensor(X_te[valid_rows]), y_valid=torch.from_numpy(y_te[valid_rows]),
        X_test=tensor(X_te[test_rows]), y_test=torch.from_numpy(y_te[test_rows]),
        augment=CropFlip(flip=cfg.name != "svhn") if cfg.augment else None,
        standardization=(torch.from_numpy(mean[0]), torch.from_numpy(std[0])) if cfg.standardize else None,
    )
