"""The package version (one place; imported by the package and by the logs and results files).

Foundation layer: imports nothing.
"""

__version__ = "0.1.0"
