"""In-process runs of every selection method on tiny problems, and the run-directory contract."""

import json
import platform

import pandas as pd
import pytest
import torch
from torch import nn

from bnnpred.app.compose import compose
from bnnpred.app.run_setup import cpu_name, device_fields
from bnnpred.app.runner import train
from bnnpred.curvature.functional import FlatModel
from bnnpred.errors import BnnpredError

DATA = ["dataset.n_train=40", "dataset.n_valid=20", "dataset.n_test=30", "model=mlp", "model.width=6",
        "predictive.n_samples=20", "plot.enabled=false", "progress=false"]
TINY = [*DATA, "inference.map.steps=150", "inference.map.lr=0.01"]


def run(tmp_path, *overrides, base=TINY):
    return train(compose([*base, *overrides]), tmp_path).document


@pytest.mark.parametrize("method", ["marglik_grid", "valid_nll"])
def test_grid_selection_picks_the_best_row(tmp_path, method):
    doc = run(tmp_path, f"selection={method}", "selection.delta_grid=[0.1,1,10]")
    rows = pd.read_csv(tmp_path / "selection.csv")
    assert list(rows["delta"]) == [0.1, 1.0, 10.0]
    best = rows["log_marglik"].idxmax() if method == "marglik_grid" else rows["valid_nll"].idxmin()
    assert doc["run"]["delta"] == rows.loc[best, "delta"]
    assert (tmp_path / "selection.png").is_file() is False  # plots disabled


def test_ngvi_runs_save_a_rising_elbo_trace_and_its_figure(tmp_path):
    run(tmp_path, "selection=none", "inference=oggn", "inference.gamma=0.3", "inference.iterations=40",
        "inference.log_every=5", "plot.enabled=true", "plot.grid_points=10", base=DATA)
    trace = pd.read_csv(tmp_path / "trace.csv")
    assert list(trace["step"][:3]) == [1, 5, 10] and len(trace) == 9
    assert trace["elbo"].iloc[-1] > trace["elbo"].iloc[0]
    assert (tmp_path / "convergence.png").stat().st_size > 10_000


def test_a_map_trace_follows_the_validation_and_test_metrics_per_row(tmp_path):
    """Each MAP trace row holds the network's validation and test metrics at that step (issue 18: where the
    MAP's validation likelihood peaks); the last row is the final θ, so its test NLL is the run's map predictive's."""
    doc = run(tmp_path, "selection=none", "predictive.kinds=[map]", "inference.map.log_every=50")
    trace = pd.read_csv(tmp_path / "trace.csv")
    assert list(trace["step"]) == [50, 100, 150]
    assert list(trace["epoch"]) == [50.0, 100.0, 150.0]  # full batch: one step an epoch
    for split in ("valid", "test"):
        assert trace[f"{split}_nll"].nunique() == 3
        assert trace[f"{split}_nll"].iloc[-1] == pytest.approx(doc["metrics"][split]["map"]["nll"], rel=1e-6)


def test_a_finished_run_of_the_same_config_is_skipped_and_a_changed_one_reruns(tmp_path, caplog):
    first = run(tmp_path, "selection=none")
    stamp = (tmp_path / "metrics.json").stat().st_mtime_ns
    with caplog.at_level("INFO", logger="bnnpred.app.runner"):
        assert run(tmp_path, "selection=none") == first
    assert "already holds a finished run" in caplog.text
    assert (tmp_path / "metrics.json").stat().st_mtime_ns == stamp
    changed = run(tmp_path, "selection=none", "prior.delta=3.0")
    assert changed["run"]["delta"] == 3.0 and (tmp_path / "metrics.json").stat().st_mtime_ns != stamp


@pytest.mark.data
def test_a_run_records_its_training_time_per_epoch_and_a_cached_fit_the_training_that_made_it(tmp_path):
    """notes-001 #11's time per epoch: the training loop's seconds over its epochs (full batch: one step an epoch);
    a MAP read from the fit cache records the training that made it, marked as such (never null)."""
    cache = f"fit_cache={tmp_path / 'cache'}"
    trained = run(tmp_path / "a", "selection=none", "predictive.kinds=[map]", cache)["run"]["training"]
    assert trained["epochs"] == 150 and trained["seconds"] > 0
    assert trained["seconds_per_epoch"] == pytest.approx(trained["seconds"] / 150)
    cached = run(tmp_path / "b", "selection=none", "predictive.kinds=[map,glm]", cache)["run"]["training"]
    assert cached == {**trained, "from_fit_cache": 1.0}


def test_regression_rows_record_the_map_rmse(tmp_path, data_root):
    run(tmp_path, "dataset=snelson_gap", "selection=none", "predictive.kinds=[map]")
    row = pd.read_csv(tmp_path / "selection.csv").iloc[0]
    metrics = json.loads((tmp_path / "metrics.json").read_text())["metrics"]
    for split in ("train", "test"):  # the map predictive's RMSE is the plug-in RMSE of f(x; θ*)
        assert row[f"{split}_rmse_map"] == pytest.approx(metrics[split]["map"]["rmse"], rel=1e-12)


@pytest.mark.data
def test_gradient_selection_moves_noise_towards_the_data_noise(tmp_path, data_root):
    """snelson_gap has noise variance 0.09; starting from σ² = 1 the evidence ascent must move towards it."""
    doc = run(tmp_path, "dataset=snelson_gap", "selection=marglik_gradient", "selection.rounds=2",
              "selection.steps=100", "likelihood.sigma2=1.0", "inference.map.steps=400")
    rows = pd.read_csv(tmp_path / "selection.csv")
    assert len(rows) == 3  # two rounds plus the final refit
    assert doc["run"]["sigma2"] < 0.5
    assert rows["log_marglik"].iloc[-1] > rows["log_marglik"].iloc[0]


@pytest.mark.parametrize("structure", ["kron", "full"])
def test_gradient_selection_gives_each_layer_its_delta_by_the_evidence(tmp_path, structure):
    """prior.groups=layer with a Kronecker or full posterior: every round's evidence at least the first's, the
    layers' δ apart, and the run records them; the saved prior restores the same precision for eval."""
    doc = run(tmp_path, f"inference.structure={structure}", "prior.groups=layer", "selection=marglik_gradient",
              "selection.rounds=2", "selection.steps=100")
    rows = pd.read_csv(tmp_path / "selection.csv")
    assert len(rows) == 3 and rows["log_marglik"].iloc[-1] > rows["log_marglik"].iloc[0]
    deltas = doc["run"]["prior"]
    assert len(deltas) == 3 and len(set(deltas.values())) == 3  # model=mlp: three layers
    assert [rows[f"delta[{name}]"].iloc[-1] for name in deltas] == pytest.approx(list(deltas.values()))
    from bnnpred.app.saved_runs import restore
    _, ctx = restore(tmp_path)
    sizes = [ctx.model.sizes[i] + ctx.model.sizes[i + 1] for i in (0, 2, 4)]  # each layer's weight and bias
    expected = torch.cat([torch.full((n,), v) for n, v in zip(sizes, deltas.values(), strict=True)])
    torch.testing.assert_close(ctx.prior_precision, expected.to(ctx.prior_precision))


def test_a_prior_per_layer_without_gradient_selection_is_refused(tmp_path):
    with pytest.raises(BnnpredError, match="prior.groups=layer gives each group its own δ, which only "
                       "selection=marglik_gradient moves apart"):
        run(tmp_path, "prior.groups=layer", "selection=marglik_grid")


def test_diagonal_laplace_and_empirical_fisher_run(tmp_path):
    doc = run(tmp_path, "selection=none", "inference.structure=diag", "inference.curvature=ef",
              "predictive=all")
    assert set(doc["metrics"]["test"]) == {"map", "nn", "glm", "closed", "gp"}
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved["run"]["structure"] == "diag"


def test_a_failed_run_leaves_no_results(tmp_path):
    with pytest.raises(BnnpredError, match="MAP loss became"):
        run(tmp_path, "selection=none", "inference.map.lr=1e200")
    assert list(tmp_path.iterdir()) == []


def test_divergence_stops_with_an_error_and_keeps_the_last_good_state(tmp_path, monkeypatch):
    from bnnpred.inference import ngvi

    real_step = ngvi._step

    def failing_step(state, post, momentum, g, curv, scale, delta, cfg, t, gamma):
        return real_step(state, post, momentum, g * float("nan") if t == 3 else g, curv, scale, delta, cfg, t, gamma)

    monkeypatch.setattr(ngvi, "_step", failing_step)
    with pytest.raises(BnnpredError, match="diverged at iteration 3"):
        run(tmp_path, "selection=none", "inference=oggn", "inference.gamma=0.1", "inference.iterations=5",
            base=DATA)

    saved = torch.load(tmp_path / "last_good.pt", weights_only=False)
    assert saved["info"]["iterations"] == 2
    assert not (tmp_path / "metrics.json").exists()


def test_a_full_covariance_that_cannot_fit_in_memory_is_refused_before_training():
    from bnnpred.app.run_checks import check_full_covariance_fits
    from bnnpred.app.run_setup import typed

    def net(width: int) -> FlatModel:
        return FlatModel(nn.Sequential(nn.Linear(width, width - 1), nn.Tanh(), nn.Linear(width - 1, 1)))

    cfg = typed(compose(["dataset.n_train=10"]))
    check_full_covariance_fits(cfg, net(100), torch.float64)  # P = 10,099: 2.4 GB, allowed
    with pytest.raises(BnnpredError, match="P = 40199 needs about 39 GB; use inference.structure=diag"):
        check_full_covariance_fits(cfg, net(200), torch.float64)
    last_layer = typed(compose(["dataset.n_train=10", "inference.subset_of_weights=last_layer"]))
    check_full_covariance_fits(last_layer, net(200), torch.float64)  # the last layer's 200 parameters


def test_a_saved_config_with_an_ood_set_is_retyped_with_its_schema():
    """``bnnpred eval`` rebuilds a run's config from its config.yaml: the OOD set's node must come back as a dataset
    config (it came back as a plain dict, and every re-evaluation of an OOD run failed)."""
    from omegaconf import OmegaConf

    from bnnpred.app.config import retyped
    from bnnpred.app.run_setup import typed
    from bnnpred.data.images import MNISTConfig

    saved = OmegaConf.to_container(compose(["dataset=fashion_mnist", "model=mlp", "ood=mnist", "ood.n_test=7"]),
                                   resolve=True)
    cfg = typed(retyped(OmegaConf.create(saved)))
    assert isinstance(cfg.ood, MNISTConfig) and cfg.ood.name == "mnist" and cfg.ood.n_test == 7
    assert typed(retyped(OmegaConf.create({**saved, "ood": None}))).ood is None


def test_a_cpu_run_names_its_processor_model_where_the_system_gives_it(tmp_path):
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n")
    (tmp_path / "bare").write_text("processor\t: 0\n")
    assert cpu_name(str(tmp_path / "cpuinfo")) == f"{platform.machine()} (AMD EPYC 7B13)"
    assert cpu_name(str(tmp_path / "bare")) == cpu_name(str(tmp_path / "absent")) == platform.machine()
    assert device_fields(torch.device("cpu")) == {"device": "cpu", "device_name": cpu_name()}
