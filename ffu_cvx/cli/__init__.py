"""The ``ffu-cvx`` command line.

CLI layer: this package imports nothing.
"""
