"""notes-003 checklist items 1-4 (the thesis's GGN chapter), measured on two small seeded float64 problems.

- ``two moons``: 60 training points of :func:`~bnnpred.data.toy.load_two_moons` (noise 0.3), Bernoulli likelihood.
- ``1-D regression``: 30 points of the cubic toy (:func:`~bnnpred.data.toy.load_cubic`, ``x ~ U[-1.5, 1.5]``,
  ``y = x³ + N(0, 0.09)``), Gaussian likelihood with σ² = 0.09; the identities concern any Gaussian-likelihood
  regression.
- ``Snelson`` (item 2's second problem, as the notes name it): the real Snelson points as ``experiment=
  notes003_fig5_8`` loads them (the gap 1.5 < x < 3 left out of training), σ = 0.286, read from the data root
  (``BNNPRED_DATA_DIR``); without it item 2's GLM = GP row has no number.

Both use a 2x10 tanh MLP (P = 151 and 141, item 1's "P ≤ 300") with δ = 1, trained to a stationary MAP by the
library's :func:`~bnnpred.inference.map.train_map` (its Newton-CG finish to ‖∇ log joint‖ ≤ 1e-9). The library's
GGN, Laplace-GGN posterior, GLM / GP predictives, evidence and VOGGN are compared with references built from
autograd alone: per-example Jacobians by ``torch.func.jacrev``, Hessians by ``torch.func.hessian``, likelihoods from
``torch.distributions``, dense inverses and ``MultivariateNormal`` densities.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import torch
from torch import Tensor

from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.ggn import curvature
from bnnpred.data import load_dataset
from bnnpred.data.toy import CubicConfig, SnelsonConfig, TwoMoonsConfig, load_cubic, load_two_moons
from bnnpred.errors import BnnpredError
from bnnpred.inference import Problem
from bnnpred.inference.map import MapConfig, train_map
from bnnpred.inference.map_finish import Finish
from bnnpred.inference.voggn import VOGGNConfig, fit_voggn
from bnnpred.likelihoods import Bernoulli, Gaussian
from bnnpred.predictive import Context
from bnnpred.reproduce.claims import Claim, Compare, Verdict, claim, departs, every, item
from bnnpred.reproduce.identity_checks import max_relative_difference, relative_error
from bnnpred.reproduce.identity_checks.shared import (
    closed_form_lambda,
    dense_ggn,
    experiment_dataset_config,
    gaussian_case,
    gaussian_evidence,
    glm_and_gp_covariances,
    laplace_ggn,
    reference_jacobians,
    reference_loglik,
    seeded_mlp,
    table_2_1,
)

DTYPE = torch.float64
DELTA = 1.0  # prior precision δ of both problems
SIGMA2 = 0.09  # the regression's noise variance
MAP_TOL = 1e-9  # ‖∇ log joint‖ at the MAP (sum form)
EPS = torch.finfo(DTYPE).eps  # float64 machine epsilon: a backward-stable P x P solve is off by ≲ EPS·cond relative
SNELSON_SIGMA2 = 0.286**2  # notes-003 E5, experiment=notes003_fig5_8's likelihood


@dataclass(frozen=True)
class Trained:
    """A problem at its MAP: ``problem`` (its ``theta0`` the MAP ``w*`` ``[P]``), the test inputs ``[T, D]`` and
    the MAP's gradient norm."""

    problem: Problem
    X_test: Tensor
    grad_norm: float

    @property
    def theta(self) -> Tensor:
        return self.problem.theta0


def problem_of(model: FlatModel, likelihood: Bernoulli | Gaussian, X: Tensor, y: Tensor, delta: float,
               seed: int) -> Problem:
    """A training problem with the prior ``N(0, δ⁻¹ I)``, started at the network's initialisation."""
    theta = model.theta()
    return Problem(model=model, likelihood=likelihood, X=X, y=y, prior_precision=torch.full_like(theta, delta),
                   theta0=theta, generator=torch.Generator().manual_seed(seed))


def at_map(problem: Problem) -> tuple[Problem, float]:
    """``problem`` moved to its MAP and the MAP's gradient norm: the full-batch Newton-CG finish from the
    initialisation (no Adam steps) to ``MAP_TOL``, at most 300 iterations (about 20 and 50 here)."""
    cfg = MapConfig(steps=0, finish=Finish.newton, finish_tol=MAP_TOL, finish_iterations=300)
    fit = train_map(problem, cfg)
    return dataclasses.replace(problem, theta0=fit.theta), fit.info["grad_norm"]


@functools.cache
def two_moons() -> Trained:
    """Two moons (60 training, 40 test inputs), Bernoulli, 2x10 tanh (P = 151), at its MAP."""
    data = load_two_moons(TwoMoonsConfig(seed=0, n_train=60, n_valid=1, n_test=40))
    problem = problem_of(seeded_mlp(2, 1, 2, 10, seed=0), Bernoulli(), data.X_train, data.y_train, DELTA, seed=0)
    moved, norm = at_map(problem)
    return Trained(moved, data.X_test, norm)


@functools.cache
def regression() -> Trained:
    """The 1-D cubic toy (30 training inputs, 41 test inputs on [-2.5, 2.5]), Gaussian σ² = 0.09, 2x10 tanh
    (P = 141), at its MAP."""
    data = load_cubic(CubicConfig(seed=0, n_train=30, n_test=41, x_max=1.5, test_max=2.5, noise_var=SIGMA2))
    problem = problem_of(seeded_mlp(1, 1, 2, 10, seed=1), Gaussian(SIGMA2), data.X_train, data.y_train, DELTA,
                         seed=1)
    moved, norm = at_map(problem)
    return Trained(moved, data.X_test, norm)


@functools.cache
def snelson() -> Trained | str:
    """Snelson (``experiment=notes003_fig5_8``'s data: the real points, the gap left out of training), Gaussian
    σ² = 0.286², DNN2GP's 1x32 sigmoid (P = 97, ``notes003_fig5_8_1x32``'s network), at its MAP; test inputs 41
    points on [-1, 7], across the gap; or why there is none (no Snelson file in the data root)."""
    try:
        data = load_dataset(experiment_dataset_config("notes003_fig5_8", SnelsonConfig))
    except BnnpredError as e:
        return f"no data: {e}"
    X = data.X_train.to(DTYPE)
    problem = problem_of(seeded_mlp(1, 1, 1, 32, seed=2, activation="sigmoid"), Gaussian(SNELSON_SIGMA2), X,
                         data.y_train.to(DTYPE), DELTA, seed=2)
    moved, norm = at_map(problem)
    return Trained(moved, torch.linspace(-1.0, 7.0, 41, dtype=DTYPE)[:, None], norm)


def problems() -> dict[str, Trained]:
    """Both problems at their MAPs, by name."""
    return {"two moons": two_moons(), "1-D regression": regression()}


# ------------------------------------------------------------------------------------------ references


def reference_log_lik(likelihood: Bernoulli | Gaussian, f: Tensor, y: Tensor) -> Tensor:
    """``Σ_n log p(y_n | f_n)`` ``[]`` from ``torch.distributions`` (``f`` ``[N, 1]``): the Table 2.1 law of the
    likelihood (:func:`~bnnpred.reproduce.identity_checks.shared.reference_loglik`)."""
    case = gaussian_case(likelihood.sigma2) if isinstance(likelihood, Gaussian) else table_2_1()["Bernoulli"]
    return reference_loglik(case, f, y).sum()


# ------------------------------------------------------------------------------------------ item 1


def ggn_and_hessians(trained: Trained) -> dict[str, Tensor]:
    """notes-003 eqs. 2.4.3-2.4.4 at ``w*``: the library's GGN, the autograd Hessian of the linearised model's
    negative log-likelihood, the autograd Hessian of the network's, and the residual term ``−Σ_n Hₙᵀ R_n``
    (``∇²_w Σ_nc R_nc f_c(x_n; w)`` with ``R`` held at ``w*``), all ``[P, P]``."""
    p, w = trained.problem, trained.theta
    ggn, _ = curvature(p.model, p.likelihood, w, p.X, p.y)
    f, J = reference_jacobians(p.model, w, p.X)
    linearised = torch.func.hessian(lambda t: -reference_log_lik(p.likelihood, f + J @ (t - w), p.y))(w)
    network = torch.func.hessian(lambda t: -reference_log_lik(p.likelihood, p.model(t, p.X), p.y))(w)
    R = torch.func.grad(lambda out: reference_log_lik(p.likelihood, out, p.y))(f)  # ∂ log p / ∂f [N, 1]
    residual = -torch.func.hessian(lambda t: (R * p.model(t, p.X)).sum())(w)
    return {"ggn": ggn, "linearised": linearised, "network": network, "residual": residual}


def ggn_claims(measured: dict[str, dict[str, Tensor]]) -> list[Claim]:
    """Item 1 from :func:`ggn_and_hessians` of each problem."""
    ggn = {k: relative_error(m["ggn"], m["linearised"]) for k, m in measured.items()}
    rest = {k: relative_error(m["network"] - m["ggn"], m["residual"]) for k, m in measured.items()}
    return [
        every(item(3, 1), Compare("‖GGN (per-example Jacobians) − autograd Hessian of the linearised-model NLL‖_F "
                                  "/ ‖Hessian‖_F at w*, 2x10 tanh", "<", 1e-8), ggn, over="problem"),
        every(item(3, 1), Compare("‖(network NLL Hessian − GGN) − residual term (−HᵀR)‖_F / ‖HᵀR‖_F", "<", 1e-8),
              rest, over="problem"),
    ]


def item1() -> list[Claim]:
    """notes-003 item 1: GGN correctness (eq. 2.4.4) and Hessian − GGN = the residual term (eq. 2.4.3)."""
    return ggn_claims({name: ggn_and_hessians(t) for name, t in problems().items()})


# ------------------------------------------------------------------------------------------ item 2


def laplace_context(trained: Trained) -> Context:
    """The library's full Laplace-GGN posterior at ``w*`` (notes-003 eq. 2.4.5) as a predictive context."""
    p = trained.problem
    fit = laplace_ggn(p, trained.theta)
    return Context(p.model, p.likelihood, fit.theta, fit.posterior, p.prior_precision, p.X)


def glm_and_gp_variances(trained: Trained) -> tuple[Tensor, Tensor]:
    """notes-003 Thm 3.1.1 / 3.2.1 on the test inputs: the GLM predictive's ``J*ΣJ*ᵀ`` (weight space, P x P) and the
    GP form ``K** − K*X (K_XX + L⁻¹)⁻¹ K_X*`` on all N training points (function space), both ``[T]``
    (:func:`~bnnpred.reproduce.identity_checks.shared.glm_and_gp_covariances`)."""
    weight, function = glm_and_gp_covariances(laplace_context(trained), trained.X_test)
    return weight[:, 0, 0], function[:, 0, 0]


def blr_system(trained: Trained) -> tuple[Tensor, Tensor]:
    """notes-003 eqs. 3.3.1-3.3.2: the BLR posterior precision ``[P, P]`` and right-hand side ``[P]`` (its mean is
    ``precision⁻¹ rhs``) with features ``J_n``, pseudo-targets ``ỹ_n = J_n w* + Λ_n⁻¹ R_n`` and noise ``Λ_n⁻¹``,
    dense, from autograd Jacobians and the residual ``R_n = ∂ log p(y_n | f_n) / ∂f_n`` by autograd
    (``y_n − g⁻¹(f_n)`` for the Bernoulli, ``(y_n − f_n)/σ²`` for the Gaussian)."""
    p, w = trained.problem, trained.theta
    f, J = reference_jacobians(p.model, w, p.X)
    lam = closed_form_lambda(p.likelihood, f)
    precision = torch.diag(p.prior_precision) + dense_ggn(J, lam)
    lam, J = lam[:, 0, 0], J[:, 0]
    residual = torch.func.grad(lambda out: reference_log_lik(p.likelihood, out, p.y))(f)[:, 0]
    targets = J @ w + residual / lam
    return precision, J.T @ (lam * targets)


def log_joint_grad_norm(trained: Trained) -> float:
    """‖∇_w (Σ log p(y | f(x; w)) − ½ δ‖w‖²)‖ at ``w*`` by autograd on ``torch.distributions``."""
    p = trained.problem

    def log_joint(t: Tensor) -> Tensor:
        return reference_log_lik(p.likelihood, p.model(t, p.X), p.y) - 0.5 * (p.prior_precision * t.square()).sum()

    return float(torch.func.grad(log_joint)(trained.theta).norm())


def equivalence_claims(variances: dict[str, tuple[Tensor, Tensor]], means: dict[str, tuple[Tensor, Tensor]],
                       grad_norms: dict[str, float], conditions: dict[str, float],
                       absent: tuple[str, ...] = ()) -> list[Claim]:
    """Item 2 from the (GLM, GP) variances, the (BLR mean, ``w*``) pairs, the MAP gradient norms and the BLR
    precision's condition numbers per problem; the problems ``absent`` (their data not here) have no number."""
    differences = {k: max_relative_difference(*v) for k, v in variances.items()} | dict.fromkeys(absent, math.nan)
    shifts = {k: float((mu - w).norm()) for k, (mu, w) in means.items()}
    return [
        every(item(3, 2), Compare("max over test inputs of |J*ΣJ*ᵀ (GLM) − GP form (all N points)| / GP form", "<",
                                  1e-6), differences, over="problem"),
        every(item(3, 2), Compare("‖µ_BLR − w*‖ / ‖w*‖ (pseudo-target BLR mean at the stationary MAP)", "<", 1e-3),
              {k: shifts[k] / float(w.norm()) for k, (_, w) in means.items()}, over="problem"),
        every(item(3, 2), Compare("‖µ_BLR − w*‖", "≤", "‖∇ log joint(w*)‖ / δ + ε·cond(Σ⁻¹)·‖w*‖"),
              {k: (shifts[k], grad_norms[k] / DELTA + EPS * conditions[k] * float(w.norm()))
               for k, (_, w) in means.items()},
              over="problem", note=f"µ − w* = Σ ∇ log joint and Σ ≼ I/δ; the MAP is finished to ‖∇‖ ≤ {MAP_TOL:g}, "
              f"below which the P x P solve's rounding dominates: its float64 error bound ε·cond·‖µ‖ (ε = {EPS:.2g}; "
              "cond(Σ⁻¹) = " + ", ".join(f"{c:.3g}" for c in conditions.values()) + ")"),
    ]


def item2() -> list[Claim]:
    """notes-003 item 2: Thm 3.1.1 / 3.2.1 (GLM = GP) and the BLR mean at a converged MAP, on the two problems and
    Snelson (:func:`snelson`, where its data is)."""
    on_snelson = snelson()
    trained = problems() | ({"Snelson": on_snelson} if isinstance(on_snelson, Trained) else {})
    systems = {k: blr_system(t) for k, t in trained.items()}
    return equivalence_claims({k: glm_and_gp_variances(t) for k, t in trained.items()},
                              {k: (torch.linalg.solve(*systems[k]), t.theta) for k, t in trained.items()},
                              {k: log_joint_grad_norm(t) for k, t in trained.items()},
                              {k: float(torch.linalg.cond(precision)) for k, (precision, _) in systems.items()},
                              () if isinstance(on_snelson, Trained) else ("Snelson",))


# ------------------------------------------------------------------------------------------ item 3


def weight_and_function_evidence(trained: Trained) -> tuple[float, float]:
    """notes-003 §2.9 (Thm 3.5.1) at ``w*`` with a Gaussian likelihood: the library's Laplace-GGN evidence
    (``Σ log p − δ/2 ‖w*‖² + P/2 log δ − ½ log|GGN + δI|``) and the GP evidence ``log N(ỹ | 0, δ⁻¹JJᵀ + σ²I)``
    with ``ỹ = J w* + (y − f*)``, dense from autograd Jacobians
    (:func:`~bnnpred.reproduce.identity_checks.shared.gaussian_evidence`)."""
    p, w = trained.problem, trained.theta
    weight = laplace_ggn(p, w).log_evidence
    f, J = reference_jacobians(p.model, w, p.X)
    return float(weight), gaussian_evidence(f[:, 0], J[:, 0], w, p.y, p.likelihood.sigma2, DELTA)


def evidence_claims(weight: float, function: float, n: int) -> list[Claim]:
    """Item 3 from the two evidences of an ``n``-point problem."""
    return [claim(item(3, 3), Compare(f"|weight-space Laplace-GGN evidence − function-space GP evidence|, 1-D "
                                      f"regression (N = {n})", "<", 1e-6 * n), abs(weight - function),
                  note=f"evidences {weight:.6f} and {function:.6f}")]


def item3() -> list[Claim]:
    """notes-003 item 3: marginal-likelihood equivalence (Gaussian likelihood)."""
    trained = regression()
    return evidence_claims(*weight_and_function_evidence(trained), len(trained.problem.X))


# ------------------------------------------------------------------------------------------ item 4


def voggn_step_precision(trained: Trained) -> tuple[Tensor, Tensor]:
    """notes-003 §2.12 (eq. 4.2.1 with β = 1, S = 1): the precision ``[P, P]`` after one full-batch step of the
    library's VOGGN from ``N(w*, 10⁻³⁰ I)`` (its one draw is the mean to 1e-15) with γ = 1 (eq. 4.1.7's β weighs
    the new term, as the library's γ), and the Laplace-GGN precision ``Σ_n J_nᵀ Λ_n J_n + δI`` from autograd
    Jacobians."""
    p = dataclasses.replace(trained.problem, generator=torch.Generator().manual_seed(0))
    cfg = VOGGNConfig(gamma=1.0, n_samples=1, init_var=1e-30, iterations=1, tol=0.0, plateau_window=None)
    step = fit_voggn(p, cfg).posterior.dense_precision()
    f, J = reference_jacobians(p.model, trained.theta, p.X)
    return step, dense_ggn(J, closed_form_lambda(p.likelihood, f)) + torch.diag(p.prior_precision)


def voggn_claims(step: Tensor, laplace: Tensor) -> list[Claim]:
    """Item 4 from the one-step VOGGN precision and the Laplace-GGN precision."""
    coded = claim(item(3, 4), Compare("‖Σ⁻¹ after one VOGGN step at the MAP (β = 1, S = 1, draw = mean) − "
                                      "(Σ JᵀΛJ + δI)‖_F / ‖Σ JᵀΛJ + δI‖_F, two moons", "<", 1e-8),
                  relative_error(step, laplace))
    both = Claim(coded.item, f"{coded.text}, and the NGVI ELBO rising on average over the last 50 % of the "
                 "iterations on Snelson", Verdict.not_applicable, "no number for the ELBO (not measured)")
    return [departs(coded, both, "the ELBO's part is not measured here: a run to notes003_fig5_8_voggn's plateau "
                                 "stop takes about 3,000 iterations (15-30 s), and a shorter run is still in its "
                                 "transient, where a rising ELBO shows nothing")]


def item4() -> list[Claim]:
    """notes-003 item 4: VOGGN → Laplace-GGN."""
    return voggn_claims(*voggn_step_precision(two_moons()))


def claims() -> list[Claim]:
    """notes-003 items 1-4, in checklist order."""
    return [*item1(), *item2(), *item3(), *item4()]
