"""Seconds per full-covariance GLM refinement iteration (notes-004 §2.5) on satellite, against the estimator before
issue 21, in one process (issue 21 item 4).

Satellite split 0 (N = 4,505, C = 6), 2x50 tanh (P = 4,706), float64, θ* after 200 Adam steps (the cost does not
depend on the weights), γ = 1e-2, one sample per step, the N Jacobians stored. Each estimator runs ``--iterations``
refinement steps from the same Laplace posterior, alternating ``--rounds`` times; the best round counts. The
"dense" estimator is the one the refinement used before: the GGN as a general product ``AᵀA`` with ``A = L J``
(``C`` rows per input, ``2·N·C·P²`` flops); the current one computes one triangle (``?syrk``) of ``A = R J`` with
``R`` the rank ``C − 1`` factor of the softmax's ``Λ`` (``N·(C−1)·P²`` flops), with the products in float64 and, with
``jacobian_dtype=float32``, in float32 (``J*`` stored in float32).

    BNNPRED_DATA_DIR=../shared/data python bench/glm_refine_iteration.py [--threads 2] [--iterations 5] [--rounds 1]

Results are recorded in bench/README.md.
"""

from __future__ import annotations

import argparse
import time

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
from bnnpred.likelihoods import Categorical
from bnnpred.models.mlp import MLPConfig, build_mlp


def dense_lgva(problem, post, X, y, n_samples, generator, structure):
    """The refinement's estimator before issue 21 (LGVA on the stored Jacobians, general product ``AᵀA``)."""
    shifts = post.sample(n_samples, generator) - post.mean
    P, lik = post.mean.numel(), problem.likelihood
    g, G, loglik = post.mean.new_zeros(P), post.mean.new_zeros(P, P), post.mean.new_zeros(())
    for start in range(0, len(X), 2**24 // (6 * P)):  # the chunks of iter_jacobians
        f, J = problem.model.outputs_and_jacobians(post.mean, X[start : start + 2**24 // (6 * P)])
        for f_hat in f + torch.einsum("bcp,sp->sbc", J, shifts):
            g += torch.einsum("bc,bcp->p", lik.residual(f_hat, y[start : start + len(f)]), J)
            A = (lik.hessian_sqrt(f_hat) @ J).reshape(-1, P)
            G.addmm_(A.T, A)
            loglik += lik.log_prob(f_hat, y[start : start + len(f)]).sum()
    return g / len(shifts), G / len(shifts), loglik / len(shifts)


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
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(args.rounds):
        for name, (linearised, estimate) in runs.items():
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
