"""Seconds per full-covariance GLM refinement iteration (notes-004 §2.5) on satellite, against the estimator before
issue 21, in one process (issue 21 item 4).

Satellite split 0 (N = 4,505, C = 6), 2x50 tanh (P = 4,706), float64, θ* after 200 Adam steps (the cost does not
depend on the weights), γ = 1e-2, one sample per step, the N Jacobians stored. Each estimator runs ``--iterations``
refinement steps from the same Laplace posterior, alternating ``--rounds`` times; the best round counts. The "dense"
step is the one the refinement used before: the precision takes ``γAᵀA`` as a general product with ``A = L J`` (``C``
rows per input, ``2·N·C·P²`` flops); the current one computes one triangle (``?syrk``) of ``AᵀA`` with ``A = R J``,
``R`` the rank ``C − 1`` factor of the softmax's ``Λ`` (``N·(C−1)·P²`` flops), with the products in float64 and, with
``jacobian_dtype=float32``, in float32 (``J*`` stored in float32).

    BNNPRED_DATA_DIR=../shared/data python bench/glm_refine_iteration.py [--threads 2] [--iterations 5] [--rounds 1]

Results are recorded in bench/README.md.
"""

from __future__ import annotations

import argparse
import time
from unittest import mock

import torch

from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.ggn import Curvature, Structure
from bnnpred.data import load_dataset
from bnnpred.data.uci import UCIClassificationConfig
from bnnpred.inference.base import Problem
from bnnpred.inference.glm_refine import GLMRefineConfig, linearized_problem
from bnnpred.inference.laplace_ggn import laplace_at
from bnnpred.inference.lgva import estimate_lgva
from bnnpred.inference.map import MapConfig, train_map
from bnnpred.inference.ngvi import run_ngvi
from bnnpred.inference.ngvi_precision import DensePrecision
from bnnpred.likelihoods import Categorical
from bnnpred.models.mlp import MLPConfig, build_mlp


def dense_lgva(problem, post, X, y, n_samples, generator, structure):
    """The refinement's estimator before issue 21: LGVA on the stored Jacobians with the factor ``A = L J`` of ``C``
    rows per input (``L`` the full root of ``Λ̄``)."""
    shifts = post.sample(n_samples, generator) - post.mean
    P, lik = post.mean.numel(), problem.likelihood
    g, rows, loglik = post.mean.new_zeros(P), [], post.mean.new_zeros(())
    for start in range(0, len(X), 2**24 // (6 * P)):  # the chunks of iter_jacobians
        f, J = problem.model.outputs_and_jacobians(post.mean, X[start : start + 2**24 // (6 * P)])
        targets = y[start : start + len(f)]
        f_hats = f + torch.einsum("bcp,sp->sbc", J, shifts)
        g += sum(torch.einsum("bc,bcp->p", lik.residual(f_hat, targets), J) for f_hat in f_hats) / len(shifts)
        roots = torch.stack([lik.hessian_sqrt(f_hat) for f_hat in f_hats])
        lam, Q = torch.linalg.eigh((roots.mT @ roots).mean(0))
        rows.append((lam.clamp_min(0).sqrt().unsqueeze(-1) * Q.mT @ J).reshape(-1, P))
        loglik += sum(lik.log_prob(f_hat, targets).sum() for f_hat in f_hats) / len(shifts)
    return g, torch.cat(rows), loglik


def general_product_update(self, gamma, delta, curv, scale):
    """``DensePrecision.update`` before issue 21: the whole of ``γ·scale·AᵀA`` as a general product."""
    new = self.precision * (1 - gamma)
    new.addmm_(curv.T, curv, alpha=gamma * scale)
    new.diagonal().add_(gamma * delta)
    return DensePrecision(new)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    data = load_dataset(UCIClassificationConfig(dataset="satellite", split=0))
    X, y = data.X_train.double(), data.y_train
    model = FlatModel(build_mlp(MLPConfig(depth=2, width=50), data.input_shape, data.n_classes).double())
    theta0 = model.theta()
    problem = Problem(model=model, likelihood=Categorical(), X=X, y=y, prior_precision=torch.full_like(theta0, 1.0),
                      theta0=theta0, generator=torch.Generator().manual_seed(0))
    laplace = laplace_at(problem, train_map(problem, MapConfig(steps=200)), Structure.full, Curvature.ggn)
    linear = linearized_problem(problem, laplace.theta)
    # the trace row of the first iteration (its KL's log-determinant) is included in both, as in a real run
    cfg = GLMRefineConfig(structure=Structure.full, gamma=1e-2, iterations=args.iterations)
    runs = {"dense (before)": (linear, dense_lgva), "one triangle, rank C-1 (now)": (linear, estimate_lgva),
            "the same, jacobian_dtype=float32": (linearized_problem(problem, laplace.theta, "float32"), estimate_lgva)}
    one_triangle_update = DensePrecision.update
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(args.rounds):
        for name, (linearised, estimate) in runs.items():
            update = general_product_update if estimate is dense_lgva else one_triangle_update
            with mock.patch.object(DensePrecision, "update", update):
                start = time.perf_counter()
                run_ngvi(linearised, cfg, estimate, start=laplace.posterior)
            best[name] = min(best[name], (time.perf_counter() - start) / args.iterations)
    print(f"satellite split 0: N = {len(X)}, P = {theta0.numel()}, float64, {torch.get_num_threads()} threads, "
          f"best of {args.rounds} rounds of {args.iterations} iterations")
    for name, seconds in best.items():
        print(f"| {name} | {seconds:.2f} s per iteration |")
    dense, now, f32 = best.values()
    print(f"speed-up {dense / now:.2f}x (float64 products), {dense / f32:.2f}x (float32 products)")


if __name__ == "__main__":
    main()
