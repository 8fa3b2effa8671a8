"""Bounds on the size of per-example Jacobian chunks."""

from __future__ import annotations

# Jacobian chunks hold at most this many numbers (B·C·P), about 128 MB in float64.
DEFAULT_CHUNK_ELEMS = 2**24


def chunk_size_for(n_outputs: int, n_params: int, max_elems: int = DEFAULT_CHUNK_ELEMS) -> int:
    """Number of examples per chunk so that a ``[B, C, P]`` Jacobian holds at most ``max_elems`` numbers."""
    return max(1, max_elems // (n_outputs * n_params))
