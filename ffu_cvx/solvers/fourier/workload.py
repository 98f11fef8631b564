"""Fourier workloads: validated marginal and product-family workload types.

Solver layer, bottom of :mod:`ffu_cvx.solvers.fourier`: imports numpy and
:mod:`ffu_cvx.model.validation` only. Holds what every other Fourier module needs about a
workload: the attribute-set sizes ``N_S`` (:func:`set_size`), the downward closure
(:func:`closure`, :func:`components`) and the argument checks of domains and
attribute sets.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ...model import validation

__all__ = ["MarginalWorkload", "ProductFamily", "CirculantWorkload", "components", "set_size", "closure",
           "as_workload", "check_domain", "check_attrs", "mapping_items", "target_weight"]


# ----------------------------------------------------------------------------- checks and sizes
def check_domain(domain) -> tuple[int, ...]:
    """Attribute sizes ``(n_1, ..., n_d)``, each an integer >= 2."""
    try:
        dom = tuple(domain)
    except TypeError:
        raise ValueError(f"`domain` must be a sequence of attribute sizes, got {domain!r}") from None
    if not dom:
        raise ValueError("`domain` is empty: give at least one attribute size, e.g. domain=(2, 3)")
    out = []
    for i, n in enumerate(dom):
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 2:
            raise ValueError(f"`domain` sizes must be integers >= 2, but domain[{i}] = {n!r}; "
                             "an attribute with a single value carries no information: drop it")
        out.append(int(n))
    return tuple(out)


def check_attrs(attrs, n_attrs: int | None, name: str) -> tuple[int, ...]:
    """An attribute set: distinct 0-based indices below ``n_attrs`` (any >= 0 when None).

    ``name`` is the argument as the message shows it, backticks included.
    """
    if isinstance(attrs, (int, np.integer)) and not isinstance(attrs, (bool, np.bool_)):
        attrs = (attrs,)
    try:
        attrs = tuple(attrs)
    except TypeError:
        raise ValueError(f"{name} must be a tuple of attribute indices, got {attrs!r}") from None
    for a in attrs:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise ValueError(f"{name} = {attrs!r} holds {a!r}, which is not an attribute index (an int)")
        if n_attrs is None and a < 0:
            raise ValueError(f"{name} = {attrs!r}: attribute indices are 0-based and >= 0, got {a}")
        if n_attrs is not None and not 0 <= a < n_attrs:
            raise ValueError(f"{name} = {attrs!r}: attribute index {a} is out of range; "
                             f"the domain has {n_attrs} attributes, indices 0..{n_attrs - 1}")
    if len(set(attrs)) != len(attrs):
        dup = sorted({a for a in attrs if attrs.count(a) > 1})
        raise ValueError(f"{name} = {attrs!r} lists attribute(s) {dup} more than once; "
                         "give each attribute once per set")
    return tuple(int(a) for a in attrs)


def target_weight(value, name: str) -> float:
    """The weight ``w = 1 / c`` of a per-cell variance target ``c`` (> 0, finite)."""
    try:
        return 1.0 / validation.positive(value, name)
    except ValueError as exc:
        raise ValueError(f"{exc}; a target is a per-cell variance, so it must be > 0") from None


def set_size(domain: tuple[int, ...], attrs) -> int:
    """``N_S = prod_{i in S} n_i`` (1 for the empty set)."""
    return int(math.prod(domain[i] for i in attrs))


def closure(sets) -> tuple[tuple[int, ...], ...]:
    """Downward closure of ``sets`` (sorted tuples), ordered by size then lexicographically."""
    out = set()
    for A in sets:
        for r in range(len(A) + 1):
            out.update(itertools.combinations(A, r))
    return tuple(sorted(out, key=lambda S: (len(S), S)))


# ----------------------------------------------------------------------------- workloads
@dataclass(frozen=True)
class MarginalWorkload:
    """Weighted marginals over the domain ``Z_{n_1} x ... x Z_{n_d}``.

    Parameters
    ----------
    domain : tuple of int, each >= 2
        Attribute sizes ``(n_1, ..., n_d)``.
    sets : tuple of tuple of int
        Attribute sets ``A`` (0-based indices, stored sorted); the marginal on ``A`` has
        ``N_A`` cells. The empty set is the total count.
    weights : tuple of float, each > 0
        ``w_A`` (sum objective ``sum w_A N_A Var_A``; max objective ``max w_A Var_A``).
        Build from variance targets with :meth:`from_targets` (``w_A = 1 / c_A``).

    >>> wl = MarginalWorkload.from_targets((2, 2), {(0,): 1.0, (1,): 2.0})
    >>> wl.targets
    (1.0, 2.0)
    """

    domain: tuple
    sets: tuple
    weights: tuple

    def __post_init__(self):
        domain = check_domain(self.domain)
        sets = tuple(self.sets)
        weights = tuple(self.weights)
        if not sets:
            raise ValueError("`sets` is empty: a marginal workload needs at least one attribute set")
        if len(weights) != len(sets):
            raise ValueError(f"`weights` needs one entry per set ({len(sets)}), got {len(weights)}")
        clean = []
        for j, A in enumerate(sets):
            clean.append(tuple(sorted(check_attrs(A, len(domain), f"`sets[{j}]`"))))
        seen = {}
        for j, A in enumerate(clean):
            if A in seen:
                raise ValueError(f"`sets` lists the marginal {A} twice (entries {seen[A]} and {j}); "
                                 "give each marginal once with its tightest target")
            seen[A] = j
        w = tuple(validation.positive(x, f"weights[{j}]") for j, x in enumerate(weights))
        object.__setattr__(self, "domain", domain)
        object.__setattr__(self, "sets", tuple(clean))
        object.__setattr__(self, "weights", w)

    @classmethod
    def from_targets(cls, domain, targets: Mapping) -> "MarginalWorkload":
        """Workload from per-cell variance targets ``{attrs: c_A}`` (``w_A = 1 / c_A``)."""
        items = mapping_items(targets, "targets")
        w = [target_weight(v, f"targets[{k!r}]") for k, v in items]
        return cls(domain, tuple(k if not isinstance(k, (int, np.integer)) else (k,) for k, _ in items), tuple(w))

    @classmethod
    def from_weights(cls, domain, weights: Mapping) -> "MarginalWorkload":
        """Workload from weights ``{attrs: w_A}`` (for the sum objective)."""
        items = mapping_items(weights, "weights")
        w = [validation.positive(v, f"weights[{k!r}]") for k, v in items]
        return cls(domain, tuple(k if not isinstance(k, (int, np.integer)) else (k,) for k, _ in items), tuple(w))

    @property
    def targets(self) -> tuple:
        """Per-cell variance targets ``c_A = 1 / w_A``."""
        return tuple(1.0 / w for w in self.weights)

    @property
    def n_cells(self) -> int:
        """Size of the full domain ``prod(n_i)`` (never materialised)."""
        return set_size(self.domain, range(len(self.domain)))

    def labels(self) -> tuple:
        """One label per set, e.g. ``"A=(0, 1)"``."""
        return tuple(f"A={A}" for A in self.sets)


def mapping_items(mapping, name: str) -> list:
    """The ``(attrs, value)`` items of a non-empty dict argument ``name``."""
    if not isinstance(mapping, Mapping):
        raise ValueError(f"`{name}` must be a dict {{attrs: value}}, got {type(mapping).__name__}")
    if not mapping:
        raise ValueError(f"`{name}` is empty: give at least one attribute set")
    return list(mapping.items())


@dataclass(frozen=True)
class ProductFamily:
    """A circular product family: queries ``q_t(x) = prod_{i in attrs} g_i((x_i - t_i) mod n_i)``
    for every shift ``t`` (``N_attrs`` queries).

    attrs : tuple of int; vectors : tuple of (n_i,) arrays, one per attribute (stored in
    sorted attribute order); weight : float > 0 (``1 / target``). A marginal is the family
    with every ``g_i = e_0``.
    """

    attrs: tuple
    vectors: tuple
    weight: float = 1.0

    def __post_init__(self):
        attrs = check_attrs(self.attrs, None, "`attrs`")  # the range is checked by CirculantWorkload
        vecs = tuple(self.vectors)
        if len(vecs) != len(attrs):
            raise ValueError(f"`vectors` needs one vector per attribute of {attrs}, got {len(vecs)}")
        clean = []
        for a, g in zip(attrs, vecs):
            try:
                g = np.array(g, dtype=float)
            except (TypeError, ValueError):
                raise ValueError(f"`vectors` entry for attribute {a} is not numeric") from None
            if g.ndim != 1 or not np.all(np.isfinite(g)) or not np.any(g):
                raise ValueError(f"`vectors` entry for attribute {a} must be a finite, non-zero 1-D array, got {g!r}")
            g.setflags(write=False)
            clean.append(g)
        order = np.argsort(np.array(attrs, dtype=np.int64), kind="stable")
        object.__setattr__(self, "attrs", tuple(attrs[i] for i in order))
        object.__setattr__(self, "vectors", tuple(clean[i] for i in order))
        object.__setattr__(self, "weight", validation.positive(self.weight, "weight"))


@dataclass(frozen=True)
class CirculantWorkload:
    """Circulant product families over ``Z_{n_1} x ... x Z_{n_d}`` (each family asks one
    product query at every shift): domain, families (tuple of :class:`ProductFamily`). Sum objective ``sum_k w_k sum_t Var(q_t)``; max objective
    ``max_k w_k Var_k`` (every shift of a family has the same variance)."""

    domain: tuple
    families: tuple

    def __post_init__(self):
        domain = check_domain(self.domain)
        fams = tuple(self.families)
        if not fams:
            raise ValueError("`families` is empty: give at least one ProductFamily")
        for j, f in enumerate(fams):
            if not isinstance(f, ProductFamily):
                raise ValueError(f"`families[{j}]` must be a ProductFamily, got {type(f).__name__}")
            check_attrs(f.attrs, len(domain), f"`families[{j}].attrs`")
            for a, g in zip(f.attrs, f.vectors):
                if g.shape != (domain[a],):
                    raise ValueError(f"`families[{j}]` vector for attribute {a} has length {g.size}, "
                                     f"but the attribute has {domain[a]} values")
        object.__setattr__(self, "domain", domain)
        object.__setattr__(self, "families", fams)

    @property
    def sets(self) -> tuple:
        return tuple(f.attrs for f in self.families)

    @property
    def weights(self) -> tuple:
        return tuple(f.weight for f in self.families)

    @property
    def targets(self) -> tuple:
        return tuple(1.0 / f.weight for f in self.families)

    @property
    def n_cells(self) -> int:
        return set_size(self.domain, range(len(self.domain)))

    def labels(self) -> tuple:
        return tuple(f"family{j}:{f.attrs}" for j, f in enumerate(self.families))

    @classmethod
    def from_marginals(cls, workload: MarginalWorkload) -> "CirculantWorkload":
        """The marginal workload as product families (``g_i = e_0``)."""
        fams = []
        for A, w in zip(workload.sets, workload.weights):
            vecs = [np.eye(workload.domain[i])[0] for i in A]
            fams.append(ProductFamily(A, vecs, w))
        return cls(workload.domain, fams)


def as_workload(workload):
    """``workload`` itself when it is a MarginalWorkload or CirculantWorkload; else ``ValueError``."""
    if not isinstance(workload, (MarginalWorkload, CirculantWorkload)):
        raise ValueError(f"`workload` must be a MarginalWorkload or CirculantWorkload, got {type(workload).__name__}")
    return workload


def components(workload) -> tuple:
    """The components ``S`` (downward closure of the workload's attribute sets)."""
    return closure(as_workload(workload).sets)
