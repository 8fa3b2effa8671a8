"""Data layer: loaders, splits, the data root, checksum checks and fetching (network mocked)."""

import io
import math
import os
import shutil
import urllib.error
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from bnnpred.data import DATASETS, Task, dataset_schemas, load_dataset
from bnnpred.data.root import FILES, fetch, require_file, verify
from bnnpred.data.root import data_root as resolve_data_root
from bnnpred.data.toy import (
    BananaConfig,
    CountsConfig,
    SnelsonConfig,
    SnelsonGapConfig,
    TwoMoonsConfig,
    load_banana,
    load_counts,
    load_snelson,
    load_snelson_gap,
    load_two_moons,
    moons,
    snelson_function,
)
from bnnpred.data.uci import (
    UCIClassificationConfig,
    UCIRegressionConfig,
    load_uci_classification,
    load_uci_regression,
)
from bnnpred.errors import BnnpredError


def _same(a, b) -> bool:
    """Whether two datasets hold identical tensors in every split."""
    splits = ("train", "valid", "test")
    return all(torch.equal(x, y) for s in splits for x, y in zip(a.split(s), b.split(s), strict=True))


# --- two moons ------------------------------------------------------------------------------------------


def test_two_moons_shapes_balance_and_dtypes():
    ds = load_two_moons(TwoMoonsConfig(seed=0))
    assert ds.task is Task.binary and ds.n_classes == 2 and ds.input_shape == (2,)
    assert ds.X_train.shape == (150, 2) and ds.X_valid.shape == (150, 2) and ds.X_test.shape == (1000, 2)
    assert ds.X_train.dtype == torch.float64 and ds.y_train.dtype == torch.int64
    assert ds.y_train.sum().item() == 75 and ds.y_test.sum().item() == 500


def test_two_moons_deterministic_by_seed_and_splits_differ():
    a, b, c = (load_two_moons(TwoMoonsConfig(seed=s)) for s in (3, 3, 4))
    assert _same(a, b)
    assert not torch.equal(a.X_train, c.X_train)
    assert not torch.equal(a.X_train, a.X_valid)


@pytest.mark.parametrize("n, noise, seed", [(150, 0.3, 0), (1001, 0.1, 7), (1, 0.0, 3)])
def test_two_moons_are_scikit_learns_to_the_bit(n, noise, seed):
    from sklearn.datasets import make_moons

    x, y = moons(n, noise, np.random.RandomState(seed))
    x_ref, y_ref = make_moons(n_samples=n, shuffle=True, noise=noise, random_state=seed)
    assert np.array_equal(x, x_ref) and np.array_equal(y, y_ref) and y.dtype == y_ref.dtype


# --- counts ---------------------------------------------------------------------------------------------


def test_counts_are_whole_numbers_on_a_grid_and_seeded():
    ds = load_counts(CountsConfig(seed=0))
    assert ds.task is Task.count and ds.n_classes == 1 and ds.output_dim == 1 and ds.input_shape == (1,)
    assert [len(ds.split(s)[0]) for s in ("train", "valid", "test")] == [150, 50, 200]
    for split in ("train", "valid", "test"):
        X, y = ds.split(split)
        assert X.dtype == y.dtype == torch.float64 and X.abs().max() <= 3.0
        assert bool((y >= 0).all()) and torch.equal(y, y.round())
    torch.testing.assert_close(ds.X_test[:, 0], torch.linspace(-3, 3, 200, dtype=torch.float64))
    assert _same(ds, load_counts(CountsConfig(seed=0)))
    assert not torch.equal(ds.y_train, load_counts(CountsConfig(seed=1)).y_train)


def test_counts_are_poisson_with_rate_exp_of_one_plus_sin_2x():
    """On 20,000 points the mean of y - λ(x) lies within 4 standard errors of 0 (its variance is mean λ / n), and the
    Pearson dispersion mean((y - λ)² / λ) within 4 standard errors of 1 (its per-point variance is 2 + 1/λ)."""
    ds = load_counts(CountsConfig(seed=3, n_train=20_000))
    rate = torch.exp(1 + torch.sin(2 * ds.X_train[:, 0]))
    n = len(rate)
    assert abs(float((ds.y_train - rate).mean())) < 4 * math.sqrt(float(rate.mean()) / n)
    dispersion = ((ds.y_train - rate) ** 2 / rate).mean()
    assert abs(float(dispersion) - 1) < 4 * math.sqrt(float((2 + 1 / rate).mean()) / n)


# --- snelson with gap -----------------------------------------------------------------------------------


@pytest.mark.data
def test_snelson_gap_train_avoids_gap_and_noise_matches(data_root):
    cfg = SnelsonGapConfig(seed=0)
    ds = load_snelson_gap(cfg, data_root)
    x_train = ds.X_train.numpy().ravel()
    assert ds.X_train.shape == (150, 1) and ds.y_train.shape == (150,)
    assert not ((x_train > 1.5) & (x_train < 2.4)).any()
    assert ds.X_test.shape == (1000, 1) and ds.X_valid.shape == (150, 1)
    assert ((ds.X_test > 1.5) & (ds.X_test < 2.4)).any()  # gap_in_test=False: test covers the gap
    f = snelson_function(data_root, cfg)
    x_all = torch.cat([ds.X_train, ds.X_valid, ds.X_test]).numpy().ravel()
    y_all = torch.cat([ds.y_train, ds.y_valid, ds.y_test]).numpy()
    assert np.var(y_all - f(x_all)) == pytest.approx(0.09, rel=0.3)


@pytest.mark.data
def test_snelson_gap_deterministic_and_gap_in_test(data_root):
    a, b = (load_snelson_gap(SnelsonGapConfig(seed=5), data_root) for _ in range(2))
    assert _same(a, b)
    assert not torch.equal(a.X_train, load_snelson_gap(SnelsonGapConfig(seed=6), data_root).X_train)
    filtered = load_snelson_gap(SnelsonGapConfig(seed=5, gap_in_test=True), data_root)
    assert not ((filtered.X_test > 1.5) & (filtered.X_test < 2.4)).any()


@pytest.mark.data
def test_snelson_function_interpolates_real_data(data_root):
    with np.load(data_root / "snelson" / "snelson.npz") as npz:
        x, y = npz["x_train"], npz["y_train"]
    f = snelson_function(data_root, SnelsonGapConfig(seed=0))
    assert f(x).shape == x.shape and f(x.reshape(-1, 1)).shape == (200, 1)
    assert np.var(y - f(x)) < 0.1


# --- snelson (real points) ------------------------------------------------------------------------------


@pytest.mark.data
def test_snelson_real_splits_cover_all_points(data_root):
    ds = load_snelson(SnelsonConfig(seed=0), data_root)
    sizes = [ds.split(s)[0].shape[0] for s in ("train", "valid", "test")]
    assert sizes == [160, 20, 20]
    x_all = torch.cat([ds.X_train, ds.X_valid, ds.X_test]).numpy().ravel()
    with np.load(data_root / "snelson" / "snelson.npz") as npz:
        assert np.array_equal(np.sort(x_all), np.sort(npz["x_train"]))


@pytest.mark.data
def test_snelson_real_gap_drops_training_points_only(data_root):
    full = load_snelson(SnelsonConfig(seed=0), data_root)
    gapped = load_snelson(SnelsonConfig(seed=0, gap=[1.5, 2.4]), data_root)
    assert not ((gapped.X_train > 1.5) & (gapped.X_train < 2.4)).any()
    assert gapped.X_train.shape[0] < full.X_train.shape[0]
    assert torch.equal(gapped.X_test, full.X_test) and torch.equal(gapped.X_valid, full.X_valid)


# --- banana ---------------------------------------------------------------------------------------------


@pytest.mark.data
def test_banana_stratified_standardised_splits(data_root):
    ds = load_banana(BananaConfig(seed=0), data_root)
    splits = [ds.split(s) for s in ("train", "valid", "test")]
    assert sum(y.shape[0] for _, y in splits) == 5300
    y_all = torch.cat([y for _, y in splits])
    assert set(y_all.unique().tolist()) == {0, 1}
    ratio = y_all.double().mean().item()
    assert ratio == pytest.approx(2376 / 5300)
    for _, y in splits:
        assert abs(y.double().mean().item() - ratio) < 0.01
    assert torch.allclose(ds.X_train.mean(0), torch.zeros(2, dtype=torch.float64), atol=1e-10)
    assert torch.allclose(ds.X_train.std(0, unbiased=False), torch.ones(2, dtype=torch.float64))


@pytest.mark.data
def test_banana_subsampled_training_split(data_root):
    ds = load_banana(BananaConfig(seed=1, n_train=200), data_root)
    assert ds.X_train.shape == (200, 2)
    assert abs(ds.y_train.double().mean().item() - 2376 / 5300) < 0.01
    with pytest.raises(BnnpredError, match="n_train"):
        load_banana(BananaConfig(seed=1, n_train=10_000), data_root)


# --- registry and config validation ---------------------------------------------------------------------


@pytest.mark.data
def test_load_dataset_from_dictconfig_follows_run_seed(data_root):
    run = OmegaConf.create({"seed": 7, "dataset": {"name": "snelson_gap", "seed": "${seed}", "n_train": 20}})
    ds = load_dataset(run.dataset)
    assert ds.X_train.shape == (20, 1)
    assert _same(ds, load_snelson_gap(SnelsonGapConfig(seed=7, n_train=20), data_root))


def test_load_dataset_rejects_unknown_name_and_key():
    with pytest.raises(BnnpredError, match="unknown dataset 'nope'"):
        load_dataset(OmegaConf.create({"name": "nope"}))
    with pytest.raises(BnnpredError, match="unknown key"):
        load_dataset(OmegaConf.create({"name": "two_moons", "seed": 0, "colour": "red"}))


def test_unresolved_seed_is_a_user_error():
    with pytest.raises(BnnpredError, match="seed must be a non-negative integer"):
        load_dataset(TwoMoonsConfig())


@pytest.mark.data
def test_uci_regression_split_is_the_published_one_standardised_on_train(data_root):
    """wine-quality-red split 3: 1439 train / 160 test rows (Gal's index files), disjoint; X and y have mean 0 and
    std 1 on train; a validation part is carved out of train, not test."""
    full = load_uci_regression(UCIRegressionConfig(seed=0, split=3), data_root)
    assert (len(full.X_train), len(full.X_valid), len(full.X_test)) == (1439, 0, 160)
    assert full.input_shape == (11,) and full.task is Task.regression
    torch.testing.assert_close(full.X_train.mean(0), torch.zeros(11), atol=1e-12, rtol=0)
    torch.testing.assert_close(full.X_train.std(0, unbiased=False), torch.ones(11))
    assert abs(float(full.y_train.std(unbiased=False)) - 1) < 1e-12
    raw = np.loadtxt(data_root / "uci_regression/wine-quality-red/data.txt")
    test_rows = np.loadtxt(data_root / "uci_regression/wine-quality-red/index_test_3.txt", dtype=int)
    y_raw = raw[test_rows, -1]  # standardisation is affine: the test targets keep their order and spacing
    assert np.corrcoef(y_raw, full.y_test.numpy())[0, 1] > 1 - 1e-12
    train_rows = np.loadtxt(data_root / "uci_regression/wine-quality-red/index_train_3.txt", dtype=int)
    assert full.target_scale == pytest.approx(raw[train_rows, -1].std(), rel=1e-12)
    np.testing.assert_allclose(full.y_test.numpy() * full.target_scale + raw[train_rows, -1].mean(), y_raw)
    held = load_uci_regression(UCIRegressionConfig(seed=0, split=3, valid_fraction=0.1), data_root)
    assert (len(held.X_train), len(held.X_valid), len(held.X_test)) == (1295, 144, 160)


@pytest.mark.data
@pytest.mark.parametrize("name,n,d,classes", [("breast_cancer", 683, 10, 2), ("glass", 214, 9, 6),
                                              ("digits", 1797, 64, 10)])
def test_uci_classification_splits_are_stratified_disjoint_and_standardised_on_train(name, n, d, classes,
                                                                                    data_root):
    ds = load_uci_classification(UCIClassificationConfig(dataset=name, split=2), data_root)
    parts = [ds.y_train, ds.y_valid, ds.y_test]
    assert sum(len(p) for p in parts) == n and ds.input_shape == (d,) and ds.n_classes == classes
    assert len(ds.y_test) == round(0.15 * n) and len(ds.y_valid) == round(0.15 * n)
    share = torch.bincount(ds.y_train, minlength=classes) / len(ds.y_train)
    for part in parts[1:]:  # stratified: every class share within one point of the training share
        assert ((torch.bincount(part, minlength=classes) / len(part) - share).abs() <= 1 / len(part) + 1e-9).all()
    varying = ds.X_train.std(0) > 0
    torch.testing.assert_close(ds.X_train.mean(0), torch.zeros(d), atol=1e-12, rtol=0)
    torch.testing.assert_close(ds.X_train.std(0, unbiased=False)[varying], torch.ones(int(varying.sum())))
    assert ds.X_test.mean(0).abs().max() > 1e-6  # test statistics did not enter the scaling
    again = load_uci_classification(UCIClassificationConfig(dataset=name, split=2), data_root)
    assert torch.equal(again.X_test, ds.X_test)
    other = load_uci_classification(UCIClassificationConfig(dataset=name, split=3), data_root)
    assert not torch.equal(other.y_test, ds.y_test)


def test_schemas_match_registry():
    assert dataset_schemas() == {name: schema for name, (schema, _) in DATASETS.items()}
    for name, schema in dataset_schemas().items():
        assert OmegaConf.structured(schema).name == name


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        (SnelsonConfig(seed=0, valid_fraction=0.6, test_fraction=0.5), "must be < 1"),
        (SnelsonConfig(seed=0, test_fraction=1.0), r"in \[0, 1\)"),
        (SnelsonConfig(seed=0, gap=[2.0, 1.0]), "lo < hi"),
        (SnelsonGapConfig(seed=0, n_train=0), "n_train must be positive"),
        (SnelsonGapConfig(seed=0, gap=[-1.0, 7.0]), "covers the whole interval"),
        (BananaConfig(seed=0, valid_fraction=-0.1), "valid_fraction"),
        (CountsConfig(seed=0, n_valid=0), "n_valid must be positive"),
        (CountsConfig(seed=0, x_max=0.0), "x_max must be positive"),
        (UCIRegressionConfig(seed=0, dataset="wine"), "valid choices: bostonHousing, concrete"),
        (UCIClassificationConfig(dataset="iris"), "valid choices: australian, breast_cancer, digits"),
        (UCIClassificationConfig(train_fraction=0.8), r"sum to 1, got 0.8 \+ 0.15 \+ 0.15 = 1.1"),
        (UCIClassificationConfig(split=10), r"split must be in 0\.\.9"),
        (UCIRegressionConfig(seed=0, dataset="protein-tertiary-structure", split=5), r"split must be in 0\.\.4"),
    ],
)
def test_invalid_settings_raise_before_reading_files(tmp_path, cfg, message):
    with pytest.raises(BnnpredError, match=message):
        DATASETS[cfg.name][1](cfg, tmp_path)


# --- data root, checksums, fetch ------------------------------------------------------------------------


def test_data_root_prefers_config_then_env(monkeypatch, tmp_path):
    monkeypatch.delenv("BNNPRED_DATA_DIR", raising=False)
    with pytest.raises(BnnpredError, match="no data root: set BNNPRED_DATA_DIR or dataset.root=PATH"):
        resolve_data_root(None)
    monkeypatch.setenv("BNNPRED_DATA_DIR", str(tmp_path))
    assert resolve_data_root(None) == tmp_path
    assert resolve_data_root("/elsewhere") == Path("/elsewhere")


def test_require_file_missing_and_corrupt(tmp_path):
    with pytest.raises(BnnpredError, match="missing data file .*run: bnnpred data fetch banana"):
        require_file(tmp_path, "banana", "banana/banana.csv")
    (tmp_path / "banana").mkdir()
    (tmp_path / "banana" / "banana.csv").write_text("1.0,2.0,1\n")
    with pytest.raises(BnnpredError, match=r"corrupt data file .*bnnpred data fetch banana --force"):
        require_file(tmp_path, "banana", "banana/banana.csv")
    assert verify("banana", tmp_path) == [("banana/banana.csv", "corrupt")]


def _serve(monkeypatch, payload: bytes) -> list[str]:
    """Make urlopen return ``payload``; returns the list of requested URLs."""
    requested = []

    class Response(io.BytesIO):  # what urlopen returns: a readable body with the server's headers
        headers = {"Content-Length": str(len(payload))}

    def urlopen(url, timeout):
        requested.append(url)
        return Response(payload)

    monkeypatch.setattr("urllib.request.urlopen", urlopen)
    return requested


@pytest.mark.data
def test_fetch_writes_verified_file_and_skips_valid_ones(monkeypatch, tmp_path, data_root):
    (remote,) = FILES["banana"]
    requested = _serve(monkeypatch, (data_root / remote.path).read_bytes())
    assert fetch("banana", tmp_path) == [tmp_path / remote.path]
    assert verify("banana", tmp_path) == [(remote.path, "ok")]
    assert require_file(tmp_path, "banana", remote.path) == tmp_path / remote.path
    fetch("banana", tmp_path)
    assert requested == [remote.url]
    fetch("banana", tmp_path, force=True)
    assert requested == [remote.url, remote.url]
    assert sorted(p.name for p in (tmp_path / "banana").iterdir()) == ["banana.csv"]


def test_fetch_rejects_wrong_payload_and_leaves_nothing(monkeypatch, tmp_path):
    _serve(monkeypatch, b"not the banana data\n")
    with pytest.raises(BnnpredError, match="sha256"):
        fetch("banana", tmp_path)
    assert list((tmp_path / "banana").iterdir()) == []


@pytest.mark.data
def test_fetch_force_failure_keeps_existing_file(monkeypatch, tmp_path, data_root):
    (remote,) = FILES["snelson"]
    (tmp_path / "snelson").mkdir()
    shutil.copy(data_root / remote.path, tmp_path / remote.path)
    _serve(monkeypatch, b"truncated")
    with pytest.raises(BnnpredError):
        fetch("snelson", tmp_path, force=True)
    assert verify("snelson", tmp_path) == [(remote.path, "ok")]


def test_fetch_network_failure_is_one_line(monkeypatch, tmp_path):
    def offline(url, timeout):
        raise urllib.error.URLError("no route to host")

    monkeypatch.setattr("urllib.request.urlopen", offline)
    with pytest.raises(BnnpredError, match=r"^could not download https://\S+: no route to host$"):
        fetch("snelson", tmp_path)
    with pytest.raises(BnnpredError, match="unknown dataset to fetch 'cifar11'"):
        fetch("cifar11", tmp_path)


def test_a_data_file_rewritten_in_place_is_caught_by_the_next_read(tmp_path, data_root):
    """Issue 37: a file corrupted in place during a sweep, its size and modification time kept, fails the next run
    that reads it (every read hashes the file) instead of training it on the altered bytes."""
    (tmp_path / "banana").mkdir()
    path = tmp_path / "banana" / "banana.csv"
    shutil.copyfile(data_root / "banana" / "banana.csv", path)
    assert require_file(tmp_path, "banana", "banana/banana.csv") == path
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[-2] = ord("0") if data[-2] != ord("0") else ord("1")  # a label flipped, the size kept
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(BnnpredError, match="corrupt data file .*sha256 mismatch"):
        require_file(tmp_path, "banana", "banana/banana.csv")


def test_an_unreadable_data_file_is_named_so_not_as_a_checksum_mismatch(tmp_path):
    rel = "logreg/usps_3vs5/usps_resampled.mat.gz"  # registered by its gunzipped payload
    (tmp_path / rel).parent.mkdir(parents=True)
    (tmp_path / rel).write_bytes(b"not gzip")
    with pytest.raises(BnnpredError, match="unreadable data file .*check its permissions, or run: bnnpred data "
                                           "fetch logreg --force"):
        require_file(tmp_path, "logreg", rel)
