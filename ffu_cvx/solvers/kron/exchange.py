"""Exchangeable values of an attribute, found from the workload's blocks alone.

Solver layer (``ffu_cvx.solvers.kron``), bottom of the package above ``terms``: imports numpy and the
package's ``terms`` (the residual basis).

**The relation.** Values ``i`` and ``j`` of one attribute are *exchangeable* when swapping
them (the transposition ``(i j)`` of the columns) maps every block of every group on that
attribute onto itself up to a permutation of the block's rows: identity rows swap among
themselves, an aggregation row that holds both values or neither stays put. If ``(i j)``
and ``(j k)`` are such automorphisms so is ``(i k) = (i j)(j k)(i j)``, so the relation is
an equivalence; its classes ``C_1 .. C_r`` generate the group ``Sym(C_1) x ... x Sym(C_r)``,
and the whole workload, targets included, is invariant under it. Blocks invariant under
every permutation (the identity, the total, their stacks such as identity plus total)
put every value in one class: they carry no structure.

**Finding the classes** (:func:`exchange_classes`). Columns are first split by an
invariant that an automorphism preserves (per block, the multiset of (entry, sorted row)
over a column's non-zero entries); within each part a representative is tested against
every other value by the exact check (:func:`swaps_rows`: the rows that differ in the two
columns, swapped, are the same multiset of rows), and the values that pass form its
class. As the relation is an equivalence, testing against one representative suffices.

**Orbits of rows** (:func:`row_orbits`). Under the class group, what a row ``a`` of a block
contributes depends on its class sums ``u_k = sum_{v in C_k} a_v / sqrt(|C_k|)`` (the
coordinates of ``a`` on the orthonormal class-average basis) and its residual norms
``rho_k = ||P_k a||^2`` (``P_k`` the projector on the vectors supported on ``C_k`` with
zero sum). Rows equal up to a permutation inside classes have the same ``(u, rho)``:
they are one *reduced row*, computed once from a canonical (class-wise sorted) copy so
that orbit-mates agree bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .terms import residual_basis

__all__ = ["SYMMETRIC_KINDS", "Classes", "RowOrbits", "swaps_rows", "exchange_classes", "row_orbits",
           "attribute_classes"]

#: Block kinds invariant under every permutation of the attribute's values (no check needed).
SYMMETRIC_KINDS = ("identity", "total")


@dataclass(frozen=True, eq=False)
class Classes:
    """The exchangeable classes of an attribute of ``n`` values: ``of`` (n,) the class of each
    value (classes numbered by their first value), ``sizes`` (r,)."""

    of: np.ndarray
    sizes: np.ndarray

    @classmethod
    def build(cls, of) -> "Classes":
        of = np.asarray(of, dtype=np.intp)
        _, first, inverse = np.unique(of, return_index=True, return_inverse=True)
        order = np.argsort(first)                        # classes numbered by their first value
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        of = rank[inverse.reshape(-1)]
        sizes = np.bincount(of, minlength=order.size)
        for a in (of, sizes):
            a.setflags(write=False)
        return cls(of, sizes)

    @property
    def n(self) -> int:
        return self.of.size

    @property
    def r(self) -> int:
        return self.sizes.size

    def members(self, k: int) -> np.ndarray:
        return np.flatnonzero(self.of == k)

    def average_basis(self) -> np.ndarray:
        """(r, n): row ``k`` is ``1_{C_k} / sqrt(|C_k|)`` (orthonormal rows)."""
        M = np.zeros((self.r, self.n))
        M[self.of, np.arange(self.n)] = 1.0 / np.sqrt(self.sizes[self.of])
        return M

    def residual_basis(self, k: int) -> np.ndarray:
        """(|C_k| - 1, n): orthonormal rows spanning the zero-sum vectors supported on ``C_k``
        (Helmert contrasts, :func:`ffu_cvx.solvers.kron.terms.residual_basis`)."""
        return residual_basis(self.members(k), self.n)


def swaps_rows(A: np.ndarray, i: int, j: int) -> bool:
    """Whether swapping columns ``i`` and ``j`` of ``A`` permutes its rows (as a multiset)."""
    moved = A[:, i] != A[:, j]
    if not moved.any():
        return True
    rows = A[moved]
    swapped = rows.copy()
    swapped[:, [i, j]] = rows[:, [j, i]]
    return np.array_equal(_sorted_rows(rows), _sorted_rows(swapped))


def _sorted_rows(R: np.ndarray) -> np.ndarray:
    return R[np.lexsort(R.T[::-1])] if R.shape[0] > 1 else R


def _column_keys(A: np.ndarray) -> list:
    """Per column, an invariant of the automorphisms: the sorted (entry, row key) pairs of its
    non-zero entries, a row's key being its sorted entries (unchanged by permuting columns)."""
    row_key = np.unique(np.sort(A, axis=1), axis=0, return_inverse=True)[1].reshape(-1)
    keys = []
    for col in A.T:
        nz = np.flatnonzero(col)
        keys.append(tuple(sorted(zip(col[nz].tolist(), row_key[nz].tolist()))))
    return keys


def exchange_classes(matrices, n: int) -> Classes:
    """The exchangeable classes of an attribute of ``n`` values whose blocks are ``matrices``
    (each (rows, n)): ``i ~ j`` when ``(i j)`` permutes the rows of every matrix."""
    mats = [np.asarray(A, dtype=float) for A in matrices]
    parts = {}
    keys = list(zip(*[_column_keys(A) for A in mats])) if mats else [()] * n
    for v, key in enumerate(keys):
        parts.setdefault(key, []).append(v)
    of = np.empty(n, dtype=np.intp)
    label = 0
    for part in parts.values():
        left = part
        while left:
            rep, same, rest = left[0], [left[0]], []
            for v in left[1:]:
                (same if all(swaps_rows(A, rep, v) for A in mats) else rest).append(v)
            of[same] = label
            label, left = label + 1, rest
    return Classes.build(of)


def attribute_classes(blocks, n: int) -> Classes:
    """:func:`exchange_classes` of the distinct blocks (``ffu_cvx.workloads.products.Block``) on one
    attribute; the identity and the total need no check."""
    seen, mats = set(), []
    for b in blocks:
        if b.kind in SYMMETRIC_KINDS:
            continue
        key = (b.matrix.shape, b.matrix.tobytes())
        if key not in seen:
            seen.add(key)
            mats.append(b.matrix)
    return exchange_classes(mats, n)


@dataclass(frozen=True, eq=False)
class RowOrbits:
    """A block's rows up to permutations inside classes: ``index`` (rows,) the reduced row of each
    row, ``U`` (k, r) class-average coordinates and ``res`` (k, r) residual norms
    ``||P_c a||^2`` of each reduced row, ``count`` (k,) rows per reduced row."""

    index: np.ndarray
    U: np.ndarray
    res: np.ndarray
    count: np.ndarray

    @property
    def k(self) -> int:
        return self.U.shape[0]


def _canonical(A: np.ndarray, classes: Classes) -> tuple[np.ndarray, np.ndarray]:
    """``(C, M)``: ``A`` with its columns grouped by class (class 0 first) and sorted inside
    each class, row by row, and the (n, r) indicator of the classes in that column order."""
    order = np.argsort(classes.of, kind="stable")
    C = A[:, order]
    start = 0
    for s in classes.sizes.tolist():
        if s > 1:
            C[:, start:start + s] = np.sort(C[:, start:start + s], axis=1)
        start += s
    M = np.zeros((classes.n, classes.r))
    M[np.arange(classes.n), classes.of[order]] = 1.0
    return C, M


def _identity_orbits(classes: Classes) -> RowOrbits:
    """The orbits of the identity's rows in closed form: one per class (its rows ``e_v``), with
    ``U = 1 / sqrt|C_k|`` and residual ``1 - 1/|C_k|`` on its own class."""
    sizes = classes.sizes.astype(float)
    U = np.diag(1.0 / np.sqrt(sizes))
    res = np.diag(np.where(classes.sizes > 1, 1.0 - 1.0 / sizes, 0.0))
    index, count = classes.of.astype(np.intp), classes.sizes.astype(np.intp)
    for a in (index, U, res, count):
        a.setflags(write=False)
    return RowOrbits(index, U, res, count)


def row_orbits(A: np.ndarray, classes: Classes, kind: str = "") -> RowOrbits:
    """The :class:`RowOrbits` of block ``A`` (rows, n) under the class group of ``classes``; an
    ``"identity"`` block's in closed form (the county identity of a geography is 3,143 x 3,143:
    its rows sorted and made unique took seconds per solve)."""
    if kind == "identity":
        return _identity_orbits(classes)
    A = np.asarray(A, dtype=float)
    C, M = _canonical(A, classes)
    canon, index, count = np.unique(C, axis=0, return_inverse=True, return_counts=True)
    sums, squares = canon @ M, (canon * canon) @ M
    sizes = classes.sizes.astype(float)
    U = sums / np.sqrt(sizes)
    res = squares - sums * sums / sizes
    # below rounding of the squares it is zero (a row constant on the class); singletons have none
    res[(res <= 1e-12 * np.maximum(squares, 1e-300)) | (classes.sizes == 1)[None, :]] = 0.0
    for a in (index, U, res, count):
        a.setflags(write=False)
    return RowOrbits(index.reshape(-1), U, res, count)
