"""The library as laplace-torch users work (issue 36): post-hoc on a trained network, save and load, their keywords
answered with ours, the module's mode kept, and progress that shows in a script without logging set up."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import bnnpred
import bnnpred.progress
from bnnpred import fit_file, laplace_torch_keywords
from bnnpred.app.saved_runs import restore
from bnnpred.errors import BnnpredError
from tests.helpers import TINY
from tests.helpers import bnnpred as cli

REPO = Path(__file__).resolve().parents[1]


def classification(n: int = 300, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 4, generator=gen)
    return X, (X[:, 0] + X[:, 1] * X[:, 2] > 0).long() + (X[:, 3] > 1).long()


def network(width: int = 16, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, width), torch.nn.Tanh(), torch.nn.Linear(width, 3))


def test_a_post_hoc_fit_keeps_theta_to_the_bit_and_equals_the_command_lines_posterior(tmp_path):
    """The command line trains a run; its network at θ* fitted with train=False gives θ* unchanged and the same
    Kronecker posterior precision (float64)."""
    structure = "kron"
    run_dir = tmp_path / "run"
    out = cli("train", *TINY, f"inference.structure={structure}", "plot.enabled=false", f"hydra.run.dir={run_dir}",
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    s, ctx = restore(run_dir)
    net = s.model.module
    fitted = bnnpred.fit(net, s.data.X_train, s.data.y_train, task=s.data.task.value, train=False,
                         prior_precision=ctx.prior_precision, options={"structure": structure})
    assert fitted.theta.dtype == torch.float64 and torch.equal(fitted.theta, ctx.theta)
    torch.testing.assert_close(fitted.posterior.dense_precision(), ctx.posterior.dense_precision(), rtol=1e-12,
                               atol=0)


def tensors(state) -> list[torch.Tensor]:
    """Every tensor in a nested state."""
    if isinstance(state, torch.Tensor):
        return [state]
    values = state.values() if isinstance(state, dict) else state if isinstance(state, list | tuple) else []
    return [t for value in values for t in tensors(value)]


@pytest.mark.parametrize("structure", ["kron", "diag", "full"])
def test_save_then_load_predicts_to_the_last_bit_without_the_training_data(tmp_path, structure):
    X, y = classification(20_000)
    net = network()
    fitted = bnnpred.fit(net, X, y, task="multiclass", options={"structure": structure, "map": {"steps": 30}},
                         progress=False).optimize_prior(steps=20)
    path = fitted.save(tmp_path / "fit.pt")
    posterior_bytes = sum(t.nbytes for t in tensors(fitted.posterior.state()))
    assert path.stat().st_size < posterior_bytes + 20_000 < X.nbytes  # the posterior, θ, the prior: no data
    loaded = bnnpred.load(path, network(seed=1))  # the same architecture, other weights: θ* comes from the file
    for kind in ("map", "glm", "nn", "closed"):
        assert torch.equal(loaded.predict(X[:50], kind, n_samples=30).probs,
                           fitted.predict(X[:50], kind, n_samples=30).probs), kind
    assert loaded.prior.deltas() == fitted.prior.deltas() and loaded.info == fitted.info
    with pytest.raises(BnnpredError, match="the gp predictive conditions on the training inputs, which a saved fit "):
        loaded.predict(X[:5], "gp")
    with_inputs = bnnpred.load(path, network(), X_train=X)
    assert torch.equal(with_inputs.predict(X[:5], "gp", gp_subset_size=50).probs,
                       fitted.predict(X[:5], "gp", gp_subset_size=50).probs)
    with pytest.raises(BnnpredError, match="keeps its log evidence .* but not the curvature"):
        loaded.log_evidence_at(3.0)


def test_a_saved_fit_that_was_edited_or_is_of_another_network_is_one_error(tmp_path):
    X, y = classification()
    path = bnnpred.fit(network(), X, y, task="multiclass", options={"map": {"steps": 5}}, progress=False).save(
        tmp_path / "fit.pt")
    with pytest.raises(BnnpredError, match=r"fit\.pt was saved from another network: its parameter 0\.weight "
                                           r"\[16, 4\] is 0\.weight \[8, 4\] here"):
        bnnpred.load(path, network(width=8))
    data = bytearray(path.read_bytes())
    data[-20] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(BnnpredError, match=r"fit\.pt does not match its checksum \(edited or cut short\)"):
        bnnpred.load(path, network())
    (tmp_path / "other.pt").write_bytes(b"not a fit")
    with pytest.raises(BnnpredError, match="other.pt is not a fit saved by Fitted.save"):
        bnnpred.load(tmp_path / "other.pt", network())
    assert not list(tmp_path.glob(".*"))  # writes leave no partial files


@pytest.mark.parametrize("keyword", sorted(laplace_torch_keywords.FIT))
def test_laplace_torchs_fit_keywords_name_ours(keyword):
    X, y = classification(20)
    with pytest.raises(TypeError, match=re.escape(f"fit() takes no {keyword}= (laplace-torch's keyword); here: "
                                                  f"{laplace_torch_keywords.FIT[keyword]}")):
        bnnpred.fit(network(), X, y, task="multiclass", **{keyword: "kron"})


@pytest.mark.parametrize("keyword", sorted(laplace_torch_keywords.PREDICT))
def test_laplace_torchs_predict_keywords_name_ours(keyword):
    X, y = classification(20)
    fitted = bnnpred.fit(network(), X, y, task="multiclass", train=False, progress=False)
    with pytest.raises(TypeError, match=re.escape(f"predict() takes no {keyword}=")):
        fitted.predict(X, **{keyword: "probit"})
    with pytest.raises(TypeError, match=re.escape("predict() got an unexpected keyword argument 'n_sample'")):
        fitted.predict(X, n_sample=3)


def test_train_false_applies_to_the_methods_whose_training_is_the_maps():
    X, y = classification(20)
    with pytest.raises(BnnpredError, match="train=False: vl trains its posterior; it applies to laplace_ggn, map"):
        bnnpred.fit(network(), X, y, task="multiclass", method="vl", train=False)
    with pytest.raises(BnnpredError, match=r"train=False fits at the network's weights, but options\['map'\] = "
                                           r"\{'steps': 10\} trains"):
        bnnpred.fit(network(), X, y, task="multiclass", train=False, options={"map": {"steps": 10}})


def test_fit_and_predict_restore_every_submodules_own_mode():
    """A batch-norm layer the user froze (eval) inside a network in train mode stays frozen after fit and predict,
    tensors or streamed."""
    X, y = classification(64)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    net.train()
    net[1].eval()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y), batch_size=16)
    fitted = bnnpred.fit(net, X, y, task="multiclass", options={"map": {"steps": 3}}, progress=False)
    fitted.predict(X[:4], "glm", n_samples=5)
    bnnpred.fit(net, loader, task="multiclass", train=False, options={"structure": "diag"})
    assert net.training and not net[1].training and net[0].training


def test_optimize_prior_moves_the_evidence_in_its_one_place_and_a_save_keeps_it(tmp_path):
    X, y = classification(200)
    fitted = bnnpred.fit(network(), X, y, task="multiclass", train=False, options={"structure": "kron"})
    start = fitted.log_evidence
    fitted.optimize_prior(steps=50)
    assert fitted.log_evidence > start  # the evidence maximised over δ at θ*
    (delta,) = fitted.prior.deltas().values()
    assert fitted.log_evidence == pytest.approx(fitted.log_evidence_at(delta), rel=1e-12)
    assert "log_marglik" not in fitted.info  # one source: not copied into the diagnostics
    loaded = bnnpred.load(fitted.save(tmp_path / "fit.pt"), network())
    assert loaded.log_evidence == fitted.log_evidence
    with pytest.raises(BnnpredError, match="a loaded fit keeps its log evidence .* but not the curvature"):
        loaded.log_evidence_at(1.0)


def test_a_fit_saved_with_the_evidence_in_info_loads_and_one_without_a_key_is_one_error(tmp_path):
    X, y = classification(100)
    fitted = bnnpred.fit(network(), X, y, task="multiclass", train=False, options={"structure": "diag"})
    path = fitted.save(tmp_path / "fit.pt")
    state = fit_file.read(path, torch.device("cpu"))
    state["info"]["log_marglik"] = state.pop("log_evidence")  # as bnnpred wrote it until 2026-11-27
    fit_file.write(path, state)
    loaded = bnnpred.load(path, network())
    assert loaded.log_evidence == fitted.log_evidence and "log_marglik" not in loaded.info
    del state["prior"]
    fit_file.write(path, state)
    with pytest.raises(BnnpredError, match=r"fit\.pt was written by a bnnpred that saved no prior \(bnnpred \S+ "
                                           r"torch \S+\); fit and save it again with this one"):
        bnnpred.load(path, network())


def test_targets_of_another_shape_than_n_are_refused_not_broadcast():
    X, y = classification(40)
    message = r"y must hold one target per row, shape \[N\], got \[40, 1\]; e.g. y.view\(-1\)"
    with pytest.raises(BnnpredError, match=message):
        bnnpred.fit(network(), X, y[:, None], task="multiclass", train=False)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y[:, None]), batch_size=40)
    with pytest.raises(BnnpredError, match=message):
        bnnpred.fit(network(), loader, task="multiclass", train=False)


def test_a_fit_of_another_dtype_than_the_network_is_refused_on_load(tmp_path):
    X, y = classification(40)
    path = bnnpred.fit(network(), X, y, task="multiclass", train=False).save(tmp_path / "fit.pt")  # float64
    with pytest.raises(BnnpredError, match="holds a float64 fit and this network is float32; convert the network"):
        bnnpred.load(path, network().float())


def test_empty_batches_of_a_loader_add_nothing():
    X, y = classification(100)
    batches = [(X[:50], y[:50]), (X[:0], y[:0]), (X[50:], y[50:])]
    whole = bnnpred.fit(network(), X, y, task="multiclass", train=False, options={"structure": "kron"})
    streamed = bnnpred.fit(network(), batches, task="multiclass", train=False, options={"structure": "kron"})
    assert streamed.log_evidence == pytest.approx(whole.log_evidence, rel=1e-12)


def test_fit_leaves_the_modules_mode_and_predict_runs_in_eval_mode():
    X, y = classification(100)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Dropout(0.5), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    net.train()
    fitted = bnnpred.fit(net, X, y, task="multiclass", options={"map": {"steps": 5}}, progress=False)
    assert net.training  # as the user left it
    first, second = (fitted.predict(X[:10], "map").probs for _ in range(2))
    assert torch.equal(first, second)  # dropout off while predicting
    assert net.training
    net.eval()
    bnnpred.fit(net, X, y, task="multiclass", train=False, progress=False)
    assert not net.training


def test_a_script_without_logging_sees_the_map_announced_and_its_progress(tmp_path):
    script = """
import torch, bnnpred, bnnpred.progress
bnnpred.progress.LOG_EVERY = 0.0
net = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
X, y = torch.randn(50, 2), torch.randint(0, 2, (50,))
bnnpred.fit(net, X, y, task="multiclass", options={"map": {"steps": 3}})
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert lines[0] == ("bnnpred.fit: training the MAP from the network's weights first: 3 full-batch Adam steps on "
                        "50 points (train=False fits the posterior at the weights as they are)")
    assert any(line.startswith("MAP: 3/3 (100 %)") for line in lines), out.stderr


def test_progress_lines_go_to_the_log_where_it_is_handled_and_progress_false_is_silent(caplog, monkeypatch):
    monkeypatch.setattr(bnnpred.progress, "LOG_EVERY", 0.0)
    X, y = classification(50)
    with caplog.at_level("INFO", logger="bnnpred"):
        bnnpred.fit(network(), X, y, task="multiclass", options={"map": {"steps": 3}})
        shown = caplog.text
        caplog.clear()
        bnnpred.fit(network(), X, y, task="multiclass", options={"map": {"steps": 3}}, progress=False)
    assert "bnnpred.fit: training the MAP" in shown and "MAP: 3/3 (100 %)" in shown
    assert "MAP:" not in caplog.text and "bnnpred.fit:" not in caplog.text


@pytest.mark.parametrize("structure", ["kron", "diag", "full"])
def test_a_post_hoc_fit_streamed_from_a_loader_equals_the_fit_on_tensors(structure):
    """Issue 36 item 5: the curvature summed batch by batch (one batch in memory) equals the one over the tensors:
    the Kronecker factors, the posterior precision and the evidence, float64 to 1e-12."""
    X, y = classification(300)
    net = network()
    options = {"structure": structure, "kron_batch_size": 64}
    whole = bnnpred.fit(net, X, y, task="multiclass", train=False, prior_precision=3.0, options=options)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y), batch_size=96)  # 3 batches + 12
    streamed = bnnpred.fit(net, loader, task="multiclass", train=False, prior_precision=3.0, options=options)
    assert torch.equal(streamed.theta, whole.theta)
    if structure == "kron":
        for mine, theirs in zip(streamed._evidence.curvature.blocks, whole._evidence.curvature.blocks, strict=True):
            for name in ("A", "B", "dense"):
                if getattr(theirs, name) is not None:
                    torch.testing.assert_close(getattr(mine, name), getattr(theirs, name), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(streamed.posterior.dense_precision(), whole.posterior.dense_precision(), rtol=1e-12,
                               atol=1e-12)
    assert streamed.log_evidence == pytest.approx(whole.log_evidence, rel=1e-12)
    assert streamed.log_evidence_at(10.0) == pytest.approx(whole.log_evidence_at(10.0), rel=1e-12)
    torch.testing.assert_close(streamed.predict(X[:20], "glm", n_samples=50).probs,
                               whole.predict(X[:20], "glm", n_samples=50).probs, rtol=1e-10, atol=1e-12)
    with pytest.raises(BnnpredError, match="a fit streamed from a loader never held"):
        streamed.predict(X[:5], "gp")


def test_predictions_streamed_from_a_loader_equal_those_on_all_inputs_at_once():
    """Issue 36 item 5: predict over a DataLoader of (inputs, targets) or of inputs alone, batch by batch, joined in
    order: map, nn (the same weight draws in every batch), closed and bridge equal the prediction on the whole tensor
    (float64, 1e-12); glm draws per batch, so it equals the batches predicted one by one; a regression's and a count
    model's mixtures join along their inputs."""
    X, y = classification(200)
    fitted = bnnpred.fit(network(), X, y, task="multiclass", train=False, prior_precision=3.0)
    pairs = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y), batch_size=64)  # 3 batches + 8
    for kind in ("map", "nn", "closed", "bridge"):
        whole, streamed = fitted.predict(X, kind, n_samples=30), fitted.predict(pairs, kind, n_samples=30)
        for mine, theirs in zip(streamed, whole, strict=True):
            assert (mine is None) == (theirs is None)
            if mine is not None:
                torch.testing.assert_close(mine, theirs, rtol=1e-12, atol=1e-14)
    inputs = torch.utils.data.DataLoader(X, batch_size=64)
    by_batch = torch.cat([fitted.predict(X[i:i + 64], "glm", n_samples=30).probs for i in range(0, 200, 64)])
    assert torch.equal(fitted.predict(inputs, "glm", n_samples=30).probs, by_batch)
    for task, target in (("regression", X[:, 0] + 0.1 * X[:, 1]), ("count", (X[:, 0].exp().round()))):
        regression = bnnpred.fit(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)),
                                 X, target, task=task, train=False, options={"structure": "diag"})
        for kind in ("nn", "closed"):
            whole, streamed = regression.predict(X, kind, n_samples=30), regression.predict(inputs, kind, n_samples=30)
            torch.testing.assert_close(streamed.mean, whole.mean, rtol=1e-12, atol=1e-14)
            torch.testing.assert_close(streamed.variance, whole.variance, rtol=1e-12, atol=1e-14)
    with pytest.raises(BnnpredError, match="the loader yielded no batch"):
        fitted.predict(torch.utils.data.DataLoader(X[:0], batch_size=8), "map")
    with pytest.raises(BnnpredError, match="must yield input tensors or .* got a batch of str"):
        fitted.predict([("a", "b")], "map")


def test_the_bridge_of_a_logit_without_variance_is_finite():
    from bnnpred.predictive import laplace_bridge

    mean = torch.tensor([[1.0, 0.0, -1.0]], dtype=torch.float64)
    log_alpha = laplace_bridge(mean, torch.tensor([[0.5, 0.0, -1e-18]], dtype=torch.float64))
    probs = torch.softmax(log_alpha, -1)
    assert torch.isfinite(probs).all() and probs[0, 1:].sum() > 0.999  # the point masses take the mass


def test_the_laplace_bridge_inverts_the_dirichlets_own_laplace_approximation():
    """Hobbhahn et al.'s bridge maps the Laplace approximation of Dir(α) in the softmax basis back to α exactly:
    μ_k = log α_k − mean log α, σ²_k = (1 − 2/C)/α_k + Σ_l α_l⁻¹ / C² (float64), at small and huge logits."""
    from bnnpred.predictive import laplace_bridge

    gen = torch.Generator().manual_seed(0)
    for C, scale in ((2, 1.0), (3, 1.0), (10, 1.0), (10, 60.0)):
        alpha = torch.exp(scale * torch.randn(5, C, generator=gen, dtype=torch.float64))
        mean = alpha.log() - alpha.log().mean(-1, keepdim=True)
        var = (1 - 2 / C) / alpha + (1 / alpha).sum(-1, keepdim=True) / C**2
        torch.testing.assert_close(laplace_bridge(mean, var).exp(), alpha, rtol=1e-12, atol=0)


def test_the_bridge_predictive_is_the_dirichlets_mean_and_is_for_softmax_only():
    X, y = classification()
    fitted = bnnpred.fit(network(), X, y, task="multiclass", options={"map": {"steps": 50}}, progress=False)
    assert "bridge" in fitted.predictive_kinds()
    probs = fitted.predict(X[:20], "bridge").probs
    torch.testing.assert_close(probs.sum(-1), torch.ones(20, dtype=probs.dtype), rtol=0, atol=1e-12)
    assert (probs.argmax(-1) == fitted.predict(X[:20], "map").probs.argmax(-1)).float().mean() > 0.9
    binary = bnnpred.fit(torch.nn.Linear(4, 1), X, (y > 0).long(), task="binary", options={"map": {"steps": 5}},
                         progress=False)
    assert "bridge" not in binary.predictive_kinds()
    with pytest.raises(BnnpredError, match=r"predictive bridge is for task multiclass \(a softmax over classes\); "
                                           "use closed"):
        binary.predict(X, "bridge")


def test_the_command_line_refuses_the_bridge_on_a_binary_set_in_one_line(tmp_path):
    out = cli("train", *TINY, "predictive=bridge", cwd=tmp_path)  # two_moons: one logit
    assert out.returncode == 2 and out.stderr.strip().startswith("error: predictive bridge is for task multiclass")
    assert list(tmp_path.iterdir()) == []
