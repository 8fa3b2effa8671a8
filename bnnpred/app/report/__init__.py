"""Reports of experiment results: figures and tables."""
