"""Top-down estimation of nested count tables: coarse tables first, finer ones subject to them.

Estimate layer: imports numpy and scipy (optimize, sparse) only; it reads a product workload's
groups and blocks (:mod:`ffu_cvx.workloads.products`) without importing the module.

A *count table* is a product group whose every block is a partition: a 0/1 matrix whose
rows are disjoint (identity, total, bands, disjoint given ranges), so each query counts
the records in one cell of a coarsened domain and the group's answers, in C order, are
that table. Table ``h`` *nests in* table ``g`` when, attribute by attribute, every class
of ``h`` is a union of classes of ``g``: every value of ``h`` is a sum of values of ``g``.

:func:`lattice` finds the nesting of a workload's tables; :func:`estimate` then turns
unbiased, consistent table values ``a_hat`` (one per query) into non-negative integers
that nest exactly, table by table in order of depth (a table's depth is the length of the
longest chain of tables nested in it):

1. **fit**: the table's values closest to its own ``a_hat`` (Euclidean: the queries of one
   table share one variance) among the non-negative ones whose sums are the integer values
   already fixed for its *parents* (the deepest tables nested in it). With one parent the
   problem separates by parent cell into projections onto scaled simplices (a sort each);
   with several, Dykstra's alternating projections onto each parent's set converge to the
   projection onto their intersection. A table with no parent is clipped at 0;
2. **controlled rounding**: the integers within 1 of the fitted values that keep every
   parent's sums exactly and minimise the squared distance to them: with one parent the
   largest fractional parts in each parent cell round up; with several, a 0/1 programme
   (HiGHS through :func:`scipy.optimize.milp`; the constraint matrix of two parents is an
   interval matrix, totally unimodular, so the relaxation is already integral) per
   connected set of cells, within :data:`ROUNDING_SECONDS`. Constraints the integers cannot meet
   (three or more parents that disagree) are relaxed at a large price and reported in
   ``info["violation"]``.

The aggregates keep the accuracy of their own unbiased values (a deep table only moves
within the sums its parents fix, and where the truth is inside that set the projection
moves the values towards it), and non-negativity improves the sparse fine tables without
pushing their zeros into the totals. Finally one integer histogram over the *atoms* (values
no table tells apart, per attribute) with every table as its sums: the table that covers
every atom, or one more fitted and rounded node with the maximal tables as its parents.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, sparse
from scipy.sparse import csgraph

__all__ = ["Lattice", "lattice", "partition", "estimate", "project_simplices", "round_in_parents", "DYKSTRA_TOL",
           "DYKSTRA_MAX_ITER", "CHUNK", "VIOLATION_PRICE", "ROUNDING_SECONDS"]

#: Largest sum-constraint violation (in counts) at which Dykstra's projections stop.
DYKSTRA_TOL = 1e-7
#: Most rounds of Dykstra's projections.
DYKSTRA_MAX_ITER = 5_000
#: Variables per 0/1 programme of the controlled rounding (connected sets are batched up to it).
CHUNK = 20_000
#: Price of one count of violated sum in the controlled rounding (the 0/1 objective is within +-1 a cell).
VIOLATION_PRICE = 1e4
#: Seconds HiGHS may spend on one 0/1 programme of the controlled rounding. Two parents make an interval
#: matrix whose relaxation is integral (milliseconds); three or more may conflict, and branch and bound on,
#: say, a histogram under 35 three-way marginals does not end: its best point then is taken (the conflicts
#: reported), or, without one, the largest parent's sums alone are kept.
ROUNDING_SECONDS = 5.0


def partition(block) -> np.ndarray | None:
    """Class of each value (n,) int64 (-1: in no row) of a partition block, or None if ``block`` is not one."""
    A = np.asarray(block.matrix if hasattr(block, "matrix") else block)
    if not np.all((A == 0) | (A == 1)) or np.any(A.sum(axis=0) > 1):
        return None
    covered = A.any(axis=0)
    return np.where(covered, A.argmax(axis=0), -1).astype(np.int64)


@dataclass(frozen=True)
class Lattice:
    """The nesting of a workload's count tables.

    classes : per published table, per attribute, the class of each value (n_a,) (-1: uncounted);
    atoms : per attribute, the atom of each value (n_a,); atom_classes : per table, per
    attribute, the class of each atom; shapes : per table, its shape (classes per attribute);
    same : per table, the first table equal to it (itself if none); parents : per table,
    the maximal tables strictly nested in it; depth : per table; cover : the table whose
    cells are the atoms, or None.
    """

    classes: tuple
    atoms: tuple
    atom_classes: tuple
    shapes: tuple
    same: tuple
    parents: tuple
    depth: tuple
    cover: int | None
    published: int

    @property
    def atom_shape(self) -> tuple:
        return tuple(int(a.max()) + 1 for a in self.atoms)

    def order(self) -> list:
        """The distinct tables, shallowest first."""
        return sorted((g for g in range(len(self.shapes)) if self.same[g] == g), key=lambda g: (self.depth[g], g))

    def from_published(self, g: int, values: list) -> np.ndarray:
        """(m_g,) the values of table ``g`` summed from the first published table it nests in."""
        if g < self.published:
            return np.asarray(values[g], dtype=float)
        h = next(h for h in range(self.published) if _nests(self.atom_classes[h], self.atom_classes[g],
                                                            self.shapes[h]))
        idx = self.parent_index(h, g)
        on = idx >= 0
        return np.bincount(idx[on], np.asarray(values[h], dtype=float)[on], math.prod(self.shapes[g]))

    def parent_index(self, g: int, h: int) -> np.ndarray:
        """(m_g,) the cell of table ``h`` that each cell of table ``g`` sums into (-1: none)."""
        return _cell_map(self.atom_classes[g], self.atom_classes[h], self.shapes[g], self.shapes[h])

    def atom_index(self, h: int) -> np.ndarray:
        """(n_atoms,) the cell of table ``h`` of each atom (-1: none)."""
        return _index(self.atom_classes[h], self.shapes[h])


def _index(class_of: tuple, shape: tuple) -> np.ndarray:
    """C-order cell of every combination of the per-attribute class maps (-1 where any is -1)."""
    idx = np.zeros((1,) * len(class_of), dtype=np.int64)
    bad = np.zeros_like(idx, dtype=bool)
    stride = 1
    for a in reversed(range(len(class_of))):
        c = class_of[a].reshape([-1 if i == a else 1 for i in range(len(class_of))])
        idx = idx + np.maximum(c, 0) * stride
        bad = bad | (c < 0)
        stride *= shape[a]
    return np.where(bad, -1, idx).reshape(-1)


def _class_map(fine: np.ndarray, coarse: np.ndarray, size: int) -> np.ndarray | None:
    """The coarse class of each fine class (size,) when every coarse class is a union of fine ones, else None."""
    if np.any((coarse >= 0) & (fine < 0)):
        return None
    out = np.full(size, -2, dtype=np.int64)
    on = fine >= 0
    out[fine[on]] = coarse[on]
    check = out[fine[on]]
    return out if np.array_equal(check, coarse[on]) and not np.any(out == -2) else None


def _cell_map(fine_classes, coarse_classes, fine_shape, coarse_shape) -> np.ndarray:
    maps = [_class_map(f, c, n) for f, c, n in zip(fine_classes, coarse_classes, fine_shape)]
    return _index(tuple(maps), coarse_shape)


def _nests(g_classes, h_classes, g_shape) -> bool:
    return all(_class_map(f, c, n) is not None for f, c, n in zip(g_classes, h_classes, g_shape))


def _atoms(per_table: list) -> np.ndarray:
    """The atom of each value of one attribute: values with the same class in every table."""
    keys = np.stack(per_table, axis=1) if per_table else np.zeros((0, 0))
    return np.unique(keys, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)


def _canonical(c: np.ndarray) -> np.ndarray:
    """``c`` with its classes renumbered in order of first appearance (-1 kept): equal partitions, equal arrays."""
    out = np.full(c.size, -1, dtype=np.int64)
    on = c >= 0
    first, inverse = np.unique(c[on], return_index=True, return_inverse=True)[1:]
    out[on] = np.argsort(np.argsort(first))[inverse.reshape(-1)]
    return out


def _meet_classes(c1: np.ndarray, c2: np.ndarray) -> np.ndarray:
    """The finest partition of one attribute's atoms coarser than both ``c1`` and ``c2`` (class per atom,
    -1 where either leaves an atom uncounted or a class reaches such an atom)."""
    for fine, coarse in ((c1, c2), (c2, c1)):
        if _class_map(fine, coarse, int(fine.max(initial=-1)) + 1) is not None:
            return coarse
    n = c1.size
    r1, r2 = int(c1.max(initial=-1)) + 1, int(c2.max(initial=-1)) + 1
    rows, cols = [], []
    for c, offset in ((c1, n), (c2, n + r1)):
        on = np.flatnonzero(c >= 0)
        rows.append(on)
        cols.append(c[on] + offset)
    size = n + r1 + r2
    graph = sparse.coo_matrix((np.ones(sum(r.size for r in rows)), (np.concatenate(rows), np.concatenate(cols))),
                              shape=(size, size))
    comp = csgraph.connected_components(graph, directed=False)[1][:n]
    bad = np.zeros(comp.max() + 1, dtype=bool)
    bad[comp[(c1 < 0) | (c2 < 0)]] = True
    good = np.flatnonzero(~bad[comp])
    out = np.full(n, -1, dtype=np.int64)
    out[good] = np.unique(comp[good], return_inverse=True)[1].reshape(-1)
    return out


def _meets(atom_classes: list, shapes: list) -> None:
    """Append to ``atom_classes`` and ``shapes`` the meets of every two tables (repeatedly) that are new."""
    def key(t):
        return tuple(_canonical(c).tobytes() for c in t)

    known = {key(t) for t in atom_classes}
    done = 0
    while done < len(atom_classes):
        for b in range(done):
            t = tuple(_meet_classes(x, y) for x, y in zip(atom_classes[done], atom_classes[b]))
            shape = tuple(int(c.max(initial=-1)) + 1 for c in t)
            if min(shape) > 0 and key(t) not in known:
                known.add(key(t))
                atom_classes.append(t)
                shapes.append(shape)
        done += 1


def lattice(workload) -> Lattice | None:
    """The :class:`Lattice` of ``workload``'s groups (and of the meets of every two, which the workload may not
    publish: two tables must agree on what they share), or None if a group is not a count table."""
    classes = []
    for group in workload.groups:
        parts = [partition(b) for b in group.blocks]
        if any(p is None for p in parts):
            return None
        classes.append(tuple(parts))
    n_attr = len(workload.domain.attributes)
    atoms = tuple(_atoms([c[a] for c in classes]) for a in range(n_attr))
    atom_classes = []
    for c in classes:
        per = []
        for a in range(n_attr):
            first = np.zeros(int(atoms[a].max()) + 1, dtype=np.int64)
            first[atoms[a]] = c[a]
            per.append(first)
        atom_classes.append(tuple(per))
    shapes = [tuple(int(b.matrix.shape[0]) for b in g.blocks) for g in workload.groups]
    _meets(atom_classes, shapes)
    G = len(atom_classes)
    nest = [[g != h and _nests(atom_classes[g], atom_classes[h], shapes[g]) for h in range(G)] for g in range(G)]
    same = tuple(next(h for h in range(G) if h == g or (nest[g][h] and nest[h][g])) for g in range(G))
    strict = [[nest[g][h] and not nest[h][g] and same[h] == h for h in range(G)] for g in range(G)]
    depth = [0] * G
    for g in sorted(range(G), key=lambda g: sum(strict[g])):
        depth[g] = 1 + max((depth[h] for h in range(G) if strict[g][h]), default=-1)
    parents = tuple(tuple(h for h in range(G) if strict[g][h] and not any(strict[k][h] for k in range(G)
                                                                            if strict[g][k]))
                    for g in range(G))
    atom_shape = tuple(int(a.max()) + 1 for a in atoms)
    cover = next((g for g in range(G) if same[g] == g and shapes[g] == atom_shape and all(
        np.array_equal(ac, np.arange(n)) for ac, n in zip(atom_classes[g], atom_shape))), None)
    return Lattice(tuple(classes), atoms, tuple(atom_classes), tuple(shapes), same, parents, tuple(depth), cover,
                   len(classes))


# ----------------------------------------------------------------------------- the fit
def project_simplices(v: np.ndarray, parent: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Euclidean projection of ``v`` (n,) onto ``{t >= 0: sum of t over parent cell p = totals[p]}``.

    ``parent`` (n,) int: each value's parent cell (-1: no constraint, clipped at 0); ``totals``
    (P,) >= 0. Per parent cell ``t = max(v - theta, 0)`` with ``theta`` found from the sorted values.
    """
    v = np.asarray(v, dtype=float)
    out = np.maximum(v, 0.0)
    on = np.flatnonzero(parent >= 0)
    if on.size == 0:
        return out
    p, w = parent[on], v[on]
    order = np.lexsort((-w, p))
    p, w = p[order], w[order]
    starts = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
    rank = np.arange(p.size) - np.repeat(starts, np.diff(np.r_[starts, p.size])) + 1
    csum = np.cumsum(w)
    csum -= np.repeat(np.r_[0.0, csum[starts[1:] - 1]], np.diff(np.r_[starts, p.size]))
    theta = (csum - totals[p]) / rank
    ok = w > theta
    # the last k in each parent cell with w_k > theta_k: theta there is the threshold
    last = np.zeros(totals.shape[0], dtype=np.int64) - 1
    np.maximum.at(last, p[ok], np.flatnonzero(ok))
    thr = np.where(last >= 0, theta[np.maximum(last, 0)], -np.inf)
    empty = last < 0  # a zero total: every child 0
    thr[empty] = np.inf
    out[on] = np.maximum(v[on] - thr[parent[on]], 0.0)
    return out


def _dykstra(v: np.ndarray, constraints: list, report) -> tuple[np.ndarray, int, float]:
    """Projection of ``v`` onto the intersection of the sets of ``constraints`` ((parent, totals) pairs);
    ``report(share)`` after each round, the shares (progress of the violation to its tolerance, on a log
    scale) adding up to at most 1."""
    x, incr = v.copy(), [np.zeros_like(v) for _ in constraints]
    violation, it, first, reported = np.inf, 0, None, 0.0
    target = DYKSTRA_TOL * max(1.0, float(np.abs(v).max(initial=0.0)))
    for it in range(1, DYKSTRA_MAX_ITER + 1):
        for k, (parent, totals) in enumerate(constraints):
            y = project_simplices(x + incr[k], parent, totals)
            incr[k] = x + incr[k] - y
            x = y
        violation = max(_violation(x, parent, totals) for parent, totals in constraints)
        if violation <= target:
            break
        first = violation if first is None else first
        share = math.log(first / violation) / math.log(first / target) if first > target else 0.0
        if share > reported:
            report(share - reported)
            reported = share
    report(1.0 - reported)
    return x, it, violation


def _violation(x: np.ndarray, parent: np.ndarray, totals: np.ndarray) -> float:
    on = parent >= 0
    return float(np.abs(np.bincount(parent[on], x[on], totals.shape[0]) - totals).max(initial=0.0))


def fit(v: np.ndarray, constraints: list, on_round=None) -> tuple[np.ndarray, dict]:
    """``(t, info)``: the non-negative values closest to ``v`` whose sums are the ``constraints``' totals;
    ``on_round(share)``, if given, as the fit progresses (the shares add up to 1)."""
    report = on_round or (lambda share: None)
    if len(constraints) < 2:
        t = project_simplices(v, *constraints[0]) if constraints else np.maximum(v, 0.0)
        report(1.0)
        return t, {"rounds": len(constraints), "fit_violation": _violation(t, *constraints[0]) if constraints
                   else 0.0}
    t, rounds, violation = _dykstra(v, constraints, report)
    return t, {"rounds": rounds, "fit_violation": violation}


# ----------------------------------------------------------------------------- controlled rounding
def _round_one(t: np.ndarray, parent: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Largest fractional parts up, per parent cell, so each cell's sum is its total exactly."""
    base = np.floor(t)
    frac = t - base
    out = base.copy()
    on = np.flatnonzero(parent >= 0)
    out[parent < 0] = np.round(t[parent < 0])
    if on.size == 0:
        return out
    need = np.rint(totals - np.bincount(parent[on], base[on], totals.shape[0])).astype(np.int64)
    order = on[np.lexsort((-frac[on], parent[on]))]
    p = parent[order]
    starts = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
    rank = np.arange(p.size) - np.repeat(starts, np.diff(np.r_[starts, p.size]))
    out[order[rank < need[p]]] += 1.0
    return out


def _components(n: int, constraints: list) -> np.ndarray:
    """Connected sets of cells (n,) linked by shared parent cells."""
    rows, cols, offset = [], [], n
    for parent, totals in constraints:
        on = np.flatnonzero(parent >= 0)
        rows.append(on)
        cols.append(parent[on] + offset)
        offset += totals.shape[0]
    r, c = np.concatenate(rows), np.concatenate(cols)
    graph = sparse.coo_matrix((np.ones(r.size), (r, c)), shape=(offset, offset))
    return csgraph.connected_components(graph, directed=False)[1][:n]


def _round_milp(t: np.ndarray, constraints: list, cells: np.ndarray) -> tuple[np.ndarray, float]:
    """0/1 increments of ``floor(t[cells])`` keeping every parent sum; ``(values, violation)``."""
    base = np.floor(t[cells])
    frac = t[cells] - base
    free = np.flatnonzero(frac > 0)
    rows, need = [], []
    for parent, totals in constraints:
        p = parent[cells]
        on = p >= 0
        keys, inv = np.unique(p[on], return_inverse=True)
        A = sparse.coo_matrix((np.ones(on.sum()), (inv, np.flatnonzero(on))), shape=(keys.size, cells.size)).tocsr()
        rows.append(A[:, free])
        need.append(totals[keys] - A @ base)
    A = sparse.vstack(rows).tocsr()
    b = np.rint(np.concatenate(need))
    k = A.shape[0]
    if k == 0:
        return np.round(t[cells]), 0.0
    system = sparse.hstack([A, sparse.identity(k), -sparse.identity(k)]).tocsr()
    cost = np.r_[1.0 - 2.0 * frac[free], np.full(2 * k, VIOLATION_PRICE)]
    integrality = np.r_[np.ones(free.size), np.zeros(2 * k)]
    bounds = optimize.Bounds(np.zeros(free.size + 2 * k), np.r_[np.ones(free.size), np.full(2 * k, np.inf)])
    res = optimize.milp(cost, constraints=optimize.LinearConstraint(system, b, b), integrality=integrality,
                        bounds=bounds, options={"time_limit": ROUNDING_SECONDS})
    if res.x is None:
        parent, totals = max(constraints, key=lambda c: c[1].size)
        out = _round_one(t[cells], parent[cells], totals)
    else:
        out = base.copy()
        out[free] += np.rint(res.x[:free.size])
    return out, _conflict(out, [(parent[cells], totals) for parent, totals in constraints])


def _conflict(values: np.ndarray, constraints: list) -> float:
    """Counts by which ``values``' sums miss the constraints' totals, over the parent cells they reach."""
    missed = 0.0
    for parent, totals in constraints:
        on = parent >= 0
        reached = np.unique(parent[on])
        missed += float(np.abs(np.bincount(parent[on], values[on], totals.size)[reached] - totals[reached]).sum())
    return missed


def round_in_parents(t: np.ndarray, constraints: list, on_chunk=None) -> tuple[np.ndarray, float]:
    """Integers within 1 of ``t`` (n,) >= 0 keeping every constraint's (integer) sums; ``(values, violation)``.

    ``on_chunk(share)``, if given, is called as parts of the cells are done (the shares add up to 1)."""
    report = on_chunk or (lambda share: None)
    if len(constraints) < 2:
        out = _round_one(t, *constraints[0]) if constraints else np.round(t)
        report(1.0)
        return out, 0.0
    out = np.round(t)
    comp = _components(t.shape[0], constraints)
    order = np.argsort(comp, kind="stable")
    bounds = np.flatnonzero(np.r_[True, comp[order][1:] != comp[order][:-1], True])
    violation, start = 0.0, 0
    for i in range(1, bounds.size):
        if bounds[i] - bounds[start] < CHUNK and i < bounds.size - 1:
            continue
        cells = order[bounds[start]:bounds[i]]
        out[cells], v = _round_milp(t, constraints, cells)
        violation += v
        start = i
        report(cells.size / t.shape[0])
    return out, violation


# ----------------------------------------------------------------------------- the whole lattice
@dataclass
class _Progress:
    """Calls ``report(done, seconds_left, what)`` as work is done: a table's work is its cells times one plus
    its parents (a fit and a rounding under each), half for the fit, half for the rounding."""

    report: object
    total: float
    done: float = 0.0
    start: float = field(default_factory=time.perf_counter)

    def step(self, work: float, what: str) -> None:
        self.done += work
        if self.report is None:
            return
        elapsed = time.perf_counter() - self.start
        left = elapsed * (self.total - self.done) / max(self.done, 1.0)
        self.report(min(self.done / self.total, 1.0), left, what)


def estimate(lat: Lattice, values: list, atom_values: np.ndarray | None = None, progress=None):
    """Non-negative integer tables that nest exactly, from unbiased values.

    lat : the workload's :class:`Lattice`; values : per published table, its unbiased values (m_g,),
    consistent (the meets' are their sums);
    atom_values : (n_atoms,) unbiased histogram over the atoms, used when no table covers
    them (then required); progress : None or ``progress(done, seconds_left, what)``.
    Returns ``(tables, atoms, info)``: per table its integers (m_g,), the integer histogram
    over the atoms (n_atoms,), and ``info`` (per table: ``rounds``, ``fit_violation``,
    ``violation`` of the rounding; and ``seconds``).
    """
    order = lat.order()
    n_atoms = math.prod(lat.atom_shape)
    values = [lat.from_published(g, values) for g in range(len(lat.shapes))]
    maximal = [g for g in order if not any(g in lat.parents[k] for k in order)]
    work = sum(len(values[g]) * (1 + len(lat.parents[g])) for g in order)
    work += 0 if lat.cover is not None else n_atoms * (1 + len(maximal))
    track = _Progress(progress, float(work))
    fixed, info = {}, {"tables": {}}
    t0 = time.perf_counter()
    for g in order:
        constraints = [(lat.parent_index(g, h), fixed[h]) for h in lat.parents[g]]
        fixed[g], info["tables"][g] = _one(np.asarray(values[g], dtype=float), constraints, track, f"table {g}")
    if lat.cover is not None:
        atoms = fixed[lat.cover].copy()
    else:
        if atom_values is None:
            raise ValueError("no table covers every atom: `atom_values` (an unbiased histogram over the atoms) "
                             "is needed to fit one")
        constraints = [(lat.atom_index(h), fixed[h]) for h in maximal]
        atoms, info["atoms"] = _one(np.asarray(atom_values, dtype=float), constraints, track, "histogram")
    tables = [fixed[lat.same[g]] for g in range(lat.published)]
    info["seconds"] = time.perf_counter() - t0
    return tables, atoms, info


def _one(v: np.ndarray, constraints: list, track: _Progress, what: str) -> tuple[np.ndarray, dict]:
    half = v.size * (1 + len(constraints)) / 2
    t, info = fit(v, constraints, lambda share: track.step(half * share, f"{what}: fitting"))
    out, violation = round_in_parents(t, constraints, lambda share: track.step(half * share, f"{what}: rounding"))
    info["violation"] = violation
    return out, info
