"""Inference methods: each is a module with a config dataclass (a :class:`~bnnpred.inference.contract.Method`) and
``fit(problem, cfg) -> Fit``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from bnnpred.errors import BnnpredError, unknown_choice
from bnnpred.inference.base import Fit, Problem, Session
from bnnpred.inference.bbb import BBBConfig, fit_bbb
from bnnpred.inference.contract import NEEDS, Method
from bnnpred.inference.exact_vi import ExactVIConfig, fit_exact_vi
from bnnpred.inference.glm_refine import GLMRefineConfig, fit_glm_refine
from bnnpred.inference.laplace_ggn import LaplaceGGNConfig, fit_laplace_ggn, laplace_from_batches
from bnnpred.inference.lgva import LGVAConfig, fit_lgva
from bnnpred.inference.map import MapOnlyConfig, fit_map
from bnnpred.inference.oggn import OGGNConfig, fit_oggn
from bnnpred.inference.slang import SLANGConfig, fit_slang
from bnnpred.inference.vl import VLConfig, fit_vl
from bnnpred.inference.voggn import VOGGNConfig, fit_voggn
from bnnpred.predictive import PredictiveKind

METHODS: dict[str, tuple[type[Method], Callable[[Problem, Any], Fit]]] = {
    "map": (MapOnlyConfig, fit_map),
    "laplace_ggn": (LaplaceGGNConfig, fit_laplace_ggn),
    "oggn": (OGGNConfig, fit_oggn),
    "lgva": (LGVAConfig, fit_lgva),
    "voggn": (VOGGNConfig, fit_voggn),
    "bbb": (BBBConfig, fit_bbb),
    "glm_refine": (GLMRefineConfig, fit_glm_refine),
    "vl": (VLConfig, fit_vl),
    "slang": (SLANGConfig, fit_slang),
    "exact_vi": (ExactVIConfig, fit_exact_vi),
}

# Methods whose fit carries the log evidence (``Fit.evidence``).
EVIDENCE_METHODS = {name for name, (schema, _) in METHODS.items() if schema.EVIDENCE}

# Methods that fit post-hoc at the network's weights from a stream of (inputs, targets) batches, one batch in
# memory at a time: (model, likelihood, θ, batches, prior precision, cfg) -> Fit.
STREAMED = {"laplace_ggn": laplace_from_batches}


def check_predictives(method: str, kinds: Iterable[PredictiveKind]) -> None:
    """Every one of ``kinds`` must be a predictive of ``method``'s result (its ``KINDS``); else one error naming
    the ones it supports and the methods that give the missing one."""
    supported = METHODS[method][0].KINDS
    for kind in kinds:
        if kind not in supported:
            able = sorted(name for name, (schema, _) in METHODS.items() if kind in schema.KINDS)
            raise BnnpredError(f"predictive {kind.value} needs {NEEDS[kind]}, which inference={method} does not "
                               f"give; use predictive={' / '.join(k.value for k in supported)}, or "
                               f"inference={' / '.join(able)}")


def fit(problem: Problem, cfg: Method) -> Fit:
    """Run the inference method named ``cfg.name``, after its checks against the network (a ``FlatModel``'s)."""
    if cfg.name not in METHODS:
        raise unknown_choice("inference method", cfg.name, METHODS)
    cfg.check_network(problem.model.module)
    return METHODS[cfg.name][1](problem, cfg)


__all__ = ["EVIDENCE_METHODS", "METHODS", "Fit", "Method", "Problem", "Session", "check_predictives", "fit"]
