"""The package version (pyproject.toml has the same), importable without the package root's lazy names."""

__version__ = "0.1.0"
