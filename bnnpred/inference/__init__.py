"""Inference methods: each is a module with a config dataclass and ``fit(problem, cfg) -> Fit``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bnnpred.errors import unknown_choice
from bnnpred.inference.base import Fit, Problem
from bnnpred.inference.bbb import BBBConfig, fit_bbb
from bnnpred.inference.exact_vi import ExactVIConfig, fit_exact_vi
from bnnpred.inference.glm_refine import GLMRefineConfig, fit_glm_refine
from bnnpred.inference.laplace_ggn import LaplaceGGNConfig, fit_laplace_ggn
from bnnpred.inference.lgva import LGVAConfig, fit_lgva
from bnnpred.inference.map import MapOnlyConfig, fit_map
from bnnpred.inference.oggn import OGGNConfig, fit_oggn
from bnnpred.inference.slang import SLANGConfig, fit_slang
from bnnpred.inference.vl import VLConfig, fit_vl
from bnnpred.inference.voggn import VOGGNConfig, fit_voggn

METHODS: dict[str, tuple[type, Callable[[Problem, Any], Fit]]] = {
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

# Methods whose fit carries the Laplace-GGN log evidence (``info["log_marglik"]``).
EVIDENCE_METHODS = {"laplace_ggn"}


def fit(problem: Problem, cfg: Any) -> Fit:
    """Run the inference method named ``cfg.name``."""
    if cfg.name not in METHODS:
        raise unknown_choice("inference method", cfg.name, METHODS)
    return METHODS[cfg.name][1](problem, cfg)


__all__ = ["EVIDENCE_METHODS", "METHODS", "Fit", "Problem", "fit"]
