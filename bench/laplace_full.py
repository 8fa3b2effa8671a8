"""Full Laplace-GGN at satellite size: 2x50 tanh MLP, N = 5000 inputs of 36 features, C = 6 classes.

Times the per-example Jacobians, the GGN assembly, the Cholesky of the P x P precision and the GLM predictive on
1000 test points with 1000 samples; reports peak memory, and compares the GGN assembly with the symmetric-product
floor: the N·C·P² flops of one triangle of ``AᵀA`` (``A = L J`` stacked, ``[N·C, P]``; a general product costs
2·N·C·P²) at this machine's measured GEMM rate (the assembly forms C − 1 rows per input for the softmax).

    python bench/laplace_full.py [--dtype float64] [--n 5000]

Results are recorded in bench/README.md.
"""

from __future__ import annotations

import argparse
import resource
import time

import torch

from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.ggn import curvature
from bnnpred.curvature.jacobians import iter_jacobians
from bnnpred.likelihoods import Categorical
from bnnpred.models.mlp import MLPConfig, build_mlp
from bnnpred.posteriors import FullPosterior
from bnnpred.predictive import Context, glm_predictive


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def gemm_rate(P: int, k: int, dtype: torch.dtype) -> float:
    """Measured flop rate of ``[P, k] x [k, P]`` (2·P²·k flops), best of three."""
    A = torch.randn(k, P, dtype=dtype)
    best = min(timed(lambda: A.T @ A)[1] for _ in range(3))
    return 2 * P * P * k / best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--dtype", default="float64", choices=["float32", "float64"])
    ns = parser.parse_args()
    dtype = getattr(torch, ns.dtype)
    torch.manual_seed(0)
    N, D, C = ns.n, 36, 6
    model = FlatModel(build_mlp(MLPConfig(depth=2, width=50), (D,), C).to(dtype))
    theta = model.theta()
    P = theta.numel()
    X, X_test = torch.randn(N, D, dtype=dtype), torch.randn(1000, D, dtype=dtype)
    y = torch.randint(0, C, (N,))
    lik = Categorical()

    _, t_jac = timed(lambda: sum(J.numel() for _, _, J in iter_jacobians(model, theta, X)))
    (G, _), t_ggn = timed(lambda: curvature(model, lik, theta, X, y))
    precision = G + torch.eye(P, dtype=dtype)
    post, t_chol = timed(lambda: FullPosterior(theta, precision))
    ctx = Context(model, lik, theta, post, torch.ones(P, dtype=dtype), X)
    _, t_glm = timed(lambda: glm_predictive(ctx, X_test, 1000, torch.Generator().manual_seed(0)))
    rate = gemm_rate(P, 3000, dtype)
    floor = N * C * P * P / rate
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    print(f"N = {N}, C = {C}, P = {P}, dtype = {ns.dtype}, threads = {torch.get_num_threads()}")
    print(f"Jacobians (all N)          {t_jac:8.2f} s")
    print(f"GGN assembly (incl. Jac.)  {t_ggn:8.2f} s")
    print(f"  symmetric floor N·C·P²   {floor:8.2f} s at {rate / 1e9:.1f} GFLOP/s  -> ratio {t_ggn / floor:.2f}")
    print(f"  assembly without Jac.    {t_ggn - t_jac:8.2f} s  -> ratio {(t_ggn - t_jac) / floor:.2f}")
    print(f"Cholesky (P x P)           {t_chol:8.2f} s")
    print(f"GLM predictive 1000 x 1000 {t_glm:8.2f} s")
    print(f"peak memory (max RSS)      {peak_mb:8.0f} MB")


if __name__ == "__main__":
    main()
