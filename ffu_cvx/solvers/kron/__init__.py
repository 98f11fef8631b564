"""The Kronecker solver for product workloads: ``solve_kron`` (``solve(..., method="kron")``).

Solver layer: the package imports numpy, scipy, the model modules (``basis``, ``privacy``, ``problem``,
``result``, ``status``, ``validation``), ``workloads.products``, ``solvers.options``, the dense solvers
``sdp`` and ``smii`` (for the per-attribute problems) and ``fourier`` (unions of marginals). Its modules, from the bottom
(none imports one above it):

- ``terms``: structured mechanisms kept in factors (profile, variances, noise), the
  residual of a large class kept implicit;
- ``exchange``: the exchangeable values of an attribute and the orbits of a block's rows;
- ``whiten``: the whitened strategy answers of a structured mechanism, from sparse counts;
- ``quotient``: attributes read through class sums only, solved on their classes;
- ``hierarchy``: bounds for geography hierarchies from uniform sub-hierarchies;
- ``solution``: :class:`KronSolution`, the Solution with Sigma in factors;
- ``factors``: per-attribute Problem 1 solves (closed forms, SDP, SM-II), cached;
- ``simple``: the exact product of one group, one Kronecker Sigma by block-coordinate
  descent, independent per-group products;
- ``coupled``: blocks coupled across one attribute's classes by a few rows over several
  (a nation over its states), stepped and bounded without forming them;
- ``reduce``: the reduction of unions by exchangeable values (class averages and
  within-class residuals) and its certified block dual ascent;
- ``driver``: :func:`solve_kron`, the choice of structure;
- ``marginals``: unions of marginals through the Fourier optimum (``method="auto"``).
"""

from .driver import STRUCTURES, KronOptions, solve_kron, structure_of
from .marginals import is_marginal_union, solve_marginal_union
from .solution import KronSolution
from .terms import Factor, Term

__all__ = ["KronOptions", "solve_kron", "structure_of", "STRUCTURES", "KronSolution", "Factor", "Term", "is_marginal_union",
           "solve_marginal_union"]
