"""bnnpred as a library: any method of the command line on one's own ``nn.Module``, and every predictive.

>>> import torch
>>> import bnnpred
>>> net = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
>>> X, y = torch.randn(200, 2), (torch.rand(200) > 0.5).long()          # [N, 2], [N]
>>> fitted = bnnpred.fit(net, X, y, task="binary", method="laplace_ggn", prior_precision=1.0,
...                      options={"map": {"steps": 300, "lr": 0.01}})
>>> pred = fitted.predict(X[:5], kind="glm", n_samples=100)             # ClassPrediction: .probs [5, 2]
>>> fitted.log_evidence                                                 # the Laplace-GGN log evidence
>>> bnnpred.evaluate(pred, y[:5])                                        # {"nll": ..., "accuracy": ...}

``fit`` trains the network (it is the method's start point and is left as it was) and returns a :class:`Fitted`
holding θ*, the posterior, the method's diagnostics and training trace. The methods are the command line's
(``bnnpred.METHODS``), configured by the same keys as ``inference.*`` on the command line (``options``); the
predictives are ``map``, ``nn`` (network sampling), ``glm`` (linearised sampling), ``closed`` (probit / Gaussian
closed form) and ``gp`` (the Laplace-GGN's GP view, on all or a subset of the training points).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from torch import Tensor, nn

from bnnpred import inference, metrics
from bnnpred.curvature.functional import FlatModel
from bnnpred.data.base import Task
from bnnpred.errors import BnnpredError, unknown_choice
from bnnpred.inference import Fit, Problem
from bnnpred.laplace_evidence import LaplaceEvidence, maximise_evidence
from bnnpred.likelihoods import Gaussian, Likelihood, likelihood_for
from bnnpred.posteriors import Posterior
from bnnpred.prediction import Prediction
from bnnpred.predictive import Context, GPSubset, PredictiveKind, predictor
from bnnpred.prior import Prior, PriorConfig, PriorGroups, PriorScale

TASKS = {task.value: task for task in Task}


@dataclass
class Fitted:
    """The result of :func:`fit`.

    Attributes:
        method: the method's name.
        theta: ``θ*`` ``[P]``, the point the predictives linearise at (the MAP for Laplace, the mean for VI).
        posterior: the Gaussian over ``θ`` (``.mean`` ``[P]``, ``.sample(n)`` ``[n, P]``, ...), or None for MAP.
        info: the method's scalar diagnostics (gradient norm, steps, log evidence, ...).
        trace: per-step records of the training (loss, or ELBO and KL).
        likelihood: the likelihood the network's outputs parameterise.
        prior: the prior ``θ ~ N(0, diag(prior.precision())⁻¹)`` (its groups' δ in ``prior.deltas()``).
    """

    method: str
    theta: Tensor
    posterior: Posterior | None
    info: dict[str, float]
    trace: list[dict[str, float]]
    likelihood: Likelihood
    prior: Prior
    _model: FlatModel = field(repr=False)
    _X_train: Tensor = field(repr=False)
    _evidence: LaplaceEvidence | None = field(default=None, repr=False)

    @property
    def prior_precision(self) -> Tensor:
        """The prior's precision ``[P]``."""
        return self.prior.precision(self.theta)

    @property
    def log_evidence(self) -> float:
        """The Laplace-GGN log marginal likelihood at θ* and this fit's prior (notes-000 §5.2); only Laplace fits
        have it."""
        value = self._laplace().value
        if not math.isfinite(value):
            raise BnnpredError("the evidence is undefined: the posterior precision needed jitter (info['jitter'])")
        return value

    def log_evidence_at(self, prior_precision: float | Tensor, sigma2: float | None = None) -> float:
        """The log evidence at another prior (δ for every group of this fit's prior, or a tensor ``[P]``) and, for
        regression, another noise ``σ²``, with θ* and the curvature held fixed: no refitting.

        >>> fitted.log_evidence_at(10.0)                                     # a float
        """
        if not isinstance(prior_precision, Tensor) and self.prior.n_free == 0:
            raise BnnpredError("log_evidence_at: this fit's prior was given as a tensor and has no δ to set; pass "
                               "prior_precision as a tensor [P]")
        precision = (prior_precision.to(self.theta) if isinstance(prior_precision, Tensor)
                     else self.prior.at(prior_precision).precision(self.theta))
        return float(self._laplace()(precision.double(), self._noise(sigma2)))

    def optimize_prior(self, *, steps: int = 500, lr: float = 0.1) -> Fitted:
        """The fit at the prior (every group's δ: one, or one per layer with ``prior_groups="layer"``) and, for
        regression, the noise that maximise the log evidence at θ* (Adam on ``log δ``, ``log σ²``; laplace-torch's
        ``optimize_prior_precision(method="marglik")``); θ* and the curvature are kept, the posterior follows.

        >>> better = fitted.optimize_prior()
        >>> better.prior.deltas(), better.log_evidence >= fitted.log_evidence   # {'all': ...}, True
        """
        if steps < 0 or not lr > 0:
            raise BnnpredError(f"optimize_prior: steps must be >= 0 and lr > 0, got steps={steps}, lr={lr}")
        if self.prior.n_free == 0:
            raise BnnpredError("optimize_prior: a prior given as a tensor has no δ to optimise; pass "
                               "prior_precision as a float")
        sigma2 = self.likelihood.sigma2 if isinstance(self.likelihood, Gaussian) else None
        prior, sigma2 = maximise_evidence(self._laplace(), self.prior, sigma2, steps=steps, lr=lr)
        likelihood = self.likelihood if sigma2 is None else Gaussian(sigma2)
        precision = prior.precision(self.theta)
        posterior = self._laplace().posterior(precision, sigma2)
        value = math.nan if posterior.jitter else float(self._laplace()(precision.double(), _as_noise(sigma2)))
        return dataclasses.replace(self, posterior=posterior, likelihood=likelihood, prior=prior,
                                   _evidence=dataclasses.replace(self._laplace(), value=value))

    def _laplace(self) -> LaplaceEvidence:
        if self._evidence is None:
            raise BnnpredError(f"a {self.method} fit has no evidence; fit with method="
                               f"{' / '.join(repr(m) for m in sorted(inference.EVIDENCE_METHODS))}")
        return self._evidence

    def _noise(self, sigma2: float | None) -> Tensor | None:
        """``σ²`` as the evidence takes it: the given value, else this fit's (None for classification and counts)."""
        if not isinstance(self.likelihood, Gaussian):
            if sigma2 is not None:
                raise BnnpredError("sigma2 applies to regression only; drop it")
            return None
        if sigma2 is not None and not sigma2 > 0:
            raise BnnpredError(f"sigma2 must be positive, got {sigma2}")
        return _as_noise(self.likelihood.sigma2 if sigma2 is None else sigma2)

    def predict(self, X: Tensor, kind: str = "glm", *, n_samples: int = 1000, seed: int = 0,
                gp_subset_size: int | None = None, gp_subset: str = "random") -> Prediction:
        """The predictive ``kind`` at inputs ``X`` ``[B, ...]``: a ``ClassPrediction`` (``.probs`` ``[B, C]``), a
        ``RegPrediction`` or a ``CountPrediction`` (``.mean`` / ``.variance`` ``[B]``); sampled predictives draw
        ``n_samples`` from a generator seeded by ``seed``, so the same call gives the same numbers."""
        kinds = {k.value: k for k in PredictiveKind}
        if kind not in kinds:
            raise unknown_choice("predictive", kind, kinds)
        inference.check_predictives(self.method, [kinds[kind]])
        if n_samples < 1:
            raise BnnpredError(f"n_samples must be >= 1, got {n_samples}")
        ctx = Context(self._model, self.likelihood, self.theta, self.posterior, self.prior_precision, self._X_train)
        how = {h.value: h for h in GPSubset}
        if gp_subset not in how:
            raise unknown_choice("gp_subset", gp_subset, how)
        predict = predictor(kinds[kind], ctx, n_samples=n_samples, seed=seed, gp_subset_size=gp_subset_size,
                            gp_subset_how=how[gp_subset])
        return predict(X.to(device=self.theta.device, dtype=self.theta.dtype))

    def predictive_kinds(self) -> list[str]:
        """The predictives this fit supports, as its method declares them (``KINDS``, see
        :mod:`bnnpred.inference.contract`): ``map`` always; the sampled and closed forms with a posterior; the GP
        view for a Laplace-GGN posterior."""
        return [kind.value for kind in inference.METHODS[self.method][0].KINDS]


def _as_noise(sigma2: float | None) -> Tensor | None:
    return None if sigma2 is None else torch.tensor(sigma2, dtype=torch.float64)


def fit(model: nn.Module, X: Tensor | Iterable, y: Tensor | None = None, *, task: str,
        method: str = "laplace_ggn", prior_precision: float | Tensor = 1.0, prior_scale: str = "isotropic",
        prior_groups: str = "shared", bias_precision: float | None = None, sigma2: float = 0.1,
        options: dict[str, Any] | None = None, seed: int = 0) -> Fitted:
    """Fit ``method`` to ``model`` on the data ``X`` ``[N, ...]`` and ``y`` ``[N]`` (or a ``DataLoader`` of
    ``(X, y)`` batches, gathered into memory: the methods use full-data curvature).

    Args:
        model: the network; its outputs are the likelihood's parameters ``[N, C]`` (one logit for ``binary``, the
            mean for ``regression``, the log rate for ``count``). Its parameters are the start point; it is not
            changed.
        task: ``regression`` (Gaussian, noise ``sigma2``), ``binary`` (one logit), ``multiclass`` (softmax) or
            ``count`` (Poisson, log link; targets are whole numbers ≥ 0).
        method: one of ``bnnpred.METHODS`` (``map``, ``laplace_ggn``, ``oggn``, ``lgva``, ``voggn``, ``bbb``,
            ``vl``, ``slang``, ``glm_refine``, ...).
        prior_precision: δ, a float (with ``prior_scale``: ``isotropic``, or ``fan_in`` for δ·fan-in on weights;
            ``prior_groups``: ``shared``, or one δ per ``layer`` or ``tensor``, which :meth:`Fitted.optimize_prior`
            moves apart; ``bias_precision``: a fixed precision for the biases), or a tensor ``[P]`` of
            per-parameter precisions.
        options: the method's settings, as ``inference.*`` keys on the command line (``{"structure": "kron",
            "map": {"steps": 2000}}``); ``bnnpred train inference=NAME --cfg job`` lists them.
        seed: seeds the method's random draws.
    """
    if method not in inference.METHODS:
        raise unknown_choice("method", method, inference.METHODS)
    if task not in TASKS:
        raise unknown_choice("task", task, TASKS)
    X, y = _tensors(X, y)
    flat = FlatModel(model)
    theta0 = flat.theta()
    X = X.to(device=theta0.device, dtype=theta0.dtype)
    y = y.to(device=theta0.device, dtype=torch.int64 if TASKS[task].classification else theta0.dtype)
    prior = _prior(flat, prior_precision, prior_scale, prior_groups, bias_precision)
    likelihood = likelihood_for(TASKS[task], sigma2)
    likelihood.check_targets(y)
    cfg = _method_config(method, options or {})
    problem = Problem(model=flat, likelihood=likelihood, X=X, y=y, prior_precision=prior.precision(theta0),
                      theta0=theta0,
                      generator=torch.Generator(device=theta0.device).manual_seed(seed))
    try:
        result: Fit = inference.fit(problem, cfg)
    finally:
        with torch.no_grad():  # trainers evaluate the module at other θ; leave the user's parameters as they were
            for name, value in flat.unflatten(theta0).items():
                model.get_parameter(name).copy_(value)
    return Fitted(method=method, theta=result.theta, posterior=result.posterior, info=dict(result.info),
                  trace=list(result.trace), likelihood=likelihood, prior=prior, _model=flat, _X_train=X,
                  _evidence=result.evidence)


def evaluate(prediction: Prediction, y: Tensor) -> dict[str, float]:
    """NLL, accuracy, ECE and Brier score (classification), NLL, RMSE and log-likelihoods (regression) or NLL and
    RMSE (counts) of a prediction on the targets ``y`` ``[B]``."""
    return metrics.evaluate(prediction, y.to(prediction[0].device))


def _tensors(X: Tensor | Iterable, y: Tensor | None) -> tuple[Tensor, Tensor]:
    if isinstance(X, Tensor):
        if y is None:
            raise BnnpredError("fit(model, X, y): y is missing; pass the targets [N], or a DataLoader as X")
        if len(X) != len(y):
            raise BnnpredError(f"X has {len(X)} rows but y has {len(y)}; they must match")
        return X, y
    if y is not None:
        raise BnnpredError("fit(model, loader): a DataLoader carries its targets; drop y")
    batches = list(X)
    if not batches or not all(isinstance(b, list | tuple) and len(b) == 2 for b in batches):
        raise BnnpredError("fit(model, loader): the loader must yield (inputs, targets) batches")
    return torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])


def _prior(model: FlatModel, delta: float | Tensor, scale: str, groups: str, bias: float | None) -> Prior:
    if isinstance(delta, Tensor):
        if delta.shape != (model.n_params,) or not bool((delta > 0).all()):
            raise BnnpredError(f"prior_precision as a tensor must be positive with shape [{model.n_params}] (one per "
                               f"parameter), got {list(delta.shape)}")
        return Prior.from_precision(delta)
    scales, kinds = {s.value: s for s in PriorScale}, {g.value: g for g in PriorGroups}
    if scale not in scales:
        raise unknown_choice("prior_scale", scale, scales)
    if groups not in kinds:
        raise unknown_choice("prior_groups", groups, kinds)
    return Prior.from_config(model, PriorConfig(delta=delta, scale=scales[scale], groups=kinds[groups],
                                                bias_delta=bias))


def _method_config(method: str, options: dict[str, Any]) -> Any:
    """The method's config dataclass with ``options`` merged in, type-checked and validated."""
    schema = inference.METHODS[method][0]
    try:
        cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), {**options, "name": method}))
    except OmegaConfBaseException as e:
        keys = ", ".join(f.name for f in schema.__dataclass_fields__.values() if f.name != "name")
        raise BnnpredError(f"{method} options: {str(e).splitlines()[0]} (its options: {keys})") from e
    cfg.validate()
    return cfg
