"""bnnpred against laplace-torch, stage by stage, side by side in one process (issue 21).

The same network, data and θ for both: a 2x50 tanh MLP, N = 4,500 inputs of 36 features, C = 6 classes
(P = 4,706), random data from a fixed seed, δ = 1; then 3c3d (P = 892,010) on Fashion-MNIST images (random ones of
the same shape without a data root): the Kronecker fit and the Kronecker glm predictive. Stages shorter than 3 s
count the best of three runs (both libraries):

- full GGN fit (laplace-torch: each GGN backend, the fastest counts), posterior factorisation (our Cholesky of the
  precision; its posterior covariance), glm predictive (1000 inputs x 1000 samples), probit predictive (1000 inputs),
  evidence at 20 prior precisions with the curvature kept, diagonal GGN fit, Kronecker fit (factors and their
  eigendecompositions), Kronecker glm predictive (1000 x 1000).

The dense stages' flop floors are printed at the GEMM rate measured in the same run: the GGN's symmetric product
``N·C·P²`` (half laplace-torch's general product ``2·N·C·P²``; ours forms ``C − 1`` rows per input for the
softmax, so it can go below it), the Cholesky ``P³/3``, the eigendecomposition ``≈ 4P³/3`` (tridiagonal reduction).

    python bench/laplace_torch.py [--dtype float32|float64] [--threads 2] [--n-fit-3c3d 1000] [--n-test-3c3d 10]
                                   [--only-3c3d]

laplace-torch is an optional extra (``pip install -e '.[bench]'``); without it the script says so and stops.
Results are recorded in bench/README.md.
"""

from __future__ import annotations

import argparse
import copy
import importlib.metadata
import sys
import time
from collections.abc import Callable

import torch

from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.ggn import Structure, curvature
from bnnpred.curvature.kron import kron_ggn
from bnnpred.laplace_evidence import FullCurvature, LaplaceEvidence
from bnnpred.likelihoods import Categorical
from bnnpred.models.mlp import MLPConfig, build_mlp
from bnnpred.posteriors import DiagPosterior, FullPosterior, KronPosterior
from bnnpred.predictive import Context, closed_predictive, glm_predictive

D, C, N_TEST, SAMPLES, DELTA = 36, 6, 1000, 1000, 1.0
DELTAS = torch.logspace(-2, 2, 20).tolist()
SHORT = 3.0  # seconds


def timed(fn: Callable[[], object]) -> tuple[object, float]:
    """``fn()`` and its seconds: the best of three runs for stages under ``SHORT`` seconds (the machine is shared;
    short stages are the noisiest), else of one."""
    start = time.perf_counter()
    out = fn()
    best = time.perf_counter() - start
    for _ in range(2 if best < SHORT else 0):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return out, best


def gemm_rate(P: int, k: int, dtype: torch.dtype) -> float:
    """Measured flop rate of ``[P, k] x [k, P]`` (2·P²·k flops), best of three."""
    A = torch.randn(k, P, dtype=dtype)
    return 2 * P * P * k / min(timed(lambda: A.T @ A)[1] for _ in range(3))


def mlp_problem(dtype: torch.dtype, n: int, device: torch.device | str = "cpu"
                ) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The 2x50 tanh MLP (P = 4,706, initialised from seed 0), ``n`` random inputs ``X`` ``[n, D]``, their labels
    ``y`` ``[n]`` in 0..C-1 and ``N_TEST`` test inputs ``[N_TEST, D]`` (drawn on the CPU from seed 0): the network
    and the inputs in ``dtype``, all on ``device``."""
    torch.manual_seed(0)
    net = build_mlp(MLPConfig(depth=2, width=50), (D,), C).to(device=device, dtype=dtype)
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(n, D, generator=gen, dtype=dtype)
    y, X_test = torch.randint(0, C, (n,), generator=gen), torch.randn(N_TEST, D, generator=gen, dtype=dtype)
    return net, X.to(device), y.to(device), X_test.to(device)


def ours(net: torch.nn.Module, X: torch.Tensor, y: torch.Tensor, X_test: torch.Tensor) -> dict[str, float]:
    model, lik = FlatModel(net), Categorical()
    theta = model.theta()
    delta = torch.full_like(theta, DELTA)
    gen = torch.Generator().manual_seed(0)
    t: dict[str, float] = {}
    (G, loglik), t["full GGN fit"] = timed(lambda: curvature(model, lik, theta, X, y))
    precision = G.diagonal_scatter(G.diagonal() + delta)
    post, t["posterior factorisation"] = timed(lambda: FullPosterior(theta, precision))
    ctx = Context(model, lik, theta, post, delta, X)
    _, t["glm predictive"] = timed(lambda: glm_predictive(ctx, X_test, SAMPLES, gen))
    _, t["probit predictive"] = timed(lambda: closed_predictive(ctx, X_test))

    def evidences() -> list[float]:
        evidence = LaplaceEvidence(theta, FullCurvature(None, 1, H=G), float(loglik), len(X))
        return [float(evidence(torch.full_like(theta, d, dtype=torch.float64))) for d in DELTAS]

    _, t["evidence at 20 prior precisions"] = timed(evidences)
    _, t["diagonal GGN fit"] = timed(lambda: DiagPosterior(theta, curvature(model, lik, theta, X, y,
                                                                            structure=Structure.diag)[0] + delta))
    kron, t["Kronecker fit"] = timed(lambda: KronPosterior(theta, kron_ggn(model, lik, theta, X, y)[0], delta))
    kron_ctx = Context(model, lik, theta, kron, delta, X)
    _, t["Kronecker glm predictive"] = timed(lambda: glm_predictive(kron_ctx, X_test, SAMPLES, gen))
    return t


def backends() -> dict[str, type]:
    from laplace.curvature import BackPackGGN, CurvlinopsGGN

    return {"BackPACK": BackPackGGN, "curvlinops": CurvlinopsGGN}


def fitted(kind: str, backend: type, net: torch.nn.Module, X: torch.Tensor, y: torch.Tensor):
    """A laplace-torch ``kind`` Laplace (``full``, ``diag``, ``kron``) fitted to ``(X, y)`` (batches of 500; a copy
    of the network's weights each time) and the seconds that took (:func:`timed`)."""
    from laplace import DiagLaplace, FullLaplace, KronLaplace

    cls = {"full": FullLaplace, "diag": DiagLaplace, "kron": KronLaplace}[kind]
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y), batch_size=500)
    # a copy of the same weights: BackPACK's extension leaves hooks on the module that break torch.func transforms

    def fit():
        la = cls(copy.deepcopy(net), "classification", prior_precision=DELTA, backend=backend)
        la.fit(loader)
        if kind == "kron":
            la.posterior_precision  # noqa: B018  (the factors' eigendecompositions, as KronPosterior makes)
        return la

    return timed(fit)


def theirs(net: torch.nn.Module, X: torch.Tensor, y: torch.Tensor, X_test: torch.Tensor) -> tuple[dict, dict]:
    t: dict[str, float] = {}
    per_backend: dict[str, dict[str, float]] = {}
    best: dict[str, object] = {}
    for kind, stage in (("full", "full GGN fit"), ("diag", "diagonal GGN fit"), ("kron", "Kronecker fit")):
        for name, backend in backends().items():
            try:
                la, seconds = fitted(kind, backend, net, X, y)
            except Exception as e:  # a backend that cannot do this structure is reported, not fatal
                print(f"laplace-torch {kind} with {name} failed: {type(e).__name__}: {e}", file=sys.stderr)
                continue
            per_backend.setdefault(stage, {})[name] = seconds
            if seconds < t.get(stage, float("inf")):
                t[stage], best[kind] = seconds, la
        if kind == "full":
            la = best["full"]

            def factorise(la=la):
                la.prior_precision = DELTA  # the setter drops its cached factor: each run factorises afresh
                return la.posterior_covariance

            _, t["posterior factorisation"] = timed(factorise)
            _, t["glm predictive"] = timed(lambda la=la: la(X_test, pred_type="glm", link_approx="mc",
                                                             n_samples=SAMPLES))
            _, t["probit predictive"] = timed(lambda la=la: la(X_test, pred_type="glm", link_approx="probit"))
            _, t["evidence at 20 prior precisions"] = timed(
                lambda la=la: [float(la.log_marginal_likelihood(prior_precision=torch.tensor(d))) for d in DELTAS])
            del la, best["full"]
    _, t["Kronecker glm predictive"] = timed(lambda: best["kron"](X_test, pred_type="glm", link_approx="mc",
                                                                  n_samples=SAMPLES))
    return t, per_backend


def c3d3(n_fit: int, n_test: int) -> dict[str, dict[str, float]]:
    """3c3d Kronecker fit over ``n_fit`` images and glm predictive (100 samples) over ``n_test``, float32, per image."""
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from kron_3c3d import images, laplace_torch
    from kron_3c3d import ours as ours_3c3d

    X, y, X_test = images()
    rows = {}
    for name, run in (("bnnpred", ours_3c3d), ("laplace-torch", laplace_torch)):
        r = run(X, y, X_test, n_fit, n_test)
        rows[name] = {"Kronecker fit": r["fit"] / n_fit, "Kronecker glm predictive": r["glm"] / n_test}
    return rows


def mlp_arguments(description: str) -> argparse.ArgumentParser:
    """The options of a bench on :func:`mlp_problem`: ``--dtype``, ``--threads``, ``--n`` (training inputs)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n", type=int, default=4500, help="training inputs of the MLP")
    return parser


def laplace_torch_installed() -> bool:
    """Whether laplace-torch imports; where it does not, says how to install it."""
    try:
        import laplace  # noqa: F401
    except ImportError:
        print("laplace-torch is not installed (pip install -e '.[bench]'): nothing to compare against")
        return False
    return True


def main() -> None:
    parser = mlp_arguments(__doc__.splitlines()[0])
    parser.add_argument("--n-fit-3c3d", type=int, default=1000)
    parser.add_argument("--n-test-3c3d", type=int, default=10)
    parser.add_argument("--only-3c3d", action="store_true", help="skip the MLP stages")
    args = parser.parse_args()
    if not laplace_torch_installed():
        return
    torch.set_num_threads(args.threads)
    if not args.only_3c3d:
        mlp_stages(args)
    if args.n_fit_3c3d > 0:
        rows = c3d3(args.n_fit_3c3d, args.n_test_3c3d)
        print(f"\n3c3d, float32, {torch.get_num_threads()} threads: seconds per image ({args.n_fit_3c3d} fitted, "
              f"{args.n_test_3c3d} predicted)")
        print("| stage | bnnpred | laplace-torch | ratio |\n|---|---|---|---|")
        for stage in rows["bnnpred"]:
            mine, other = rows["bnnpred"][stage], rows["laplace-torch"][stage]
            print(f"| {stage} | {mine * 1e3:.1f} ms | {other * 1e3:.1f} ms | {other / mine:.2f} |")


def mlp_stages(args: argparse.Namespace) -> None:
    """The MLP's stages side by side, printed as a table with the dense stages' floors."""
    dtype = getattr(torch, args.dtype)
    net, X, y, X_test = mlp_problem(dtype, args.n)
    N = args.n
    P = sum(p.numel() for p in net.parameters())
    ours(net, X[:100], y[:100], X_test[:10])  # warm-up: first-call costs (library loading) are not a stage's
    theirs(net, X[:100], y[:100], X_test[:10])
    a = ours(net, X, y, X_test)
    b, per_backend = theirs(net, X, y, X_test)
    rate = gemm_rate(P, 3000, dtype)
    floors = {"full GGN fit": N * C * P * P / rate, "posterior factorisation": P**3 / 3 / rate,
              "evidence at 20 prior precisions": 4 * P**3 / 3 / rate}
    print(f"MLP 2x50 tanh, N = {N}, C = {C}, P = {P}, {args.dtype}, {torch.get_num_threads()} threads, "
          f"laplace-torch {importlib.metadata.version('laplace-torch')}, "
          f"GEMM rate {rate / 1e9:.1f} GFLOP/s")
    print("| stage | bnnpred | laplace-torch | ratio | floor |\n|---|---|---|---|---|")
    for stage in a:
        other = b.get(stage)
        detail = ", ".join(f"{k} {v:.2f} s" for k, v in per_backend.get(stage, {}).items())
        floor = f"{floors[stage]:.2f} s" if stage in floors else ""
        print(f"| {stage} | {a[stage]:.2f} s | {detail or (f'{other:.2f} s' if other else 'failed')} | "
              f"{other / a[stage]:.1f} | {floor} |" if other else f"| {stage} | {a[stage]:.2f} s | failed | | |")


if __name__ == "__main__":
    main()
