"""bnnpred: an experiment runner for Laplace and variational Bayesian deep learning."""

__version__ = "0.1.0"
