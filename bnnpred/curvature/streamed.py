"""The data curvature summed over a stream of ``(inputs, targets)`` batches (a ``DataLoader``), holding one batch at
a time: memory independent of N. Every term is a sum over examples (notes-000 eq. 3.12's ``Σ_i J_iᵀ Λ_i J_i``, the
Kronecker factors' ``Σ a aᵀ`` and ``Σ g gᵀ``, the log-likelihood), so the batches' terms add; the Kronecker output
factor ``B`` is a mean over the N examples (notes-004 eq. 8), so each batch's is weighted by its size."""

from __future__ import annotations

from collections.abc import Iterable

from torch import Tensor

from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.ggn import Curvature, Structure, curvature
from bnnpred.curvature.kron import KronBlock, kron_batch_size, kron_ggn, supported_layers
from bnnpred.errors import BnnpredError
from bnnpred.likelihoods import Likelihood

Batches = Iterable[tuple[Tensor, Tensor]]


def streamed_curvature(model: FlatModel, likelihood: Likelihood, theta: Tensor, batches: Batches, *,
                       kind: Curvature, structure: Structure) -> tuple[Tensor, Tensor, int]:
    """:func:`~bnnpred.curvature.ggn.curvature` (``[P, P]`` or its diagonal ``[P]``) and the log-likelihood summed
    over ``batches``, and the number of examples N."""
    total, loglik, n = None, theta.new_zeros(()), 0
    for X, y in batches:
        if not len(X):  # an empty batch adds nothing
            continue
        H, batch_loglik = curvature(model, likelihood, theta, X, y, kind=kind, structure=structure)
        total = H if total is None else total.add_(H)
        loglik, n = loglik + batch_loglik, n + len(X)
    if total is None:
        raise BnnpredError("the data loader yielded no batches; give it the training set")
    return total, loglik, n


def streamed_kron(model: FlatModel, likelihood: Likelihood, theta: Tensor, batches: Batches,
                  batch_size: int | None = None) -> tuple[list[KronBlock], Tensor, int]:
    """:func:`~bnnpred.curvature.kron.kron_ggn`'s blocks over all of ``batches``: the input factors ``A`` and the
    bias blocks summed, the output factors ``B = (1/N) Σ_b N_b B_b``; the log-likelihood; N. One batch gives
    ``kron_ggn``'s own result. ``batch_size`` None: :func:`~bnnpred.curvature.kron.kron_batch_size` of the first
    batch, kept for the others."""
    blocks, loglik, sizes = None, theta.new_zeros(()), []
    for X, y in batches:
        if not len(X):  # an empty batch adds nothing (its mean output factor would be 0 / 0)
            continue
        if batch_size is None:
            batch_size = kron_batch_size(model, likelihood, theta, X, supported_layers(model))
        found, batch_loglik = kron_ggn(model, likelihood, theta, X, y, batch_size, show_progress=False)
        loglik = loglik + batch_loglik
        sizes.append(len(X))
        if blocks is None:
            blocks = found
            continue
        if len(sizes) == 2:  # from the second batch on, B holds sums weighted by the batch sizes
            for block in blocks:
                if block.B is not None:
                    block.B.mul_(sizes[0])
        for total, block in zip(blocks, found, strict=True):
            for name in ("A", "dense"):
                if getattr(total, name) is not None:
                    getattr(total, name).add_(getattr(block, name))
            if total.B is not None:
                total.B.add_(block.B, alpha=len(X))
    if blocks is None:
        raise BnnpredError("the data loader yielded no batches; give it the training set")
    if len(sizes) > 1:
        for block in blocks:
            if block.B is not None:
                block.B.div_(sum(sizes))
    return blocks, loglik, sum(sizes)
