"""What an SM-II run remembers of its iterates: the best sub-problem end, the cheapest iterate, ends to mix.

Solver layer (SM-II): imports :mod:`~ffu_cvx.solvers.smii.mixing` and :mod:`~ffu_cvx.solvers.smii.model` only.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from .mixing import EndPool, end_of
from .model import Point

__all__ = ["Best", "Lowest", "Incumbents"]

#: Sub-problem ends kept to be mixed with later iterates (:mod:`~ffu_cvx.solvers.smii.mixing`), besides
#: the best one, within ``MIX_BYTES`` of covariances (at k = 4,096 two ends, 268 MB).
MIX_ENDS = 3
MIX_BYTES = 2 ** 28
#: Iterates are mixed only once theirs, the best or the least-cost gap is within this multiple of ``tol``.
MIX_WITHIN = 10.0


class Best(NamedTuple):
    """The sub-problem end with the smallest certified gap so far (``kappa``: its target scale)."""

    gap: float
    point: Point
    kappa: float


class Lowest(NamedTuple):
    """The accepted iterate of least normalised cost ``alpha`` so far, at any Newton step (where a
    restart resumes): iteration ``nit``, ``end`` its :func:`~ffu_cvx.solvers.smii.mixing.end_of` tuple (``sigma``,
    scale, profile, ratios), ``c_int`` the internal targets and ``t1``, ``t2``, ``s1``, ``s2`` the soft
    maxes of its sub-problem. The point is rebuilt when needed (at k = 4,096 R and Y hold 260 MB)."""

    alpha: float
    nit: int
    end: tuple
    c_int: object
    t1: float
    t2: float
    s1: object
    s2: object


class Incumbents:
    """The best end (``best``), the cheapest accepted iterate (``lowest``), the last ends kept to be
    mixed (``ends``) and the weight of the mix that certified (``mixed``) of a run on a basis of size ``k``;
    ``to_numpy`` moves the run's arrays to the host."""

    def __init__(self, k: int, to_numpy):
        self.best: Best | None = None
        self.lowest: Lowest | None = None
        self.ends, self.mixed, self.to_numpy = EndPool(min(MIX_ENDS, MIX_BYTES // (8 * k ** 2))), None, to_numpy

    @property
    def best_gap(self) -> float:
        return math.inf if self.best is None else self.best.gap

    def accepted(self, q: Point, alpha: float, nit: int, kappa: float, c_int) -> None:
        """Note the iterate ``q`` of cost ``alpha`` accepted at iteration ``nit``."""
        if self.lowest is None or alpha < self.lowest.alpha:
            self.lowest = Lowest(alpha, nit, end_of(q, kappa, self.to_numpy), c_int, q.t1, q.t2, q.s1, q.s2)

    def rescored(self, bounds) -> None:
        """The best end's gap against the best bound now (it may have risen since)."""
        if self.best is not None:
            self.best = self.best._replace(gap=bounds.gap(self.best.point.cost(self.best.kappa)))

    def near(self, gap: float, bounds, tol: float) -> bool:
        """Whether ``gap``, the best end's or the cheapest iterate's is within ``MIX_WITHIN`` times ``tol``."""
        low = math.inf if self.lowest is None else bounds.gap(self.lowest.alpha)
        return min(gap, self.best_gap, low) <= MIX_WITHIN * tol

    def partner(self, p: Point, kappa: float, keep: bool):
        """``(this end, best mix)``: the end tuple of ``p`` and the least-bound mix of it with the kept ends,
        the best end and the cheapest iterate (:meth:`~ffu_cvx.solvers.smii.mixing.EndPool.best_mix`; None when
        there is none); with ``keep`` ``p`` joins the kept ends."""
        this = end_of(p, kappa, self.to_numpy)
        extra = () if self.best is None else (end_of(self.best.point, self.best.kappa, self.to_numpy),)
        extra += () if self.lowest is None else (self.lowest.end,)
        found = self.ends.best_mix(this[2], this[3], extra=extra)
        if keep:
            self.ends.push(*this)
        return this, found
