r"""Full-batch finishes of a MAP to a stationary point: ``‖∇ (−Σ log p − log prior)‖ ≤ tol``.

The Laplace evidence and the representer identity (notes-000 §5.2, §6.4, Fig. 5.6) assume a stationary MAP, which
Adam's minibatch steps do not reach. Two finishes, both descent methods with a line search (each step lowers the
log joint), ending at their last point:

* ``lbfgs``: torch's L-BFGS with a strong-Wolfe line search, restarted when a line search stalls. Cheap per step;
  slow in the long, ill-conditioned valleys of a nearly separable classifier.
* ``newton``: Newton's method on the log joint, ``d ≈ −(H + λI)⁻¹ g`` by conjugate gradients on exact
  Hessian-vector products, preconditioned by ``(GGN + diag(δ) + λI)⁻¹`` (notes-000 eq. 2.25's GGN plus the prior
  precision, Levenberg-Marquardt damping ``λ``), with an Armijo backtracking line search; where the decrease a step
  promises is below the log joint's rounding, which the search cannot see, the full step is taken when it
  at least halves the gradient (a damped step that moves θ by nothing never does, so ``λ`` rises and the finish
  ends there). Where the residuals are
  small the GGN is nearly the Hessian and CG takes a step or two (its first iterate is the Gauss-Newton step); the
  forcing term ``min(½, √‖g‖)`` gives superlinear convergence. One step forms the ``[P, P]`` GGN and its Cholesky
  factor, so it suits ``P`` up to a few thousand.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from enum import Enum

import torch
from torch import Tensor

from bnnpred.curvature.ggn import Structure, gradient_and_ggn
from bnnpred.errors import BnnpredError
from bnnpred.inference.base import Problem
from bnnpred.inference.objective import objective_at

log = logging.getLogger(__name__)

ARMIJO = 1e-4  # sufficient decrease: f(θ + t d) ≤ f(θ) + ARMIJO · t · gᵀd
CG_STEPS = 50  # at most, conjugate-gradient steps per Newton step
HALVINGS = 30  # line-search halvings before the damping is raised
MAX_DAMPING = 1e12  # λ / mean diagonal of the curvature at which Newton gives up (no descent found)
ROUNDING = 1e3  # machine epsilons: relative changes of the log joint its line search cannot see


class Finish(str, Enum):
    lbfgs = "lbfgs"
    newton = "newton"


def sum_neg_log_joint(problem: Problem, theta: Tensor) -> Tensor:
    """``−Σ_i log p(y_i | f(x_i; θ)) + ½ θᵀ diag(δ) θ`` on the full data ``[]`` (notes-000 eq. 2.2, sum form)."""
    nll = -problem.likelihood.log_prob(problem.model(theta, problem.X), problem.y).sum()
    return nll + 0.5 * (problem.prior_precision * theta.square()).sum()


def finish_to_tolerance(problem: Problem, theta0: Tensor, finish: Finish, tol: float,
                        max_iterations: int) -> tuple[Tensor, dict[str, float]]:
    """``finish`` from ``θ0`` until the log joint's gradient norm is ``≤ tol`` or ``max_iterations`` are used.

    Returns ``θ`` ``[P]`` and ``{"grad_norm", "finish_iterations", "finish_converged"}``."""
    run: Callable[[Problem, Tensor, float, int], tuple[Tensor, float, int]] = {
        Finish.lbfgs: _lbfgs, Finish.newton: _newton}[finish]
    theta, norm, used = run(problem, theta0, tol, max_iterations)
    return theta, {"grad_norm": norm, "finish_iterations": float(used), "finish_converged": float(norm <= tol)}


def log_joint_grad_norm(problem: Problem, theta: Tensor) -> float:
    """``‖∇_θ [Σ log p + log prior]‖`` over the full data in bounded memory (the stationarity check of notes-000 §7
    F.21): the health check's objective, computed in chunks of examples."""
    return objective_at(problem, theta.detach()).grad_norm


def _gradient_norm(problem: Problem, theta: Tensor) -> float:
    """:func:`log_joint_grad_norm`, an error when it is not finite."""
    return _finite(log_joint_grad_norm(problem, theta))


def _finite(norm: float) -> float:
    """``norm``, or the error of a finish that diverged."""
    if not math.isfinite(norm):
        raise BnnpredError("the full-batch finish of the MAP diverged; raise inference.map.finish_tol or "
                           "inference.map.steps")
    return norm


def _lbfgs(problem: Problem, theta0: Tensor, tol: float, max_iterations: int) -> tuple[Tensor, float, int]:
    """L-BFGS, restarting its memory when a line search stalls (torch's L-BFGS stops on ``tolerance_change``)."""
    theta = theta0.detach().clone().requires_grad_(True)

    def closure() -> Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = sum_neg_log_joint(problem, theta)
        loss.backward()
        return loss

    used, norm = 0, _gradient_norm(problem, theta)
    while norm > tol and used < max_iterations:
        optimizer = torch.optim.LBFGS([theta], lr=1.0, max_iter=min(200, max_iterations - used), history_size=50,
                                      tolerance_grad=tol / math.sqrt(theta.numel()),  # its test is on max |g_j|
                                      tolerance_change=1e-15, line_search_fn="strong_wolfe")
        optimizer.step(closure)
        steps = optimizer.state[theta]["n_iter"]
        used += max(steps, 1)
        new_norm = _gradient_norm(problem, theta)
        if steps <= 1 and new_norm >= norm:  # no progress from a fresh memory: give up here
            return theta.detach(), new_norm, used
        norm = new_norm
    return theta.detach(), norm, used


def _newton(problem: Problem, theta0: Tensor, tol: float, max_iterations: int) -> tuple[Tensor, float, int]:
    """Newton-CG steps preconditioned by the GGN with an Armijo line search; ``λ`` ×10 when a line search fails,
    ÷10 after a full step, and the loop ends where it is when ``λ`` passes ``MAX_DAMPING`` times the mean
    curvature (no descent left that the line search can see)."""
    theta = theta0.detach().clone()
    prior = torch.broadcast_to(problem.prior_precision, theta.shape)
    damping, used = 0.0, 0
    while True:
        g_lik, G, loglik = gradient_and_ggn(problem.model, problem.likelihood, theta, problem.X, problem.y,
                                            structure=Structure.full)
        grad = prior * theta - g_lik
        norm = _finite(float(grad.norm()))
        if norm <= tol or used >= max_iterations:
            return theta, norm, used
        value = float(0.5 * (prior * theta.square()).sum() - loglik)
        G.diagonal().add_(prior)
        scale = float(G.diagonal().mean())
        hvp = _hessian_vector_product(problem, theta)
        while True:
            step, cg = _preconditioned_cg(hvp, G, grad, damping, forcing=min(0.5, math.sqrt(norm)))
            slope = float(grad @ step)
            if -slope <= _rounding(theta, value):  # a decrease below the log joint's rounding: the search is blind
                t = 1.0 if _full_step_helps(problem, theta, step, value, norm) else None
            else:
                t = _armijo(problem, theta, step, value, slope)
            if t is not None:
                break
            damping = max(10 * damping, 1e-8 * scale)
            if damping > MAX_DAMPING * scale:
                return theta, norm, used
        theta = theta + t * step
        used += 1
        log.info("Newton finish %d: gradient norm %.3g, %d CG steps, step %g, damping %.3g", used, norm, cg, t,
                 damping)
        if t == 1.0:
            damping = damping / 10 if damping > 1e-7 * scale else 0.0


def _full_step_helps(problem: Problem, theta: Tensor, step: Tensor, value: float, norm: float) -> bool:
    """Whether the full ``step`` from ``θ``, whose decrease of the log joint (``value`` there, gradient norm
    ``norm``) is below the log joint's rounding, leaves the log joint within that rounding and at least halves the
    gradient (full batch): a Newton step near a minimum does; a damped step that moves θ by nothing, or one towards
    another stationary point, does not."""
    with torch.no_grad():
        trial = float(sum_neg_log_joint(problem, theta + step))
    return abs(trial - value) <= _rounding(theta, value) and log_joint_grad_norm(problem, theta + step) <= norm / 2


def _rounding(theta: Tensor, value: float) -> float:
    """The changes of a log joint ``value`` computed in ``θ``'s dtype that its rounding hides: :data:`ROUNDING`
    epsilons of it (of 1 near 0)."""
    return ROUNDING * torch.finfo(theta.dtype).eps * max(abs(value), 1.0)


def _hessian_vector_product(problem: Problem, theta: Tensor) -> Callable[[Tensor], Tensor]:
    """``v ↦ ∇²(−log joint)(θ) v`` ``[P] -> [P]``, forward-over-reverse on the full batch (the exact Hessian)."""
    gradient = torch.func.grad(lambda t: sum_neg_log_joint(problem, t))
    return lambda v: torch.func.jvp(gradient, (theta,), (v,))[1]


def _preconditioned_cg(hvp: Callable[[Tensor], Tensor], G: Tensor, grad: Tensor, damping: float,
                       forcing: float) -> tuple[Tensor, int]:
    """An inexact Newton step ``d ≈ −(H + λI)⁻¹ g`` ``[P]`` by conjugate gradients preconditioned with
    ``(G + λI)⁻¹`` (``G`` ``[P, P]`` the GGN plus prior: positive definite), to ``‖r‖ ≤ forcing · ‖g‖``, and the
    CG steps taken. The first iterate is the Gauss-Newton step scaled; CG stops before a direction of non-positive
    curvature (so ``d`` stays a descent direction), returning the Gauss-Newton step if that is the first."""
    eye = torch.eye(len(G), dtype=G.dtype, device=G.device)
    factor = torch.linalg.cholesky(G + damping * eye if damping else G)
    precondition = lambda r: torch.cholesky_solve(r.unsqueeze(1), factor).squeeze(1)  # noqa: E731
    x, r = torch.zeros_like(grad), -grad
    z = precondition(r)
    p, rz = z, float(r @ z)
    for k in range(CG_STEPS):
        Hp = hvp(p) + damping * p
        curvature = float(p @ Hp)
        if not curvature > 0:
            return (z if k == 0 else x), k
        alpha = rz / curvature
        x, r = x + alpha * p, r - alpha * Hp
        if float(r.norm()) <= forcing * float(grad.norm()):
            return x, k + 1
        z = precondition(r)
        rz, rz_old = float(r @ z), rz
        p = z + (rz / rz_old) * p
    return x, CG_STEPS


def _armijo(problem: Problem, theta: Tensor, step: Tensor, value: float, slope: float) -> float | None:
    """The first ``t`` of ``1, ½, ¼, …`` with sufficient decrease along ``step``; None if none of ``HALVINGS``. A
    shortened step must lower the objective strictly: one that leaves it equal in float64 passes the test on
    rounding alone (near a MAP, after ~30 halvings, it moves θ by nothing and Newton would repeat it until its
    iteration cap). A full Newton step is taken on equality, as it still shrinks the gradient."""
    if not slope < 0:
        return None
    t = 1.0
    with torch.no_grad():
        for _ in range(HALVINGS):
            trial = float(sum_neg_log_joint(problem, theta + t * step))
            if trial <= value + ARMIJO * t * slope and (t == 1.0 or trial < value):
                return t
            t /= 2
    return None
