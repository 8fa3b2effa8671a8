"""The method contract (bnnpred/inference/contract.py): every registered method declares it and has its config
file, and each cross-config check is one line from the command line and one ``BnnpredError`` from ``bnnpred.fit``."""

from collections.abc import Callable

import pytest
import torch
from omegaconf import OmegaConf

import bnnpred
from bnnpred.app.compose import CONF_DIR, compose
from bnnpred.cli import main
from bnnpred.errors import BnnpredError
from bnnpred.inference import EVIDENCE_METHODS, METHODS
from bnnpred.inference.contract import NEEDS, Method
from bnnpred.predictive import PredictiveKind


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_registered_method_satisfies_the_contract(name):
    schema, fit = METHODS[name]
    assert issubclass(schema, Method) and callable(fit)
    assert (CONF_DIR / "inference" / f"{name}.yaml").is_file()
    cfg = OmegaConf.to_object(compose([f"inference={name}"]).inference)  # its YAML on its schema
    assert type(cfg) is schema and cfg.name == name
    cfg.validate()
    assert schema.KINDS[0] is PredictiveKind.map and set(schema.KINDS[1:]) <= set(NEEDS)
    budget = cfg.budget()
    assert schema.BUDGET.steps and all(isinstance(budget[key], int) and budget[key] >= 1
                                       for key in schema.BUDGET.steps)
    assert all(budget[key] is None or isinstance(budget[key], int) for key in schema.BUDGET.epochs)
    assert (name in EVIDENCE_METHODS) == schema.EVIDENCE


@pytest.mark.parametrize("preset", sorted(p.stem for p in (CONF_DIR / "inference").glob("*.yaml")))
def test_every_inference_preset_is_a_registered_method(preset):
    assert compose([f"inference={preset}"]).inference.name in METHODS


def data(d: int = 3, n: int = 40) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(n, d, generator=gen)
    return X, X.sum(1) + 0.3 * torch.randn(n, generator=gen)


def fit_relu_vl() -> None:
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    bnnpred.fit(net, *data(), task="regression", method="vl")


def fit_slang_above_its_parameter_count() -> None:
    bnnpred.fit(torch.nn.Linear(2, 1), *data(d=2), task="regression", method="slang", options={"rank": 4})


def predict_with(method: str, kind: str) -> Callable[[], None]:
    def call() -> None:
        X, y = data()
        options = {"iterations": 2} if method != "map" else {}
        fitted = bnnpred.fit(torch.nn.Linear(3, 1), X, y, task="regression", method=method,
                             options={**options, "map": {"steps": 2}})
        fitted.predict(X, kind=kind)

    return call


POSTERIOR_METHODS = " / ".join(sorted(n for n, (schema, _) in METHODS.items() if PredictiveKind.glm in schema.KINDS))
CHECKS = [  # (command line, the same check through the API or None, the message)
    (["inference=vl", "selection=none", "predictive=map", "model.activation=relu"], fit_relu_vl,
     "inference=vl needs an activation with a second derivative (ReLU's is zero) and the network uses ReLU; use a "
     "softplus network, e.g. model.activation=softplus"),
    (["inference=slang", "selection=none", "model.depth=0", "inference.rank=4"], fit_slang_above_its_parameter_count,
     "inference.rank = 4 exceeds the 3 parameters; use rank <= 3"),
    (["inference=map", "predictive=glm"], predict_with("map", "glm"),
     f"predictive glm needs a posterior, which inference=map does not give; use predictive=map, or "
     f"inference={POSTERIOR_METHODS}"),
    (["inference=oggn", "predictive=gp"], predict_with("oggn", "gp"),
     "predictive gp needs the Laplace-GGN posterior (it is its GP view), which inference=oggn does not give; use "
     "predictive=map / nn / glm / closed / bridge, or inference=laplace_ggn"),
    (["inference=voggn", "selection=marglik_grid"], None,  # the API has no hyperparameter selection
     "selection=marglik_grid needs the Laplace-GGN evidence; use inference=laplace_ggn, or selection=valid_nll / "
     "none with inference=voggn"),
]


@pytest.mark.parametrize("args,call,message", CHECKS)
def test_each_cross_config_check_is_one_line_from_the_cli_and_one_error_from_the_api(args, call, message, tmp_path,
                                                                                     capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *args, f"hydra.run.dir={tmp_path / 'run'}"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == f"error: {message}"
    assert list(tmp_path.iterdir()) == []
    if call is not None:
        with pytest.raises(BnnpredError) as error:
            call()
        assert str(error.value) == message


# notes-001/002's bad input (issue 18): each method's own bound, named with a valid value. (method's command line,
# the method of bnnpred.fit, the key and its bad value, the message; SLANG's rank is a check above.)
BOUNDS = [
    (["inference=vi"], "bbb", "rho_lr_factor", 0.0,
     "inference.rho_lr_factor (the variance parameters' learning-rate multiplier) must be positive, got 0.0; e.g. "
     "inference.rho_lr_factor=10 (notes-001 §2.8)"),
    (["inference=vl"], "vl", "rho_lr_factor", -1.0,
     "inference.rho_lr_factor (the variance parameters' learning-rate multiplier) must be positive, got -1.0; e.g. "
     "inference.rho_lr_factor=10 (notes-001 §2.8)"),
    (["inference=vl"], "vl", "fixed_sigma2", 0.0,
     "inference.fixed_sigma2 must be positive or null (learned), got 0.0; e.g. inference.fixed_sigma2=0.0001"),
    (["inference=vi"], "bbb", "fixed_sigma2", -0.01,
     "inference.fixed_sigma2 must be positive or null (learned), got -0.01; e.g. inference.fixed_sigma2=0.0001"),
    *[(["inference=vl"], "vl", "kl_weight", beta,
       f"inference.kl_weight (β) must be in (0, 1], got {beta}; e.g. inference.kl_weight=0.1 (notes-001 Table 1), "
       "1 is the ELBO") for beta in (0.0, -0.1, 1.5)],
    (["inference=vi"], "bbb", "kl_weight", 2.0,
     "inference.kl_weight (β) must be in (0, 1], got 2.0; e.g. inference.kl_weight=0.1 (notes-001 Table 1), 1 is the "
     "ELBO"),
    (["inference=bbb"], "bbb", "n_samples", 0,
     "inference.n_samples (S) must be >= 1, got 0; e.g. inference.n_samples=1"),
    (["inference=slang"], "slang", "n_samples", 0,
     "inference.n_samples (S) must be >= 1, got 0; e.g. inference.n_samples=4 (notes-002's MNIST runs)"),
]


@pytest.mark.parametrize("args,method,key,value,message", BOUNDS)
def test_each_variational_bound_is_one_line_from_the_cli_and_one_error_from_the_api(args, method, key, value,
                                                                                    message, tmp_path, capsys):
    network = ["model.activation=softplus"] if method == "vl" else []  # VL refuses ReLU before its bounds
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *args, "selection=none", "predictive=map", *network, f"inference.{key}={value}",
              f"hydra.run.dir={tmp_path / 'run'}"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == f"error: {message}"
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(BnnpredError) as error:
        bnnpred.fit(torch.nn.Linear(3, 1), *data(), task="regression", method=method, options={key: value})
    assert str(error.value) == message
