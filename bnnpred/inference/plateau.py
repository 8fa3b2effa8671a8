"""Stopping a stochastic optimiser on a plateau of a noisy objective (issue 22: never a fixed tolerance on a noisy
quantity such as the change of a sampled mean)."""

from __future__ import annotations

from collections.abc import Sequence


def plateau_reached(values: Sequence[float], window: int, tol: float) -> bool:
    """Whether the average of the last ``window`` values differs by less than ``tol`` from the average of the
    ``window`` values before them.

    ``values`` is a trace to be maximised (an ELBO estimate per trace row). Averaging over a window shrinks the
    noise of the comparison by ``√(window / 2)``. A fall by ``tol`` or more is no plateau (a diverging run must not
    count as converged). Needs ``2 · window`` values.
    """
    if len(values) < 2 * window:
        return False
    recent = sum(values[-window:]) / window
    previous = sum(values[-2 * window : -window]) / window
    return abs(recent - previous) < tol

