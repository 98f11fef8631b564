"""Experiments: one module per table or figure, run as ``python -m experiments.<name>``."""
