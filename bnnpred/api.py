"""bnnpred as a library: any method of the command line on one's own ``nn.Module``, and every predictive.

Post-hoc, on a network one has trained (laplace-torch's ``Laplace(model, ...).fit(loader)``):

>>> import torch
>>> import bnnpred
>>> net = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
>>> X, y = torch.randn(200, 2), torch.randint(0, 3, (200,))              # [N, 2], [N]
>>> fitted = bnnpred.fit(net, X, y, task="multiclass", train=False, options={"structure": "kron"})
>>> pred = fitted.predict(X[:5], kind="glm", n_samples=100)             # ClassPrediction: .probs [5, 3]
>>> round(float(pred.probs.sum()), 6)
5.0
>>> fitted.optimize_prior(steps=50).log_evidence < 0                     # in place; the posterior follows
True
>>> sorted(bnnpred.evaluate(pred, y[:5]))
['accuracy', 'brier', 'ece', 'nll']

Without ``train=False``, ``fit`` first trains the network from its weights (the method's start point; the module's
own parameters are left as they were) and says so. It returns a :class:`Fitted` holding θ*, the posterior, the
method's diagnostics and training trace; ``Fitted.save(path)`` and :func:`load` keep it in one file. The methods
are the command line's (``bnnpred.METHODS``: each name's options, as a dataclass), configured by the same keys as
``inference.*`` on the command line (``options``); the predictives are ``map``, ``nn`` (network sampling), ``glm``
(linearised sampling), ``closed`` (probit / Gaussian closed form), ``bridge`` (the Laplace bridge, softmax only) and
``gp`` (the Laplace-GGN's GP view, on all or a subset of the training points).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from torch import Tensor, nn

from bnnpred import fit_file, inference, laplace_torch_keywords, metrics
from bnnpred.curvature.functional import FlatModel
from bnnpred.data.base import Task
from bnnpred.errors import BnnpredError, unknown_choice
from bnnpred.inference import Fit, Problem, Session
from bnnpred.inference.map import MAP_BUDGET
from bnnpred.laplace_evidence import GRID_ELEMS, LaplaceEvidence, maximise_evidence
from bnnpred.likelihoods import Gaussian, Likelihood, likelihood_for
from bnnpred.posteriors import Posterior, load_posterior
from bnnpred.prediction import Prediction, concat
from bnnpred.predictive import Context, GPSubset, PredictiveKind, applies, predictor
from bnnpred.prior import Prior, PriorConfig, PriorGroups, PriorScale
from bnnpred.progress import announce

TASKS = {task.value: task for task in Task}


@dataclass
class Fitted:
    """The result of :func:`fit`.

    Attributes:
        method: the method's name.
        task: ``regression``, ``binary``, ``multiclass`` or ``count``.
        theta: ``θ*`` ``[P]``, the point the predictives linearise at (the MAP for Laplace, the mean for VI).
        posterior: the Gaussian over ``θ`` (``.mean`` ``[P]``, ``.sample(n)`` ``[n, P]``, ...), or None for MAP.
        info: the method's scalar diagnostics (gradient norm, steps, ...); the log evidence is
            :attr:`log_evidence`.
        trace: per-step records of the training (loss, or ELBO and KL).
        likelihood: the likelihood the network's outputs parameterise.
        prior: the prior ``θ ~ N(0, diag(prior.precision())⁻¹)`` (its groups' δ in ``prior.deltas()``).
    """

    method: str
    task: str
    theta: Tensor
    posterior: Posterior | None
    info: dict[str, float]
    trace: list[dict[str, float]]
    likelihood: Likelihood
    prior: Prior
    _model: FlatModel = field(repr=False)
    _X_train: Tensor | None = field(repr=False)  # None for a loaded fit given no training inputs
    _evidence: LaplaceEvidence | None = field(default=None, repr=False)
    _loaded_evidence: float | None = field(default=None, repr=False)  # a loaded fit's, which keeps no curvature

    @property
    def prior_precision(self) -> Tensor:
        """The prior's precision ``[P]``."""
        return self.prior.precision(self.theta)

    @property
    def log_evidence(self) -> float:
        """The Laplace-GGN log marginal likelihood at θ* and this fit's prior (notes-000 §5.2); only Laplace fits
        have it (a loaded one keeps the value it was saved with)."""
        value = self._loaded_evidence if self._loaded_evidence is not None else self._laplace().value
        if not math.isfinite(value):
            raise BnnpredError("the evidence is undefined: the posterior precision needed jitter (info['jitter'])")
        return value

    def log_evidence_at(self, prior_precision: float | Tensor, sigma2: float | None = None) -> float:
        """The log evidence at another prior (δ for every group of this fit's prior, or a tensor ``[P]``) and, for
        regression, another noise ``σ²``, with θ* and the curvature held fixed: no refitting."""
        if not isinstance(prior_precision, Tensor) and self.prior.n_free == 0:
            raise BnnpredError("log_evidence_at: this fit's prior was given as a tensor and has no δ to set; pass "
                               "prior_precision as a tensor [P]")
        precision = (prior_precision.to(self.theta) if isinstance(prior_precision, Tensor)
                     else self.prior.at(prior_precision).precision(self.theta))
        return float(self._laplace()(precision.double(), self._noise(sigma2)))

    def log_evidence_grid(self, deltas: Iterable[float], sigma2s: Iterable[float] | None = None) -> list[float]:
        """:meth:`log_evidence_at` at each δ of a grid (paired with each σ² of ``sigma2s`` for regression; None:
        this fit's), θ* and the curvature held fixed, in one pass over the kept spectrum for diagonal and Kronecker
        posteriors (a full one decomposes once and takes ``O(P)`` per δ)."""
        deltas = [float(d) for d in deltas]
        if self.prior.n_free == 0:
            raise BnnpredError("log_evidence_grid: this fit's prior was given as a tensor and has no δ to set; use "
                               "log_evidence_at with a tensor [P] per prior")
        noises = None if sigma2s is None else [self._noise(float(s)) for s in sigma2s]
        if noises is not None and len(noises) != len(deltas):
            raise BnnpredError(f"log_evidence_grid: {len(deltas)} deltas but {len(noises)} sigma2s; give one σ² per "
                               "δ, or none for this fit's")
        if not deltas:
            return []
        noise = self._noise(None) if noises is None else torch.stack(noises)
        if noise is not None and noise.dim() == 0:
            noise = noise.expand(len(deltas))
        rows = max(1, GRID_ELEMS // len(self.theta))  # the grid's [G, P] precisions made a chunk at a time
        return [value for start in range(0, len(deltas), rows) for value in self._laplace().at_each(
            torch.stack([self.prior.at(d).precision(self.theta) for d in deltas[start:start + rows]]).double(),
            None if noise is None else noise[start:start + rows]).tolist()]

    def optimize_prior(self, *, steps: int = 500, lr: float = 0.1) -> Fitted:
        """Move this fit, in place, to the prior (every group's δ: one, or one per layer with
        ``prior_groups="layer"``) and, for regression, the noise that maximise the log evidence at θ* (Adam on
        ``log δ``, ``log σ²``; laplace-torch's ``optimize_prior_precision(method="marglik")``); θ* and the
        curvature are kept, the posterior follows. Returns the fit itself, so calls chain."""
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
        self.posterior, self.likelihood, self.prior = posterior, likelihood, prior
        self._evidence = dataclasses.replace(self._laplace(), value=value)
        self.info = {**{k: v for k, v in self.info.items() if k != "jitter"},
                     **({"jitter": posterior.jitter} if posterior.jitter else {})}
        return self

    def _saved_evidence(self) -> float | None:
        """The log evidence as a saved file keeps it (NaN after jitter), None for a method without one."""
        if self._loaded_evidence is not None:
            return self._loaded_evidence
        return None if self._evidence is None else self._evidence.value

    def _laplace(self) -> LaplaceEvidence:
        if self._evidence is None and self.method in inference.EVIDENCE_METHODS:
            raise BnnpredError("a loaded fit keeps its log evidence (.log_evidence) but not the curvature "
                               "that moves it with the prior; fit again to change the prior")
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

    def predict(self, X: Tensor | Iterable, kind: str = "glm", *, n_samples: int = 1000, seed: int = 0,
                gp_subset_size: int | None = None, gp_subset: str = "random", **laplace_torch: Any) -> Prediction:
        """The predictive ``kind`` at inputs ``X`` ``[B, ...]``: a ``ClassPrediction`` (``.probs`` ``[B, C]``), a
        ``RegPrediction`` or a ``CountPrediction`` (``.mean`` / ``.variance`` ``[B]``); sampled predictives draw
        ``n_samples`` from a generator seeded by ``seed``, so the same call gives the same numbers. The network is
        evaluated in eval mode whatever its mode, which is left as it was. laplace-torch's ``pred_type=`` and
        ``link_approx=`` are refused naming the ``kind`` that does the same.

        ``X`` may be a ``DataLoader`` (or any iterable) of input batches, or of ``(inputs, targets)`` batches whose
        targets are ignored: the batches are predicted one at a time (the network, the posterior and a GP's
        conditioning held once) and joined in order. Every batch starts the same random stream, so ``nn`` uses the
        same weight draws in each and equals the prediction on all inputs at once; ``glm`` and ``gp`` draw each
        input's latent noise within its batch."""
        laplace_torch_keywords.refuse("predict", laplace_torch, laplace_torch_keywords.PREDICT)
        kinds = {k.value: k for k in PredictiveKind}
        if kind not in kinds:
            raise unknown_choice("predictive", kind, kinds)
        inference.check_predictives(self.method, [kinds[kind]])
        if n_samples < 1:
            raise BnnpredError(f"n_samples must be >= 1, got {n_samples}")
        if self._X_train is None and kinds[kind] is PredictiveKind.gp:
            raise BnnpredError("the gp predictive conditions on the training inputs, which a saved fit leaves out "
                               "and a fit streamed from a loader never held: bnnpred.load(path, model, X_train=X), "
                               "or fit on tensors")
        X_train = X[:0] if self._X_train is None else self._X_train
        ctx = Context(self._model, self.likelihood, self.theta, self.posterior, self.prior_precision, X_train)
        how = {h.value: h for h in GPSubset}
        if gp_subset not in how:
            raise unknown_choice("gp_subset", gp_subset, how)
        predict = predictor(kinds[kind], ctx, n_samples=n_samples, seed=seed, gp_subset_size=gp_subset_size,
                            gp_subset_how=how[gp_subset])
        with _eval_mode(self._model.module):
            if isinstance(X, Tensor):
                return predict(self._on_device(X))
            parts = [predict(self._on_device(inputs)) for inputs in _inputs(X)]
        if not parts:
            raise BnnpredError("predict(loader): the loader yielded no batch")
        return concat(parts)

    def _on_device(self, X: Tensor) -> Tensor:
        return X.to(device=self.theta.device, dtype=self.theta.dtype)

    def predictive_kinds(self) -> list[str]:
        """The predictives this fit supports, as its method declares them (``KINDS``, see
        :mod:`bnnpred.inference.contract`) and its task allows: ``map`` always; the sampled and closed forms (and
        for ``multiclass`` the Laplace bridge) with a posterior; the GP view for a Laplace-GGN posterior."""
        return [kind.value for kind in inference.METHODS[self.method][0].KINDS if applies(kind, self.likelihood)]

    def save(self, path: str | Path) -> Path:
        """Write the fit to ``path`` (:mod:`bnnpred.fit_file`: tensors only, checksummed, with the versions that
        wrote it, without the training data or the network's code); :func:`load` reads it back onto the same
        network. Returns the path."""
        posterior = None if self.posterior is None else self.posterior.state()
        return fit_file.write(Path(path), {
            "method": self.method, "task": self.task, "theta": self.theta, "posterior": posterior,
            "info": dict(self.info), "log_evidence": self._saved_evidence(), "trace": list(self.trace),
            "sigma2": getattr(self.likelihood, "sigma2", None),
            "prior": self.prior.state(),
            "network": fit_file.network_signature(self._model), "buffers": self._model.buffer_state()})


def load(path: str | Path, model: nn.Module, X_train: Tensor | None = None) -> Fitted:
    """The fit that :meth:`Fitted.save` wrote to ``path``, on ``model`` (the network it was fitted on: the same
    parameter names and shapes; its buffers, e.g. batch-norm statistics, are set to the saved ones). Its predictives
    equal the saved fit's to the last bit; the gp predictive needs the training inputs ``X_train`` ``[N, ...]``,
    and a loaded fit keeps its log evidence but not the curvature that moves it with the prior. A file that was
    edited, is not a saved fit, or was saved from another network is a one-line error."""
    flat = FlatModel(model)
    state = fit_file.read(Path(path), flat.theta().device)
    fit_file.check_network(Path(path), state["network"], flat, state["theta"])
    flat.load_buffers(state["buffers"])
    theta = state["theta"]
    prior = Prior.from_state(state["prior"])
    posterior = None if state["posterior"] is None else load_posterior(state["posterior"])
    X_train = None if X_train is None else X_train.to(device=theta.device, dtype=theta.dtype)
    return Fitted(method=state["method"], task=state["task"], theta=theta, posterior=posterior, info=state["info"],
                  trace=state["trace"], likelihood=likelihood_for(TASKS[state["task"]], state["sigma2"]),
                  prior=prior, _model=flat, _X_train=X_train, _loaded_evidence=state["log_evidence"])


@contextmanager
def _eval_mode(module: nn.Module) -> Iterator[None]:
    """The module in eval mode for a ``with`` block, every submodule's own mode restored after (a batch-norm layer
    kept in eval inside a network in train mode stays so)."""
    modes = {sub: sub.training for sub in module.modules()}
    module.eval()
    try:
        yield
    finally:
        for sub, training in modes.items():
            sub.training = training


def _as_noise(sigma2: float | None) -> Tensor | None:
    return None if sigma2 is None else torch.tensor(sigma2, dtype=torch.float64)


def fit(model: nn.Module, X: Tensor | Iterable, y: Tensor | None = None, *, task: str,
        method: str = "laplace_ggn", train: bool = True, prior_precision: float | Tensor = 1.0,
        prior_scale: str = "isotropic", prior_groups: str = "shared", bias_precision: float | None = None,
        sigma2: float = 0.1, options: dict[str, Any] | None = None, seed: int = 0, progress: bool = True,
        **laplace_torch: Any) -> Fitted:
    """Fit ``method`` to ``model`` on the data ``X`` ``[N, ...]`` and ``y`` ``[N]``, or a ``DataLoader`` of
    ``(X, y)`` batches: streamed for a post-hoc Laplace fit (``train=False``; one batch in memory at a time, the
    curvature summed over batches; no ``gp`` predictive then), gathered into memory for a method that trains.

    Args:
        model: the network; its outputs are the likelihood's parameters ``[N, C]`` (one logit for ``binary``, the
            mean for ``regression``, the log rate for ``count``). Its parameters are the start point; they are not
            changed, and its train / eval mode is left as it was.
        train: for ``map`` and ``laplace_ggn`` (whose training is the MAP's): train the network from its weights
            first (``options["map"]``: 10,000 full-batch Adam steps unless set, said when it starts), or with
            False fit the posterior at the network's weights as they are (post-hoc, as laplace-torch). The other
            methods train their posterior and take only True.
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
        progress: long stages report progress: a bar on a terminal or in a notebook, else a line with the time left
            every 30 s (to the ``bnnpred`` log, or stderr where logging is not set up).

    laplace-torch's keywords (``hessian_structure=``, ``subset_of_weights=``, ``sigma_noise=``, ...) are refused
    naming the spelling here.
    """
    laplace_torch_keywords.refuse("fit", laplace_torch, laplace_torch_keywords.FIT)
    if method not in inference.METHODS:
        raise unknown_choice("method", method, inference.METHODS)
    if task not in TASKS:
        raise unknown_choice("task", task, TASKS)
    cfg = _method_config(method, _training(method, train, options or {}))
    with _eval_mode(model):  # the module's modes as they were after the fit (FlatModel works in eval mode)
        return _fit(model, X, y, TASKS[task], method, cfg, train, prior_precision, prior_scale, prior_groups,
                    bias_precision, sigma2, seed, progress)


def _fit(model: nn.Module, X: Tensor | Iterable, y: Tensor | None, task: Task, method: str, cfg: Any, train: bool,
         prior_precision: float | Tensor, prior_scale: str, prior_groups: str, bias_precision: float | None,
         sigma2: float, seed: int, progress: bool) -> Fitted:
    """:func:`fit` once its arguments are checked."""
    flat = FlatModel(model)
    theta0 = flat.theta()
    prior = _prior(flat, prior_precision, prior_scale, prior_groups, bias_precision)
    likelihood = likelihood_for(task, sigma2)
    if not train and not isinstance(X, Tensor) and y is None and method in inference.STREAMED:
        # post-hoc from a loader: one batch in memory at a time
        result = inference.STREAMED[method](flat, likelihood, theta0, _batches(X, theta0, likelihood, task),
                                            prior.precision(theta0), cfg)
        return Fitted(method=method, task=task.value, theta=result.theta, posterior=result.posterior,
                      info=dict(result.info), trace=[], likelihood=likelihood, prior=prior, _model=flat,
                      _X_train=None, _evidence=result.evidence)
    X, y = _tensors(X, y)
    X = X.to(device=theta0.device, dtype=theta0.dtype)
    y = y.to(device=theta0.device, dtype=torch.int64 if task.classification else theta0.dtype)
    likelihood.check_targets(y)
    if progress and train and inference.METHODS[method][0].BUDGET is MAP_BUDGET:
        length = (f"{cfg.map.epochs} epochs of batch {cfg.map.batch_size}" if cfg.map.epochs is not None
                  else f"{cfg.map.steps:,} {'full-batch ' if cfg.map.batch_size is None else ''}Adam steps")
        announce(f"bnnpred.fit: training the MAP from the network's weights first: {length} on {len(X):,} points "
                 "(train=False fits the posterior at the weights as they are)")
    problem = Problem(model=flat, likelihood=likelihood, X=X, y=y, prior_precision=prior.precision(theta0),
                      theta0=theta0, generator=torch.Generator(device=theta0.device).manual_seed(seed),
                      session=Session(progress=progress))
    try:
        result: Fit = inference.fit(problem, cfg)
    finally:
        with torch.no_grad():  # trainers evaluate the module at other θ; leave the user's parameters as they were
            for name, value in flat.unflatten(theta0).items():
                model.get_parameter(name).copy_(value)
    return Fitted(method=method, task=task.value, theta=result.theta, posterior=result.posterior,
                  info=dict(result.info), trace=list(result.trace), likelihood=likelihood, prior=prior, _model=flat,
                  _X_train=X, _evidence=result.evidence)


def _training(method: str, train: bool, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` for ``train=False``: no MAP steps (a method whose training is the MAP's alone), refused where
    the method must train or the options train."""
    if train:
        return options
    if inference.METHODS[method][0].BUDGET is not MAP_BUDGET:
        fixed = sorted(m for m, (schema, _) in inference.METHODS.items() if schema.BUDGET is MAP_BUDGET)
        raise BnnpredError(f"train=False: {method} trains its posterior; it applies to {', '.join(fixed)}")
    given = options.get("map", {})
    if given.get("steps") or given.get("epochs") or given.get("finish_tol"):
        raise BnnpredError(f"train=False fits at the network's weights, but options['map'] = {given} trains; drop "
                           "one of them")
    return {**options, "map": {**given, "steps": 0, "epochs": None, "finish_tol": None}}


def evaluate(prediction: Prediction, y: Tensor) -> dict[str, float]:
    """NLL, accuracy, ECE and Brier score (classification), NLL, RMSE and log-likelihoods (regression) or NLL and
    RMSE (counts) of a prediction on the targets ``y`` ``[B]``."""
    return metrics.evaluate(prediction, y.to(prediction[0].device))


def _batches(loader: Iterable, like: Tensor, likelihood: Likelihood, task: Task) -> Iterator[tuple[Tensor, Tensor]]:
    """The loader's ``(inputs, targets)`` batches on ``like``'s device and dtype (class labels as int64), each
    checked against the likelihood's support."""
    classification = task.classification
    for batch in loader:
        if not (isinstance(batch, list | tuple) and len(batch) == 2):
            raise BnnpredError("fit(model, loader): the loader must yield (inputs, targets) batches")
        X, y = batch
        _check_targets_shape(X, y)
        y = y.to(device=like.device, dtype=torch.int64 if classification else like.dtype)
        likelihood.check_targets(y)
        yield X.to(device=like.device, dtype=like.dtype), y


def _inputs(loader: Iterable) -> Iterator[Tensor]:
    """A loader's input batches: each batch itself, or the first of an ``(inputs, targets)`` pair."""
    for batch in loader:
        inputs = batch[0] if isinstance(batch, list | tuple) else batch
        if not isinstance(inputs, Tensor):
            raise BnnpredError(f"predict(loader): the loader must yield input tensors or (inputs, targets) pairs, got "
                               f"a batch of {type(inputs).__name__}")
        yield inputs


def _tensors(X: Tensor | Iterable, y: Tensor | None) -> tuple[Tensor, Tensor]:
    if isinstance(X, Tensor):
        if y is None:
            raise BnnpredError("fit(model, X, y): y is missing; pass the targets [N], or a DataLoader as X")
        _check_targets_shape(X, y)
        return X, y
    if y is not None:
        raise BnnpredError("fit(model, loader): a DataLoader carries its targets; drop y")
    batches = list(X)
    if not batches or not all(isinstance(b, list | tuple) and len(b) == 2 for b in batches):
        raise BnnpredError("fit(model, loader): the loader must yield (inputs, targets) batches")
    X, y = torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])
    _check_targets_shape(X, y)
    return X, y


def _check_targets_shape(X: Tensor, y: Tensor) -> None:
    """One target per row: ``y`` ``[N]`` beside ``X`` ``[N, ...]`` (a ``[N, 1]`` column would broadcast silently)."""
    if y.dim() != 1:
        raise BnnpredError(f"y must hold one target per row, shape [N], got {list(y.shape)}; e.g. y.view(-1)")
    if len(X) != len(y):
        raise BnnpredError(f"X has {len(X)} rows but y has {len(y)}; they must match")


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
