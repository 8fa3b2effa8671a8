r"""Posterior predictives, each usable on any Gaussian posterior (notes-000 §5.1, notes-004 §2.4).

- ``map``: ``p(y | f(x; θ*))``.
- ``nn`` (NN sampling, eq. 3.14): ``θ_s ~ q``, ``(1/S) Σ_s p(y | f(x; θ_s))``.
- ``glm`` (GLM sampling, eq. 3.15): ``θ_s ~ q``, ``(1/S) Σ_s p(y | f_lin(x; θ_s))`` with
  ``f_lin(x; θ) = f(x; θ*) + J(x; θ*)(θ - θ*)``; the linearisation point stays ``θ*``.
- ``closed``: the latent ``f* ~ N(f(x;θ*) + J(µ - θ*), J Σ Jᵀ)`` pushed through the likelihood in closed
  form (exact for the Gaussian, probit for classification, Gauss-Hermite quadrature for the Poisson).
- ``bridge`` (the Laplace bridge, Hobbhahn, Kristiadi & Hennig 2022, as their eq. states it, without the mean and
  variance corrections that laplace-torch's ``link_approx="bridge"`` applies first, so its numbers differ): the same
  latent's means and variances mapped to a Dirichlet over the class probabilities, whose mean is predicted (softmax
  likelihoods only).
- ``gp`` (notes-004 eqs. 14-16, notes-000 eq. 3.13): the function-space GP with kernel ``J S₀ Jᵀ`` on all N
  or a subset of M training points, latent ``N(f(x*;θ*), K** - K*M (K_MM + W⁻¹)⁻¹ K_M*)``, sampled.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum

import torch
from torch import Tensor
from torch.func import jvp, vmap

from bnnpred import metrics
from bnnpred.curvature import kernel
from bnnpred.curvature.chunks import DEFAULT_CHUNK_ELEMS
from bnnpred.curvature.functional import FlatModel, SubsetModel
from bnnpred.curvature.jacobians import iter_jacobians
from bnnpred.curvature.kron import iter_layer_gradients, jacobian_layers
from bnnpred.errors import BnnpredError
from bnnpred.likelihoods import Categorical, Gaussian, Likelihood
from bnnpred.memory import available_bytes, gigabytes
from bnnpred.posteriors import DiagPosterior, KronPosterior, Posterior, SubsetPosterior
from bnnpred.posteriors.linalg import robust_cholesky
from bnnpred.prediction import ClassPrediction, Prediction

log = logging.getLogger(__name__)

# Network evaluations for NN sampling are batched so that their activations hold about this many numbers: on the CPU
# few enough that a layer's output stays near the caches for the next (3c3d's forward pass: 0.43-0.48 ms per image in
# batches of 32-128 images, 0.63-0.78 ms in batches of 512; bench/README.md), on a GPU more per kernel launch.
CPU_MAX_ACTIVATIONS = 2**24
MAX_ACTIVATIONS = 2**26


class PredictiveKind(str, Enum):
    map = "map"
    nn = "nn"
    glm = "glm"
    closed = "closed"
    bridge = "bridge"
    gp = "gp"


# the predictives made for one likelihood: kind -> (its class, the task that has it)
LIKELIHOOD_OF = {PredictiveKind.bridge: (Categorical, "multiclass")}


def applies(kind: PredictiveKind, likelihood: Likelihood) -> bool:
    """Whether the predictive serves this likelihood (every one does but those of :data:`LIKELIHOOD_OF`)."""
    return kind not in LIKELIHOOD_OF or isinstance(likelihood, LIKELIHOOD_OF[kind][0])


def check_applies(kind: PredictiveKind, likelihood: Likelihood) -> None:
    """Refuse a predictive made for another likelihood (the Laplace bridge is a softmax's), naming the ones that
    apply."""
    if not applies(kind, likelihood):
        needed = LIKELIHOOD_OF[kind]
        raise BnnpredError(f"predictive {kind.value} is for task {needed[1]} (a softmax over classes); use closed "
                           "(the closed form: probit for one logit) or glm here")


class GPSubset(str, Enum):
    random = "random"
    top_lambda = "top_lambda"  # the M points with the largest tr Λ(x)


@dataclass
class Context:
    """What the predictives need: the network at ``θ*``, the posterior and the prior.

    Attributes:
        model, likelihood: network and likelihood.
        theta: linearisation point ``θ*`` ``[P]`` (the MAP for Laplace).
        posterior: Gaussian over ``θ``, or ``None`` for a point estimate.
        prior_precision: ``[P]``, the diagonal of ``S₀⁻¹`` (the GP kernel's prior).
        X_train: training inputs ``[N, ...]`` (the GP predictive conditions on them).
    """

    model: FlatModel
    likelihood: Likelihood
    theta: Tensor
    posterior: Posterior | None
    prior_precision: Tensor
    X_train: Tensor

    def within_subset(self) -> Context:
        """For a posterior over a block of the parameters (:class:`SubsetPosterior`, the last-layer Laplace): the
        same predictive problem in the block's parameters, the others fixed at θ* (Jacobians, kernels and the GLM
        reach the block alone); otherwise this context."""
        post = self.posterior
        if not isinstance(post, SubsetPosterior):
            return self
        block = slice(post.start, post.stop)
        return Context(SubsetModel(self.model, self.theta, post.names), self.likelihood, self.theta[block],
                       post.inner, self.prior_precision[block], self.X_train)

    def require_posterior(self, kind: str) -> Posterior:
        if self.posterior is None:
            raise BnnpredError(
                f"predictive '{kind}' needs a posterior, but the run has a point estimate; "
                "use inference=laplace_ggn or predictive=map"
            )
        return self.posterior


def network_outputs(model: FlatModel, theta: Tensor, X: Tensor, step: int = 4096) -> Tensor:
    """``f(X; θ)`` ``[N, C]`` without a graph, ``step`` inputs at a time (bounded activation memory)."""
    with torch.no_grad():
        return torch.cat([model(theta, X[i : i + step]) for i in range(0, len(X), step)])


def map_predictive(ctx: Context, X: Tensor) -> Prediction:
    """Plug-in predictive at ``θ*``."""
    return ctx.likelihood.predict_point(network_outputs(ctx.model, ctx.theta, X))


def nn_samples(ctx: Context, X: Tensor, thetas: Tensor) -> Tensor:
    """``f(X; θ_s)`` ``[S, B, C]`` for parameter draws ``θ_s`` ``[S, P]``, in batches of (sample, input) pairs whose
    activations hold about ``MAX_ACTIVATIONS`` numbers (``CPU_MAX_ACTIVATIONS`` on the CPU; one draw at a time, not
    under ``vmap``, when a batch holds one: e.g. an image network's, which runs channels last then)."""
    budget = CPU_MAX_ACTIVATIONS if thetas.device.type == "cpu" else MAX_ACTIVATIONS
    pairs = max(1, budget // activations_per_input(ctx.model, ctx.theta, X[:1]))
    x_step = min(len(X), pairs)
    s_step = max(1, pairs // max(1, x_step))
    batched = vmap(ctx.model, in_dims=(0, None))
    forward = batched if s_step > 1 else lambda draws, inputs: ctx.model(draws[0], inputs).unsqueeze(0)
    with torch.no_grad():
        return torch.cat(
            [
                torch.cat([forward(thetas[s : s + s_step], X[i : i + x_step]) for s in range(0, len(thetas), s_step)])
                for i in range(0, len(X), x_step)
            ],
            dim=1,
        )


def activations_per_input(model: FlatModel, theta: Tensor, x: Tensor) -> int:
    """Numbers the network's layers output for one input ``x`` ``[1, ...]`` (its activation memory)."""
    total = 0

    def count(module: torch.nn.Module, inputs: tuple[Tensor, ...], output: Tensor) -> None:
        nonlocal total
        total += output.numel() if isinstance(output, Tensor) else 0

    leaves = [m for m in model.module.modules() if not list(m.children())]
    hooks = [m.register_forward_hook(count) for m in leaves]
    try:
        with torch.no_grad():
            model(theta, x)
    finally:
        for hook in hooks:
            hook.remove()
    return max(1, total)


def glm_samples(ctx: Context, X: Tensor, thetas: Tensor) -> Tensor:
    """``f_lin(X; θ_s) = f(X; θ*) + J(X; θ*)(θ_s - θ*)`` ``[S, B, C]`` (joint over inputs)."""
    delta = thetas - ctx.theta
    chunks = [f + torch.einsum("bcp,sp->sbc", J, delta) for _, f, J in iter_jacobians(ctx.model, ctx.theta, X)]
    return torch.cat(chunks, dim=1)


def nn_predictive(ctx: Context, X: Tensor, n_samples: int, generator: torch.Generator) -> Prediction:
    thetas = ctx.require_posterior("nn").sample(n_samples, generator)
    return ctx.likelihood.predict_samples(nn_samples(ctx, X, thetas))


def glm_predictive(ctx: Context, X: Tensor, n_samples: int, generator: torch.Generator) -> Prediction:
    """GLM sampling in function space (notes-004 §2.4): ``f_s ~ N(f(x;θ*) + J(µ − θ*), J Σ Jᵀ)`` per input, the
    marginals of ``f_lin(x; θ_s)`` with ``θ_s ~ q``, drawn from the ``C x C`` logit covariance instead of ``[S, P]``
    parameter draws (what makes it affordable for image networks)."""
    ctx.require_posterior("glm")
    mean, cov = glm_latent(ctx, X)
    return ctx.likelihood.predict_samples(sample_gaussian_latent(mean, cov, n_samples, generator))


def glm_latent(ctx: Context, X: Tensor) -> tuple[Tensor, Tensor]:
    """Latent GLM marginal ``N(f(x;θ*) + J(µ - θ*), J Σ Jᵀ)``: mean ``[B, C]``, covariance ``[B, C, C]`` (over a
    last-layer posterior's block alone: :meth:`Context.within_subset`)."""
    ctx.require_posterior("closed")
    ctx = ctx.within_subset()
    post = ctx.posterior
    shift = post.mean - ctx.theta
    if isinstance(post, KronPosterior) or (isinstance(post, DiagPosterior) and jacobian_layers(ctx.model)):
        return layered_glm_latent(ctx, post, X, shift)
    means, covs = [], []
    for _, f, J in iter_jacobians(ctx.model, ctx.theta, X):
        means.append(f + J @ shift)
        covs.append(post.functional_cov(J))
    return torch.cat(means), torch.cat(covs)


def layered_glm_latent(ctx: Context, post: KronPosterior | DiagPosterior, X: Tensor,
                       shift: Tensor) -> tuple[Tensor, Tensor]:
    """:func:`glm_latent` for a Kronecker or diagonal posterior from each layer's Jacobian factors (C backward
    passes per batch, no ``[B, C, P]`` Jacobian), the mean shift by a Jacobian-vector product."""
    means, covs = [], []
    for rows, f, factors in iter_layer_gradients(ctx.model, ctx.theta, X):
        covs.append(post.functional_cov_from_layers(factors))
        means.append(_shifted(ctx, X[rows], f, shift))
    return torch.cat(means), torch.cat(covs)


def _shifted(ctx: Context, X: Tensor, f: Tensor, shift: Tensor | None) -> Tensor:
    """``f(X; θ*) + J(X)·shift`` ``[B, C]`` by one Jacobian-vector product (``f`` itself for no or a zero shift)."""
    if shift is None or not bool(shift.any()):
        return f
    return f + jvp(lambda theta: ctx.model(theta, X), (ctx.theta,), (shift,))[1].detach()


def closed_predictive(ctx: Context, X: Tensor) -> Prediction:
    mean, cov = glm_latent(ctx, X)
    return ctx.likelihood.predict_gaussian(mean, cov)


def laplace_bridge(mean: Tensor, var: Tensor) -> Tensor:
    r"""``log α`` ``[B, C]`` of the Laplace bridge (Hobbhahn, Kristiadi & Hennig 2022) for logit means ``mean`` and
    variances ``var`` ``[B, C]``: ``α_k = (1 − 2/C + e^{μ_k} Σ_l e^{−μ_l} / C²) / σ²_k``, the Dirichlet whose own
    Laplace approximation in the softmax basis (``μ_k = log α_k − mean_l log α_l``, ``σ²_k = (1 − 2/C)/α_k +
    Σ_l α_l⁻¹ / C²``) has these moments: the map inverts that one exactly. In logs, so large logits stay finite."""
    C = mean.shape[-1]
    spread = mean + torch.logsumexp(-mean, dim=-1, keepdim=True) - 2 * math.log(C)  # log(e^{μ_k} Σ e^{−μ_l} / C²)
    floor = torch.finfo(var.dtype).tiny  # a logit of zero variance (round-off may make it negative): a point mass
    return (torch.logaddexp(torch.full_like(mean, math.log1p(-2 / C) if C > 2 else -math.inf), spread)
            - var.clamp_min(floor).log())


def bridge_predictive(ctx: Context, X: Tensor) -> ClassPrediction:
    """The Laplace bridge's predictive: the mean ``α / Σ α`` of its Dirichlet, from the GLM latent's means and the
    diagonal of its covariance."""
    check_applies(PredictiveKind.bridge, ctx.likelihood)
    mean, cov = glm_latent(ctx, X)
    return ClassPrediction(probs=torch.softmax(laplace_bridge(mean, cov.diagonal(dim1=-2, dim2=-1)), dim=-1))


@dataclass
class GPConditioning:
    """The training side of the GP predictive, computed once.

    Attributes:
        feats: kernel features of the M training points (:mod:`~bnnpred.curvature.kernel`).
        L: ``[M, C, C]`` with ``LᵀL = Λ`` at each training point.
        K: ``K_MM`` ``[MC, MC]`` at the prior ``S₀ = Δ⁻¹``.
        scale: the prior precision is ``scale · Δ``, so the kernel is ``K / scale``.
        chol: ``chol(I + L K Lᵀ / scale)``.
        per_class: same-class pairs only (:func:`~bnnpred.curvature.kernel.cross_kernel`).
    """

    feats: kernel.Features
    L: Tensor
    K: Tensor
    scale: float
    chol: Tensor
    per_class: bool


def _apply_L(L: Tensor, V: Tensor) -> Tensor:
    """``blockdiag(L_m) V`` for ``V`` ``[M, C, R]``, as ``[M, C, R]``."""
    return torch.einsum("mkc,mcr->mkr", L, V)


def gp_condition(ctx: Context, subset: Tensor, prior_scale: float = 1.0, per_class: bool = False) -> GPConditioning:
    """Condition the GP with kernel ``J S₀ Jᵀ`` on training rows ``subset`` (W = blockdiag Λ_i = LᵀL), with the
    prior precision multiplied by ``prior_scale`` (``S₀ = (scale · Δ)⁻¹``)."""
    return _conditioned(*_training_kernel(ctx, subset, per_class), prior_scale, per_class)


def _training_kernel(ctx: Context, subset: Tensor, per_class: bool) -> tuple[kernel.Features, Tensor, Tensor]:
    """The M training points' kernel features, ``L`` ``[M, C, C]`` and ``K_MM`` ``[MC, MC]`` at ``S₀ = Δ⁻¹``."""
    chunks = list(kernel.iter_features(ctx.model, ctx.theta, ctx.X_train[subset], 1 / ctx.prior_precision))
    f_m = torch.cat([f for _, f, _ in chunks])
    feats = kernel.concat([u for _, _, u in chunks])
    del chunks  # the features are in ``feats`` now: holding both doubled the GP's peak memory
    M, C = f_m.shape
    K = kernel.cross_kernel(feats, feats, per_class).reshape(M * C, M * C)
    return feats, ctx.likelihood.hessian_sqrt(f_m), K


def _sandwiched(L: Tensor, K: Tensor) -> Tensor:
    """``L K Lᵀ`` ``[MC, MC]`` for ``L`` ``[M, C, C]`` (block diagonal) and a symmetric ``K`` ``[MC, MC]``."""
    M, C = L.shape[:2]
    LK = _apply_L(L, K.reshape(M, C, M * C)).reshape(M * C, M * C)
    return _apply_L(L, LK.T.reshape(M, C, M * C)).reshape(M * C, M * C)  # L (L K)ᵀ = L K Lᵀ (K symmetric)


def _conditioned(feats: kernel.Features, L: Tensor, K: Tensor, scale: float, per_class: bool) -> GPConditioning:
    """:class:`GPConditioning` with ``chol(I + L K Lᵀ / scale)`` for ``L`` ``[M, C, C]`` and ``K`` ``[MC, MC]``."""
    LKL = _sandwiched(L, K)
    B_mat = torch.eye(LKL.shape[0], dtype=K.dtype, device=K.device) + LKL / scale
    return GPConditioning(feats, L, K, scale, robust_cholesky(B_mat, "GP matrix I + L K Lᵀ").factor, per_class)


def _times_L(L: Tensor, K_xM: Tensor) -> Tensor:
    """``L K_Mx`` ``[MC, bC]`` for the cross-kernels ``K_xM`` ``[b, C, MC]``."""
    b, C = K_xM.shape[:2]
    return _apply_L(L, K_xM.reshape(b * C, L.shape[0], C).permute(1, 2, 0)).reshape(-1, b * C)


def query_chunk_elems(train_numbers: int) -> int:
    """Numbers a chunk of predicted inputs' kernel features may hold, beside the M training points' ``train_numbers``:
    an eighth of them (M = 800 on 3c3d: 100 images), at least the default. Each chunk's cross-kernel streams all of
    the training features for ``2b`` flops per number (``b`` inputs): bound by memory at the default chunk (3c3d: 9
    images), much less at 100 (bench/README.md, the GP's prior factor)."""
    return max(DEFAULT_CHUNK_ELEMS, train_numbers // 8)


def _gp_kernels(ctx: Context, X: Tensor, train_feats: kernel.Features,
                per_class: bool) -> Iterator[tuple[Tensor, Tensor, Tensor]]:
    """Per chunk of ``X`` (:func:`query_chunk_elems`): the latent mean ``[b, C]``, ``K(x, x)`` ``[b, C, C]`` and
    ``K(x, X_M)`` ``[b, C, MC]`` at the prior ``S₀ = Δ⁻¹``."""
    shift = None if ctx.posterior is None else ctx.posterior.mean - ctx.theta
    chunk = query_chunk_elems(kernel.n_numbers(train_feats))
    for rows, f, feats in kernel.iter_features(ctx.model, ctx.theta, X, 1 / ctx.prior_precision, chunk):
        f = _shifted(ctx, X[rows], f, shift)
        K_xM = kernel.cross_kernel(feats, train_feats, per_class)
        yield f, kernel.self_kernel(feats, per_class), K_xM.reshape(len(f), f.shape[1], -1)


CACHE_NUMBERS = 2**18  # numbers of a CPU block whose small products stay in cache (1 MB in float32)


def cache_blocks(rows: Tensor) -> Iterator[slice]:
    """Blocks of the leading dimension of ``rows`` ``[b, ...]``: on the CPU of about :data:`CACHE_NUMBERS` numbers
    each, so that a block's products with itself are made while it is in cache (the GP's covariances, ``[C, MC] x
    [MC, C]`` per input, are bound by memory otherwise: 3.5x slower at M = 400, C = 10, bench/README.md); elsewhere
    one block."""
    b = len(rows)
    step = max(1, CACHE_NUMBERS // max(1, rows[0].numel())) if rows.device.type == "cpu" and b else max(b, 1)
    return (slice(i, min(i + step, b)) for i in range(0, b, step))


def _gp_cov(cond: GPConditioning, K_xx: Tensor, K_xM: Tensor) -> Tensor:
    """``K** − K*M (K_MM + W⁻¹)⁻¹ K_M*`` ``[b, C, C]`` with ``(K + W⁻¹)⁻¹ = Lᵀ (I + L K Lᵀ)⁻¹ L``."""
    b, C = K_xx.shape[:2]
    LK = _times_L(cond.L, K_xM) / cond.scale
    V = torch.linalg.solve_triangular(cond.chol, LK, upper=False).T.reshape(b, C, -1)
    cov = torch.empty_like(K_xx)
    for rows in cache_blocks(V):
        torch.sub(K_xx[rows] / cond.scale, V[rows] @ V[rows].mT, out=cov[rows])
    return cov


def gp_latent(ctx: Context, X: Tensor, cond: GPConditioning) -> tuple[Tensor, Tensor]:
    r"""Function-space Laplace-GP latent at ``X`` (notes-000 eq. 3.13, notes-004 eq. 15).

    ``K** - K*M (K_MM + W⁻¹)⁻¹ K_M*`` with ``(K + W⁻¹)⁻¹ = Lᵀ (I + L K Lᵀ)⁻¹ L`` (Rasmussen & Williams §3.4),
    which stays finite for the singular softmax ``Λ``. With all N points (and the full kernel) this equals the
    weight-space ``J Σ Jᵀ`` of the full Laplace-GGN posterior exactly (Woodbury).

    Returns:
        mean ``[B, C]`` (``f(x;θ*)``, plus ``J(µ - θ*)`` for a posterior mean away from ``θ*``) and
        covariance ``[B, C, C]``.
    """
    means, covs = [], []
    for f, K_xx, K_xM in _gp_kernels(ctx, X, cond.feats, cond.per_class):
        means.append(f)
        covs.append(_gp_cov(cond, K_xx, K_xM))
    return torch.cat(means), torch.cat(covs)


def gp_subset_count(size: int | None, N: int) -> int:
    """M, the GP's training points, for ``predictive.gp_subset_size`` ``size`` (None: all N); outside 1..N an
    error, not a silent switch to all N."""
    if size is not None and not 1 <= size <= N:
        raise BnnpredError(f"predictive.gp_subset_size={size} must be between 1 and the {N} training points; "
                           f"use at most {N}, or null for all of them")
    return N if size is None else size


def gp_subset(
    ctx: Context, size: int | None, how: GPSubset, generator: torch.Generator
) -> Tensor:
    """Training rows for the GP: all N (``size`` None), a seeded random M, or the top-M by tr Λ; a size above N is
    an error, not a silent switch to all N."""
    N = len(ctx.X_train)
    if gp_subset_count(size, N) == N:
        return torch.arange(N)
    if how is GPSubset.random:
        return torch.randperm(N, generator=generator)[:size].sort().values
    f = network_outputs(ctx.model, ctx.theta, ctx.X_train)
    trace = ctx.likelihood.hessian(f).diagonal(dim1=1, dim2=2).sum(-1)
    return trace.topk(size).indices.sort().values.cpu()


def gp_bytes(model: FlatModel, theta: Tensor, x: Tensor, M: int, n_valid: int) -> int:
    """Memory the GP predictive holds at once on M training points like ``x`` ``[1, ...]``: their kernel features,
    a chunk of predicted inputs' (:func:`query_chunk_elems`) and one of training points' (the default) three times
    each (as a chunk is made, a convolution's Jacobian columns come out of a product and are joined to its bias
    columns: bench/README.md, the GP's peak memory), four ``MC x MC`` matrices (K, L K, L K Lᵀ and its Cholesky
    factor; or K, L K Lᵀ, its eigenvectors and eigh's workspace) and, when a prior factor is tuned, the ``n_valid``
    validation points' projected cross-kernels ``[n_valid, C, MC]``."""
    _, f, feats = next(kernel.iter_features(model, theta, x, torch.ones_like(theta)))
    per_point = kernel.n_numbers(feats)
    C, item = f.shape[1], f.element_size()
    chunks = 3 * (query_chunk_elems(M * per_point) + DEFAULT_CHUNK_ELEMS)
    return item * (M * per_point + chunks + 4 * (M * C) ** 2 + n_valid * C * M * C)


def check_gp_memory(model: FlatModel, theta: Tensor, x: Tensor, M: int, n_valid: int) -> None:
    """A one-line error, before anything is computed, when the GP on M points would not fit in free memory; it
    names the largest M that would."""
    free = available_bytes(theta.device)
    need = gp_bytes(model, theta, x, M, n_valid)
    if free is None or need <= free:
        return
    low, high = 0, M  # bisection for the largest M that fits: the need grows with M
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if gp_bytes(model, theta, x, mid, n_valid) <= free else (low, mid)
    raise BnnpredError(f"predictive.gp_subset_size={M} needs about {gigabytes(need)} for the GP, but "
                       f"{gigabytes(free)} are free on {theta.device.type}; use at most {low}")


def sample_gaussian_latent(mean: Tensor, cov: Tensor, n_samples: int, generator: torch.Generator) -> Tensor:
    """Draws ``[S, B, C]`` from independent per-input Gaussians ``N(mean_b, cov_b)``."""
    chol = torch.linalg.cholesky(cov + 1e-12 * torch.eye(cov.shape[-1], dtype=cov.dtype, device=cov.device))
    z = torch.randn((n_samples, *mean.shape), generator=generator, dtype=mean.dtype, device=mean.device)
    return mean + torch.einsum("bij,sbj->sbi", chol, z)


def gp_predictive(
    ctx: Context, X: Tensor, n_samples: int, generator: torch.Generator, cond: GPConditioning
) -> Prediction:
    """GP predictive (eq. 16)."""
    mean, cov = gp_latent(ctx, X, cond)
    return _latent_predictive(ctx.likelihood, mean, cov, n_samples, generator)


def _latent_predictive(likelihood: Likelihood, mean: Tensor, cov: Tensor, n_samples: int,
                       generator: torch.Generator) -> Prediction:
    """Exact Gaussian for regression, latent samples pushed through the likelihood otherwise."""
    if isinstance(likelihood, Gaussian):
        return likelihood.predict_gaussian(mean, cov)
    return likelihood.predict_samples(sample_gaussian_latent(mean, cov, n_samples, generator))


def _latents_at_scales(ctx: Context, X: Tensor, feats: kernel.Features, L: Tensor, K: Tensor, scales: list[float],
                      per_class: bool = False) -> tuple[Tensor, list[Tensor]]:
    """:func:`gp_latent` at ``X`` conditioned on training points with features ``feats``, ``L`` ``[M, C, C]`` and
    ``K`` ``[MC, MC]`` (:func:`_training_kernel`) under each prior scale ``s`` of ``scales``: the mean ``[B, C]`` and
    a covariance ``[B, C, C]`` per scale.

    One eigendecomposition ``L K Lᵀ = Q diag(λ) Qᵀ`` serves every scale: ``K**/s − K*M Lᵀ (I + L K Lᵀ/s)⁻¹ L K_M*/s²
    = K**/s − Zᵀ diag(1 / (s (s + λ))) Z`` with ``Z = Qᵀ L K_M*`` ``[MC, C]`` per input, made once; a scale then
    costs ``O(B C² MC)`` where :func:`gp_condition` costs a Cholesky factor and a triangular solve with ``B·C``
    columns."""
    lam, Q = torch.linalg.eigh(_sandwiched(L, K))
    lam = lam.clamp_min(0)  # L K Lᵀ is positive semi-definite: rounding's negatives are 0
    means, self_kernels, projected = [], [], []  # per chunk: f [b, C], K** [b, C, C], Z [b, C, MC]
    for f, K_xx, K_xM in _gp_kernels(ctx, X, feats, per_class):
        means.append(f)
        self_kernels.append(K_xx)
        projected.append((_times_L(L, K_xM).T @ Q).reshape(*K_xx.shape[:2], -1))  # (Qᵀ L K_M*)ᵀ, no transposed copy
    del Q

    K_xx = torch.cat(self_kernels)
    del self_kernels
    roots = [(s * (s + lam)).rsqrt() for s in scales]  # Zᵀ diag(w) Z as (Z √w)ᵀ (Z √w)
    covs = [torch.empty_like(K_xx) for _ in scales]
    start = 0
    for Z in projected:
        for rows in cache_blocks(Z):  # every scale of a block while it is in cache
            z, at = Z[rows], slice(start + rows.start, start + rows.stop)
            for cov, s, root in zip(covs, scales, roots, strict=True):
                weighted = z * root
                torch.sub(K_xx[at] / s, weighted @ weighted.mT, out=cov[at])
        start += len(Z)
    return torch.cat(means), covs


def tuned_gp_condition(ctx: Context, subset: Tensor, factors: list[float], valid: tuple[Tensor, Tensor],
                       n_samples: int, seed: int, per_class: bool = False) -> GPConditioning:
    """The GP on a subset of M of the N training points with prior precision ``δ · N/M · factor``, the factor
    chosen by validation NLL (notes-004 §2.4, the reference's subset GP with factors logspace(−1, 3, 13)), every
    factor's validation latent from one eigendecomposition (:func:`_latents_at_scales`); the chosen factor's
    conditioning is :func:`gp_condition`'s."""
    X_valid, y_valid = valid
    if not len(X_valid):
        raise BnnpredError("predictive.gp_prior_factors picks a factor by validation NLL; the dataset has no "
                           "validation split")
    base = len(ctx.X_train) / len(subset)
    feats, L, K = _training_kernel(ctx, subset, per_class)
    mean, covs = _latents_at_scales(ctx, X_valid, feats, L, K, [base * factor for factor in factors], per_class)
    nlls = []
    for cov in covs:
        generator = torch.Generator(device=ctx.theta.device).manual_seed(seed)
        nlls.append(metrics.nll(_latent_predictive(ctx.likelihood, mean, cov, n_samples, generator), y_valid))
    best = min(range(len(factors)), key=nlls.__getitem__)  # the first of equal NLLs, as before
    log.info("gp predictive: prior precision δ·N/M·%g chosen by validation NLL %.4f", factors[best], nlls[best])
    return _conditioned(feats, L, K, base * factors[best], per_class)


def predictor(
    kind: PredictiveKind, ctx: Context, *, n_samples: int, seed: int, gp_subset_size: int | None,
    gp_subset_how: GPSubset, gp_prior_factors: list[float] | None = None, gp_per_class: bool = False,
    valid: tuple[Tensor, Tensor] | None = None,
) -> Callable[[Tensor], Prediction]:
    """A function ``X -> Prediction`` for one predictive; each call reuses the same random stream start."""
    device = ctx.theta.device

    def gen() -> torch.Generator:
        return torch.Generator(device=device).manual_seed(seed)

    if kind is PredictiveKind.map:
        return lambda X: map_predictive(ctx, X)
    if kind is PredictiveKind.nn:
        return lambda X: nn_predictive(ctx, X, n_samples, gen())
    if kind is PredictiveKind.glm:
        return lambda X: glm_predictive(ctx, X, n_samples, gen())
    if kind is PredictiveKind.closed:
        return lambda X: closed_predictive(ctx, X)
    if kind is PredictiveKind.bridge:
        return lambda X: bridge_predictive(ctx, X)
    ctx = ctx.within_subset()  # a last-layer posterior's GP view has the last layer's kernel
    subset = gp_subset(ctx, gp_subset_size, gp_subset_how, torch.Generator().manual_seed(seed))
    check_gp_memory(ctx.model, ctx.theta, ctx.X_train[:1], len(subset),
                    0 if gp_prior_factors is None or valid is None else len(valid[0]))

    @functools.cache
    def conditioned() -> GPConditioning:  # at the first prediction: a run whose predictions are kept skips it
        return (gp_condition(ctx, subset, per_class=gp_per_class) if gp_prior_factors is None
                else tuned_gp_condition(ctx, subset, gp_prior_factors, valid, n_samples, seed, gp_per_class))

    return lambda X: gp_predictive(ctx, X, n_samples, gen(), conditioned())
