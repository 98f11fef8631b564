"""The exact reference solver: the SDP of Problem 1, refined and post-checked.

Solver layer: the package imports ``driver``. Its modules, from the bottom (none imports one above it):

- ``scsmodels``: SCS's data of the warm-started model, arrays only;
- ``cvx``: the CVXPY adapter, every conic model of the package and the one place CVXPY is imported;
- ``refine``: the lexicographic refinement (Theorem 5), level by level;
- ``driver``: :func:`solve_sdp` and :class:`SDPOptions`, ``solve(..., method="sdp")``.
"""

from .driver import SDPOptions, solve_sdp

__all__ = ["SDPOptions", "solve_sdp"]
