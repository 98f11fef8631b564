"""The model: Problem 1, its bases, privacy accounting, accuracy targets, certificates and the Solution.

Model layer: its modules import numpy, scipy and each other only.
"""
