"""Implicit product workloads over a :class:`ffu_cvx.domain.Domain` (HDMM's idea, our code).

Core layer: imports numpy, ``domain``, ``memory``, ``problem`` and ``validation``. A *block* is a
small dense matrix over one attribute (identity, total, prefix, all ranges, bands,
given ranges, or any matrix); a *product group* takes one block per attribute (the
attributes it does not name get the total) and one variance target for all its
``prod(m_i)`` queries, the Kronecker product ``W_g = A_1 (x) ... (x) A_a``; a
*product workload* is a union of groups. Nothing of size ``d`` x ``m`` is formed:
``dense()`` is the named exit and refuses above a size limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from . import validation
from .domain import Attribute, Domain
from .memory import check_dense
from .problem import FitnessProblem

__all__ = ["BLOCKS", "Block", "ProductGroup", "ProductWorkload", "ProductProblem", "block", "product",
           "DENSE_MAX_CELLS"]

#: Names of the built-in blocks (``{"bands": w}`` and ``{"ranges": [(lo, hi), ...]}`` take a parameter).
BLOCKS = ("identity", "total", "prefix", "ranges", "bands")
#: ``dense()`` refuses workloads with more cells than this unless asked for more.
DENSE_MAX_CELLS = 1 << 14


@dataclass(frozen=True, eq=False)
class Block:
    """One factor ``A`` (r, n) over one attribute, with a label per row and its ``kind``."""

    kind: str
    matrix: np.ndarray
    labels: tuple

    @property
    def is_total(self) -> bool:
        return self.kind == "total"


def _intervals(attr: Attribute, pairs, what: str) -> Block:
    A = np.zeros((len(pairs), attr.size))
    for r, (lo, hi) in enumerate(pairs):
        A[r, lo:hi + 1] = 1.0
    labels = tuple(f"{attr.label(lo)}-{attr.label(hi)}" if hi > lo else attr.label(lo) for lo, hi in pairs)
    return Block(what, A, labels)


def _given_ranges(attr: Attribute, pairs) -> list:
    out = []
    for p in pairs:
        try:
            lo, hi = (int(v) for v in p)
        except (TypeError, ValueError):
            raise ValueError(f"attribute `{attr.name}`: ranges must be (lo, hi) pairs of codes, got {p!r}") from None
        if not 0 <= lo <= hi < attr.size:
            raise ValueError(f"attribute `{attr.name}`: range {p!r} is outside 0..{attr.size - 1} or empty")
        out.append((lo, hi))
    if not out:
        raise ValueError(f"attribute `{attr.name}`: the list of ranges is empty")
    return out


def block(attr: Attribute, spec) -> Block:
    """The block of ``spec`` over ``attr``: a name in :data:`BLOCKS`, ``{"bands": w}``,
    ``{"ranges": [(lo, hi), ...]}`` (inclusive codes) or a matrix (r, attr.size)."""
    n = attr.size
    if isinstance(spec, str):
        if spec == "identity":
            return Block("identity", np.eye(n), tuple(attr.label(i) for i in range(n)))
        if spec == "total":
            return Block("total", np.ones((1, n)), ("all",))
        if spec in ("prefix", "ranges") and not attr.ordered:
            raise ValueError(f"attribute `{attr.name}` is categorical: block {spec!r} needs ordered values "
                             "(Domain(..., ordered=[...]))")
        if spec == "prefix":
            return _intervals(attr, [(0, hi) for hi in range(n)], "prefix")
        if spec == "ranges":
            return _intervals(attr, [(lo, hi) for lo in range(n) for hi in range(lo, n)], "ranges")
        raise ValueError(f"attribute `{attr.name}`: unknown block {spec!r}; use one of {BLOCKS[:4]}, "
                         "{'bands': width}, {'ranges': [(lo, hi), ...]} or a matrix")
    if isinstance(spec, Mapping):
        if set(spec) == {"bands"}:
            w = validation.positive_int(spec["bands"], f"{attr.name}.bands")
            return _intervals(attr, [(lo, min(lo + w, n) - 1) for lo in range(0, n, w)], "bands")
        if set(spec) == {"ranges"}:
            return _intervals(attr, _given_ranges(attr, spec["ranges"]), "given ranges")
        raise ValueError(f"attribute `{attr.name}`: a block mapping is {{'bands': w}} or {{'ranges': [...]}}, "
                         f"got keys {sorted(spec)}")
    A = validation.finite_array(spec, f"{attr.name} block", ndim=2)
    if A.shape[1] != n or A.shape[0] == 0:
        raise ValueError(f"attribute `{attr.name}`: a block matrix must have {n} columns (the attribute's size) "
                         f"and at least one row, got shape {A.shape}")
    return Block("matrix", A, tuple(f"{attr.name} row {r}" for r in range(A.shape[0])))


@dataclass(frozen=True, eq=False)
class ProductGroup:
    """``W_g = A_1 (x) ... (x) A_a`` (one block per attribute, domain order) with one
    variance ``target`` for each of its ``m`` queries; ``name`` for labels."""

    blocks: tuple
    target: float
    name: str

    @property
    def factors(self) -> tuple:
        """The block matrices ``A_i`` (r_i, n_i)."""
        return tuple(b.matrix for b in self.blocks)

    @property
    def m(self) -> int:
        return math.prod(b.matrix.shape[0] for b in self.blocks)

    def dense(self) -> np.ndarray:
        """``W_g`` (m, d) formed explicitly (callers check the size first)."""
        W = np.ones((1, 1))
        for A in self.factors:
            W = np.kron(W, A)
        return W

    def apply(self, x: np.ndarray) -> np.ndarray:
        """``W_g x`` (m,) for the histogram ``x`` (d,) by mode products, O(d sum r_i)."""
        T = np.asarray(x, dtype=float).reshape([A.shape[1] for A in self.factors])
        for axis, A in enumerate(self.factors):
            T = np.moveaxis(np.tensordot(A, T, axes=([1], [axis])), 0, axis)
        return T.reshape(-1)


class ProductWorkload:
    """A union of :class:`ProductGroup` over ``domain``: ``m`` queries, ``d`` cells (ints)."""

    def __init__(self, domain: Domain, groups, name: str = "product"):
        self.domain, self.groups, self.name = domain, tuple(groups), name
        if not self.groups:
            raise ValueError("`groups` is empty: give at least one (blocks, target) pair")

    @property
    def m(self) -> int:
        return sum(g.m for g in self.groups)

    @property
    def d(self) -> int:
        return self.domain.size

    @property
    def c(self) -> np.ndarray:
        """Targets (m,), one per query (formed: m floats)."""
        return np.concatenate([np.full(g.m, g.target) for g in self.groups])

    def dense(self, max_cells: int = DENSE_MAX_CELLS) -> tuple[np.ndarray, np.ndarray]:
        """``(W (m, d), c (m,))`` explicitly; refuses a domain over ``max_cells`` cells."""
        if self.d > max_cells:
            raise ValueError(f"`dense()`: the domain has {self.d} cells > max_cells = {max_cells}; a dense W would be "
                             f"{self.m} x {self.d}. Solve it structured (method='kron' or 'auto') or pass a larger "
                             "`max_cells` if it fits in memory")
        check_dense(self.m, self.d, f"the dense W of {self.name}", "max_cells",
                    "solve it structured (method='kron' or 'auto')")
        return np.vstack([g.dense() for g in self.groups]), self.c

    def apply(self, x: np.ndarray) -> np.ndarray:
        """``W x`` (m,) for a histogram ``x`` (d,), group by group."""
        return np.concatenate([g.apply(x) for g in self.groups])

    def to_problem(self, basis="auto") -> "ProductProblem":
        """The structured Problem 1 (``FitnessProblem.from_workload`` calls this)."""
        return ProductProblem(self)


def product(domain: Domain, groups, name: str = "product") -> ProductWorkload:
    """The product workload of ``groups``: a list of ``(blocks, target)`` with ``blocks`` a
    mapping {attribute: block spec} (attributes not named get the total)."""
    if not isinstance(domain, Domain):
        raise ValueError(f"`domain` must be a Domain, got {type(domain).__name__}")
    out = []
    for g, item in enumerate(groups):
        try:
            specs, target = item
        except (TypeError, ValueError):
            raise ValueError(f"group {g}: give a (blocks, target) pair, got {item!r}") from None
        if not isinstance(specs, Mapping):
            raise ValueError(f"group {g}: blocks must be a mapping {{attribute: block}}, got {specs!r}")
        for attr in specs:
            domain.index(attr)
        target = validation.positive(target, f"group {g} target")
        blocks = tuple(block(a, specs.get(a.name, "total")) for a in domain.attributes)
        label = " x ".join(f"{a.name} {specs[a.name] if isinstance(specs[a.name], str) else b.kind}"
                           for a, b in zip(domain.attributes, blocks) if a.name in specs) or "total"
        out.append(ProductGroup(blocks, target, label))
    return ProductWorkload(domain, out, name)


class ProductProblem:
    """Problem 1 for a :class:`ProductWorkload`: the structured counterpart of
    :class:`ffu_cvx.problem.FitnessProblem` (what ``FitnessProblem.from_workload`` gives
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
        """The dense :class:`ffu_cvx.problem.FitnessProblem` of the same queries and targets."""
        W, c = self.workload.dense(max_cells)
        return FitnessProblem(W, c, basis=basis, name=self.name)

    def __repr__(self) -> str:
        return (f"ProductProblem({self.name!r}: {len(self.groups)} groups, m = {self.m}, "
                f"d = {self.d} cells over {self.domain.names})")
