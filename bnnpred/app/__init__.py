"""The application: a run's config and composition, its checks, set-up, training and evaluation, the health of its
fit, its files and records, and the tables and figures read from runs. It uses the library (the package's other
modules) and never the studies (:mod:`bnnpred.reproduce`) or the command line (:mod:`bnnpred.cli`)."""
