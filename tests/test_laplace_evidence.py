"""The evidence for any prior from one fit (issue 16): the Kronecker structure, per-layer δ, gradient selection
against the grid, and laplace-torch's log marginal likelihood on the same θ*."""

import copy
from dataclasses import replace

import pytest
import torch

from bnnpred import laplace_evidence
from bnnpred.curvature.ggn import Structure
from bnnpred.errors import BnnpredError
from bnnpred.inference import Fit
from bnnpred.inference.laplace_ggn import LaplaceGGNConfig, laplace_of_structure
from bnnpred.laplace_evidence import maximise_evidence
from bnnpred.prior import Prior, PriorConfig, PriorGroups, PriorScale
from tests.helpers import tiny_problem


def laplace(problem, structure: Structure, dampen: bool = False) -> Fit:
    cfg = LaplaceGGNConfig(structure=structure, dampen=dampen)
    return laplace_of_structure(problem, Fit(theta=problem.theta0, posterior=None), cfg)


@pytest.mark.parametrize("dampen", [False, True])
@pytest.mark.parametrize("kind", ["gaussian", "categorical"])
def test_the_kronecker_evidence_at_another_prior_is_a_refit_there(kind, dampen):
    """A per-tensor prior (and another σ²) given to the kept Kronecker factors = a Kronecker fit made there from
    scratch: the same posterior precision and evidence, float64, 1e-9."""
    from bnnpred.likelihoods import Gaussian
    problem, lik = tiny_problem(kind, depth=2, n=30, width=6, delta=0.7)
    fit = laplace(problem, Structure.kron, dampen)
    prior = Prior.from_config(problem.model, PriorConfig(groups=PriorGroups.tensor))
    prior = prior.with_free_log_delta(torch.linspace(-1.0, 2.0, len(prior.names), dtype=torch.float64))
    precision = prior.precision(problem.theta0)
    sigma2 = 0.37 if kind == "gaussian" else None
    again = replace(problem, prior_precision=precision, likelihood=Gaussian(0.37) if sigma2 else lik)
    refit = laplace(again, Structure.kron, dampen)
    torch.testing.assert_close(fit.evidence.posterior(precision, sigma2).dense_precision(),
                               refit.posterior.dense_precision(), rtol=1e-10, atol=1e-10)
    value = float(fit.evidence(precision, None if sigma2 is None else torch.tensor(sigma2, dtype=torch.float64)))
    assert abs(value - refit.log_evidence) < 1e-9 * abs(refit.log_evidence)


@pytest.mark.parametrize(("structure", "dampen"), [(Structure.kron, False), (Structure.kron, True),
                                                   (Structure.full, False), (Structure.diag, False)])
@pytest.mark.parametrize("kind", ["gaussian", "categorical"])
def test_the_evidence_over_a_grid_is_the_evidence_at_each_point(structure, dampen, kind, monkeypatch):
    """``at_each`` over 7 per-tensor priors (and 7 noises for the Gaussian) equals the one-point evidence at each,
    float64, 1e-12 relative: the grid's one pass is the same sum, whole and in chunks of 2 rows."""
    problem, _ = tiny_problem(kind, depth=2, n=30, width=6, delta=0.7)
    fit = laplace(problem, structure, dampen)
    prior = Prior.from_config(problem.model, PriorConfig(groups=PriorGroups.tensor))
    gen = torch.Generator().manual_seed(2)
    precisions = torch.stack([prior.with_free_log_delta(torch.randn(len(prior.names), generator=gen,
                                                                    dtype=torch.float64)).precision(problem.theta0)
                              for _ in range(7)])
    if structure is Structure.full:  # rows off the kept spectrum (per tensor) and on it (shared δ)
        precisions[::2] = torch.logspace(-1, 1, 4, dtype=torch.float64)[:, None].expand(-1, precisions.shape[1])
    sigma2 = torch.logspace(-1, 0.5, 7, dtype=torch.float64) if kind == "gaussian" else None
    grid = fit.evidence.at_each(precisions, sigma2)
    each = torch.stack([fit.evidence(p, None if sigma2 is None else sigma2[g]) for g, p in enumerate(precisions)])
    torch.testing.assert_close(grid, each, rtol=1e-12, atol=0)
    monkeypatch.setattr(laplace_evidence, "GRID_ELEMS", 2 * precisions.shape[1])
    torch.testing.assert_close(fit.evidence.at_each(precisions, sigma2), each, rtol=1e-12, atol=0)


@pytest.mark.parametrize("structure", [Structure.kron, Structure.full, Structure.diag])
def test_gradient_selection_lands_on_the_grid_optimum_of_the_same_evidence(structure):
    """Adam on log δ from δ = 1 against a grid of 2,001 δ over eight decades (spacing 0.0092 in log δ): the same
    maximiser to 0.01 in log δ, and an evidence no lower than the grid's best (1e-6 nats: the grid's own
    resolution costs more than that)."""
    problem, _ = tiny_problem("categorical", depth=1, n=40, width=6)
    fit = laplace(problem, structure)
    shared = Prior.from_config(problem.model, PriorConfig(delta=1.0))
    grid = torch.logspace(-4, 4, 2001, dtype=torch.float64)
    values = torch.stack([fit.evidence(shared.at(float(d)).precision()) for d in grid])
    chosen, _ = maximise_evidence(fit.evidence, shared, None, steps=2000, lr=0.05)
    assert abs(chosen.free_log_delta().item() - grid[values.argmax()].log().item()) < 0.01
    assert float(fit.evidence(chosen.precision())) >= float(values.max()) - 1e-6


@pytest.mark.parametrize("structure", [Structure.kron, Structure.full, Structure.diag])
def test_a_delta_per_layer_by_evidence_is_at_least_the_best_shared_delta(structure):
    """The per-layer optimum contains the shared one (all layers equal), so its evidence is ≥ the shared optimum's;
    on this network it is strictly higher and the layers' δ differ."""
    problem, _ = tiny_problem("categorical", depth=2, n=40, width=6)
    fit = laplace(problem, structure)
    shared, _ = maximise_evidence(fit.evidence, Prior.from_config(problem.model, PriorConfig()), None,
                                  steps=2000, lr=0.05)
    layer = Prior.from_config(problem.model, PriorConfig(groups=PriorGroups.layer)).at(shared.delta)
    per_layer, _ = maximise_evidence(fit.evidence, layer, None, steps=500, lr=0.1)
    best_shared, best_layer = (float(fit.evidence(p.precision())) for p in (shared, per_layer))
    assert best_layer > best_shared + 1e-3
    assert len(set(per_layer.deltas().values())) == 3


def laplace_torch_evidence(problem, structure: str) -> float:
    """laplace-torch 0.3's ``log_marginal_likelihood`` of the same network at the same θ and δ (curvlinops GGN)."""
    laplace_lib = pytest.importorskip("laplace", reason="laplace-torch is an optional extra (pip install -e "
                                      "'.[bench]'); the comparison runs where it is installed")
    from laplace.curvature import CurvlinopsGGN

    net = copy.deepcopy(problem.model.module)
    torch.nn.utils.vector_to_parameters(problem.theta0, net.parameters())
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(problem.X, problem.y), batch_size=16)
    cls = {"full": laplace_lib.FullLaplace, "diag": laplace_lib.DiagLaplace, "kron": laplace_lib.KronLaplace}
    la = cls[structure](net, "classification", prior_precision=0.7, backend=CurvlinopsGGN)
    la.fit(loader)
    return float(la.log_marginal_likelihood())


@pytest.mark.parametrize("structure", [Structure.full, Structure.diag, Structure.kron])
def test_the_evidence_equals_laplace_torchs_on_the_same_theta(structure):
    """Both are log p(D|θ*) − ½ θ*ᵀΔθ* + ½ log det Δ − ½ log det Π on the same GGN (KFLR for Kronecker), float64:
    equal to 1e-8 relative."""
    problem, _ = tiny_problem("categorical", depth=1, n=40, width=6, delta=0.7)
    theirs = laplace_torch_evidence(problem, structure.value)
    ours = laplace(problem, structure).log_evidence
    assert ours == pytest.approx(theirs, rel=1e-8)


def test_a_fan_in_prior_uses_the_kept_spectrum_and_agrees_with_a_cholesky_factor():
    """Δ = r·S (fan-in scales S, one δ): the spectrum of S^{-1/2} H S^{-1/2} gives log det(H + rS) at every r; equal
    to a Cholesky factor's, float64, 1e-10; a per-layer prior (not proportional) takes the Cholesky path."""
    problem, _ = tiny_problem("categorical", depth=2, n=40, width=6)
    fit = laplace(problem, Structure.full)
    prior = Prior.from_config(problem.model, PriorConfig(scale=PriorScale.fan_in))
    assert len(set(prior.scale.tolist())) == 3  # fan-ins 2 and 6 for the weights, 1 for the biases
    H = fit.evidence.curvature.H
    for r in (0.01, 1.0, 30.0):
        precision = prior.at(r).precision()
        exact = 2 * torch.linalg.cholesky(H + torch.diag(precision)).diagonal().log().sum()
        assert float(fit.evidence.curvature.logdet(precision, 1.0)) == pytest.approx(float(exact), rel=1e-10)
    assert fit.evidence.curvature._scale is not None
    assert fit.evidence.curvature._vectors is None  # values need the eigenvalues alone (≈ 4P³/3 flops, not ≈ 9P³)
    layer = Prior.from_config(problem.model, PriorConfig(groups=PriorGroups.layer))
    precision = layer.with_free_log_delta(torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)).precision()
    exact = 2 * torch.linalg.cholesky(H + torch.diag(precision)).diagonal().log().sum()
    assert float(fit.evidence.curvature.logdet(precision, 1.0)) == pytest.approx(float(exact), rel=1e-10)


def test_rows_off_the_spectrum_share_one_buffer_and_give_a_fresh_cholesky_factors_value_to_the_bit():
    """A grid's per-layer rows form ``c·H + diag(Δ)`` in place in one buffer (at noise factor 1, a float and a
    tensor ``c``, a ``c`` per row), each row's value the same to the bit as the factor of the matrix made afresh."""
    problem, _ = tiny_problem("gaussian", depth=2, n=40, width=6)
    curvature = laplace(problem, Structure.full).evidence.curvature
    layer = Prior.from_config(problem.model, PriorConfig(groups=PriorGroups.layer))
    rows = torch.stack([layer.with_free_log_delta(torch.tensor(d, dtype=torch.float64)).precision()
                        for d in ([0.0, 1.0, 2.0], [1.5, -1.0, 0.5], [2.0, 2.0, -2.0])])
    curvature.logdet(torch.ones_like(rows[0]), 1.0)  # the kept spectrum's scale: isotropic, so no row is on it
    for c in (1.0, 0.37, torch.tensor(0.37, dtype=torch.float64), torch.tensor([1.0, 0.5, 2.0], dtype=torch.float64)):
        each = c if torch.is_tensor(c) and c.dim() else torch.full((len(rows),), float(c), dtype=torch.float64)
        fresh = torch.stack([2 * torch.linalg.cholesky(k * curvature.H + torch.diag(row)).diagonal().log().sum()
                             for k, row in zip(each, rows, strict=True)])
        assert torch.equal(curvature.logdets(rows, c), fresh), c
        assert torch.equal(torch.stack([curvature.logdet(row, k) for k, row in zip(each, rows, strict=True)]), fresh)


def test_an_evidence_value_is_the_same_before_and_after_a_gradient_asked_for_the_eigenvectors():
    """The kept eigenvalues are those of the first evaluation (eigvalsh); the eigh a gradient needs adds its
    eigenvectors only, so a value at a prior never moves in its last bits."""
    problem, _ = tiny_problem("categorical", depth=2, n=40, width=6)
    fit = laplace(problem, Structure.full)
    precision = torch.full_like(problem.theta0, 0.7)
    before = float(fit.evidence(precision))
    fit.evidence(precision.clone().requires_grad_(True)).backward()
    assert fit.evidence.curvature._vectors is not None
    assert float(fit.evidence(precision)) == before


@pytest.mark.parametrize("scale", [PriorScale.isotropic, PriorScale.fan_in])
def test_the_gradient_in_each_layers_delta_is_the_cholesky_factors_from_a_shared_start(scale):
    """A per-layer prior starts with every δ equal (the kept spectrum's point): the gradient in each layer's log δ
    and in log σ² must be that of log det through a Cholesky factor (float64, 1e-9), not only the shared
    direction's."""
    problem, _ = tiny_problem("gaussian", depth=2, n=40, width=6)
    fit = laplace(problem, Structure.full)
    prior = Prior.from_config(problem.model, PriorConfig(delta=0.8, scale=scale, groups=PriorGroups.layer))
    log_delta = prior.free_log_delta().clone().requires_grad_(True)
    log_sigma2 = torch.tensor(-1.0, dtype=torch.float64, requires_grad=True)
    fit.evidence(prior.precision_at(log_delta), log_sigma2.exp()).backward()
    H, c = fit.evidence.curvature.H, 0.3 / log_sigma2.detach().exp()  # tiny_problem's σ²₀ = 0.3
    exact_delta = log_delta.detach().clone().requires_grad_(True)
    exact_sigma2 = log_sigma2.detach().clone().requires_grad_(True)
    precision = prior.precision_at(exact_delta)
    logdet = 2 * torch.linalg.cholesky(0.3 / exact_sigma2.exp() * H + torch.diag(precision)).diagonal().log().sum()
    value = (fit.evidence.loglik_at(exact_sigma2.exp()) - 0.5 * (precision * problem.theta0.square()).sum()
             + 0.5 * precision.log().sum() - 0.5 * logdet)
    value.backward()
    assert c > 0
    torch.testing.assert_close(log_delta.grad, exact_delta.grad, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(log_sigma2.grad, exact_sigma2.grad, rtol=1e-9, atol=1e-9)


def test_a_kronecker_evidence_and_posterior_refuse_a_prior_that_does_not_factorise():
    """One check, in both the evidence's log-determinant and the posterior: a precision that varies inside a weight
    tensor is not B ⊗ A + δ I."""
    import bnnpred

    X = torch.randn(40, 2, generator=torch.Generator().manual_seed(0))
    fitted = bnnpred.fit(torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3)), X,
                         (X[:, 0] > 0).long(), task="multiclass", train=False, options={"structure": "kron"},
                         progress=False)
    varying = torch.linspace(1.0, 2.0, len(fitted.theta), dtype=fitted.theta.dtype)
    message = "structure=kron needs one prior precision per weight or bias tensor .* use prior.groups=shared"
    with pytest.raises(BnnpredError, match=message):
        fitted.log_evidence_at(varying)
    grid = torch.stack([torch.ones_like(varying), varying]).double()  # the grid's second row does not factorise
    with pytest.raises(BnnpredError, match=message):
        fitted._laplace().at_each(grid)
    with pytest.raises(BnnpredError, match=message):
        bnnpred.fit(fitted._model.module, X, (X[:, 0] > 0).long(), task="multiclass", train=False,
                    prior_precision=varying, options={"structure": "kron"}, progress=False)
