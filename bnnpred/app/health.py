"""Numerical health of a fit: broken numbers end a run as failed, or are flagged where the user keeps them.

A fit is checked on the objective its method declares (``HEALTH``,
:class:`~bnnpred.inference.contract.HealthObjective`). By default ``θ*`` is checked against the random start ``θ₀``
on the full-data negative log joint per example ``L(θ) = -(1/N) [Σ_i log p(y_i | f(x_i; θ)) - ½ θᵀ diag(δ) θ]``
(notes-000 eq. 2.2), which a point estimate and a posterior centred on the MAP's basin are meant to improve: a fit
that ends with a non-finite or a higher ``L`` than it started from has diverged. A mean-field method is checked on
its own objective instead, the ELBO per example of its trace (non-finite, or lower at the last row than at the
first: diverged; above 0 on a discrete likelihood, which no ELBO can be: broken); its mean alone need not improve
``L``.
A method that trains to a stationary point on the full batch (a MAP by full-batch Adam or with a full-batch finish:
its info records ``grad_norm`` and ``full_batch = 1``) must also end with a smaller gradient norm than it started
with. A minibatch-trained MAP's final gradient norm measures the noise of its last steps, not a breakage (3c3d on
8,000 Fashion-MNIST images, six epochs at a constant step: 3.7e3 at the start, 1.0e4 at the end), so only its
objective is checked. Metrics must be finite. Jitter added to a precision is never a failure but always a flag,
and so is a Laplace posterior after a full-batch MAP centred more than one of its standard deviations from the mode
(:func:`stationarity_flags`).
"""

from __future__ import annotations

import math

import torch

from bnnpred.inference.base import Fit
from bnnpred.inference.contract import HealthObjective
from bnnpred.inference.objective import Objective


def fit_problems(start: Objective, end: Objective, fit: Fit,
                 objective: HealthObjective = HealthObjective.log_joint, *, discrete: bool) -> list[str]:
    """Why the fit's numbers are broken (empty if they are not), on ``objective`` (``start`` and ``end``: ``L`` at
    ``θ₀`` and ``θ*``; the ELBO: ``fit.trace``, bounded by 0 for a ``discrete`` likelihood)."""
    if not math.isfinite(end.value):  # on every objective
        found = [f"the objective is {end.value} at the fitted θ"]
    elif objective is HealthObjective.elbo:
        found = elbo_problems(fit.trace, discrete)
    else:
        found = log_joint_problems(start, end)
    if fit.info.get("full_batch") and not end.grad_norm < start.grad_norm:
        found.append(f"the gradient norm did not fall ({start.grad_norm:.3g} at the start, {end.grad_norm:.3g} at "
                     "the end)")
    return found


def log_joint_problems(start: Objective, end: Objective) -> list[str]:
    """``L`` higher at ``θ*`` than at ``θ₀``."""
    if end.value > start.value:
        return [f"the fit ended worse than it started (negative log joint per example {start.value:.4g} → "
                f"{end.value:.4g})"]
    return []


def elbo_problems(trace: list[dict[str, float]], discrete: bool) -> list[str]:
    """The trace's ELBO per example (the trainer's objective: β-weighted where β ≠ 1, each row averaged over its
    window of minibatch steps) non-finite at its last row, or lower there than at its first; for a ``discrete``
    likelihood (log p ≤ 0) also above 0 at any row. BBB's is an ELBO, ``E_q[log p] − β·KL`` with each sample's
    log p ≤ 0 and the KL in closed form, ≥ 0; VL's is no bound but an expansion, ``log p(y | µ) − ½ Σ σ² F − β·KL``,
    and F ⪰ 0 keeps it below 0 too. Above 0, the objective left what it stands for: VL with the Hessian's one-probe
    estimate in place of F (notes-001 §2.4) climbs to 1e23 while its σ grow without bound (a VL(H) fit can also cross
    0 by the probe's noise alone, and is then flagged too: the ablation exists to diverge). A trace without an
    ELBO is itself a problem (nothing to check the fit on). A fit traced once (one window) is not compared, and a
    loss spike inside the first window lowers the bar: the trainer's own guard (a non-finite loss is an error) and
    the finite ``L`` at ``θ*`` remain."""
    elbo = [row["elbo"] for row in trace if "elbo" in row]
    if not elbo:
        return ["the fit's trace has no ELBO to check it on"]
    if not math.isfinite(elbo[-1]):
        return [f"its objective (the trace's ELBO) is {elbo[-1]} at the end"]
    if discrete and max(elbo) > 0:
        return [f"its objective is no ELBO: the trace's ELBO per example reached {max(elbo):.4g}, above the 0 that "
                "bounds every ELBO of a discrete likelihood"]
    if elbo[-1] < elbo[0]:
        return [f"its objective fell over the fit (the trace's ELBO per example {elbo[0]:.4g} at the first row → "
                f"{elbo[-1]:.4g})"]
    return []


def stationarity_flags(end: Objective, fit: Fit) -> list[str]:
    """A flag for a Laplace posterior built at a point that is not the mode it approximates: after a full-batch
    MAP, the Newton step from ``θ*`` to the mode of the quadratic model, measured in the posterior's own standard
    deviations, ``λ = √(gᵀ Σ g)`` with ``g = ∇(N·L)(θ*)`` (the Newton decrement; ``Σ⁻¹`` the Laplace precision),
    above 1: the Gaussian is centred more than one of its widths away from where it should be (notes-000 §5.2
    assumes ``g = 0``). δ = 1e8 with Adam's oscillation leaves ``g`` at 1.8e8 while the posterior's width is 1e-4."""
    posterior = fit.posterior
    if not fit.info.get("full_batch") or end.grad is None or posterior is None or not torch.equal(posterior.mean,
                                                                                                   fit.theta):
        return []
    decrement = math.sqrt(max(float(end.grad @ posterior.cov_mv(end.grad)), 0.0))  # round-off can make it < 0
    if decrement > 1:
        return [f"the fit is not a stationary point: its Newton step to the mode is {decrement:.3g} posterior "
                f"standard deviations (gradient norm {end.grad_norm:.3g}); train longer or set "
                "inference.map.finish_tol"]
    return []


def jitter_flags(fit: Fit) -> list[str]:
    """A flag for jitter added to the posterior precision before it could be factorised."""
    jitter = 0.0 if fit.posterior is None else fit.posterior.jitter
    return [f"jitter {jitter:g} x mean diagonal was added to the posterior precision"] if jitter else []


def non_finite_metrics(results: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    """``split/predictive/metric = value`` for every metric that is NaN or infinite."""
    return [f"{split}/{kind}/{name} = {value}" for split, by_kind in results.items()
            for kind, values in by_kind.items() for name, value in values.items()
            if isinstance(value, float) and not math.isfinite(value)]
