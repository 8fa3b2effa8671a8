"""The notes' unit and identity checklist items as numbers: each module ``notesNNN`` measures its notes file's
items on small seeded float64 problems through the library's own code paths, against independent references
(autograd, dense linear algebra, finite differences, torch.distributions, enumeration), and returns them as
claims (:func:`claims`); the ``identities`` study (:mod:`bnnpred.reproduce.identities`) puts them on a page.

Every check is deterministic (its own seeded generator) and takes seconds on one core.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def single_thread() -> Iterator[None]:
    """One intra-op thread for the duration (restored after): the checks are many small tensor operations, which
    two threads on a busy 2-core machine make many times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def relative_error(value: torch.Tensor, reference: torch.Tensor) -> float:
    """‖value − reference‖_F / ‖reference‖_F (the whole tensors; 0 / 0 is 0)."""
    norm = float(torch.linalg.vector_norm(reference))
    difference = float(torch.linalg.vector_norm(value - reference))
    return difference / norm if norm > 0 else difference


def max_abs_error(value: torch.Tensor, reference: torch.Tensor) -> float:
    """max |value − reference| over all entries."""
    return float((value - reference).abs().max())


def max_relative_difference(value: torch.Tensor, reference: torch.Tensor) -> float:
    """``max_i |value_i − reference_i| / |reference_i|``."""
    return float(((value - reference).abs() / reference.abs()).max())
