"""Bounds for geography hierarchies from uniform sub-hierarchies.

Solver layer (``ffu_cvx.solvers.kron``): imports numpy and ``workloads`` (``domain``, ``products``).

**Nested levels.** An attribute (counties, say) carries a hierarchy when every group's
block on it is the total (the nation), one fixed partition of its values into disjoint
sums (the states), or the identity (the counties). With states of unequal sizes the
states' class averages couple every state through the national rows, and the exact
reduction has one block of (states x the other attributes' class tuples).

**Sub-hierarchies bound the optimum from below.** Keep ``m`` values in each of the ``S``
parts of at least ``m`` values and drop the other cells: a mechanism for the whole
domain, read on the kept cells only (the others set to zero), answers every query
restricted to them with the same variance and has the same profile on them, so the
optimum of the restricted workload is at most the whole one's. The restricted workload is
a *uniform* hierarchy, a product over (part, member) whose blocks are total x total,
identity x total and identity x identity: both attributes are symmetric, the reduction
is small and its certified bound is exact (:func:`uniform_hierarchy`). The bound grows
with ``S`` and ``m`` (a smaller uniform hierarchy is a sub-hierarchy of a larger one); the
parts' sizes, sorted, give the frontier of the largest ``m`` for each ``S``, searched for
the best bound by :func:`best_sub_hierarchy`.

**Padding bounds it from above.** Adding empty values until every part has the largest
part's size gives a uniform hierarchy whose mechanisms, read on the real cells, are
mechanisms for the real workload (the same argument the other way): its optimum is at
least the real one's.
"""

from __future__ import annotations

import numpy as np

from ...workloads.domain import Domain
from ...workloads.products import Block, ProductGroup, ProductProblem, ProductWorkload

__all__ = ["nested_parts", "uniform_hierarchy", "frontier", "best_sub_hierarchy"]

#: Most uniform sub-hierarchies solved by :func:`best_sub_hierarchy` (a golden-section search).
SEARCH_SOLVES = 4
#: Certified gap to which each uniform hierarchy is solved: its bound is valid at any gap, and
#: within this of its optimum.
UNIFORM_TOL = 1e-3


def _level(A: np.ndarray) -> str | None:
    """``"total"``, ``"identity"`` or ``"parts"`` (two or more disjoint 0/1 sums covering every
    value) for a block ``A`` (rows, n); None for any other block."""
    rows, n = A.shape
    if rows == 1 and np.all(A == 1.0):
        return "total"
    if rows == n and np.array_equal(A, np.eye(n)):
        return "identity"
    if 1 < rows < n and np.all((A == 0) | (A == 1)) and np.all(A.sum(axis=0) == 1):
        return "parts"
    return None


def nested_parts(problem: ProductProblem, i: int) -> np.ndarray | None:
    """The part of each value (n,) when every group's block on attribute ``i`` is the total, one
    partition into disjoint sums, or the identity, with the partition and at least one
    other level present; None otherwise."""
    partition, levels = None, set()
    for g in problem.groups:
        A = g.blocks[i].matrix
        level = _level(A)
        if level is None or (level == "parts" and partition is not None and not np.array_equal(partition, A)):
            return None
        partition = A if level == "parts" else partition
        levels.add(level)
    if partition is None or len(levels) < 2:
        return None
    return np.argmax(partition, axis=0)


#: Blocks on (part, member) of each level.
_UNIFORM = {"total": ("total", "total"), "parts": ("identity", "total"), "identity": ("identity", "identity")}


def _geo_blocks(b: Block, S: int, m: int) -> tuple:
    out = []
    for kind, size in zip(_UNIFORM[_level(b.matrix)], (S, m)):
        M = np.ones((1, size)) if kind == "total" else np.eye(size)
        out.append(Block(kind, M, tuple(str(r) for r in range(M.shape[0])), b.attribute))
    return tuple(out)


def uniform_hierarchy(problem: ProductProblem, i: int, S: int, m: int) -> ProductProblem:
    """``problem`` with attribute ``i`` replaced by ``S`` parts of ``m`` members each (two
    attributes, part then member): the national, part and finest levels become total x total,
    identity x total and identity x identity."""
    dom = problem.domain
    name = dom.names[i]
    spec = {}
    for j, a in enumerate(dom.attributes):
        if j == i:
            spec[f"{name} part"], spec[f"{name} member"] = S, m
        else:
            spec[a.name] = a.size if a.sized else list(a.values)
    ordered = [a.name for j, a in enumerate(dom.attributes) if a.ordered and j != i]
    groups = [ProductGroup(g.blocks[:i] + _geo_blocks(g.blocks[i], S, m) + g.blocks[i + 1:], g.target, g.name,
                           g.accuracy) for g in problem.groups]
    return ProductProblem(ProductWorkload(Domain(spec, ordered=ordered), groups,
                                          name=f"{problem.name} ({S} x {m} uniform {name} hierarchy)"))


def frontier(parts: np.ndarray) -> list:
    """``[(S, m)]``: for each number of parts ``S`` (from 2), the largest ``m`` that ``S`` parts all
    reach (the ``S``-th largest part's size), the largest ``S`` kept for each ``m``."""
    sizes = np.sort(np.bincount(parts))[::-1]
    best = {}
    for S in range(2, sizes.size + 1):
        best[int(sizes[S - 1])] = S
    return sorted((S, m) for m, S in best.items())


def best_sub_hierarchy(bound_of, points: list, solves: int = SEARCH_SOLVES) -> dict:
    """``{(S, m): bound}`` of the points of :func:`frontier` that a golden-section search for the
    largest ``bound_of(S, m)`` visits (at most ``solves``; ``bound_of`` may return None to stop)."""
    seen = {}

    def at(k):
        if points[k] not in seen:
            if len(seen) >= solves:
                return -np.inf
            value = bound_of(*points[k])
            if value is None:
                return -np.inf
            seen[points[k]] = value
        return seen[points[k]]

    lo, hi = 0, len(points) - 1
    ratio = (np.sqrt(5.0) - 1.0) / 2.0
    while hi - lo > 2 and len(seen) < solves:
        a = hi - int(round(ratio * (hi - lo)))
        b = lo + int(round(ratio * (hi - lo)))
        a, b = min(a, b), max(a, b)
        if a == b:
            b = a + 1
        if at(a) >= at(b):
            hi = b
        else:
            lo = a
    for k in range(lo, hi + 1):
        at(k)
    return seen
