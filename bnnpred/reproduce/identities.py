"""The notes' unit and identity checklist items on a page: the theorems and algorithm checks the figures rest on
(GGN = Hessian on linear models, Laplace-GGN = BLR on pseudo-data, weight space = function space, one NGVI step =
the BLR posterior, SLANG's fast linear algebra, the VL regulariser, the toy data sets, ...), each measured on a
small seeded float64 problem through the library's own code and compared with an independent reference
(:mod:`bnnpred.reproduce.identity_checks`); and the items that ask what every run records, checked on the files
of small runs made through the runner.

The checks run no experiment (at most a few optimiser steps on a toy, and six runs of seconds) and take about
30 s on one thread, so every tier (and ``--report-only``) measures them again with the code at hand; the unit tests
assert the same identities on their own problems.
"""

from __future__ import annotations

from types import ModuleType

from bnnpred.reproduce.base import Reproduction, Study
from bnnpred.reproduce.claims import Claim, items
from bnnpred.reproduce.identity_checks import (
    notes000_methods,
    notes000_theory,
    notes001,
    notes002,
    notes003,
    notes004,
    records,
    single_thread,
)

SECTIONS: tuple[tuple[str, tuple[ModuleType, ...]], ...] = (
    ("notes-000 (the thesis): likelihoods, GGN, Laplace-GGN as BLR and GP, NGVI, the toy data", (notes000_theory,
                                                                                                   notes000_methods)),
    ("notes-001 (Variational Laplace): the regulariser, the KL, the ELBO, the guards", (notes001,)),
    ("notes-002 (SLANG): the fast low-rank algebra, the update, the gradient rows", (notes002,)),
    ("notes-003 (the thesis's GGN chapter): GGN, GLM = GP, the evidence, VOGGN → Laplace", (notes003,)),
    ("notes-004 (the GLM predictive): linearisation, curvature, weight space = function space", (notes004,)),
    ("Run records: the fields the notes ask every run to record (notes-000 #21, notes-001 #11, notes-004 #11)",
     (records,)),
)


def measure(modules: tuple[ModuleType, ...]) -> list[Claim]:
    """Every claim of ``modules`` (each module's ``claims()``), in their order."""
    with single_thread():
        return [c for module in modules for c in module.claims()]


def make(r: Reproduction) -> str:
    """The page: one section per notes file, its claims measured now (nothing is read from runs; the provenance
    line, written after them, gives the time they took)."""
    sections = [(title, r.table(measure(modules))) for title, modules in SECTIONS]
    lines = ["# The notes' unit, identity and run-record checks, measured", "",
             r.provenance("bnnpred reproduce identities"), "",
             "Each row of the notes-NNN sections measures one pass criterion of a notes file's checklist (its "
             "unit, identity and data checks) on a small seeded float64 problem, through the code the runner uses, "
             "against an independent reference: autograd derivatives and Hessians, dense linear algebra, central "
             "finite differences, torch.distributions, enumeration or a large Monte Carlo reference. The tolerances "
             "are the notes' where they give one; a row whose tolerance is ours says so and why. The run-record "
             "section makes small runs through the runner and looks up, in the files each writes, every field an "
             "item asks a run to record (a field marked (config) is a setting of the config the run saved). "
             "Settings: the modules of `bnnpred/reproduce/identity_checks/`."]
    for title, table in sections:
        lines += ["", f"## {title}", "", table]
    return "\n".join(lines) + "\n"


STUDY = Study(name="identities", title="The notes' unit, identity and run-record checklist items, measured",
              make=make, cpu_cost="about 30 s",
              items=(*items(0, *range(1, 11), 21), *items(1, *range(1, 6), 11), *items(2, *range(1, 8)),
                     *items(3, *range(1, 5)), *items(4, *range(1, 4), 11)))
