"""Implicit product workloads over a :class:`ffu_cvx.workloads.domain.Domain` (HDMM's idea, our code).

Workloads layer: imports numpy, ``model`` (``accuracy``, ``memory``, ``problem``, ``validation``), ``counts`` and ``domain``. A
*block* is a small dense matrix over one attribute (identity, total, prefix, all ranges, bands,
given ranges, or any matrix); a *product group* takes one block per attribute (the
attributes it does not name get the total) and one accuracy target for all its
``prod(m_i)`` queries (a variance, a margin at a confidence level, or a joint margin for
the whole table: :mod:`ffu_cvx.model.accuracy`), the Kronecker product ``W_g = A_1 (x) ... (x) A_a``; a
*product workload* is a union of groups. Nothing of size ``d`` x ``m`` is formed:
``dense()`` is the named exit and refuses above a size limit.

The implicit algebra: ``m`` (number of queries), ``apply`` (``W x`` for a dense histogram
or, without materialising the domain, for sparse :class:`ffu_cvx.workloads.counts.Counts`: each
group needs only the marginal over the attributes it does not total), ``grams`` (the
per-factor ``A_i^T A_i``: the gram of a Kronecker product is the Kronecker product of the
grams) and query labels made from attribute and value names (``"age 20-29 × sex F"``),
one at a time (``label(j)``, ``labels``: a lazy sequence, never m strings at once).

>>> from ffu_cvx.workloads.domain import Domain
>>> dom = Domain({"age": 100, "sex": ["F", "M"]})
>>> wl = product(dom, [({"age": {"bands": 10}, "sex": "identity"}, 20.0), ({}, 1.0)])
>>> wl.m, wl.label(5), wl.label(20)
(21, 'age 20-29 × sex M', 'total')
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate
from numbers import Integral, Real
from typing import Mapping

import numpy as np

from ..model import accuracy, validation
from ..model.accuracy import Target
from ..model.memory import check_dense, dense_bytes, human_bytes
from ..model.problem import FitnessProblem
from .counts import Counts
from .domain import Attribute, Domain

__all__ = ["BLOCKS", "Block", "ProductGroup", "ProductWorkload", "ProductProblem", "QueryLabels", "block",
           "product", "DENSE_MAX_CELLS", "DENSE_METHODS", "LABEL_JOIN"]

#: Names of the built-in blocks (``{"bands": w}``, ``{"ranges": [(lo, hi), ...]}`` and a geography's
#: ``{"level": name}`` take a parameter).
BLOCKS = ("identity", "total", "prefix", "ranges", "bands", "level")
#: ``dense()`` refuses workloads with more cells than this unless asked for more.
DENSE_MAX_CELLS = 1 << 14
#: Methods that solve a dense FitnessProblem: a ProductProblem goes to them through ``dense()``.
DENSE_METHODS = ("sdp", "smii", "gd")
#: Joins the attribute parts of a query label: ``"age 20-29 × sex F"``.
LABEL_JOIN = " × "


@dataclass(frozen=True, eq=False)
class Block:
    """One factor ``A`` (r, n) over one attribute, with a label per row, its ``kind`` and the
    ``attribute``'s name."""

    kind: str
    matrix: np.ndarray
    labels: tuple
    attribute: str = ""

    @property
    def is_total(self) -> bool:
        return self.kind == "total"


def _intervals(attr: Attribute, pairs, what: str) -> Block:
    A = np.zeros((len(pairs), attr.size))
    for r, (lo, hi) in enumerate(pairs):
        A[r, lo:hi + 1] = 1.0
    labels = tuple(f"{attr.label(lo)}-{attr.label(hi)}" if hi > lo else attr.label(lo) for lo, hi in pairs)
    return Block(what, A, labels, attr.name)


def _is_code(value) -> bool:
    """Whether ``value`` is a whole number usable as a code (``3`` or ``3.0``; not ``0.5``, ``True`` or ``"3"``)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (Integral, Real)):
        return False
    return isinstance(value, Integral) or (math.isfinite(value) and value == int(value))


def _given_ranges(attr: Attribute, pairs) -> list:
    out = []
    for p in pairs:
        try:
            lo, hi = p
        except (TypeError, ValueError):
            raise ValueError(f"attribute `{attr.name}`: ranges must be (lo, hi) pairs of codes, got {p!r}") from None
        bad = [v for v in (lo, hi) if not _is_code(v)]
        if bad:
            raise ValueError(f"attribute `{attr.name}`: `ranges` entry {p!r} has the bound {bad[0]!r}, not an "
                             f"integer; bounds are whole-number codes in 0..{attr.size - 1} (both included)")
        lo, hi = int(lo), int(hi)
        if not 0 <= lo <= hi < attr.size:
            raise ValueError(f"attribute `{attr.name}`: range {p!r} is outside 0..{attr.size - 1} or empty")
        out.append((lo, hi))
    if not out:
        raise ValueError(f"attribute `{attr.name}`: the list of ranges is empty")
    return out


def _check_block_fits(attr: Attribute, kind: str, rows: int) -> None:
    """Refuse, before forming it, a dense (rows, attr.size) ``kind`` block that cannot fit in memory."""
    check_dense(rows, attr.size, f"the {kind} block of attribute `{attr.name}` ({attr.size} values)", attr.name,
                f"every block is formed densely over its attribute's values: give `{attr.name}` fewer values "
                "(coarser codes)")


def _named_block(attr: Attribute, spec: str) -> Block:
    """The block named ``spec`` (one of :data:`BLOCKS` but the given ranges) over ``attr``."""
    n = attr.size
    rows = {"identity": n, "total": 1, "prefix": n, "ranges": n * (n + 1) // 2}.get(spec)
    if rows is None:
        raise ValueError(f"attribute `{attr.name}`: unknown block {spec!r}; use one of {BLOCKS[:4]}, "
                         "{'bands': width}, {'ranges': [(lo, hi), ...]}, {'level': name} or a matrix")
    if spec in ("prefix", "ranges") and not attr.ordered:
        raise ValueError(f"attribute `{attr.name}` is categorical: block {spec!r} needs ordered values "
                         "(Domain(..., ordered=[...]))")
    _check_block_fits(attr, spec, rows)
    if spec == "identity":
        return Block("identity", np.eye(n), tuple(attr.label(i) for i in range(n)), attr.name)
    if spec == "total":
        return Block("total", np.ones((1, n)), ("all",), attr.name)
    if spec == "prefix":
        return _intervals(attr, [(0, hi) for hi in range(n)], "prefix")
    return _intervals(attr, [(lo, hi) for lo in range(n) for hi in range(lo, n)], "ranges")


def _level_block(attr: Attribute, level) -> Block:
    """One sum per unit of ``attr``'s level ``level`` (units in the order of their first value),
    labelled ``"state AL"``."""
    if not isinstance(level, str):
        raise ValueError(f"attribute `{attr.name}`: {{'level': name}} takes a level name, got {level!r}")
    units = attr.level(level)
    order = list(dict.fromkeys(units))
    _check_block_fits(attr, f"level {level!r}", len(order))
    row = {u: r for r, u in enumerate(order)}
    A = np.zeros((len(order), attr.size))
    A[[row[u] for u in units], np.arange(attr.size)] = 1.0
    return Block("level", A, tuple(f"{level} {u}" for u in order), attr.name)


def _mapping_block(attr: Attribute, spec: Mapping) -> Block:
    """The block of ``{"bands": w}``, ``{"ranges": [(lo, hi), ...]}`` or ``{"level": name}`` over ``attr``."""
    n = attr.size
    if set(spec) == {"level"}:
        return _level_block(attr, spec["level"])
    if set(spec) == {"bands"}:
        w = validation.positive_int(spec["bands"], f"{attr.name}.bands")
        _check_block_fits(attr, "bands", -(-n // w))
        return _intervals(attr, [(lo, min(lo + w, n) - 1) for lo in range(0, n, w)], "bands")
    if set(spec) == {"ranges"}:
        pairs = _given_ranges(attr, spec["ranges"])
        _check_block_fits(attr, "given ranges", len(pairs))
        return _intervals(attr, pairs, "given ranges")
    raise ValueError(f"attribute `{attr.name}`: a block mapping is {{'bands': w}}, {{'ranges': [...]}} or "
                     f"{{'level': name}}, got keys {sorted(spec)}")


def block(attr: Attribute, spec) -> Block:
    """The block of ``spec`` over ``attr``: a name in :data:`BLOCKS`, ``{"bands": w}``,
    ``{"ranges": [(lo, hi), ...]}`` (inclusive codes), ``{"level": name}`` (one sum per unit of a
    geography's level: ``Domain(..., levels=...)``) or a matrix (r, attr.size). A block
    too large for memory (an attribute of 10^12 values) is refused before it is formed."""
    if isinstance(spec, str):
        return _named_block(attr, spec)
    if isinstance(spec, Mapping):
        return _mapping_block(attr, spec)
    A = validation.finite_array(spec, f"{attr.name} block", ndim=2)
    if A.shape[1] != attr.size or A.shape[0] == 0:
        raise ValueError(f"attribute `{attr.name}`: a block matrix must have {attr.size} columns (the attribute's "
                         f"size) and at least one row, got shape {A.shape}")
    zero = np.flatnonzero(~A.any(axis=1))
    if zero.size:
        which = "every row" if zero.size == A.shape[0] else f"row {int(zero[0])}"
        raise ValueError(f"attribute `{attr.name}`: {which} of the block matrix is all zero, so the group's queries "
                         "built on it are identically zero (they need no noise): drop the zero rows")
    return Block("matrix", A, tuple(f"row {r}" for r in range(A.shape[0])), attr.name)


def _refuse_dense(m: int, d: int, max_cells: int, what: str) -> None:
    """Refuse a dense (m, d) ``what`` of a domain over ``max_cells`` cells, saying why and what instead."""
    if d > max_cells:
        raise ValueError(f"`max_cells`: the domain has {d} cells > max_cells = {max_cells}; {what} would be a dense "
                         f"{m} x {d} matrix ({human_bytes(dense_bytes(m, d))}). Nothing needs it: answers come from "
                         "`.apply(counts)` (sparse counts: domain.counts(records)), the solve from method='kron' "
                         "or 'auto'; pass a larger `max_cells` only if it fits in memory")
    check_dense(m, d, what, "max_cells", "use .apply(counts) for answers and method='kron' or 'auto' to solve")


@dataclass(frozen=True, eq=False)
class ProductGroup:
    """``W_g = A_1 (x) ... (x) A_a`` (one block per attribute, domain order) with one
    variance ``target`` for each of its ``m`` queries; ``name`` for labels; ``accuracy``
    the target as the publisher stated it (:class:`ffu_cvx.model.accuracy.Target`; a variance
    when not given)."""

    blocks: tuple
    target: float
    name: str
    accuracy: Target | None = None

    def __post_init__(self):
        if self.accuracy is None:
            object.__setattr__(self, "accuracy", Target("variance", float(self.target)))

    @property
    def factors(self) -> tuple:
        """The block matrices ``A_i`` (r_i, n_i)."""
        return tuple(b.matrix for b in self.blocks)

    @property
    def m(self) -> int:
        return math.prod(b.matrix.shape[0] for b in self.blocks)

    @property
    def shape(self) -> tuple:
        """``(r_1, ..., r_a)``: query ``j`` is the C-order multi-index of ``j`` in this shape."""
        return tuple(b.matrix.shape[0] for b in self.blocks)

    @property
    def grams(self) -> tuple:
        """Per-factor grams ``A_i^T A_i`` (n_i, n_i): ``W_g^T W_g`` is their Kronecker product."""
        return tuple(A.T @ A for A in self.factors)

    @property
    def support(self) -> tuple:
        """Positions of the attributes this group does not total (what its answers depend on)."""
        return tuple(i for i, b in enumerate(self.blocks) if not b.is_total)

    def label(self, j: int) -> str:
        """Label of query ``j`` (0 <= j < m): ``"age 20-29 × sex F"``; ``"total"`` if all are totals."""
        if not 0 <= j < self.m:
            raise IndexError(f"query {j} is not in 0..{self.m - 1}")
        index = []
        for r in reversed(self.shape):
            j, i = divmod(j, r)
            index.append(i)
        parts = [b.labels[i] if b.kind == "level" else f"{b.attribute} {b.labels[i]}"
                 for b, i in zip(self.blocks, reversed(index)) if not b.is_total]
        return LABEL_JOIN.join(parts) or "total"

    def dense(self, max_cells: int = DENSE_MAX_CELLS) -> np.ndarray:
        """``W_g`` (m, d) formed explicitly; refused over ``max_cells`` cells."""
        _refuse_dense(self.m, math.prod(A.shape[1] for A in self.factors), max_cells, f"W of group {self.name!r}")
        W = np.ones((1, 1))
        for A in self.factors:
            W = np.kron(W, A)
        return W

    def apply(self, x) -> np.ndarray:
        """``W_g x`` (m,) for a histogram ``x`` (d,) or sparse :class:`ffu_cvx.workloads.counts.Counts`.

        Dense: mode products, O(d sum r_i). Counts: the marginal over :attr:`support` (the
        totals sum out), then mode products on it; the domain is never formed.
        """
        if isinstance(x, Counts):
            if tuple(x.domain.sizes) != tuple(A.shape[1] for A in self.factors):
                raise ValueError(f"the counts are over a domain of sizes {tuple(x.domain.sizes)}, the group "
                                 f"{self.name!r} over {tuple(A.shape[1] for A in self.factors)}")
            factors = [self.factors[i] for i in self.support]
            T = x.marginal(self.support)
        else:
            factors = self.factors
            T = np.asarray(x, dtype=float).reshape([A.shape[1] for A in factors])
        for axis, A in enumerate(factors):
            T = np.moveaxis(np.tensordot(A, T, axes=([1], [axis])), 0, axis)
        return T.reshape(-1)


class QueryLabels(Sequence):
    """The m query labels of a :class:`ProductWorkload`, made one at a time (``len``, index, iterate)."""

    def __init__(self, workload: "ProductWorkload"):
        self.workload = workload

    def __len__(self) -> int:
        return self.workload.m

    def __getitem__(self, j):
        if isinstance(j, slice):
            return [self.workload.label(i) for i in range(*j.indices(len(self)))]
        return self.workload.label(j + len(self) if j < 0 else j)

    def __iter__(self):
        for g in self.workload.groups:
            for j in range(g.m):
                yield g.label(j)


class ProductWorkload:
    """A union of :class:`ProductGroup` over ``domain``: ``m`` queries, ``d`` cells (ints)."""

    def __init__(self, domain: Domain, groups, name: str = "product"):
        self.domain, self.groups, self.name = domain, tuple(groups), name
        if not self.groups:
            raise ValueError("`groups` is empty: give at least one (blocks, target) pair")
        #: Index of each group's first query, and m at the end (len(groups) + 1,).
        self.offsets = tuple(accumulate((g.m for g in self.groups), initial=0))

    @property
    def m(self) -> int:
        return self.offsets[-1]

    @property
    def d(self) -> int:
        return self.domain.size

    @property
    def c(self) -> np.ndarray:
        """Targets (m,), one per query (formed: m floats)."""
        return np.concatenate([np.full(g.m, g.target) for g in self.groups])

    @property
    def grams(self) -> tuple:
        """Per group, the per-factor grams ``A_i^T A_i``: ``W^T W = sum_g kron(grams[g])``."""
        return tuple(g.grams for g in self.groups)

    def group_of(self, j: int) -> tuple[int, int]:
        """``(g, i)``: query ``j`` is query ``i`` of group ``g``."""
        if not 0 <= j < self.m:
            raise IndexError(f"query {j} is not in 0..{self.m - 1}")
        g = bisect_right(self.offsets, j) - 1
        return g, j - self.offsets[g]

    def label(self, j: int) -> str:
        """Label of query ``j``, e.g. ``"age 20-29 × sex F"`` (see :meth:`ProductGroup.label`)."""
        g, i = self.group_of(j)
        return self.groups[g].label(i)

    @property
    def labels(self) -> QueryLabels:
        """The m labels as a lazy sequence (one string made per access)."""
        return QueryLabels(self)

    def group_index(self) -> np.ndarray:
        """(m,) the group of each query."""
        return np.repeat(np.arange(len(self.groups)), [g.m for g in self.groups])

    def dense(self, max_cells: int = DENSE_MAX_CELLS) -> tuple[np.ndarray, np.ndarray]:
        """``(W (m, d), c (m,))`` explicitly; refuses a domain over ``max_cells`` cells (the
        message says why and what to use instead)."""
        _refuse_dense(self.m, self.d, max_cells, f"the W of {self.name!r}")
        return np.vstack([g.dense(max_cells) for g in self.groups]), self.c

    def apply(self, x) -> np.ndarray:
        """``W x`` (m,) for a histogram ``x`` (d,) or sparse :class:`ffu_cvx.workloads.counts.Counts` over
        this domain, group by group (see :meth:`ProductGroup.apply`)."""
        if isinstance(x, Counts):
            if x.domain != self.domain:
                raise ValueError(f"the counts are over {x.domain!r}, the workload over {self.domain!r}; count "
                                 "the records with this workload's domain (wl.domain.counts(records))")
        else:
            x = np.asarray(x)
            if x.shape != (self.d,):
                raise ValueError(f"`x` must be a histogram of shape ({self.d},) or Counts (domain.counts(records)), "
                                 f"got shape {x.shape}")
        check_dense(self.m, 1, "the answers", "x", "answer fewer queries (fewer or coarser groups)")
        return np.concatenate([g.apply(x) for g in self.groups])

    def to_problem(self, basis="auto") -> "ProductProblem":
        """The structured Problem 1 (``FitnessProblem.from_workload`` calls this)."""
        return ProductProblem(self)

    def __repr__(self) -> str:
        return f"ProductWorkload({self.name!r}: {len(self.groups)} groups, m = {self.m}, over {self.domain!r})"


def _group_blocks(domain: Domain, specs: Mapping, group: str) -> tuple:
    """One block per attribute of ``domain`` (the total where ``specs`` names none); errors name ``group``."""
    try:
        return tuple(block(a, specs.get(a.name, "total")) for a in domain.attributes)
    except ValueError as exc:
        raise ValueError(f"{group}: {exc}") from None


def product(domain: Domain, groups, name: str = "product") -> ProductWorkload:
    """The product workload of ``groups``: a list of ``(blocks, target)`` or ``(blocks, target, name)``
    with ``blocks`` a mapping {attribute: block spec} (attributes not named get the total)
    and ``target`` the accuracy of each of the group's queries: a variance (> 0), or
    ``{"margin": M, "level": L}`` (each query within ``±M`` at level ``L``), or
    ``{"margin": M, "level": L, "joint": True}`` (all of them at once; see :mod:`ffu_cvx.model.accuracy`)."""
    if not isinstance(domain, Domain):
        raise ValueError(f"`domain` must be a Domain, got {type(domain).__name__}")
    if isinstance(groups, (str, Mapping)) or not hasattr(groups, "__iter__"):
        raise ValueError(f"`groups` must be a list of (blocks, target) pairs, got {type(groups).__name__}")
    out = []
    for g, item in enumerate(groups):
        try:
            specs, target, *name_ = item
        except (TypeError, ValueError):
            name_ = [None, None]
        if isinstance(item, (str, Mapping)):
            name_ = [None, None]
        if len(name_) > 1 or not (name_ == [] or isinstance(name_[0], str)):
            raise ValueError(f"group {g}: give a (blocks, target) pair or a (blocks, target, name) triple, "
                             f"got {item!r}")
        if not isinstance(specs, Mapping):
            raise ValueError(f"group {g}: blocks must be a mapping {{attribute: block}}, got {specs!r}")
        unknown = [a for a in specs if a not in domain.names]
        if unknown:
            raise ValueError(f"group {g}: unknown attribute {unknown[0]!r}; the domain has {list(domain.names)}")
        blocks = _group_blocks(domain, specs, f"group {g}" + (f" ({name_[0]!r})" if name_ else ""))
        goal = accuracy.target(target, f"group {g} target", queries=math.prod(b.matrix.shape[0] for b in blocks))
        label = " x ".join(f"{a.name} {specs[a.name] if isinstance(specs[a.name], str) else b.kind}"
                           for a, b in zip(domain.attributes, blocks) if a.name in specs) or "total"
        out.append(ProductGroup(blocks, goal.variance, name_[0] if name_ else label, goal))
    return ProductWorkload(domain, out, name)


class ProductProblem:
    """Problem 1 for a :class:`ProductWorkload`: the structured counterpart of
    :class:`ffu_cvx.model.problem.FitnessProblem` (what ``FitnessProblem.from_workload`` gives
    for a product workload). ``dense()`` is the FitnessProblem of the same queries when
    the domain is small enough."""

    def __init__(self, workload: ProductWorkload):
        if not isinstance(workload, ProductWorkload):
            raise ValueError(f"`workload` must be a ProductWorkload, got {type(workload).__name__}")
        self.workload = workload

    domain = property(lambda self: self.workload.domain)
    groups = property(lambda self: self.workload.groups)
    m = property(lambda self: self.workload.m)
    d = property(lambda self: self.workload.d)
    name = property(lambda self: self.workload.name)

    def dense(self, max_cells: int = DENSE_MAX_CELLS, basis="auto"):
        """The dense :class:`ffu_cvx.model.problem.FitnessProblem` of the same queries and targets."""
        W, c = self.workload.dense(max_cells)
        return FitnessProblem(W, c, basis=basis, labels=tuple(self.workload.labels), name=self.name)

    def for_method(self, method: str, max_cells: int = DENSE_MAX_CELLS):
        """The problem ``method`` takes: :meth:`dense` for the dense methods (:data:`DENSE_METHODS`),
        this structured problem otherwise. A domain too large for a dense method is refused
        with the reason and the structured method to use."""
        if str(method).lower() not in DENSE_METHODS:
            return self
        try:
            return self.dense(max_cells)
        except ValueError as exc:
            raise ValueError(f"method {method!r} solves a dense problem, and this product workload is too large for "
                             f"one: {exc}") from None

    def __repr__(self) -> str:
        return (f"ProductProblem({self.name!r}: {len(self.groups)} groups, m = {self.m}, "
                f"d = {self.d} cells over {self.domain.names})")
