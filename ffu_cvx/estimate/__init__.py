"""Estimates from a release: consistent, non-negative, integer tables.

Estimate layer: this package imports nothing.
"""
