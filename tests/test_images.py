"""IDX reading and the MNIST / Fashion-MNIST datasets."""

import gzip
import struct

import numpy as np
import pytest
import torch

from bnnpred.data import Task, load_dataset
from bnnpred.data.idx import read_idx
from bnnpred.data.images import MNISTConfig
from bnnpred.data.root import verify
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
