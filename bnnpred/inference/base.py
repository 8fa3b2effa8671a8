"""What every inference method receives and returns."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from bnnpred.curvature.functional import FlatModel
from bnnpred.likelihoods import Likelihood
from bnnpred.posteriors import Posterior
from bnnpred.predictive import network_outputs

if TYPE_CHECKING:
    from bnnpred.laplace_evidence import LaplaceEvidence

TRACE_DRAWS = 8  # posterior draws per ELBO estimate in a training trace


@dataclass(frozen=True)
class Session:
    """How a problem is trained, apart from what it is: progress display, the shared store of point estimates, the
    metrics monitored in traces and the resumable training states. None of it changes a fit's numbers."""

    progress: bool = False
    fit_cache: Path | None = None  # folder of shared point estimates (see inference.fit_cache); None: none
    monitor: Callable[[Tensor], dict[str, float]] | None = None  # metrics at θ for traces (valid / test NLL)
    checkpoints: Path | None = None  # folder of resumable training states (see inference.checkpoint); None: none
    checkpoint_seconds: float = 300.0  # at least this long between two checkpoints of a trainer


@dataclass
class Problem:
    """A training problem: network, likelihood, data, prior ``N(0, diag(prior_precision)⁻¹)``, start point, the
    random generator of its minibatches and draws; and the :class:`Session` it is trained in."""

    model: FlatModel
    likelihood: Likelihood
    X: Tensor  # [N, ...]
    y: Tensor  # [N]
    prior_precision: Tensor  # [P]
    theta0: Tensor  # [P] initial parameters
    generator: torch.Generator
    augment: Callable[[Tensor, torch.Generator], Tensor] | None = None  # training-time input transform
    session: Session = field(default_factory=Session)

    def training_batch(self, rows: Tensor | slice) -> tuple[Tensor, Tensor]:
        """Inputs and targets of ``rows`` as a trainer sees them: augmented when the dataset asks for it."""
        X = self.X[rows]
        return (X if self.augment is None else self.augment(X, self.generator)), self.y[rows]

    def monitored(self, theta: Tensor) -> dict[str, float]:
        """The monitor's metrics at ``θ`` for a trace row (none without a monitor)."""
        monitor = self.session.monitor
        return {} if monitor is None else monitor(theta.detach())


@dataclass
class Fit:
    """Result of an inference method.

    Attributes:
        theta: the point the predictives linearise at, ``θ*`` ``[P]`` (the MAP for Laplace).
        posterior: the Gaussian over ``θ``, or ``None`` for a point estimate.
        info: scalar diagnostics (final gradient norm, steps, log marginal likelihood, ...).
        trace: per-step records, e.g. ``{"step": 100, "loss": 0.31}``.
        buffers: the network's buffers after training (batch-norm running statistics; empty for most networks).
        evidence: a Laplace fit's log evidence as a function of the prior and the noise (its curvature kept apart
            from the prior), or ``None`` for a method without one.
        timing: the training loop's wall time (:meth:`TrainingClock.timing`): Adam's for a MAP (its full-batch
            finish is not in it) and a Laplace fit, the refinement's for a GLM refinement; a MAP read from the fit
            cache carries the timing of the training that made it, with ``from_fit_cache = 1``; empty for a fit
            without a stepped training loop (exact VI's L-BFGS). Kept apart from ``info``: it is
            not a result, and a resumed fit equals an uninterrupted one in all else.
    """

    theta: Tensor
    posterior: Posterior | None
    info: dict[str, float] = field(default_factory=dict)
    trace: list[dict[str, float]] = field(default_factory=list)
    buffers: dict[str, Tensor] = field(default_factory=dict)
    evidence: LaplaceEvidence | None = None
    timing: dict[str, float] = field(default_factory=dict)

    @property
    def log_evidence(self) -> float | None:
        """The log evidence (``evidence.value``: NaN where the precision needed jitter), or None for a method
        without one."""
        return None if self.evidence is None else self.evidence.value


@dataclass
class TrainingClock:
    """The wall time of a training loop, carried across a resume: ``before`` is the seconds earlier processes
    spent (saved in the checkpoint, :meth:`seconds` at the save), so a resumed run counts its whole training."""

    before: float = 0.0
    started: float = field(default_factory=time.perf_counter)

    def seconds(self) -> float:
        """The seconds so far: earlier processes' and this one's since it started."""
        return self.before + time.perf_counter() - self.started

    def timing(self, epochs: float) -> dict[str, float]:
        """``{"seconds", "epochs", "seconds_per_epoch"}`` after ``epochs`` passes over the training set (notes-001
        #11's time per epoch; NaN after none)."""
        seconds = self.seconds()
        return {"seconds": seconds, "epochs": epochs, "seconds_per_epoch": seconds / epochs if epochs else math.nan}


def batches(N: int, batch_size: int | None, generator: torch.Generator) -> Iterator[Tensor | slice]:
    """Full batch forever, or shuffled minibatches epoch after epoch (the last partial batch dropped)."""
    if batch_size is None or batch_size >= N:
        while True:
            yield slice(None)
    while True:
        perm = torch.randperm(N, generator=generator, device=generator.device)
        for start in range(0, N - batch_size + 1, batch_size):
            yield perm[start : start + batch_size]


def decay_factor(decay: float, t: int) -> float:
    """``1 / (1 + t^ω)`` for ``decay = ω > 0`` (notes-002 §2.9), 1 for ``ω = 0``."""
    return 1.0 if decay == 0 else 1 / (1 + t**decay)


def training_length(N: int, batch_size: int | None, steps: int, epochs: int | None, log_every: int) -> tuple[int, int]:
    """``(steps, log_every)`` of a trainer: ``epochs`` passes of ``N // batch_size`` minibatches with one trace row
    per epoch when ``epochs`` is set, else ``steps`` and ``log_every`` as given."""
    if epochs is None:
        return steps, log_every
    per_epoch = steps_per_epoch(N, batch_size)
    return epochs * per_epoch, per_epoch


def steps_per_epoch(N: int, batch_size: int | None) -> int:
    """``N // batch_size`` minibatches (one full-batch step)."""
    return max(1, N // batch_size) if batch_size else 1


def posterior_trace_row(problem: Problem, posterior: Posterior, step: int, epoch: float) -> dict[str, float]:
    """A training-trace row of a Gaussian posterior: the ELBO per example
    ``(1/N) (Σ_i E_q log p(y_i | f(x_i; θ)) − KL(q ‖ p))`` (notes-002 eq. 1) with ``E_q`` over ``TRACE_DRAWS`` draws on
    the whole training set, the KL, and the session's monitor at ``µ`` (e.g. the validation and test metrics).
    The draws come from a generator seeded by the run's seed and the step, so how often a run logs does not change
    its training and runs with other seeds draw other noise."""
    seed = problem.generator.initial_seed() * 1_000_003 + step
    generator = torch.Generator(device=posterior.mean.device).manual_seed(seed % 2**63)
    with torch.no_grad():
        loglik = sum(problem.likelihood.log_prob(network_outputs(problem.model, theta, problem.X), problem.y).sum()
                     for theta in posterior.sample(TRACE_DRAWS, generator)) / TRACE_DRAWS
        kl = float(posterior.kl_to_prior(problem.prior_precision))
    return {"step": step, "epoch": epoch, "elbo": (float(loglik) - kl) / len(problem.X), "kl": kl,
            **problem.monitored(posterior.mean)}
