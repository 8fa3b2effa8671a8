"""Input grids for the studies' 2-D toy maps, and distances to the training inputs."""

from __future__ import annotations

import numpy as np
import torch

GRID_POINTS = 100


def grid_around(X: torch.Tensor, margin: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A ``GRID_POINTS``² grid over the inputs' bounding box widened by ``margin``: ``xx``, ``yy`` ``[H, W]`` and
    the points ``[H·W, 2]``."""
    axes = [torch.linspace(float(X[:, i].min()) - margin, float(X[:, i].max()) + margin, GRID_POINTS,
                           dtype=X.dtype) for i in range(2)]
    xx, yy = torch.meshgrid(*axes, indexing="xy")
    return xx, yy, torch.stack([xx.reshape(-1), yy.reshape(-1)], 1)


def nearest_distance(points: torch.Tensor, X: torch.Tensor) -> np.ndarray:
    """Distance from each point ``[G, 2]`` to the nearest of ``X`` ``[N, 2]`` (itself excluded when ``points`` is
    ``X``): ``[G]``."""
    d = torch.cdist(points, X)
    if points is X:
        d.fill_diagonal_(float("inf"))
    return d.min(1).values.numpy()
