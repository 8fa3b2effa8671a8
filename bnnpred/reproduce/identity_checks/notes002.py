r"""notes-002 (SLANG) checklist part A, "Algorithmic unit checks", items 1-7, measured in float64 through the
library's own SLANG code paths against dense linear algebra, Monte Carlo and per-example autograd references:

1. ``fast_inverse``: :meth:`LowRankDiagPosterior.cov_mv` (Woodbury) against a dense solve, D = 500, L = 10.
2. ``fast_sample``: the factor of :meth:`LowRankDiagPosterior.cov_root_times` (D = 200, L = 8) and the empirical
   covariance of 2×10⁵ draws of :meth:`LowRankDiagPosterior.sample` (D = 30, L = 8: see :func:`fast_sample_claims`),
   each for a random ``U``, ``U ≡ 0`` and ``rank(U) = 3 < L``, against the dense inverse of ``UUᵀ + diag d``; and
   the seed's Algorithm 3 as printed, which must fail the factor test (the erratum).
3. ``fast_eig``: :func:`randomized_eigen_factor` on ``A = (1−β)UUᵀ + βGᵀG`` (D = 2,000, L = 10, MS = 64, spectrum
   ``2^{−k}``) against ``A``'s eigenpairs, known by construction (what dense ``eigh`` returns, to rounding).
4-5. :func:`slang_step` (exact eig) on a fixed sequence of 50 empirical-Fisher factors against the dense
   full-Gaussian VOGN recursion (P = 20, MS = 6): the diagonal at L = 3 (App. D) and everything at L = P.
6. :func:`per_example_rows` (layer factors) of a 4-8-8-3 tanh MLP (M = 16, S = 3) against a per-example autograd
   loop, and their sums against the minibatch gradient.
7. One :func:`fit_slang` step with β = 1, L = P on a 2-4-1 MLP: the precision is ``(N/(MS)) Σ g gᵀ + λI``.

Every problem is drawn from its own seeded generator; the global RNG and default dtype are left untouched.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from bnnpred.curvature.functional import FlatModel
from bnnpred.inference.base import Problem
from bnnpred.inference.gradient_rows import DenseRows, per_example_rows
from bnnpred.inference.slang import (
    Eig,
    SLANGConfig,
    SLANGState,
    StackedRows,
    fit_slang,
    randomized_eigen_factor,
    slang_step,
    top_eigen_factor,
)
from bnnpred.likelihoods import Bernoulli, Categorical, Likelihood
from bnnpred.models.mlp import MLPConfig, build_mlp
from bnnpred.posteriors import LowRankDiagPosterior
from bnnpred.reproduce.claims import Claim, Compare, claim, every, item
from bnnpred.reproduce.identity_checks import max_abs_error, relative_error

DTYPE = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _precision(U: Tensor, d: Tensor) -> Tensor:
    """``UUᵀ + diag d`` ``[D, D]``, formed densely (the reference side)."""
    return U @ U.T + torch.diag(d)


# --- item 1: fast_inverse ---------------------------------------------------------------------------------------

def woodbury_solve(D: int = 500, L: int = 10, seed: int = 0) -> tuple[Tensor, Tensor]:
    """``y = (UUᵀ + diag d)⁻¹ x`` ``[D]`` by the library's Woodbury solve (notes-002 §2.5, eqs. 23-24, Alg. 2) and
    by a dense solve, for ``U ~ N(0, 1)`` ``[D, L]``, ``d ~ U(0.5, 1.5)``, ``x ~ N(0, I)``."""
    gen = _gen(seed)
    U = torch.randn(D, L, generator=gen, dtype=DTYPE)
    d = torch.rand(D, generator=gen, dtype=DTYPE) + 0.5
    x = torch.randn(D, generator=gen, dtype=DTYPE)
    y = LowRankDiagPosterior(torch.zeros(D, dtype=DTYPE), U, d).cov_mv(x)
    return y, torch.linalg.solve(_precision(U, d), x)


def fast_inverse_claim(y: Tensor, reference: Tensor) -> Claim:
    """notes-002 checklist item 1: ‖y − (UUᵀ+diag d)⁻¹x‖/‖y‖ < 1e-10."""
    error = float(torch.linalg.vector_norm(y - reference) / torch.linalg.vector_norm(y))
    return claim(item(2, 1), Compare("‖y − (UUᵀ + diag d)⁻¹x‖ / ‖y‖, y = LowRankDiagPosterior.cov_mv(x) (Woodbury) vs "
                                     "a dense solve, D = 500, L = 10", "<", 1e-10), error)


# --- item 2: fast_sample ----------------------------------------------------------------------------------------

def sampler_posteriors(D: int, L: int = 8, seed: int = 1) -> dict[str, LowRankDiagPosterior]:
    """Zero-mean posteriors with precision ``UUᵀ + diag d`` (``d ~ U(0.5, 1.5)``) for ``U`` ``[D, L]`` random,
    ``≡ 0`` and of rank 3 < L (notes-002 item 2's three cases)."""
    gen = _gen(seed)
    d = torch.rand(D, generator=gen, dtype=DTYPE) + 0.5
    factors = {"random U": torch.randn(D, L, generator=gen, dtype=DTYPE),
               "U ≡ 0": torch.zeros(D, L, dtype=DTYPE),
               "rank(U) = 3 < L": torch.randn(D, 3, generator=gen, dtype=DTYPE) @ torch.randn(3, L, generator=gen,
                                                                                          dtype=DTYPE)}
    return {name: LowRankDiagPosterior(torch.zeros(D, dtype=DTYPE), U, d) for name, U in factors.items()}


def sampler_factor(post: LowRankDiagPosterior) -> Tensor:
    """The sampler's implied factor ``T`` ``[D, D]`` (draws are ``µ + T ε``): its action on the unit vectors."""
    D = post.mean.numel()
    return post.cov_root_times(torch.eye(D, dtype=DTYPE)).T


def literal_algorithm3_factor(post: LowRankDiagPosterior) -> Tensor:
    """The factor ``T`` ``[D, D]`` of the seed's Algorithm 3 as printed (notes-002 §2.6, the erratum): ``V = d^{−1/2}
    U``, ``A = chol(VᵀV)``, ``B = chol(I + VᵀV)`` (lower), ``C = A⁻ᵀ(B − I)A⁻¹``, ``K = (C + VᵀV)⁻¹`` and
    ``y = d^{−1/2} ε − V K Vᵀ ε``. Defined only for ``rank(U) = L`` (``A`` is a Cholesky factor)."""
    V = post.U * post.d.rsqrt().unsqueeze(1)
    gram = V.T @ V
    eye = torch.eye(gram.shape[0], dtype=DTYPE)
    A = torch.linalg.cholesky(gram)
    A_inv = torch.linalg.solve_triangular(A, eye, upper=False)
    C = A_inv.T @ (torch.linalg.cholesky(eye + gram) - eye) @ A_inv
    return torch.diag(post.d.rsqrt()) - V @ torch.linalg.solve(C + gram, V.T)


def sampler_draws(post: LowRankDiagPosterior, n: int = 200_000, seed: int = 2) -> Tensor:
    """``n`` draws ``[n, D]`` of the library's sampler (notes-002 §2.6, the corrected Alg. 3)."""
    return post.sample(n, _gen(seed))


def fast_sample_claims(factors: dict[str, tuple[Tensor, Tensor]], draws: dict[str, tuple[Tensor, Tensor]],
                       literal: tuple[Tensor, Tensor]) -> list[Claim]:
    """notes-002 checklist item 2: ``‖TTᵀ − Σ‖_F/‖Σ‖_F < 1e-10`` (a), the empirical covariance of the draws within
    2 % relative Frobenius error (b), on every case, and the literal Algorithm 3 failing (a) on a random ``U`` (c);
    ``factors`` maps a case to ``(T [D, D], UUᵀ + diag d)``, ``draws`` to ``(draws [n, D], UUᵀ + diag d)``,
    ``literal`` is ``(T [D, D], UUᵀ + diag d)`` of :func:`literal_algorithm3_factor`."""
    factor_errors = {name: relative_error(T @ T.T, torch.linalg.inv(precision))
                     for name, (T, precision) in factors.items()}
    cov_errors = {name: relative_error(torch.cov(x.T), torch.linalg.inv(precision))
                  for name, (x, precision) in draws.items()}
    T, precision = literal
    return [
        every(item(2, 2, "a"), Compare("‖TTᵀ − (UUᵀ + diag d)⁻¹‖_F / ‖(UUᵀ + diag d)⁻¹‖_F, T the sampler's factor "
                                       "(LowRankDiagPosterior.cov_root_times), D = 200, L = 8", "<", 1e-10),
              factor_errors, over="U"),
        every(item(2, 2, "b"), Compare("‖Cov̂ − (UUᵀ + diag d)⁻¹‖_F / ‖(UUᵀ + diag d)⁻¹‖_F, Cov̂ the empirical "
                                       "covariance of 2×10⁵ draws of LowRankDiagPosterior.sample, D = 30, L = 8",
                                       "≤", 0.02),
              cov_errors, over="U",
              note="D = 30, not 200: at D = 200 the Monte Carlo error of 2×10⁵ draws alone is ≈ 3 %"),
        claim(item(2, 2, "c"), Compare("‖TTᵀ − (UUᵀ + diag d)⁻¹‖_F / ‖(UUᵀ + diag d)⁻¹‖_F, T the literal Algorithm 3's "
                                       "factor (the erratum: it must fail), random U, D = 200, L = 8", "≥", 1e-3),
              relative_error(T @ T.T, torch.linalg.inv(precision)),
              note="B = chol(I + VᵀV), K = (C + VᵀV)⁻¹ and no d^{−1/2} on VKVᵀε, as printed; undefined for U ≡ 0 "
                   "and rank(U) < L (chol(VᵀV) fails)"),
    ]


def fast_sample_cases() -> tuple[dict[str, tuple[Tensor, Tensor]], dict[str, tuple[Tensor, Tensor]],
                                 tuple[Tensor, Tensor]]:
    """Item 2's inputs: the factors at D = 200 and the draws at D = 30, each with its precision, and the literal
    Algorithm 3's factor on the random ``U`` at D = 200 with its precision."""
    posteriors = sampler_posteriors(200)
    factors = {name: (sampler_factor(post), _precision(post.U, post.d)) for name, post in posteriors.items()}
    draws = {name: (sampler_draws(post), _precision(post.U, post.d)) for name, post in sampler_posteriors(30).items()}
    random = posteriors["random U"]
    return factors, draws, (literal_algorithm3_factor(random), _precision(random.U, random.d))


# --- item 3: fast_eig -------------------------------------------------------------------------------------------

class EigCase(NamedTuple):
    """Item 3's measured eigen-factor and the exact top-L eigenpairs it is compared with."""

    U: Tensor  # [D, L] the randomized eigen-factor (U Uᵀ ≈ the best rank-L part of A)
    values: Tensor  # [L] A's top eigenvalues, descending
    vectors: Tensor  # [D, L] their orthonormal eigenvectors


def eig_case(D: int = 2000, L: int = 10, MS: int = 64, beta: float = 0.3, ratio: float = 0.5,
             seed: int = 3, *, eig: Eig = Eig.randomized) -> EigCase:
    """``A = (1−β)UUᵀ + βGᵀG`` (notes-002 eq. 22) with ``U`` ``[D, L]`` and ``G`` ``[MS, D]`` built so that ``A``'s
    eigendecomposition is ``Q diag(ratio^k) Qᵀ``, k = 0..L+MS−1 (``Q`` ``[D, L+MS]`` orthonormal); its top-L
    eigen-factor by :func:`randomized_eigen_factor` (4 subspace iterations with K = L + 2 vectors, §2.4; ``eig``
    exact: :func:`top_eigen_factor`) and its top-L eigenpairs, known by construction. They stand in for dense
    ``eigh`` of the formed ``A``, which returns them to 3e-15 (values) and 4e-14 (subspace) here but costs 2.5 s of
    the check's budget at D = 2,000."""
    gen = _gen(seed)
    K = L + MS
    Q, _ = torch.linalg.qr(torch.randn(D, K, generator=gen, dtype=DTYPE))
    R, _ = torch.linalg.qr(torch.randn(K, K, generator=gen, dtype=DTYPE))
    spectrum = ratio ** torch.arange(K, dtype=DTYPE)
    rows = R @ (Q * spectrum.sqrt()).T  # [K, D], rowsᵀ rows = Q diag(spectrum) Qᵀ
    U, G = rows[:L].T / math.sqrt(1 - beta), rows[L:] / math.sqrt(beta)
    W = StackedRows(U=U, G=DenseRows(G), a=math.sqrt(1 - beta), b=math.sqrt(beta))
    U, _ = top_eigen_factor(W, L) if eig is Eig.exact else randomized_eigen_factor(W, L, 4, gen)
    return EigCase(U, spectrum[:L], Q[:, :L])


def fast_eig_claims(case: EigCase) -> list[Claim]:
    """notes-002 checklist item 3: top-L eigenvalues within 1e-4 relative (a), largest principal angle between the
    subspaces < 1e-2 rad (b)."""
    values = torch.linalg.eigvalsh(case.U.T @ case.U).flip(0)  # the nonzero eigenvalues of U Uᵀ
    value_error = float(((values - case.values).abs() / case.values).max())
    basis, _ = torch.linalg.qr(case.U)
    outside = basis - case.vectors @ (case.vectors.T @ basis)  # sin of the largest angle = its spectral norm
    angle = float(torch.arcsin(torch.linalg.matrix_norm(outside, ord=2).clamp(max=1.0)))
    text = "randomized_eigen_factor (4 iterations, K = L + 2) vs A's exact eigenpairs, A = (1−β)UUᵀ + βGᵀG built " \
           "with spectrum 2^−k, D = 2,000, L = 10, MS = 64"
    note = "the notes' reference is dense eigh, which returns these eigenpairs to 4e-14 here"
    return [claim(item(2, 3, "a"), Compare(f"max_k |λ̂_k − λ_k| / λ_k over the top L eigenvalues, {text}", "<", 1e-4),
                  value_error, note=note),
            claim(item(2, 3, "b"), Compare(f"largest principal angle between the top-L eigenspaces (rad), {text}", "<",
                                           1e-2), angle, note=note)]


# --- items 4 and 5: SLANG against full-Gaussian VOGN ------------------------------------------------------------

class EFSequence(NamedTuple):
    """Items 4-5's fixed input: a sequence of empirical-Fisher factors and gradients, the start and the step sizes."""

    G: Tensor  # [T, MS, P] the scaled gradient rows of each step (Ĝ_t = G_tᵀ G_t)
    g_hat: Tensor  # [T, P] the minibatch gradients ĝ_t
    d0: Tensor  # [P] the starting diagonal
    prior: Tensor  # [P] λ
    alpha: float
    beta: float


class Trajectory(NamedTuple):
    """The precisions and means after each step of a SLANG or dense VOGN run."""

    precisions: Tensor  # [T, P, P] after each step
    means: Tensor  # [T, P] after each step


def ef_sequence(P: int = 20, MS: int = 6, steps: int = 50, seed: int = 4) -> EFSequence:
    """A fixed sequence of ``steps`` empirical-Fisher factors and gradients, a start diagonal and a prior."""
    gen = _gen(seed)
    return EFSequence(G=torch.randn(steps, MS, P, generator=gen, dtype=DTYPE),
                      g_hat=torch.randn(steps, P, generator=gen, dtype=DTYPE),
                      d0=torch.rand(P, generator=gen, dtype=DTYPE) + 0.5, prior=torch.full((P,), 0.5, dtype=DTYPE),
                      alpha=0.1, beta=0.2)


def slang_run(seq: EFSequence, rank: int, *, eig: Eig = Eig.exact) -> Trajectory:
    """:func:`slang_step` (no momentum; the eigensolver ``eig``) from ``U = 0``, ``d = d0``, ``µ = 0`` over the
    sequence."""
    P = seq.d0.numel()
    cfg = SLANGConfig(rank=rank, eig=eig, momentum=0.0)
    state = SLANGState(mean=torch.zeros(P, dtype=DTYPE), U=torch.zeros(P, rank, dtype=DTYPE), d=seq.d0.clone(),
                       momentum=torch.zeros(P, dtype=DTYPE))
    precisions, means = [], []
    for G, g_hat in zip(seq.G, seq.g_hat, strict=True):
        state = slang_step(state, DenseRows(G.clone()), g_hat, seq.prior, seq.alpha, seq.beta, cfg, _gen(0))
        precisions.append(_precision(state.U, state.d))
        means.append(state.mean)
    return Trajectory(torch.stack(precisions), torch.stack(means))


def vogn_run(seq: EFSequence) -> Trajectory:
    """Dense full-Gaussian VOGN (notes-002 eq. 2): ``Π ← (1−β)Π + β(GᵀG + diag λ)``, ``µ ← µ − α Π⁻¹(ĝ + λ ⊙ µ)``."""
    precision, mean = torch.diag(seq.d0), torch.zeros_like(seq.d0)
    precisions, means = [], []
    for G, g_hat in zip(seq.G, seq.g_hat, strict=True):
        precision = (1 - seq.beta) * precision + seq.beta * (G.T @ G + torch.diag(seq.prior))
        mean = mean - seq.alpha * torch.linalg.solve(precision, g_hat + seq.prior * mean)
        precisions.append(precision)
        means.append(mean)
    return Trajectory(torch.stack(precisions), torch.stack(means))


def diagonal_claim(slang: Trajectory, vogn: Trajectory) -> Claim:
    """notes-002 checklist item 4 (App. D, §2.8): SLANG's precision diagonal is VOGN's at every step."""
    diag_slang, diag_vogn = slang.precisions.diagonal(dim1=1, dim2=2), vogn.precisions.diagonal(dim1=1, dim2=2)
    error = float(((diag_slang - diag_vogn).abs() / diag_vogn).max())
    return claim(item(2, 4), Compare("max_t max_j |diag(UUᵀ + diag d)_j − diag(Σ⁻¹_VOGN)_j| / diag(Σ⁻¹_VOGN)_j, "
                                     "slang_step (L = 3, exact eig) vs dense VOGN, 50 fixed EF matrices, P = 20, "
                                     "MS = 6, β = 0.2", "<", 1e-10), error,
                 note="the library always clamps Δ ≥ 0; with the exact eigensolver Δ is the diagonal of a PSD "
                      "remainder, so the clamp can act only at rounding level")


def full_rank_claims(slang: Trajectory, vogn: Trajectory) -> list[Claim]:
    """notes-002 checklist item 5: with L = P SLANG's precision (a) and mean (b) are VOGN's over all steps."""
    precision_error = max(relative_error(a, b) for a, b in zip(slang.precisions, vogn.precisions, strict=True))
    mean_error = max(relative_error(a, b) for a, b in zip(slang.means, vogn.means, strict=True))
    text = "slang_step with L = P = 20 (exact eig, no momentum) vs dense VOGN, 50 steps"
    return [claim(item(2, 5, "a"), Compare(f"max_t ‖Π̂_t − Π_t‖_F / ‖Π_t‖_F, {text}", "≤", 1e-8), precision_error),
            claim(item(2, 5, "b"), Compare(f"max_t ‖µ̂_t − µ_t‖ / ‖µ_t‖, {text}", "≤", 1e-8), mean_error)]


# --- items 6 and 7: per-example gradients and the N/(MS) scaling ------------------------------------------------

def mlp_problem(widths: list[int], d_in: int, likelihood: Likelihood, C: int, N: int, seed: int,
                prior: float = 0.7) -> Problem:
    """A float64 tanh MLP ``d_in → widths → C`` with ``θ0 ~ N(0, 0.5²)``, inputs ``X ~ N(0, I)`` ``[N, d_in]`` and
    uniformly random labels (the global RNG, used by the layers' initialisation, is restored)."""
    with torch.random.fork_rng(devices=[]):
        model = FlatModel(build_mlp(MLPConfig(widths=widths), (d_in,), C).double())
    gen = _gen(seed)
    theta0 = 0.5 * torch.randn(model.n_params, generator=gen, dtype=DTYPE)
    X = torch.randn(N, d_in, generator=gen, dtype=DTYPE)
    y = torch.randint(0, max(C, 2), (N,), generator=gen)
    return Problem(model=model, likelihood=likelihood, X=X, y=y, prior_precision=torch.full_like(theta0, prior),
                   theta0=theta0, generator=gen)


def autograd_rows(problem: Problem, thetas: Tensor, X: Tensor, y: Tensor) -> Tensor:
    """The reference rows ``∇_θ log p(y_i | θ_s)`` ``[S·M, P]`` (draw major), one autograd call per draw and
    example."""
    rows = []
    for theta in thetas:
        for i in range(len(X)):
            at = theta.detach().clone().requires_grad_()
            loglik = problem.likelihood.log_prob(problem.model(at, X[i:i + 1]), y[i:i + 1]).sum()
            rows.append(torch.autograd.grad(loglik, at)[0])
    return torch.stack(rows)


class GradientCase(NamedTuple):
    """Item 6's measured per-example rows and their sums, with the autograd references."""

    rows: Tensor  # [S·M, P] the library's per-example rows
    reference: Tensor  # [S·M, P] the autograd loop's
    sums: Tensor  # [S, P] the library's rows summed over the examples of each draw
    minibatch: Tensor  # [S, P] ∇_θ Σ_i log p(y_i | θ_s) by autograd


def gradient_case(M: int = 16, S: int = 3, seed: int = 5) -> GradientCase:
    """notes-002 §2.7: :func:`per_example_rows` (layer factors) of a 4-8-8-3 tanh MLP, categorical likelihood, at S
    draws around θ0 on M examples, and the autograd references."""
    problem = mlp_problem([8, 8], 4, Categorical(), 3, M, seed)
    thetas = problem.theta0 + 0.3 * torch.randn(S, problem.theta0.numel(), generator=_gen(seed + 1), dtype=DTYPE)
    rows = per_example_rows(problem, thetas, problem.X, problem.y)
    by_draw = torch.eye(S, dtype=DTYPE).repeat_interleave(M, 0)  # [S·M, S], column s picks draw s's rows
    minibatch = torch.stack([torch.func.grad(lambda t: problem.likelihood.log_prob(problem.model(t, problem.X),
                                                                                    problem.y).sum())(theta)
                             for theta in thetas])  # one autograd call per draw on the whole minibatch
    return GradientCase(rows.dense(), autograd_rows(problem, thetas, problem.X, problem.y),
                        rows.transpose_times(by_draw).T, minibatch)


def per_example_claims(case: GradientCase) -> list[Claim]:
    """notes-002 checklist item 6: the rows match the autograd loop (a) and sum to the minibatch gradient (b), both
    relative to the largest reference entry, to 1e-10 in float64 (the notes' 1e-5 is for float32)."""
    row_error = max_abs_error(case.rows, case.reference) / float(case.reference.abs().max())
    sum_error = max_abs_error(case.sums, case.minibatch) / float(case.minibatch.abs().max())
    setting = "MLP 4-8-8-3 (2 hidden layers), M = 16, S = 3"
    return [claim(item(2, 6, "a"), Compare(f"max |g_is − g_is(autograd loop)| / max |g(autograd loop)|, "
                                           f"per_example_rows (layer factors), {setting}", "≤", 1e-10), row_error,
                  note="float64: the notes' 1e-5 is for float32"),
            claim(item(2, 6, "b"), Compare(f"max_s max |Σ_i g_is − ∇Σ_i log p(y_i | θ_s)| / max |∇Σ_i log p|, the "
                                           f"rows' per-draw sums vs the minibatch gradient by autograd, {setting}",
                                           "≤", 1e-10), sum_error, note="float64: the notes' 1e-5 is for float32")]


class ScalingCase(NamedTuple):
    """Item 7's precision after one fit_slang step and the pieces of its reference ``(N/(MS)) Σ g gᵀ + λI``."""

    precision: Tensor  # [P, P] U Uᵀ + diag d after one fit_slang step
    outer: Tensor  # [P, P] Σ_{i,s} g_is g_isᵀ over the step's minibatch and draws (autograd loop)
    scale: float  # N / (M S)
    prior: Tensor  # [P] λ


def scaling_case(N: int = 40, M: int = 8, S: int = 3, seed: int = 6) -> ScalingCase:
    """One :func:`fit_slang` step (β = 1, L = P, exact eig) on a 2-4-1 tanh MLP with a Bernoulli likelihood; the
    reference outer products at the step's draws and minibatch, which are replicated from the run's seed (the run
    draws S samples of q₀ = N(θ0, I), then shuffles the N rows)."""
    problem = mlp_problem([4], 2, Bernoulli(), 1, N, seed)
    P = problem.theta0.numel()
    replay = torch.Generator()
    replay.set_state(problem.generator.get_state())  # where the run starts
    cfg = SLANGConfig(rank=P, lr=0.1, precision_lr=1.0, iterations=1, log_every=1, n_samples=S, batch_size=M)
    post = fit_slang(problem, cfg).posterior
    thetas = problem.theta0 + torch.randn(S, P, generator=replay, dtype=DTYPE)
    rows = torch.randperm(N, generator=replay)[:M]
    G = autograd_rows(problem, thetas, problem.X[rows], problem.y[rows])
    return ScalingCase(_precision(post.U, post.d), G.T @ G, N / (M * S), problem.prior_precision)


def scaling_claim(case: ScalingCase) -> Claim:
    """notes-002 checklist item 7: with β = 1 and L = P the precision after one step is (N/(MS)) Σ g gᵀ + λI."""
    reference = case.scale * case.outer + torch.diag(case.prior)
    return claim(item(2, 7), Compare("‖Π − ((N/(MS)) Σ g gᵀ + λI)‖_F / ‖(N/(MS)) Σ g gᵀ + λI‖_F after one fit_slang "
                                     "step, β = 1, L = P = 17, N = 40, M = 8, S = 3", "≤", 1e-12),
                 relative_error(case.precision, reference),
                 note="exactly, i.e. to float64 rounding; the step's draws and minibatch replayed from the run's seed")


def claims() -> list[Claim]:
    """notes-002 items 1-7, in checklist order (about 3 s on one core)."""
    seq = ef_sequence()
    vogn = vogn_run(seq)
    return [fast_inverse_claim(*woodbury_solve()),
            *fast_sample_claims(*fast_sample_cases()),
            *fast_eig_claims(eig_case()),
            diagonal_claim(slang_run(seq, rank=3), vogn),
            *full_rank_claims(slang_run(seq, rank=seq.d0.numel()), vogn),
            *per_example_claims(gradient_case()),
            scaling_claim(scaling_case())]
