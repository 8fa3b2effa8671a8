"""Cholesky with jitter: a precision that is not positive definite gets a warning, then a clear error."""

from __future__ import annotations

import logging
import warnings

import torch
from torch import Tensor

from bnnpred.errors import BnnpredError

log = logging.getLogger(__name__)

JITTERS = (1e-10, 1e-8, 1e-6, 1e-4)  # relative to the mean diagonal


def robust_cholesky(A: Tensor, what: str = "posterior precision") -> Tensor:
    """Lower Cholesky factor of the symmetric ``A`` ``[P, P]``, adding jitter if needed.

    Raises:
        BnnpredError: if ``A`` is not positive definite even with jitter ``1e-4 · mean(diag A)``.
    """
    L, info = torch.linalg.cholesky_ex(A)
    if info == 0:
        return L
    scale = A.diagonal().mean().abs().clamp_min(torch.finfo(A.dtype).tiny)
    eye = torch.eye(A.shape[0], dtype=A.dtype, device=A.device)
    for rel in JITTERS:
        L, info = torch.linalg.cholesky_ex(A + rel * scale * eye)
        if info == 0:
            message = f"{what} was not positive definite; added jitter {rel:g} x mean diagonal"
            warnings.warn(message, RuntimeWarning, stacklevel=2)
            log.warning(message)
            return L
    raise BnnpredError(
        f"{what} is not positive definite even with jitter {JITTERS[-1]:g} x mean diagonal; "
        "raise prior.delta or use dtype=float64"
    )
