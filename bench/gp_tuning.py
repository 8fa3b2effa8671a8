"""The GP predictive's prior factor tuned on validation at image scale (issue 35): 3c3d (P = 892,010) on
Fashion-MNIST-shaped images, float32, the per-class kernel on M training points and 13 factors (notes-004 §2.4's
logspace(−1, 3, 13), notes004_table2's preset), in one process, the two routes alternated:

- before: the validation kernels in the default chunks (2^24 numbers: 9 images), then per factor a Cholesky factor
  of ``I + L K Lᵀ / s`` and a triangular solve with every validation image's ``MC x C`` columns;
- now (``tuned_gp_condition``): chunks of an eighth of the training features (``query_chunk_elems``), one
  eigendecomposition of ``L K Lᵀ`` and one projection ``Z = Qᵀ L K_M*`` for all factors, a factor then costing
  ``O(n C² MC)``; the chosen factor's Cholesky conditioning as before;
- eigen_default_chunks: ``now`` in the default chunks, to tell the two changes apart.

Both choose the same factor; their validation covariances agree to float32 rounding. The network is untrained
(costs do not depend on the weights).

    python bench/gp_tuning.py [--M 200] [--n-valid 500] [--threads 1]

Results are recorded in bench/README.md.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

from bnnpred import metrics, predictive
from bnnpred.curvature.chunks import DEFAULT_CHUNK_ELEMS
from bnnpred.curvature.functional import FlatModel
from bnnpred.likelihoods import Categorical
from bnnpred.models.deepobs import C3D3Config, build_3c3d
from bnnpred.predictive import Context

DELTA, SAMPLES, SEED = 10.0, 100, 0
FACTORS = list(np.logspace(-1, 3, 13))


def context(n_train: int) -> Context:
    gen = torch.Generator().manual_seed(0)
    X = torch.rand(n_train, 1, 28, 28, generator=gen)
    torch.manual_seed(0)
    model = FlatModel(build_3c3d(C3D3Config(), (1, 28, 28), 10), channels_last=True)  # as the runner builds it
    theta = model.theta().detach()
    return Context(model, Categorical(), theta, None, torch.full_like(theta, DELTA), X)


@contextmanager
def default_chunks() -> Iterator[None]:
    """Predicted inputs in the default chunks (2^24 numbers), as before ``query_chunk_elems``."""
    chunk, predictive.query_chunk_elems = predictive.query_chunk_elems, lambda n: DEFAULT_CHUNK_ELEMS
    try:
        yield
    finally:
        predictive.query_chunk_elems = chunk


def before(ctx: Context, subset: torch.Tensor, valid: tuple[torch.Tensor, torch.Tensor]) -> tuple[float, list]:
    """The previous tuning: default chunks, a Cholesky factor and a triangular solve per factor."""
    base = len(ctx.X_train) / len(subset)
    feats, L, K = predictive._training_kernel(ctx, subset, True)
    with default_chunks():
        kernels = list(predictive._gp_kernels(ctx, valid[0], feats, True))
    mean = torch.cat([f for f, _, _ in kernels])
    nlls, covs = [], []
    for factor in FACTORS:
        scaled = predictive._conditioned(feats, L, K, base * factor, True)
        covs.append(torch.cat([predictive._gp_cov(scaled, K_xx, K_xM) for _, K_xx, K_xM in kernels]))
        nlls.append(nll(ctx, mean, covs[-1], valid[1]))
    return FACTORS[int(np.argmin(nlls))], covs


def now(ctx: Context, subset: torch.Tensor, valid: tuple[torch.Tensor, torch.Tensor]) -> tuple[float, list]:
    base = len(ctx.X_train) / len(subset)
    feats, L, K = predictive._training_kernel(ctx, subset, True)
    mean, covs = predictive._latents_at_scales(ctx, valid[0], feats, L, K, [base * f for f in FACTORS], True)
    return FACTORS[int(np.argmin([nll(ctx, mean, cov, valid[1]) for cov in covs]))], covs


def eigen_default_chunks(ctx: Context, subset: torch.Tensor,
                         valid: tuple[torch.Tensor, torch.Tensor]) -> tuple[float, list]:
    """``now`` in the default chunks: what the eigendecomposition saves alone."""
    with default_chunks():
        return now(ctx, subset, valid)


def nll(ctx: Context, mean: torch.Tensor, cov: torch.Tensor, y: torch.Tensor) -> float:
    generator = torch.Generator().manual_seed(SEED)
    return metrics.nll(predictive._latent_predictive(ctx.likelihood, mean, cov, SAMPLES, generator), y)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--M", type=int, default=200)
    parser.add_argument("--n-valid", type=int, default=500)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    ctx = context(4 * args.M)
    gen = torch.Generator().manual_seed(1)
    valid = torch.rand(args.n_valid, 1, 28, 28, generator=gen), torch.randint(0, 10, (args.n_valid,), generator=gen)
    subset = torch.randperm(len(ctx.X_train), generator=gen)[:args.M].sort().values
    seconds, chosen, covs = {}, {}, {}
    for route in (before, now, eigen_default_chunks) * 2:
        start = time.perf_counter()
        chosen[route.__name__], covs[route.__name__] = route(ctx, subset, valid)
        seconds.setdefault(route.__name__, []).append(time.perf_counter() - start)
    error = max(float((a - b).abs().max() / b.abs().max()) for a, b in zip(covs["now"], covs["before"], strict=True))
    print(f"M = {args.M}, {args.n_valid} validation images, {len(FACTORS)} factors, {args.threads} thread(s): "
          + ", ".join(f"{name} {' / '.join(f'{s:.1f}' for s in runs)} s" for name, runs in seconds.items())
          + f"; before / now {min(seconds['before']) / min(seconds['now']):.2f}, before / eigen_default_chunks "
          f"{min(seconds['before']) / min(seconds['eigen_default_chunks']):.2f}; factor chosen "
          f"{chosen['before']:.3g} / {chosen['now']:.3g}; largest covariance difference {error:.1e} of the largest "
          "entry")


if __name__ == "__main__":
    main()
