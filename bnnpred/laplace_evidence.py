r"""A Laplace fit's data curvature kept apart from the prior: the posterior and the log evidence for any prior
precision and noise, from one formula (notes-000 §5.2), differentiable in ``log δ`` and ``log σ²``.

At ``θ*`` the data term's curvature ``H`` (GGN or empirical Fisher, full / diagonal / Kronecker, over every
parameter or a block) was computed once, at the fit's noise ``σ²₀``. For another prior ``Δ`` and noise ``σ²``

.. math:: Π(Δ, σ²) = c·H + Δ, \qquad c = (σ²₀ / σ²)^k

(``k = 1`` for the GGN of a Gaussian likelihood, ``k = 2`` for its empirical Fisher; ``c = 1`` for classification
and counts), and the log evidence is :func:`bnnpred.marglik.log_marglik` with ``log det Π(Δ, σ²)`` from the
structure:

- full: ``Σ_j log(c μ_j + r)`` over the eigenvalues of ``S^{-1/2} H S^{-1/2}`` for a prior ``Δ = r·S`` proportional to
  a fixed scale (a shared δ), a Cholesky factor otherwise;
- diagonal: ``Σ_p log(c h_p + δ_p)``;
- Kronecker: ``Σ log(c b_i a_j + δ_block)`` in each block's eigenbasis (dampened: ``(c b_i + √δ)(a_j + √δ)``),
  so any per-tensor or per-layer prior costs no factorisation.

A grid of priors (and noises) is one call, :meth:`LaplaceEvidence.at_each`: one pass over the kept spectrum for the
diagonal and Kronecker structures.
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import torch
from torch import Tensor

from bnnpred.curvature.kron import KronBlock
from bnnpred.errors import BnnpredError
from bnnpred.marglik import log_marglik
from bnnpred.posteriors import DiagPosterior, FullPosterior, KronPosterior, Posterior, SubsetPosterior
from bnnpred.posteriors.kron import block_delta
from bnnpred.prior import Prior


@dataclass
class LaplaceCurvature(ABC):
    """The data curvature ``H`` at ``θ*`` over ``θ[block]``, computed at noise ``sigma2`` (None: no noise, as for
    classification and counts), scaling with the noise as ``σ^{-2·power}``."""

    sigma2: float | None
    power: int

    @property
    def block(self) -> slice:
        """The parameters the posterior is over (a last-layer posterior's block; all by default)."""
        return slice(None)

    def factor(self, sigma2: Tensor | float | None) -> Tensor | float:
        """``c = (σ²₀ / σ²)^k``: 1 without a noise (classification, counts) or at the fit's own noise."""
        if self.sigma2 is None or sigma2 is None:
            return 1.0
        return (self.sigma2 / sigma2) ** self.power

    @abstractmethod
    def logdet(self, precision: Tensor, c: Tensor | float) -> Tensor:
        """``log det (c·H + diag(precision))`` ``[]`` for the prior precision of the block's parameters."""

    def logdets(self, precisions: Tensor, c: Tensor | float) -> Tensor:
        """:meth:`logdet` at each row of ``precisions`` ``[G, P_block]`` (``c``: one, or ``[G]``) ``[G]``; structures
        whose log det is elementwise in the spectrum override it with one pass over the grid."""
        return torch.stack([self.logdet(row, c[g] if _is_grid(c) else c) for g, row in enumerate(precisions)])

    @abstractmethod
    def posterior(self, mean: Tensor, precision: Tensor, c: Tensor | float) -> Posterior:
        """``N(mean, (c·H + Δ)⁻¹)`` over the block (``mean``, ``precision`` ``[P_block]``)."""


@dataclass
class FullCurvature(LaplaceCurvature):
    """A dense ``H`` ``[P, P]``. For priors proportional to one fixed scale ``S`` (``Δ = r·S``: a shared δ, with
    or without fan-in scaling) ``log det(cH + rS) = Σ log S + Σ_j log(c μ_j + r)`` with ``μ`` the eigenvalues of
    ``S^{-1/2} H S^{-1/2}``, computed once (``S``: the first prior evaluated), and its eigenvectors ``V`` once where
    a gradient needs them; any other prior (per-layer δ apart, a fixed
    bias precision) costs a Cholesky factor (``P³/3`` flops) per evaluation."""

    H: Tensor = field(default=None)  # [P, P]
    _scale: Tensor | None = field(default=None, repr=False)  # S [P] of the kept spectrum
    _spectrum: Tensor | None = field(default=None, repr=False)  # μ [P]
    _vectors: Tensor | None = field(default=None, repr=False)  # the eigenvectors V [P, P] of S^{-1/2} H S^{-1/2}

    def logdet(self, precision: Tensor, c: Tensor | float) -> Tensor:
        """At ``Δ = r·S`` the value from the kept spectrum (eigenvalues only, ``≈ 4P³/3`` flops once); where
        ``precision`` carries a gradient, that gradient in every entry of ``Δ`` is ``diag(Π⁻¹)_p = Σ_j V_pj² /
        (s_p (c μ_j + r))`` (a per-group prior's first step starts at such a point too: the eigenvectors are
        computed then, once), carried by a term whose value is zero."""
        if self._scale is None:
            self._scale = precision.detach().double().to(self.H.device).clone()  # not a view of a caller's grid
        scale = self._scale.to(precision)
        ratio = precision.detach() / scale
        if torch.allclose(ratio, ratio[0].expand_as(ratio), rtol=1e-12, atol=0):
            if self._spectrum is None or (precision.requires_grad and self._vectors is None):
                self._keep_spectrum(vectors=precision.requires_grad)
            shifted = c * self._spectrum.to(precision) + ratio[0]
            value = scale.log().sum() + torch.log(shifted).sum()
            if not precision.requires_grad:
                return value
            inverse_diag = (self._vectors.to(precision).square() / shifted.detach()).sum(dim=1) / scale
            return value + ((precision - precision.detach()) * inverse_diag).sum()
        return self._cholesky_logdet(precision, c)

    def _cholesky_logdet(self, precision: Tensor, c: Tensor | float, work: Tensor | None = None) -> Tensor:
        """``log det(c·H + diag(precision))`` ``[]`` by one Cholesky factor (``P³/3`` flops). Without a gradient the
        matrix is formed in place in ``work`` ``[P, P]`` (a grid's rows share one: forming it afresh, a scaled copy
        plus a dense diagonal, was a quarter of a row's time at P = 4,706; the same numbers)."""
        if precision.requires_grad or (torch.is_tensor(c) and c.requires_grad):
            A = c * self.H.to(precision) + torch.diag(precision)
        else:
            A = torch.empty(self.H.shape, dtype=precision.dtype, device=precision.device) if work is None else work
            A.copy_(self.H)
            if torch.is_tensor(c) or c != 1:
                A.mul_(c)
            A.diagonal().add_(precision)
        L, info = torch.linalg.cholesky_ex(A)
        if info != 0:
            raise BnnpredError("the posterior precision is not positive definite at this prior; raise prior.delta")
        return 2 * L.diagonal().log().sum()

    def logdets(self, precisions: Tensor, c: Tensor | float) -> Tensor:
        """:meth:`logdet` at each row of ``precisions`` ``[G, P]`` ``[G]``: the rows at ``Δ = r_g·S`` in one pass over
        the kept spectrum (``Σ log S + Σ_j log(c μ_j + r_g)``), a Cholesky factor for each other row."""
        if precisions.requires_grad:
            return super().logdets(precisions, c)
        if self._scale is None:
            self._scale = precisions[0].double().to(self.H.device).clone()
        ratios = precisions / self._scale.to(precisions)
        spectral = torch.isclose(ratios, ratios[:, :1], rtol=1e-12, atol=0).all(dim=1)  # as logdet's test, per row
        values = torch.empty(len(precisions), dtype=precisions.dtype, device=precisions.device)
        if spectral.any():
            if self._spectrum is None:
                self._keep_spectrum(vectors=False)
            scales = _column(c[spectral] if _is_grid(c) else c)
            shifted = scales * self._spectrum.to(precisions) + ratios[spectral, :1]
            values[spectral] = self._scale.to(precisions).log().sum() + torch.log(shifted).sum(dim=1)
        off = torch.nonzero(~spectral).flatten().tolist()
        work = torch.empty(self.H.shape, dtype=precisions.dtype, device=precisions.device) if off else None
        for g in off:  # one [P, P] buffer for every row off the spectrum
            values[g] = self._cholesky_logdet(precisions[g], c[g] if _is_grid(c) else c, work)
        return values

    def _keep_spectrum(self, vectors: bool) -> None:
        """The eigenvalues of ``S^{-1/2} H S^{-1/2}`` (kept once: a value never depends on whether a gradient was
        asked for first) and, with ``vectors``, its eigenvectors."""
        root = self._scale.rsqrt()
        whitened = root[:, None] * self.H.double() * root[None, :]
        if vectors:
            values, self._vectors = torch.linalg.eigh(whitened)
        else:
            values = torch.linalg.eigvalsh(whitened)
        if self._spectrum is None:
            self._spectrum = values.clamp_min(0)

    def posterior(self, mean: Tensor, precision: Tensor, c: Tensor | float) -> Posterior:
        return FullPosterior(mean, (self.H if c == 1 else c * self.H) + torch.diag(precision.to(self.H)))


@dataclass
class DiagCurvature(LaplaceCurvature):
    h: Tensor = field(default=None)  # [P]

    def logdet(self, precision: Tensor, c: Tensor | float) -> Tensor:
        return self.logdets(precision.unsqueeze(0), c).squeeze(0)

    def logdets(self, precisions: Tensor, c: Tensor | float) -> Tensor:
        return torch.log(_column(c) * self.h.to(precisions) + precisions).sum(-1)

    def posterior(self, mean: Tensor, precision: Tensor, c: Tensor | float) -> Posterior:
        return DiagPosterior(mean, (self.h if c == 1 else c * self.h) + precision.to(self.h))


@dataclass
class KronCurvature(LaplaceCurvature):
    """Per-layer ``B ⊗ A`` weight blocks and dense bias blocks (``B`` and the dense blocks carry the noise)."""

    blocks: list[KronBlock] = field(default_factory=list)
    dampen: bool = False
    _spectra: list[tuple[Tensor, Tensor | None]] | None = field(default=None, repr=False)
    _products: Tensor | None = field(default=None, repr=False)  # every block's b_i a_j (or d), in its θ range

    def spectra(self) -> list[tuple[Tensor, Tensor | None]]:
        """``(b, a)`` eigenvalues per block (``(d, None)`` for a dense block), float64, computed once."""
        if self._spectra is None:
            self._spectra = [(_eigenvalues(b.dense), None) if b.dense is not None
                             else (_eigenvalues(b.B), _eigenvalues(b.A)) for b in self.blocks]
        return self._spectra

    def products(self) -> Tensor:
        """The eigenvalues of every block ``[P_blocks]``: ``b_i a_j`` of ``B ⊗ A``, a dense block's own, in the
        order of the blocks (each block's in any order: its prior is one value), float64, computed once."""
        if self._products is None:
            self._products = torch.cat([b if a is None else torch.outer(b, a).flatten() for b, a in self.spectra()])
        return self._products

    def logdet(self, precision: Tensor, c: Tensor | float) -> Tensor:
        return self.logdets(precision.unsqueeze(0), c).squeeze(0)

    def logdets(self, precisions: Tensor, c: Tensor | float) -> Tensor:
        """``Σ log(c b_i a_j + δ_block)`` over all blocks in one pass (dampened: ``Σ_i n_a log(c b_i + √δ) + Σ_j
        n_b log(a_j + √δ)`` per block); a prior that does not factorise over a block is refused."""
        covered = torch.cat([precisions[:, block.start : block.stop] for block in self.blocks], dim=1)
        firsts = torch.cat([precisions[:, block.start : block.start + 1].expand(-1, block.stop - block.start)
                            for block in self.blocks], dim=1)
        if not torch.equal(covered.detach(), firsts.detach()):
            for row in precisions.detach():
                for block in self.blocks:
                    block_delta(row, block)  # names the problem
        c = _column(c)
        if not self.dampen:
            return torch.log(c * self.products().to(precisions) + firsts).sum(-1)
        total = precisions.new_zeros(len(precisions))
        for block, (b, a) in zip(self.blocks, self.spectra(), strict=True):
            delta = precisions[:, block.start : block.start + 1]  # [G, 1]
            scaled = c * b.to(precisions)
            if a is None:
                total = total + torch.log(scaled + delta).sum(-1)
            else:
                root = delta.sqrt()
                total = total + (len(a) * torch.log(scaled + root).sum(-1)
                                 + len(b) * torch.log(a.to(precisions) + root).sum(-1))
        return total

    def posterior(self, mean: Tensor, precision: Tensor, c: Tensor | float) -> Posterior:
        blocks = self.blocks if c == 1 else [
            dataclasses.replace(b, B=None if b.B is None else c * b.B, dense=None if b.dense is None else c * b.dense)
            for b in self.blocks]
        return KronPosterior(mean, blocks, precision.to(mean), self.dampen)


@dataclass
class SubsetCurvature(LaplaceCurvature):
    """The curvature of ``θ[start:stop]`` alone, the other parameters fixed at ``θ*`` (last-layer Laplace)."""

    inner: LaplaceCurvature = field(default=None)
    start: int = 0
    stop: int = 0
    names: list[str] = field(default_factory=list)

    @property
    def block(self) -> slice:
        return slice(self.start, self.stop)

    def logdet(self, precision: Tensor, c: Tensor | float) -> Tensor:
        return self.inner.logdet(precision, c)

    def logdets(self, precisions: Tensor, c: Tensor | float) -> Tensor:
        return self.inner.logdets(precisions, c)

    def posterior(self, mean: Tensor, precision: Tensor, c: Tensor | float) -> Posterior:
        """``mean`` is the whole ``θ*`` ``[P]``; ``precision`` the block's."""
        inner = self.inner.posterior(mean[self.block], precision, c)
        return SubsetPosterior(mean, inner, self.start, self.stop, self.names)


@dataclass
class LaplaceEvidence:
    r"""The Laplace-GGN log evidence of a fit as a function of the prior and the noise, ``θ*`` and ``H`` held fixed.

    Attributes:
        theta: ``θ*`` ``[P]``.
        curvature: ``H`` and its structure.
        loglik: ``Σ_i log p(y_i | f(x_i; θ*))`` at the fit's noise.
        n: the number of training points (the Gaussian log-likelihood's dependence on σ²).
        value: the evidence of the fit itself, at its own prior and noise (NaN when its precision needed jitter);
            in the function-space form when the fit used it (notes-000 eq. 3.19).
    """

    theta: Tensor
    curvature: LaplaceCurvature
    loglik: float
    n: int
    value: float = math.nan

    def loglik_at(self, sigma2: Tensor | None) -> Tensor | float:
        """``Σ log N(y_i | f_i, σ²)`` from the fit's value: the residual sum of squares is fixed at ``θ*``."""
        sigma2_fit = self.curvature.sigma2
        if sigma2_fit is None or sigma2 is None:
            return self.loglik
        sse = sigma2_fit * (-2 * self.loglik - self.n * math.log(2 * math.pi * sigma2_fit))
        return -0.5 * (self.n * torch.log(2 * math.pi * sigma2) + sse / sigma2)

    def __call__(self, precision: Tensor, sigma2: Tensor | None = None) -> Tensor:
        """The log evidence ``[]`` at the prior precision ``[P]`` and noise ``σ²`` (None: the fit's or none),
        differentiable in both (notes-000 §5.2)."""
        block = self.curvature.block
        sigma2 = None if sigma2 is None else torch.as_tensor(sigma2, dtype=precision.dtype, device=precision.device)
        c = self.curvature.factor(sigma2)
        logdet = self.curvature.logdet(precision[block], c)
        return log_marglik(torch.as_tensor(self.loglik_at(sigma2), dtype=precision.dtype),
                           self.theta[block].to(precision), precision[block], logdet)

    def at_each(self, precisions: Tensor, sigma2: Tensor | None = None) -> Tensor:
        """The log evidence ``[G]`` at each row of ``precisions`` ``[G, P]`` (and noise ``σ²`` ``[G]``): a grid in
        one pass where the structure's log det is elementwise in its kept spectrum (diagonal, Kronecker), row by
        row otherwise (full: ``O(P)`` per row from the spectrum, a Cholesky factor per row off it); in chunks of
        rows whose temporaries hold about :data:`GRID_ELEMS` numbers."""
        block = self.curvature.block
        sigma2 = None if sigma2 is None else torch.as_tensor(sigma2, dtype=precisions.dtype,
                                                             device=precisions.device).expand(len(precisions))
        rows = max(1, GRID_ELEMS // max(1, precisions.shape[1]))
        values = []
        for start in range(0, len(precisions), rows):
            chunk = precisions[start:start + rows, block]
            noise = None if sigma2 is None else sigma2[start:start + rows]
            logdets = self.curvature.logdets(chunk, self.curvature.factor(noise))
            values.append(log_marglik(torch.as_tensor(self.loglik_at(noise), dtype=precisions.dtype),
                                      self.theta[block].to(precisions), chunk, logdets))
        return torch.cat(values) if values else precisions.new_zeros(0)

    def posterior(self, precision: Tensor, sigma2: float | None = None) -> Posterior:
        """``N(θ*, Π(Δ, σ²)⁻¹)`` in the fit's structure for the prior precision ``[P]``."""
        block = self.curvature.block
        return self.curvature.posterior(self.theta, precision[block].to(self.theta), self.curvature.factor(sigma2))

    def at_fit(self, posterior: Posterior, precision: Tensor) -> float:
        """The evidence at the fit's own prior and noise from its posterior's log det (no second factorisation);
        NaN when that precision needed jitter (it would be the evidence of another prior)."""
        if posterior.jitter:
            return math.nan
        block = self.curvature.block
        return float(log_marglik(torch.as_tensor(self.loglik, dtype=self.theta.dtype), self.theta[block],
                                 precision[block].to(self.theta), posterior.logdet_precision()))


GRID_ELEMS = 2**22  # numbers per chunk of a grid of priors in LaplaceEvidence.at_each (each temporary about 32 MB)


def _eigenvalues(factor: Tensor) -> Tensor:
    """A symmetric PSD factor's eigenvalues ``[n]``, float64 (as the posterior's ``_eigh``), rounding's negatives at 0;
    no eigenvectors: the log det needs none."""
    return torch.linalg.eigvalsh(factor.double()).clamp_min(0)


def _is_grid(c: Tensor | float) -> bool:
    """Whether the noise factor ``c`` holds one value per row of a grid (``[G]``) rather than one for all."""
    return isinstance(c, Tensor) and c.dim() == 1


def _column(c: Tensor | float) -> Tensor | float:
    """``c`` shaped to scale rows ``[G, P]``: ``[G, 1]`` for one value per row."""
    return c.unsqueeze(-1) if _is_grid(c) else c


def maximise_evidence(evidence: LaplaceEvidence, prior: Prior, sigma2: float | None, *, steps: int,
                      lr: float) -> tuple[Prior, float | None]:
    """Adam ascent on the free groups' ``log δ`` (and ``log σ²`` for regression) from the given values, ``θ*`` and
    the curvature held fixed; returns the new prior and noise."""
    log_delta = prior.free_log_delta().clone().requires_grad_(True)
    log_sigma2 = torch.tensor(math.log(sigma2 if sigma2 is not None else 1.0), dtype=torch.float64,
                              requires_grad=sigma2 is not None)
    optimizer = torch.optim.Adam([log_delta] + ([log_sigma2] if sigma2 is not None else []), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        value = evidence(prior.precision_at(log_delta), log_sigma2.exp() if sigma2 is not None else None)
        (-value).backward()
        optimizer.step()
    return prior.with_free_log_delta(log_delta), (math.exp(log_sigma2.item()) if sigma2 is not None else None)
