"""The Python API on one's own network: the README's example runs as written, Laplace on a linear-Gaussian model
is Bayesian linear regression (precision, mean, evidence), and bad calls are one clear error."""

import math
import re
from pathlib import Path

import pytest
import torch

import bnnpred
from bnnpred.errors import BnnpredError
from bnnpred.inference import METHODS

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_example_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # it saves a fit
    text = README.read_text()
    section = text[text.index("## Python API"):]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)[:1]
    exec(compile(code, "README.md", "exec"), {})


def test_every_docstring_example_in_the_package_runs_as_a_doctest():
    """No example that never runs: each module with ``>>>`` lines is a doctest (api's and the claims' so far)."""
    import doctest
    import importlib

    package = README.parent / "bnnpred"
    modules = sorted(".".join(p.relative_to(README.parent).with_suffix("").parts)
                     for p in package.rglob("*.py") if ">>>" in p.read_text())
    assert "bnnpred.api" in modules
    for name in modules:
        result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
        assert result.attempted >= 1 and result.failed == 0, name


def linear_regression(n: int = 40, d: int = 3, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=gen)
    y = X @ torch.tensor([1.0, -2.0, 0.5]) + 0.3 + 0.4 * torch.randn(n, generator=gen)
    return X, y


def test_laplace_on_a_linear_gaussian_model_is_bayesian_linear_regression():
    X, y = linear_regression()
    sigma2, delta = 0.16, 2.0
    net = torch.nn.Linear(3, 1)
    fitted = bnnpred.fit(net, X, y, task="regression", method="laplace_ggn", prior_precision=delta, sigma2=sigma2,
                         options={"map": {"steps": 4000, "lr": 0.05}})
    A = torch.cat([X, torch.ones(len(X), 1)], 1)  # θ = (w, b): Linear's weight then bias
    precision = A.T @ A / sigma2 + delta * torch.eye(4)
    mean = torch.linalg.solve(precision, A.T @ y / sigma2)
    assert torch.allclose(fitted.posterior.dense_precision(), precision, rtol=1e-12, atol=1e-10)
    assert torch.allclose(fitted.theta, mean, atol=1e-6)  # Adam converged to the exact mode
    # log N(y | 0, σ² I + A Aᵀ/δ), the BLR evidence
    cov = sigma2 * torch.eye(len(X)) + A @ A.T / delta
    exact = torch.distributions.MultivariateNormal(torch.zeros(len(X)), cov).log_prob(y)
    assert fitted.log_evidence == pytest.approx(float(exact), rel=1e-8)
    pred = fitted.predict(X[:4], kind="closed")
    assert torch.allclose(pred.variance, sigma2 + torch.einsum("bp,pq,bq->b", A[:4], torch.linalg.inv(precision),
                                                               A[:4]), rtol=1e-10)


def test_optimize_prior_finds_a_stationary_point_of_log_evidence_at():
    """optimize_prior (Adam on log δ, log σ² at θ*) and log_evidence_at (the same evidence at any δ, σ²) agree: at
    the returned δ and σ² no step of 1 % in either raises the evidence (central finite differences, 1e-7 nats)."""
    X, y = linear_regression()
    fitted = bnnpred.fit(torch.nn.Linear(3, 1), X, y, task="regression", prior_precision=2.0, sigma2=0.5,
                         options={"map": {"steps": 4000, "lr": 0.05}})
    start = fitted.log_evidence
    best = fitted.optimize_prior(steps=3000, lr=0.05)
    delta, sigma2 = best.prior.delta, best.likelihood.sigma2
    top = fitted.log_evidence_at(delta, sigma2=sigma2)
    assert best.log_evidence == pytest.approx(top, rel=1e-12) and top > start
    for d, s in ((delta * 1.01, sigma2), (delta / 1.01, sigma2), (delta, sigma2 * 1.01), (delta, sigma2 / 1.01)):
        assert fitted.log_evidence_at(d, sigma2=s) <= top + 1e-7


@pytest.mark.parametrize("options", [{"structure": "kron"}, {"structure": "diag"}, {"structure": "full"}])
def test_the_evidence_grid_is_log_evidence_at_each_point(options):
    """log_evidence_grid over 9 δ (and 9 σ²) = log_evidence_at at each, 1e-12 relative, for regression with its own
    and with given noises; a σ² list of another length is one line naming the fix."""
    X, y = linear_regression()
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    fitted = bnnpred.fit(net, X, y, task="regression", prior_precision=2.0, sigma2=0.5,
                         options={**options, "map": {"steps": 200, "lr": 0.05}})
    deltas, sigma2s = torch.logspace(-2, 2, 9).tolist(), torch.logspace(-1, 0.5, 9).tolist()
    assert fitted.log_evidence_grid(deltas) == pytest.approx([fitted.log_evidence_at(d) for d in deltas], rel=1e-12)
    assert fitted.log_evidence_grid(deltas, sigma2s) == pytest.approx(
        [fitted.log_evidence_at(d, sigma2=s) for d, s in zip(deltas, sigma2s, strict=True)], rel=1e-12)
    with pytest.raises(BnnpredError, match="9 deltas but 2 sigma2s; give one σ² per δ"):
        fitted.log_evidence_grid(deltas, sigma2s[:2])
    assert fitted.log_evidence_grid([]) == []


@pytest.mark.parametrize("options", [{"structure": "kron"}, {"structure": "full", "subset_of_weights": "last_layer"}])
def test_optimize_prior_per_layer_raises_the_evidence_for_kronecker_and_last_layer_posteriors(options):
    X = torch.randn(60, 2, generator=torch.Generator().manual_seed(0))
    y = (X[:, 0] * X[:, 1] > 0).long()
    net = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    fitted = bnnpred.fit(net, X, y, task="binary", prior_groups="layer",
                         options={**options, "map": {"steps": 300, "lr": 0.02}})
    start, theta = fitted.log_evidence, fitted.theta.clone()
    best = fitted.optimize_prior(steps=300)
    assert best.log_evidence > start
    assert best.log_evidence == pytest.approx(fitted.log_evidence_at(best.prior_precision), rel=1e-9)
    assert torch.equal(best.theta, theta)
    with pytest.raises(BnnpredError, match="sigma2 applies to regression only"):
        fitted.log_evidence_at(1.0, sigma2=0.1)
    given = bnnpred.fit(net, X, y, task="binary", prior_precision=fitted.prior_precision,
                        options={**options, "map": {"steps": 300, "lr": 0.02}})
    with pytest.raises(BnnpredError, match="prior was given as a tensor and has no δ to set"):
        given.log_evidence_at(1.0)


def test_the_network_is_left_as_it_was_and_a_loader_equals_tensors():
    X, y = linear_regression()
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    before = [p.clone() for p in net.parameters()]
    options = {"map": {"steps": 50, "batch_size": 10}}
    by_tensors = bnnpred.fit(net, X, y, task="regression", method="laplace_ggn", options=options)
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters(), strict=True))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y), batch_size=16)
    by_loader = bnnpred.fit(net, loader, task="regression", method="laplace_ggn", options=options)
    assert torch.equal(by_tensors.theta, by_loader.theta)


def short_budget(method: str, steps: int) -> dict:
    """Options that set every step count of the method's budget (``BUDGET.steps``, dotted keys) to ``steps``."""
    options: dict = {}
    for key in METHODS[method][0].BUDGET.steps:
        *parents, leaf = key.split(".")
        node = options
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = steps
    return options


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_fits_and_predicts_with_every_kind_it_declares(method):
    """Each method's declared ``KINDS`` and ``EVIDENCE`` hold on its fit; the network is linear in θ (logistic
    regression), which every method takes (exact_vi needs it)."""
    X, y = linear_regression()
    labels = (y > 0).long()
    net = torch.nn.Sequential(torch.nn.Linear(3, 1))
    fitted = bnnpred.fit(net, X, labels, task="binary", method=method, options=short_budget(method, 20))
    kinds = fitted.predictive_kinds()
    assert kinds[0] == "map" and (fitted.posterior is None) == (kinds == ["map"])
    for kind in kinds:
        values = bnnpred.evaluate(fitted.predict(X, kind=kind, n_samples=10), labels)
        assert math.isfinite(values["nll"]) and 0 <= values["accuracy"] <= 1
    if METHODS[method][0].EVIDENCE:
        assert math.isfinite(fitted.log_evidence)
    else:
        with pytest.raises(BnnpredError, match="fit has no evidence"):
            fitted.log_evidence  # noqa: B018


def test_a_count_fit_has_the_gauss_hermite_predictive_as_the_mean_of_its_glm_draws():
    """Laplace on Poisson regression with a log link: the closed (20-node Gauss-Hermite) predictive's mean and
    variance equal those of the GLM predictive's 20,000 latent draws (means within 4 standard errors of the draws',
    variances within 2 %); both lie above the MAP's plug-in rate e^m (the lognormal mean is e^{m + v/2})."""
    gen = torch.Generator().manual_seed(1)
    X = torch.randn(60, 2, generator=gen)
    y = torch.poisson(torch.exp(0.5 + X @ torch.tensor([0.8, -0.4])), generator=gen)
    fitted = bnnpred.fit(torch.nn.Linear(2, 1), X, y, task="count", method="laplace_ggn", prior_precision=1.0,
                         options={"map": {"steps": 2000, "lr": 0.05}})
    X_test = 2 * torch.randn(5, 2, generator=gen)
    closed = fitted.predict(X_test, kind="closed")
    draws = fitted.predict(X_test, kind="glm", n_samples=20_000)
    assert type(closed).__name__ == type(draws).__name__ == "CountPrediction"
    standard_error = (draws.epistemic / 20_000).sqrt()
    assert ((closed.mean - draws.mean).abs() < 4 * standard_error).all()
    torch.testing.assert_close(closed.variance, draws.variance, rtol=0.02, atol=0)
    assert ((closed.mean - fitted.predict(X_test, kind="map").mean) > 4 * standard_error).all()
    values = bnnpred.evaluate(closed, torch.poisson(closed.mean, generator=gen))
    assert set(values) == {"nll", "rmse"} and math.isfinite(values["nll"])


@pytest.mark.parametrize("call,message", [
    (dict(method="lapalce"), "unknown method 'lapalce'; valid choices: bbb,"),
    (dict(task="class"), "unknown task 'class'; valid choices: binary, count, multiclass, regression"),
    (dict(task="count"), "Poisson targets must be counts 0, 1, 2, ..., got y[0] = "),
    (dict(options={"map": {"stpes": 3}}), "laplace_ggn options: Key 'stpes' not in 'MapConfig'"),
    (dict(prior_precision=-1.0), "prior precisions must be positive"),
    (dict(prior_scale="per_layer"), "unknown prior_scale 'per_layer'; valid choices: fan_in, isotropic"),
])
def test_bad_calls_are_one_error_naming_the_valid_choices(call, message):
    X, y = linear_regression()
    with pytest.raises(BnnpredError, match=re.escape(message)):
        bnnpred.fit(torch.nn.Linear(3, 1), X, y, **{"task": "regression", **call})


def test_a_predictive_that_does_not_apply_names_the_ones_that_do():
    X, y = linear_regression()
    fitted = bnnpred.fit(torch.nn.Linear(3, 1), X, y, task="regression", method="map", options={"map": {"steps": 5}})
    with pytest.raises(BnnpredError, match="predictive glm needs a posterior, which inference=map does not give; "
                                           "use predictive=map, or inference=bbb"):
        fitted.predict(X, kind="glm")
    with pytest.raises(BnnpredError, match="a map fit has no evidence"):
        fitted.log_evidence  # noqa: B018


def test_the_methods_are_named_with_their_options_as_the_inference_registry_has_them():
    assert list(bnnpred.METHODS) == sorted(METHODS)
    assert all(bnnpred.METHODS[name] is schema for name, (schema, _) in METHODS.items())
    assert bnnpred.METHODS["laplace_ggn"]().map.steps == 10000  # the options fit takes, with their defaults
