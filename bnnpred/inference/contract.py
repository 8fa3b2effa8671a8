"""The method contract: what every inference method declares in its own module, so that shared code (the runner's
checks, the API, the tests) asks the method instead of testing its name.

A method is a module with a config dataclass deriving from :class:`Method` and a ``fit(problem, cfg) -> Fit``, a
line in :data:`bnnpred.inference.METHODS`, and a YAML in ``conf/inference/``. The config declares

- ``KINDS``: the predictives its result supports, in display order (``map`` alone for a point estimate; ``gp`` only
  where the Laplace-GGN GP view applies);
- ``EVIDENCE``: whether its fit carries the log evidence (``Fit.evidence``) that marglik selection needs;
- ``BUDGET``: where its training length lives (:class:`Budget`);
- ``HEALTH``: what the runner's health check (:mod:`bnnpred.app.health`) reads of its fit (:class:`HealthObjective`);
- ``validate()``: its own value bounds, each failure one ``BnnpredError`` naming the key and a valid value;
- ``check_network(network)``: its checks against the network it is to train (VL's smooth activation, SLANG's
  rank), run by the command line before anything is written and by :func:`bnnpred.inference.fit`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from operator import attrgetter
from typing import ClassVar

from torch import nn

from bnnpred.predictive import PredictiveKind

# What a predictive needs of a method's result, for the error of a pair that does not fit (``map`` needs only θ*,
# which every method gives).
NEEDS = {PredictiveKind.nn: "a posterior", PredictiveKind.glm: "a posterior", PredictiveKind.closed: "a posterior",
         PredictiveKind.bridge: "a posterior",
         PredictiveKind.gp: "the Laplace-GGN posterior (it is its GP view)"}

POINT_KINDS = (PredictiveKind.map,)
POSTERIOR_KINDS = (PredictiveKind.map, PredictiveKind.nn, PredictiveKind.glm, PredictiveKind.closed,
                   PredictiveKind.bridge)


class HealthObjective(str, Enum):
    """The objective a fit is checked on for having ended worse than it started
    (:func:`bnnpred.app.health.fit_problems`).

    ``log_joint``: the negative log joint per example at ``θ*`` against the random start ``θ₀`` (a point estimate,
    or a posterior whose mean is meant to improve the MAP objective). ``elbo``: the method's own objective, the
    ELBO per example of its trace, last row against first. A mean-field mean is not meant to improve the MAP
    objective: under a wide prior its network alone is overconfident while its predictive is not (2x50 tanh BBB on
    Australian at δ = 1: the mean's objective 0.708 → 0.720 per example, its nn predictive's test NLL 0.425).
    SLANG and the natural-gradient family stay on the log joint: no false failure has been seen there (SLANG: 0 of
    the 320 UCI runs) and the natural-gradient divergences of issue 22 show in it; a GLM refinement's ``θ*`` is its
    Laplace's MAP.
    """

    log_joint = "log_joint"
    elbo = "elbo"


@dataclass(frozen=True)
class Budget:
    """Where a method's training length lives: dotted keys under ``inference``, ``steps`` the step (iteration)
    counts of its stages and ``epochs`` those that, when set, count passes over the data instead (with the meaning
    of :func:`bnnpred.inference.base.training_length`).

    The keys keep their names (``map.steps``, ``steps``, ``iterations``, ``max_iterations``): they are the keys of
    the presets and of every saved run's config, which a rename would break. ``Budget`` is the one name to ask.
    """

    steps: tuple[str, ...]
    epochs: tuple[str, ...] = ()


class Method:
    """The base of every inference method's config dataclass (no fields of its own; see the module docstring)."""

    name: str
    KINDS: ClassVar[tuple[PredictiveKind, ...]] = POSTERIOR_KINDS
    EVIDENCE: ClassVar[bool] = False
    BUDGET: ClassVar[Budget]
    HEALTH: ClassVar[HealthObjective] = HealthObjective.log_joint

    def validate(self) -> None:
        """Own value bounds; none by default."""

    def check_network(self, network: nn.Module) -> None:
        """Checks against the network to be trained; none by default."""

    def budget(self) -> dict[str, int | None]:
        """The training length ``{dotted key: value}`` of the ``BUDGET`` keys (steps first, then epochs)."""
        return {key: attrgetter(key)(self) for key in (*self.BUDGET.steps, *self.BUDGET.epochs)}
