"""notes-004 checklist items 1-3 (the GLM predictive: linearisation, curvature, weight space = function space),
measured on tiny seeded float64 classification problems that train nothing.

Inputs ``x ~ N(0, I₂)`` and uniformly random labels from a local generator; MLPs with tanh hidden layers of 5 units
(:func:`~bnnpred.reproduce.identity_checks.shared.seeded_mlp`) at their seeded initialisation ``θ*`` (every
identity here holds at any ``θ*``), prior ``N(0, δ⁻¹ I)`` with δ = 0.7. The library's Jacobians, GGN (full, diagonal,
Kronecker), Laplace-GGN posteriors and glm / bnn / gp predictives are compared with central finite differences,
``torch.func`` Jacobians and Hessians of ``torch.distributions`` log-likelihoods, dense Kronecker products and
inverses, and Monte Carlo standard errors.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor

from bnnpred.curvature.ggn import Structure, curvature
from bnnpred.curvature.jacobians import stacked_jacobians
from bnnpred.curvature.kron import KronBlock, kron_ggn
from bnnpred.inference import Fit, Problem
from bnnpred.posteriors import KronPosterior
from bnnpred.predictive import (
    Context,
    glm_latent,
    glm_predictive,
    glm_samples,
    gp_condition,
    gp_predictive,
    nn_samples,
)
from bnnpred.reproduce.claims import Claim, Compare, claim, every, item, standardised
from bnnpred.reproduce.identity_checks import max_abs_error, max_relative_difference, relative_error
from bnnpred.reproduce.identity_checks.shared import (
    closed_form_lambda,
    ggn_and_hessian,
    gp_covariance,
    laplace_ggn,
    reference_jacobians,
    seeded_mlp,
    table_2_1,
)

DTYPE = torch.float64
DELTA = 0.7
KINDS = {"logistic": "Bernoulli", "softmax": "categorical K=3"}  # the Table 2.1 likelihood of each kind
ROUNDING = 1e-10  # float64 rounding allowed where the notes give no tolerance (an identity, exact in reals)
N_KRON_SAMPLES = 20000
N_MC = 20000  # latent draws of each of the gp and glm predictives


@dataclass(frozen=True)
class Tiny:
    """A tiny seeded classification problem at ``θ* = problem.theta0`` and its test inputs ``[T, 2]``."""

    problem: Problem
    X_test: Tensor

    @property
    def theta(self) -> Tensor:
        return self.problem.theta0

    def context(self, fit: Fit | None = None) -> Context:
        """The predictive context of ``fit``'s posterior (none: a point estimate at ``θ*``)."""
        p = self.problem
        return Context(p.model, p.likelihood, self.theta, None if fit is None else fit.posterior,
                       p.prior_precision, p.X)


def tiny(kind: str, depth: int, n: int, seed: int) -> Tiny:
    """``n`` training and 7 test inputs ``~ N(0, I₂)``, random labels, an MLP with ``depth`` tanh layers of 5 units
    (0: logistic or softmax regression) and the likelihood of ``kind`` (a key of ``KINDS``)."""
    case = table_2_1()[KINDS[kind]]
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(n + 7, 2, generator=gen, dtype=DTYPE)
    y = torch.randint(0, max(2, case.outputs), (n,), generator=gen)
    model = seeded_mlp(2, case.outputs, depth, 5, seed)
    theta = model.theta()
    problem = Problem(model=model, likelihood=case.likelihood, X=X[:n], y=y,
                      prior_precision=torch.full_like(theta, DELTA), theta0=theta, generator=gen)
    return Tiny(problem, X[n:])


def laplace(t: Tiny) -> Fit:
    """The library's full Laplace-GGN at ``θ*`` (notes-004 eq. 12)."""
    return laplace_ggn(t.problem, t.theta)


def reference_ggn(t: Tiny) -> Tensor:
    """``Σ_n J_nᵀ Λ_n J_n`` ``[P, P]`` from autograd Jacobians and the closed-form Λ, contracted as ``(J_nᵀΛ_n)J_n``
    (not :func:`~bnnpred.reproduce.identity_checks.shared.dense_ggn`'s ``J_nᵀ(Λ_nJ_n)``: the two differ in the last
    bits, and items 2a, 2c and 3a measure float64 rounding against this one)."""
    p = t.problem
    f, J = reference_jacobians(p.model, t.theta, p.X)
    return torch.einsum("ncp,ncd,ndq->pq", J, closed_form_lambda(p.likelihood, f), J)


# ------------------------------------------------------------------------------------------ item 1


def linearisation_at_shifted_theta(t: Tiny, scale: float = 0.1, seed: int = 7) -> tuple[Tensor, Tensor]:
    """notes-004 eq. 10 at ``θ = θ* + scale·ε`` (``ε ~ N(0, I)``): the library's ``f_lin(x, θ)`` (:func:`glm_samples`)
    and ``f(x, θ*) + J(θ − θ*)`` with the Jacobian by ``jacrev``, both ``[T, C]``."""
    theta = t.theta + scale * torch.randn(len(t.theta), generator=torch.Generator().manual_seed(seed), dtype=DTYPE)
    f, J = reference_jacobians(t.problem.model, t.theta, t.X_test)
    return glm_samples(t.context(), t.X_test, theta.unsqueeze(0))[0], f + J @ (theta - t.theta)


def linear_model_jacobians(t: Tiny, X: Tensor) -> Tensor:
    """The Jacobians ``[B, C, P]`` of a model with no hidden layer, ``f(x) = W x + b`` with ``θ = (vec_row(W), b)``,
    in closed form: ``J(x) = [I_C ⊗ xᵀ, I_C]`` (no autograd; ``f(x, θ) = J(x) θ`` exactly)."""
    C = t.problem.model(t.theta, X[:1]).shape[1]
    eye = torch.eye(C, dtype=DTYPE)
    return torch.stack([torch.cat([torch.kron(eye, x.unsqueeze(0)), eye], dim=1) for x in X])


def glm_latent_and_dense(t: Tiny) -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """notes-004 eqs. 9 and 13 for a model with no hidden layer, on the runner's glm path: :func:`glm_latent`'s
    mean ``[T, C]`` and covariance ``[T, C, C]`` under the full Laplace-GGN, and the law of the bnn predictive's
    ``f(x, θ_s) = X̃ θ_s``, ``N(X̃ θ*, X̃ Σ X̃ᵀ)`` with ``X̃ = J(x)`` and ``Σ = (δI + Σ_n X̃_nᵀ Λ_n X̃_n)⁻¹`` dense, from
    :func:`linear_model_jacobians` and the closed-form Λ."""
    p = t.problem
    mean, cov = glm_latent(t.context(laplace(t)), t.X_test)
    train, test = linear_model_jacobians(t, p.X), linear_model_jacobians(t, t.X_test)
    ggn = torch.einsum("ncp,ncd,ndq->pq", train, closed_form_lambda(p.likelihood, train @ t.theta), train)
    sigma = torch.linalg.inv(torch.diag(p.prior_precision) + ggn)
    return (mean, cov), (test @ t.theta, test @ sigma @ test.transpose(1, 2))


def jacobians_and_differences(t: Tiny, eps: float = 1e-6) -> tuple[Tensor, Tensor]:
    """The library's Jacobians of the test inputs and central finite differences ``(f(θ + εe_p) − f(θ − εe_p)) / 2ε``
    over every parameter, both ``[T, C, P]``."""
    model, theta = t.problem.model, t.theta
    _, J = stacked_jacobians(model, theta, t.X_test)
    steps = eps * torch.eye(len(theta), dtype=DTYPE)
    with torch.no_grad():
        columns = [(model(theta + e, t.X_test) - model(theta - e, t.X_test)) / (2 * eps) for e in steps]
    return J, torch.stack(columns, dim=-1)


def glm_and_bnn_samples(t: Tiny, n_samples: int = 100) -> tuple[Tensor, Tensor]:
    """notes-004 eqs. 9 and 13 on the same draws ``θ_s`` of the full Laplace-GGN: the glm predictive's
    ``f_lin(x, θ_s)`` and the bnn predictive's ``f(x, θ_s)``, both ``[S, T, C]``."""
    fit = laplace(t)
    thetas = fit.posterior.sample(n_samples, torch.Generator().manual_seed(1))
    ctx = t.context(fit)
    return glm_samples(ctx, t.X_test, thetas), nn_samples(ctx, t.X_test, thetas)


def linearisation_claims(shifted: tuple[Tensor, Tensor], jacobians: tuple[Tensor, Tensor],
                         samples: dict[str, tuple[Tensor, Tensor]],
                         latents: dict[str, tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]],
                         hessians: dict[str, tuple[Tensor, Tensor]]) -> list[Claim]:
    """Item 1 from :func:`linearisation_at_shifted_theta`, :func:`jacobians_and_differences`, and per model without
    a hidden layer :func:`glm_and_bnn_samples`, :func:`glm_latent_and_dense` and the (library −GGN, autograd Hessian
    of the log-likelihood) pair of :func:`~bnnpred.reproduce.identity_checks.shared.ggn_and_hessian`."""
    f_lin, reference = shifted
    return [
        claim(item(4, 1, "a"), Compare("max |f_lin(x, θ) − (f(x, θ*) + J(θ − θ*))| / max |f(x, θ*) + J(θ − θ*)| at "
                                       "θ = θ* + 0.1 ε, f_lin by glm_samples, J by jacrev, 2x5 tanh, 3 classes", "≤",
                                       ROUNDING),
              max_abs_error(f_lin, reference) / float(reference.abs().max()),
              note="eq. 10 away from θ*: at θ = θ* the library's f + J·0 is f exactly in floating point, which shows "
                   "nothing; float64 rounding"),
        claim(item(4, 1, "b"), Compare("‖J (library) − central differences (ε = 1e-6)‖_F / ‖J‖_F, 2x5 tanh, "
                                       f"3 classes, all P = {jacobians[0].shape[-1]} parameters", "≤", 1e-4),
              relative_error(*jacobians)),
        every(item(4, 1, "c"), Compare("max |f_lin(x, θ_s) (glm_samples) − f(x, θ_s)| / max |f(x, θ_s)| over 100 "
                                       "shared draws, no hidden layer", "≤", ROUNDING),
              {k: max_abs_error(glm, bnn) / float(bnn.abs().max()) for k, (glm, bnn) in samples.items()},
              over="model", note="the notes give no tolerance: float64 rounding; glm_samples serves the figures"),
        every(item(4, 1, "c"), Compare("max of ‖mean − X̃θ*‖ / ‖X̃θ*‖ and ‖cov − X̃ΣX̃ᵀ‖_F / ‖X̃ΣX̃ᵀ‖_F, glm_latent (the "
                                       "runner's glm predictive) vs the bnn predictive's law, dense closed-form X̃ "
                                       "and Σ, no hidden layer", "≤", ROUNDING),
              {k: max(relative_error(mean, ref_mean), relative_error(cov, ref_cov))
               for k, ((mean, cov), (ref_mean, ref_cov)) in latents.items()},
              over="model", note="the notes give no tolerance: float64 rounding"),
        every(item(4, 1, "d"), Compare("‖GGN − exact NLL Hessian‖_F / ‖Hessian‖_F, no hidden layer", "≤", ROUNDING),
              {k: relative_error(*pair) for k, pair in hessians.items()}, over="model",
              note="the notes give no tolerance: float64 rounding"),
    ]


def item1() -> list[Claim]:
    """notes-004 item 1: linearisation unit checks (eqs. 9, 10, 13; GGN = Hessian without hidden layers)."""
    deep = tiny("softmax", depth=2, n=12, seed=0)
    linear = {k: tiny(k, depth=0, n=12, seed=1) for k in KINDS}
    hessians = {k: ggn_and_hessian(t.problem.model, table_2_1()[KINDS[k]], t.theta, t.problem.X, t.problem.y)
                for k, t in linear.items()}
    return linearisation_claims(linearisation_at_shifted_theta(deep), jacobians_and_differences(deep),
                                {k: glm_and_bnn_samples(t) for k, t in linear.items()},
                                {k: glm_latent_and_dense(t) for k, t in linear.items()}, hessians)


# ------------------------------------------------------------------------------------------ item 2


def ggn_paths(t: Tiny) -> tuple[Tensor, Tensor, Tensor]:
    """notes-004 eq. 7: the library's full GGN ``[P, P]``, its diagonal path ``[P]`` and the autograd reference
    ``Σ JᵀΛJ`` with the closed-form Λ ``[P, P]``."""
    p = t.problem
    args = (p.model, p.likelihood, t.theta, p.X, p.y)
    full, _ = curvature(*args)
    diag, _ = curvature(*args, structure=Structure.diag)
    return full, diag, reference_ggn(t)


def kron_blocks(t: Tiny) -> list[KronBlock]:
    """The library's Kronecker factors of the GGN (KFLR, notes-004 eq. 8) on ``t``'s training set."""
    p = t.problem
    blocks, _ = kron_ggn(p.model, p.likelihood, t.theta, p.X, p.y)
    return blocks


def one_example_blocks(t: Tiny) -> dict[str, tuple[Tensor, Tensor]]:
    """On ``t``'s first example alone: each weight block's ``B ⊗ A`` and the same block of the exact GGN
    (autograd), keyed by the layer's θ range."""
    one = Tiny(dataclasses.replace(t.problem, X=t.problem.X[:1], y=t.problem.y[:1]), t.X_test)
    exact = reference_ggn(one)
    return {f"θ[{b.start}:{b.stop}]": (torch.kron(b.B, b.A), exact[b.start : b.stop, b.start : b.stop])
            for b in kron_blocks(one) if b.dense is None}


def dense_kron_covariance(blocks: list[KronBlock], delta: float, dampen: bool) -> Tensor:
    """The Kronecker posterior's covariance ``[P, P]`` by dense algebra on the raw factors: the inverse of the block
    diagonal of ``B ⊗ A + δI`` (exact prior) or ``(B + √δ I) ⊗ (A + √δ I)`` (dampened) per weight and
    ``D + δI`` per bias."""
    parts = []
    for b in blocks:
        if b.dense is not None:
            parts.append(b.dense + delta * torch.eye(len(b.dense), dtype=DTYPE))
        elif dampen:
            root = delta**0.5
            parts.append(torch.kron(b.B + root * torch.eye(len(b.B), dtype=DTYPE),
                                    b.A + root * torch.eye(len(b.A), dtype=DTYPE)))
        else:
            parts.append(torch.kron(b.B, b.A) + delta * torch.eye(b.stop - b.start, dtype=DTYPE))
    return torch.linalg.inv(torch.block_diag(*parts))


def sample_covariance(posterior: KronPosterior, seed: int) -> Tensor:
    """The empirical covariance ``[P, P]`` of ``N_KRON_SAMPLES`` draws of the library's sampler."""
    draws = posterior.sample(N_KRON_SAMPLES, torch.Generator().manual_seed(seed))
    return torch.cov((draws - posterior.mean).T)


def kron_posteriors(t: Tiny) -> dict[str, KronPosterior]:
    """The library's exact-prior and dampened Kronecker Laplace posteriors at ``θ*``."""
    blocks = kron_blocks(t)
    return {name: KronPosterior(t.theta, blocks, t.problem.prior_precision, dampen)
            for name, dampen in (("exact", False), ("dampened", True))}


def weight_variances(posteriors: dict[str, KronPosterior]) -> tuple[Tensor, Tensor]:
    """The exact-prior and dampened variances of the weight entries (the Kronecker blocks, not the biases): the
    library's :meth:`KronPosterior.marginal_variance` of ``posteriors`` (keys ``exact``, ``dampened``)."""
    weights = torch.cat([torch.arange(b.start, b.stop) for b in posteriors["exact"].blocks if b.dense is None])
    return posteriors["exact"].marginal_variance()[weights], posteriors["dampened"].marginal_variance()[weights]


def curvature_claims(ggns: dict[str, tuple[Tensor, Tensor, Tensor]], blocks: dict[str, tuple[Tensor, Tensor]],
                     samples: dict[str, tuple[Tensor, Tensor]], damped_cov: tuple[Tensor, Tensor],
                     variances: tuple[Tensor, Tensor]) -> list[Claim]:
    """Item 2 from :func:`ggn_paths` per likelihood, :func:`one_example_blocks`, the (sample covariance, dense
    covariance) pairs per prior treatment, the dampened posterior's (covariance, dense covariance) and the exact-prior
    and dampened variances of the weight entries (:func:`weight_variances`)."""
    exact_var, damped_var = variances
    return [
        every(item(4, 2, "a"), Compare("‖full GGN (library) − Σ JᵀΛJ (autograd J, Λ = diag(p) − ppᵀ or p(1 − p))‖_F "
                                       "/ ‖Σ JᵀΛJ‖_F, 2x5 tanh", "≤", ROUNDING),
              {k: relative_error(full, ref) for k, (full, _, ref) in ggns.items()}, over="likelihood",
              note="the notes give no tolerance: float64 rounding"),
        every(item(4, 2, "b"), Compare("‖diagonal-GGN path − diag(full GGN)‖ / ‖diag(full GGN)‖", "≤", ROUNDING),
              {k: relative_error(diag, full.diagonal()) for k, (full, diag, _) in ggns.items()}, over="likelihood",
              note="the notes give no tolerance: float64 rounding"),
        every(item(4, 2, "c"), Compare("‖B ⊗ A − exact GGN block‖_F / ‖block‖_F, one datapoint, 1x5 tanh, "
                                       "3 classes", "≤", ROUNDING),
              {k: relative_error(*pair) for k, pair in blocks.items()}, over="dense layer",
              note="B ⊗ A is the notes' Q ⊗ W in θ's row-major order; float64 rounding"),
        claim(item(4, 2, "d"), Compare(f"‖empirical covariance of {N_KRON_SAMPLES} exact-prior samples − "
                                       "(B ⊗ A + δI)⁻¹‖_F / ‖(B ⊗ A + δI)⁻¹‖_F", "≤", 0.05),
              relative_error(*samples["exact"])),
        claim(item(4, 2, "e"), Compare("‖dampened posterior's covariance (library solves) − ((B + √δI) ⊗ (A + √δI))⁻¹"
                                       "‖_F / ‖((B + √δI) ⊗ (A + √δI))⁻¹‖_F", "≤", ROUNDING),
              relative_error(*damped_cov), note="the notes give no tolerance: float64 rounding"),
        claim(item(4, 2, "e"), Compare(f"‖empirical covariance of {N_KRON_SAMPLES} dampened samples − "
                                       "((B + √δI) ⊗ (A + √δI))⁻¹‖_F / ‖·‖_F", "≤", 0.05),
              relative_error(*samples["dampened"]), note="the tolerance of the exact-prior sampler's check"),
        claim(item(4, 2, "f"), Compare("min over weight entries of (exact-prior variance − dampened variance) / "
                                       "dampened variance, the library's marginal variances", "≥", -ROUNDING),
              float(((exact_var - damped_var) / damped_var).min()),
              note="weights only: the bias blocks are the same in both posteriors"),
    ]


def item2() -> list[Claim]:
    """notes-004 item 2: curvature checks (eqs. 7, 8 and the exact-prior / dampened Kronecker posteriors)."""
    ggns = {k: ggn_paths(tiny(k, depth=2, n=12, seed=2)) for k in KINDS}
    blocks = one_example_blocks(tiny("softmax", depth=1, n=1, seed=3))
    t = tiny("softmax", depth=1, n=30, seed=4)
    posteriors = kron_posteriors(t)
    dense = {name: dense_kron_covariance(posteriors[name].blocks, DELTA, post.dampen)
             for name, post in posteriors.items()}
    samples = {name: (sample_covariance(post, seed), dense[name])
               for seed, (name, post) in enumerate(posteriors.items())}
    damped = posteriors["dampened"]
    columns = torch.stack([damped.cov_mv(e) for e in torch.eye(len(t.theta), dtype=DTYPE)], dim=1)
    variances = weight_variances(posteriors)
    return curvature_claims(ggns, blocks, samples, (columns, dense["dampened"]), variances)


# ------------------------------------------------------------------------------------------ item 3


def gp_and_weight_space(t: Tiny, *, outputs: bool = False) -> tuple[Tensor, Tensor]:
    """notes-004 eq. 15 with M = N: the library's gp latent variance ``σ*²`` ``[T]`` and ``J* Σ_ggn J*ᵀ`` ``[T]`` with
    ``Σ_ggn = (δI + Σ_n J_nᵀ Λ_n J_n)⁻¹`` dense from autograd Jacobians; ``outputs``: the covariances of all
    outputs, both ``[T, C, C]``."""
    p = t.problem
    cov = gp_covariance(t.context(laplace(t)), t.X_test)
    _, J = reference_jacobians(p.model, t.theta, t.X_test)
    sigma = torch.linalg.inv(torch.diag(p.prior_precision) + reference_ggn(t))
    if outputs:
        return cov, torch.einsum("tcp,pq,tdq->tcd", J, sigma, J)
    return cov[:, 0, 0], torch.einsum("tp,pq,tq->t", J[:, 0], sigma, J[:, 0])


def gp_and_glm_probabilities(t: Tiny) -> tuple[Tensor, Tensor]:
    """notes-004 eqs. 13 and 16 with M = N: the library's gp and glm predictive ``p(y = 1 | x)`` ``[T]`` from
    ``N_MC`` latent draws each (independent seeds), and the Monte Carlo standard error of their difference ``[T]``
    from the draws' own variances (a binary prediction's epistemic term is ``Var_s p_s``)."""
    fit = laplace(t)
    ctx = t.context(fit)
    gp = gp_predictive(ctx, t.X_test, N_MC, torch.Generator().manual_seed(5),
                       gp_condition(ctx, torch.arange(len(t.problem.X))))
    glm = glm_predictive(ctx, t.X_test, N_MC, torch.Generator().manual_seed(6))
    se = ((gp.epistemic + glm.epistemic) / N_MC).sqrt()
    return gp.probs[:, 1] - glm.probs[:, 1], se


def function_space_claims(variances: tuple[Tensor, Tensor], difference: tuple[Tensor, Tensor]) -> list[Claim]:
    """Item 3 from :func:`gp_and_weight_space` and :func:`gp_and_glm_probabilities`."""
    gp, weight = variances
    gaps, se = difference
    z = max(abs(standardised(float(d), float(s))) for d, s in zip(gaps, se, strict=True))
    return [
        claim(item(4, 3, "a"), Compare("max over test inputs of |σ*² (gp, M = N) − J*Σ_ggnJ*ᵀ| / J*Σ_ggnJ*ᵀ, 1x5 "
                                       "tanh, binary, N = 20", "≤", 1e-4),
              max_relative_difference(gp, weight)),
        claim(item(4, 3, "b"), Compare(f"max over test inputs of |p_gp − p_glm| / (its Monte Carlo s.e.), "
                                       f"{N_MC} draws each", "≤", 4.0), z,
              note="7 test inputs: a 4 s.e. bound fails by chance with probability < 0.001"),
    ]


def item3() -> list[Claim]:
    """notes-004 item 3: weight space = function space with all N points."""
    t = tiny("logistic", depth=1, n=20, seed=5)
    return function_space_claims(gp_and_weight_space(t), gp_and_glm_probabilities(t))


def claims() -> list[Claim]:
    """notes-004 items 1-3, in checklist order."""
    return [*item1(), *item2(), *item3()]
