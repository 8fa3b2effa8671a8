"""The log evidence at 20 prior precisions with the curvature kept, for every posterior structure, bnnpred against
laplace-torch side by side in one process (issue 35 item 1).

``bench/laplace_torch.py``'s problem: a 2x50 tanh MLP, N = 4,500 random inputs of 36 features, C = 6 classes
(P = 4,706), θ at its initialisation from seed 0. Each library's curvature is fitted once, outside the timings;
a timing is the 20 evaluations from a fresh evidence object (ours: ``LaplaceEvidence.at_each`` over the 20
priors, on a new curvature object, so its one eigendecomposition is inside; theirs:
``log_marginal_likelihood(prior_precision=δ)`` on the fitted ``Laplace``), the best of three. Rows:

- full, one δ: 20 δ on a log grid from 1e-2 to 1e2 (ours: one eigendecomposition of the GGN, then ``O(P)`` per δ);
- full, per-layer δ: 20 draws of one δ per parameter tensor (no single decomposition serves them: a Cholesky
  factor per draw in both libraries; laplace-torch takes them as a diagonal prior);
- diagonal, Kronecker (``B ⊗ A`` per layer: the factors' eigendecompositions timed on both sides, ours eigenvalues
  in float64, laplace-torch's ``H_facs.decompose()`` as its fit ends; and again with them made before the timing,
  as both libraries keep them) and last-layer full (P = 306);

with the floor at the GEMM rate measured in the same run (the eigendecomposition ``≈ 4P³/3``, a Cholesky ``P³/3``,
the Kronecker factors' eigendecompositions) and the largest relative difference between the two libraries' values
over the grid (the same evidence, up to the two curvatures' summation order).

    python bench/evidence_grid.py [--dtype float32|float64] [--threads 2] [--n 4500]

laplace-torch is an optional extra (``pip install -e '.[bench]'``); without it the script says so and stops.
Results are recorded in bench/README.md.
"""

from __future__ import annotations

import copy
import importlib.metadata
from collections.abc import Callable

import torch
from laplace_torch import DELTAS, gemm_rate, laplace_torch_installed, mlp_arguments, mlp_problem, timed

from bnnpred.curvature.functional import FlatModel, SubsetModel
from bnnpred.curvature.ggn import Structure, curvature
from bnnpred.curvature.kron import kron_ggn
from bnnpred.inference.laplace_ggn import last_layer_names
from bnnpred.laplace_evidence import (
    DiagCurvature,
    FullCurvature,
    KronCurvature,
    LaplaceCurvature,
    LaplaceEvidence,
    SubsetCurvature,
)
from bnnpred.likelihoods import Categorical


def per_layer_deltas(model: FlatModel, draws: int) -> list[torch.Tensor]:
    """``draws`` per-parameter precisions ``[P]`` (float64), each one δ per parameter tensor drawn log-uniformly
    in [1e-2, 1e2] from seed 0."""
    gen = torch.Generator().manual_seed(0)
    sizes = torch.tensor(model.sizes)
    return [torch.repeat_interleave(10 ** (4 * torch.rand(len(sizes), generator=gen, dtype=torch.float64) - 2),
                                    sizes) for _ in range(draws)]


def ours(net: torch.nn.Module, X: torch.Tensor, y: torch.Tensor, layered: list[torch.Tensor]
         ) -> dict[str, tuple[list[float], float]]:
    """Each row's 20 evidences and their seconds."""
    model, lik = FlatModel(net), Categorical()
    theta = model.theta()
    G, loglik = curvature(model, lik, theta, X, y)
    h = curvature(model, lik, theta, X, y, structure=Structure.diag)[0]
    blocks = kron_ggn(model, lik, theta, X, y, show_progress=False)[0]
    last = SubsetModel(model, theta, last_layer_names(model))
    G_last = curvature(last, lik, theta[last.start:last.stop], X, y)[0]

    def grid(make: Callable[[], LaplaceCurvature], precisions: list[torch.Tensor]) -> tuple[list[float], float]:
        def evidences() -> list[float]:
            evidence = LaplaceEvidence(theta, make(), float(loglik), len(X))
            return evidence.at_each(torch.stack(precisions)).tolist()
        return timed(evidences)

    isotropic = [torch.full((len(theta),), d, dtype=torch.float64) for d in DELTAS]
    decomposed = KronCurvature(None, 1, blocks=blocks)
    decomposed.products()  # the factors' spectra made once, outside the timing
    return {
        "full, one δ": grid(lambda: FullCurvature(None, 1, H=G), isotropic),
        "full, per-layer δ": grid(lambda: FullCurvature(None, 1, H=G), layered),
        "diagonal": grid(lambda: DiagCurvature(None, 1, h=h), isotropic),
        "Kronecker": grid(lambda: KronCurvature(None, 1, blocks=blocks), isotropic),
        "Kronecker, decomposition kept": grid(lambda: decomposed, isotropic),
        "last-layer full": grid(lambda: SubsetCurvature(None, 1, inner=FullCurvature(None, 1, H=G_last),
                                                        start=last.start, stop=last.stop, names=last.names),
                                isotropic),
    }


def theirs(net: torch.nn.Module, X: torch.Tensor, y: torch.Tensor, layered: list[torch.Tensor]
           ) -> dict[str, tuple[list[float], float]]:
    """laplace-torch's rows (curvlinops GGN, batches of 500), as :func:`ours`."""
    from laplace import Laplace
    from laplace.curvature import CurvlinopsGGN

    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y), batch_size=500)

    def fitted(structure: str, subset: str = "all"):
        la = Laplace(copy.deepcopy(net), "classification", subset_of_weights=subset, hessian_structure=structure,
                     backend=CurvlinopsGGN)
        la.fit(loader)
        return la

    def grid(la, precisions: list[torch.Tensor], decompose: bool = False) -> tuple[list[float], float]:
        def evidences() -> list[float]:
            if decompose:  # what its fit does after the factors: their eigendecompositions
                la.H = la.H_facs.decompose(damping=la.damping)
            return [float(la.log_marginal_likelihood(prior_precision=p.to(X.dtype))) for p in precisions]
        return timed(evidences)

    scalars = [torch.tensor(d) for d in DELTAS]
    full, kron = fitted("full"), fitted("kron")
    return {"full, one δ": grid(full, scalars), "full, per-layer δ": grid(full, layered),
            "diagonal": grid(fitted("diag"), scalars), "Kronecker": grid(kron, scalars, decompose=True),
            "Kronecker, decomposition kept": grid(kron, scalars),
            "last-layer full": grid(fitted("full", "last_layer"), scalars)}


def floors(net: torch.nn.Module, rate: float) -> dict[str, float]:
    """Each row's flop floor in seconds at ``rate``: one eigendecomposition (``4P³/3``), 20 Cholesky factors
    (``P³/3`` each), the Kronecker factors' eigendecompositions; the diagonal's O(P) work has none worth stating."""
    P = sum(p.numel() for p in net.parameters())
    weights = [m.weight.shape for m in net.modules() if isinstance(m, torch.nn.Linear)]
    kron = sum(4 * (d_out**3 + d_in**3) / 3 for d_out, d_in in weights)
    P_last = sum(net.get_parameter(n).numel() for n in last_layer_names(FlatModel(net)))
    return {"full, one δ": 4 * P**3 / 3 / rate, "full, per-layer δ": len(DELTAS) * P**3 / 3 / rate,
            "Kronecker": kron / rate, "last-layer full": 4 * P_last**3 / 3 / rate}


def main() -> None:
    args = mlp_arguments(__doc__.splitlines()[0]).parse_args()
    if not laplace_torch_installed():
        return
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    net, X, y, _ = mlp_problem(dtype, args.n)
    layered = per_layer_deltas(FlatModel(net), len(DELTAS))
    ours(net, X[:100], y[:100], layered[:2]), theirs(net, X[:100], y[:100], layered[:2])  # warm-up
    a, b = ours(net, X, y, layered), theirs(net, X, y, layered)
    P = sum(p.numel() for p in net.parameters())
    rate = gemm_rate(P, 3000, dtype)
    floor = floors(net, rate)
    print(f"MLP 2x50 tanh, N = {args.n}, P = {P}, {args.dtype}, {torch.get_num_threads()} threads, laplace-torch "
          f"{importlib.metadata.version('laplace-torch')}, GEMM rate {rate / 1e9:.1f} GFLOP/s; 20 evidences each")
    print("| posterior | bnnpred | laplace-torch | ratio | floor | ours / floor | largest relative difference |")
    print("|---|---|---|---|---|---|---|")
    for row, (values, seconds) in a.items():
        other_values, other = b[row]
        gap = max(abs(u - v) / abs(v) for u, v in zip(values, other_values, strict=True))
        at_floor = f"{floor[row]:.3f} s | {seconds / floor[row]:.1f}" if row in floor else " | "
        print(f"| {row} | {seconds:.3f} s | {other:.3f} s | {other / seconds:.1f} | {at_floor} | {gap:.1e} |")


if __name__ == "__main__":
    main()
