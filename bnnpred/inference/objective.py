"""The full-data negative log joint per example ``L(θ) = -(1/N) [Σ_i log p(y_i | f(x_i; θ)) - ½ θᵀ diag(δ) θ]``
(notes-000 eq. 2.2) and its gradient norm, in bounded memory: the stationarity check of a MAP's finish (notes-000
§7 F.21) and the objective a run's health check compares at θ₀ and θ*."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bnnpred.inference.base import Problem

# Examples per forward / backward pass of the full-data objective (bounds memory on image networks).
CHUNK = 512


@dataclass(frozen=True)
class Objective:
    """``L(θ)`` per example and ``‖∇L(θ)‖`` of the sum form ``N·L`` (as ``grad_norm`` in a MAP's info), and that
    gradient ``[P]`` where it was computed."""

    value: float
    grad_norm: float
    grad: Tensor | None = None


@dataclass(frozen=True)
class DataTerm:
    """``Σ_i −log p(y_i | f(x_i; θ))`` and its gradient ``[P]``: the part of ``N·L(θ)`` that the prior does not
    change, so a grid over δ computes it once at its shared start."""

    nll: float
    grad: Tensor


def data_term(problem: Problem, theta: Tensor) -> DataTerm:
    """The negative log-likelihood over all of ``problem.X`` and its gradient, in chunks of ``CHUNK`` examples."""
    theta = theta.detach().requires_grad_(True)
    total, grad = 0.0, torch.zeros_like(theta)
    for start in range(0, len(problem.X), CHUNK):
        f = problem.model(theta, problem.X[start : start + CHUNK])
        nll = -problem.likelihood.log_prob(f, problem.y[start : start + CHUNK]).sum()
        (g,) = torch.autograd.grad(nll, theta)
        total, grad = total + float(nll.detach()), grad + g
    return DataTerm(nll=total, grad=grad)


def objective_at(problem: Problem, theta: Tensor, data: DataTerm | None = None) -> Objective:
    """``L(θ)`` and the gradient norm of ``N·L(θ)``, from ``data`` (computed when not given) and the prior."""
    data = data_term(problem, theta) if data is None else data
    theta = theta.detach()
    prior = 0.5 * float((problem.prior_precision * theta.square()).sum())
    grad = data.grad + problem.prior_precision * theta
    return Objective(value=(data.nll + prior) / len(problem.X), grad_norm=float(grad.norm()), grad=grad)
