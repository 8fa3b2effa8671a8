"""GLM-predictive paper App. B.3: Table 1's study (:mod:`bnnpred.reproduce.notes004_table1`) with one hidden layer
of 50 tanh units; the paper reports that its conclusions hold on this architecture too."""

from bnnpred.reproduce.base import Study
from bnnpred.reproduce.claims import items
from bnnpred.reproduce.notes004_table1 import make_for

STUDY = Study(name="notes004_table1_1x50", title="GLM predictive paper (notes-004) App. B.3: Table 1's study with "
              "1x50 tanh", make=make_for(1), cpu_cost="54 min with 2 jobs (525 runs, measured 2026-11-27)",
              items=items(4, 6, 7), full_scale=True, from_records=True)
