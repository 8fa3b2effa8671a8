"""Cholesky with jitter: a precision that is not positive definite gets jitter (returned, so that the run records
it), then a clear error."""

from __future__ import annotations

import logging
from typing import NamedTuple

import torch
from torch import Tensor

from bnnpred.errors import BnnpredError

log = logging.getLogger(__name__)

JITTERS = (1e-10, 1e-8, 1e-6, 1e-4)  # relative to the mean diagonal


class Cholesky(NamedTuple):
    factor: Tensor  # lower L [P, P] with L Lᵀ = A + jitter · mean(diag A) · I
    jitter: float  # 0.0 when A itself was positive definite


def robust_cholesky(A: Tensor, what: str = "posterior precision") -> Cholesky:
    """Lower Cholesky factor of the symmetric ``A`` ``[P, P]``, adding jitter if needed.

    Raises:
        BnnpredError: if ``A`` is not positive definite even with jitter ``1e-4 · mean(diag A)``.
    """
    L, info = torch.linalg.cholesky_ex(A)
    if info == 0:
        return Cholesky(L, 0.0)
    scale = A.diagonal().mean().abs().clamp_min(torch.finfo(A.dtype).tiny)
    eye = torch.eye(A.shape[0], dtype=A.dtype, device=A.device)
    for rel in JITTERS:
        L, info = torch.linalg.cholesky_ex(A + rel * scale * eye)
        if info == 0:
            log.warning("%s was not positive definite; added jitter %g x mean diagonal", what, rel)
            return Cholesky(L, rel)
    raise BnnpredError(
        f"{what} is not positive definite even with jitter {JITTERS[-1]:g} x mean diagonal; "
        "raise prior.delta or use dtype=float64"
    )
