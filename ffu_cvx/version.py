"""The package version (one place; imported by the package and by the logs and results files)."""

__version__ = "0.1.0"
