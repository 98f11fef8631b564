"""Releases: noisy answers, their noise and privacy statements, the ledger, Problem 2 and budgets.

Release layer: this package imports nothing; its modules sit at two levels (see each).
"""
