r"""Low-rank-plus-diagonal Gaussian: precision ``Π = U Uᵀ + diag(d)`` with ``U`` ``[P, L]`` (SLANG's family,
notes-002 §2.3-2.6). Every operation costs ``O(P L²)`` or less; nothing ``P x P`` is formed.

- Solves by Woodbury (notes-002 eq. 23-24): ``Π⁻¹ x = D⁻¹x − D⁻¹U K⁻¹ UᵀD⁻¹x`` with ``K = I_L + UᵀD⁻¹U``.
- ``log det Π = Σ log d + log det K``.
- Sampling by the symmetric square root (notes-002 §2.6, the corrected sampler; the printed Alg. 3 is wrong):
  with ``V = D^{-1/2} U`` and ``VᵀV = Q Λ Qᵀ``, ``(I + VVᵀ)^{-1/2} = I + V Q diag(((1+Λ)^{-1/2} − 1)/Λ) QᵀVᵀ``
  (the limit −½ where ``Λ = 0``, so ``U = 0`` is the mean-field sampler), and ``θ = µ + d^{-1/2} ⊙ (I + VVᵀ)^{-1/2} ε``.
- ``J Σ Jᵀ = (J D⁻¹ Jᵀ) − (J D⁻¹ U) K⁻¹ (J D⁻¹ U)ᵀ`` in ``O(B C P L)``, so the GLM and closed-form predictives work.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from bnnpred.errors import BnnpredError
from bnnpred.posteriors.base import Posterior


class LowRankDiagPosterior(Posterior):
    def __init__(self, mean: Tensor, U: Tensor, d: Tensor):
        if not bool((d > 0).all()):
            raise BnnpredError("the diagonal of a low-rank-plus-diagonal precision must be positive")
        self.mean, self.U, self.d = mean, U, d
        self.DinvU = U / d.unsqueeze(1)  # [P, L]
        K = torch.eye(U.shape[1], dtype=U.dtype, device=U.device) + U.T @ self.DinvU
        self.K_chol = torch.linalg.cholesky(K)

    def _K_solve(self, B: Tensor) -> Tensor:
        return torch.cholesky_solve(B, self.K_chol)

    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        return self.mean + self.cov_root_times(self._normal(n, generator))

    def cov_root_times(self, eps: Tensor) -> Tensor:
        """``S ε`` for each row ``ε`` of ``eps`` ``[n, P]``, with ``S = D^{-1/2}(I + VVᵀ)^{-1/2}``, ``S Sᵀ = Π⁻¹``."""
        V = self.U * self.d.rsqrt().unsqueeze(1)
        lam, Q = torch.linalg.eigh(V.T @ V)
        lam = lam.clamp_min(0)
        safe = torch.where(lam > 1e-12, lam, torch.ones_like(lam))
        scale = torch.where(lam > 1e-12, ((1 + lam).rsqrt() - 1) / safe, torch.full_like(lam, -0.5))
        VQ = V @ Q
        root_eps = eps + ((eps @ VQ) * scale) @ VQ.T  # (I + VVᵀ)^{-1/2} ε, row by row
        return root_eps * self.d.rsqrt()

    def logdet_precision(self) -> Tensor:
        return self.d.log().sum() + 2 * self.K_chol.diagonal().log().sum()

    def quad(self, v: Tensor) -> Tensor:
        return (self.U.T @ v).square().sum() + (self.d * v.square()).sum()

    def cov_mv(self, v: Tensor) -> Tensor:
        return v / self.d - self.DinvU @ self._K_solve((self.DinvU.T @ v).unsqueeze(1)).squeeze(1)

    def functional_cov(self, J: Tensor) -> Tensor:
        JW = J @ self.DinvU  # [B, C, L]
        corrected = JW @ self._K_solve(JW.mT)  # (J D⁻¹U) K⁻¹ (J D⁻¹U)ᵀ per input, via solves with the L x L factor
        return (J / self.d) @ J.mT - corrected

    def marginal_variance(self) -> Tensor:
        return 1 / self.d - (self.DinvU * self._K_solve(self.DinvU.T).T).sum(1)

    def dense_precision(self) -> Tensor:
        return self.U @ self.U.T + torch.diag(self.d)

    def state(self) -> dict[str, Any]:
        return {"structure": "lowrank", "mean": self.mean, "U": self.U, "d": self.d}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> LowRankDiagPosterior:
        return cls(state["mean"], state["U"], state["d"])
