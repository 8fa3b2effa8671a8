"""IDX reading and the MNIST / Fashion-MNIST datasets."""

import gzip
import hashlib
import io
import pickle
import struct
import tarfile
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy.io import savemat

from bnnpred.app.run_setup import ood_inputs
from bnnpred.data import Task, load_dataset
from bnnpred.data import root as root_module
from bnnpred.data.idx import read_idx
from bnnpred.data.images import CIFAR, CIFAR10Config, CropFlip, MNISTConfig, read_cifar_archive, read_svhn_mat
from bnnpred.data.root import RemoteFile, verify
from bnnpred.errors import BnnpredError


def write_idx(path, array: np.ndarray, gz: bool = True) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    payload = header + array.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(payload) if gz else payload)


@pytest.mark.parametrize("gz", [True, False])
def test_read_idx_round_trips_a_written_file(tmp_path, gz):
    array = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    path = tmp_path / ("x.idx.gz" if gz else "x.idx")
    write_idx(path, array, gz)
    np.testing.assert_array_equal(read_idx(path), array)


def test_read_idx_rejects_a_bad_header_and_a_short_payload(tmp_path):
    (tmp_path / "bad.idx").write_bytes(b"\x00\x00\x0d\x01" + struct.pack(">I", 3) + b"abc")
    with pytest.raises(BnnpredError, match="bad magic"):
        read_idx(tmp_path / "bad.idx")
    (tmp_path / "short.idx").write_bytes(b"\x00\x00\x08\x01" + struct.pack(">I", 5) + b"abc")
    with pytest.raises(BnnpredError, match="payload has 3"):
        read_idx(tmp_path / "short.idx")


@pytest.mark.data
def test_mnist_four_vs_nine_subset_and_test_half(data_root):
    """notes-000 §6.4: 3000 random 4/9 training images, 9 -> 1; the validation set is half the test set."""
    data = load_dataset(MNISTConfig(seed=0, classes=[4, 9], n_train=3000))
    assert data.task is Task.binary and data.input_shape == (1, 28, 28)
    assert data.X_train.shape == (3000, 1, 28, 28)
    assert len(data.X_valid) + len(data.X_test) == 982 + 1009  # test-set counts of 4 and 9 (data README)
    assert abs(len(data.X_valid) - len(data.X_test)) <= 1
    assert 0.0 <= float(data.X_train.min()) and float(data.X_train.max()) <= 1.0
    assert set(data.y_train.tolist()) == {0, 1}


@pytest.mark.data
def test_a_test_subset_is_split_into_validation_and_test_halves_from_the_official_test_set(data_root):
    full = load_dataset(MNISTConfig(seed=0, n_train=100))
    data = load_dataset(MNISTConfig(seed=0, n_train=100, n_test=400))
    assert len(data.X_valid) == len(data.X_test) == 200
    official = {image.numpy().tobytes() for image in torch.cat([full.X_valid, full.X_test])}
    assert all(image.numpy().tobytes() in official for image in torch.cat([data.X_valid, data.X_test]))
    valid = {image.numpy().tobytes() for image in data.X_valid}
    assert not any(image.numpy().tobytes() in valid for image in data.X_test)  # disjoint halves
    torch.testing.assert_close(data.X_train, full.X_train)  # the training subset does not move
    with pytest.raises(BnnpredError, match="dataset.n_test=20000 exceeds the 10000 test images"):
        load_dataset(MNISTConfig(seed=0, n_test=20000))


@pytest.mark.data
def test_mnist_pixel_mean_matches_the_data_readme(data_root):
    data = load_dataset(MNISTConfig(seed=0, n_train=60000))
    assert float(data.X_train.mean()) == pytest.approx(0.1307, abs=1e-4)
    counts = torch.bincount(data.y_train, minlength=10).tolist()
    assert counts == [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]


@pytest.mark.data
def test_a_regzipped_copy_still_verifies_by_its_payload(data_root, tmp_path):
    """Mirrors re-gzip MNIST: the pin is the payload's sha256, not the .gz bytes."""
    for name in ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                 "t10k-labels-idx1-ubyte.gz"]:
        payload = gzip.decompress((data_root / "mnist" / name).read_bytes())
        (tmp_path / "mnist").mkdir(exist_ok=True)
        (tmp_path / "mnist" / name).write_bytes(gzip.compress(payload, compresslevel=1, mtime=0))
    assert {status for _, status in verify("mnist", tmp_path)} == {"ok"}


# ---------------------------------------------------------------- CIFAR-10 / CIFAR-100 / SVHN in their real formats

def write_cifar(path, name: str, per_batch: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """An archive laid out like the official one, with ``per_batch`` random images per pickled batch; returns the
    training images ``[N, 3, 32, 32]`` and labels in file order."""
    _, folder, train_members, test_member, label_key = CIFAR[name]
    rng = np.random.default_rng(0)
    classes = 100 if name == "cifar100" else 10
    images, labels = [], []
    with tarfile.open(path, "w:gz") as tar:
        for member in [*train_members, test_member]:
            data = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
            y = rng.integers(0, classes, per_batch).tolist()
            payload = pickle.dumps({b"data": data, label_key: y})
            info = tarfile.TarInfo(f"{folder}/{member}")
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
            if member != test_member:
                images.append(data.reshape(-1, 3, 32, 32))
                labels += y
    return np.concatenate(images), np.asarray(labels)


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
def test_cifar_archive_reads_channel_major_rows_and_labels(tmp_path, name):
    path = tmp_path / "archive.tar.gz"
    images, labels = write_cifar(path, name)
    (X_train, y_train), (X_test, y_test) = read_cifar_archive(path, name)
    np.testing.assert_array_equal(X_train, images)
    np.testing.assert_array_equal(y_train, labels)
    assert X_train.shape == (4 * len(CIFAR[name][2]), 3, 32, 32) and X_test.shape == (4, 3, 32, 32)


def test_svhn_mat_maps_label_ten_to_zero_and_transposes_to_nchw(tmp_path):
    X = np.random.default_rng(0).integers(0, 256, (32, 32, 3, 5), dtype=np.uint8)
    savemat(tmp_path / "train_32x32.mat", {"X": X, "y": np.array([[10], [1], [2], [9], [10]], dtype=np.uint8)})
    images, labels = read_svhn_mat(tmp_path / "train_32x32.mat")
    np.testing.assert_array_equal(labels, [0, 1, 2, 9, 0])
    np.testing.assert_array_equal(images[3, 1], X[:, :, 1, 3])


def test_truncated_or_foreign_files_are_one_line_errors(tmp_path):
    path = tmp_path / "archive.tar.gz"
    write_cifar(path, "cifar10")
    path.write_bytes(path.read_bytes()[:2000])
    with pytest.raises(BnnpredError, match="not a complete cifar10 archive"):
        read_cifar_archive(path, "cifar10")
    (tmp_path / "x.mat").write_bytes(b"MATLAB 5.0 MAT-file, garbage")
    with pytest.raises(BnnpredError, match="not a readable SVHN .mat file"):
        read_svhn_mat(tmp_path / "x.mat")


def test_a_missing_or_altered_cifar_archive_names_the_fetch_command(tmp_path):
    with pytest.raises(BnnpredError, match="bnnpred data fetch cifar10"):
        load_dataset(CIFAR10Config(seed=0, root=str(tmp_path)))
    (tmp_path / "cifar-10").mkdir()
    write_cifar(tmp_path / "cifar-10" / "cifar-10-python.tar.gz", "cifar10")
    with pytest.raises(BnnpredError, match=r"sha256 mismatch\); run: bnnpred data fetch cifar10 --force"):
        load_dataset(CIFAR10Config(seed=0, root=str(tmp_path)))


@pytest.fixture
def cifar_root(tmp_path, monkeypatch):
    """A data root holding a small archive in CIFAR-10's format, pinned in the registry by its own sha256."""
    path = tmp_path / "cifar-10" / "cifar-10-python.tar.gz"
    path.parent.mkdir()
    write_cifar(path, "cifar10", per_batch=6)
    monkeypatch.setitem(root_module.FILES, "cifar10", [RemoteFile("cifar-10/cifar-10-python.tar.gz",
                                                                  hashlib.sha256(path.read_bytes()).hexdigest(), "")])
    return str(tmp_path)


def test_cifar_dataset_standardises_per_channel_and_halves_the_test_set(cifar_root):
    data = load_dataset(CIFAR10Config(seed=0, root=cifar_root, augment=True))
    assert data.X_train.shape == (30, 3, 32, 32) and len(data.X_valid) == len(data.X_test) == 3
    torch.testing.assert_close(data.X_train.mean(dim=(0, 2, 3)), torch.zeros(3, dtype=torch.float64))
    torch.testing.assert_close(data.X_train.std(dim=(0, 2, 3), unbiased=False), torch.ones(3, dtype=torch.float64))
    assert data.augment == CropFlip(pad=4, flip=True)


def test_crop_flip_returns_a_padded_window_of_each_image_possibly_mirrored():
    X = torch.arange(2 * 3 * 5 * 5, dtype=torch.float64).reshape(2, 3, 5, 5)
    out = CropFlip(pad=1)(X, torch.Generator().manual_seed(3))
    padded = torch.nn.functional.pad(X, (1, 1, 1, 1))
    for b in range(2):
        windows = [w for dy in range(3) for dx in range(3) for w in (padded[b, :, dy:dy + 5, dx:dx + 5],)]
        assert any(torch.equal(out[b], w) or torch.equal(out[b], w.flip(-1)) for w in windows)
    assert not torch.equal(out, X)


def test_an_ood_set_is_standardised_with_the_in_distribution_training_statistics(cifar_root):
    """CIFAR-10 as its own OOD set: its test images come out exactly as the in-distribution test split does."""
    config = CIFAR10Config(seed=0, root=cifar_root)
    data = load_dataset(config)
    cfg = SimpleNamespace(ood=config, dataset=SimpleNamespace(name="cifar10"))
    X_ood = ood_inputs(cfg, data, torch.device("cpu"), torch.float64)
    torch.testing.assert_close(X_ood, torch.cat([data.X_valid, data.X_test]))
