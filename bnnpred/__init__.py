"""bnnpred: Laplace and variational Bayesian deep learning, from the command line (``bnnpred train``) and from
Python (``bnnpred.fit``; see :mod:`bnnpred.api`)."""

from typing import Any

from bnnpred._version import __version__

__all__ = ["METHODS", "Fitted", "__version__", "evaluate", "fit", "load"]


def __getattr__(name: str) -> Any:
    """The library's names, imported on first use (so that the command line starts without torch's import)."""
    if name in ("fit", "Fitted", "evaluate", "load"):
        from bnnpred import api

        return getattr(api, name)
    if name == "METHODS":  # name -> the method's options (its config dataclass: bnnpred.METHODS["vl"]())
        from bnnpred.inference import METHODS

        return {method: schema for method, (schema, _) in sorted(METHODS.items())}
    raise AttributeError(f"module 'bnnpred' has no attribute '{name}'")
