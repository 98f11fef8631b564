"""``Domain``: named attributes with sizes and optional value labels (a product histogram).

Workloads layer: imports ``model.validation``, ``counts`` and ``records`` (records to sparse counts). A domain ``{"age": 116, "sex": ["F", "M"]}``
has attributes in the given order, each of ``size`` values coded ``0 .. size - 1``
(value labels, when given, name the codes in order). Cells are flattened row-major
(C order, the last attribute varies fastest), as every histogram in ffu-cvx.

>>> dom = Domain({"age": 116, "sex": ["F", "M"], "race": 63})
>>> dom
Domain({age: 116, sex: 2, race: 63}, 14616 cells)
>>> dom.counts([[20, 0, 5], [20, 0, 5], [31, 1, 0]])
Counts(3 records in 2 of 14616 cells)

A *geography* is an attribute with named levels, each a map from its values to the units that
contain them (counties to states, states to regions): ``Domain({"county": [...]},
levels={"county": {"state": state_of_county}})``. A level's units partition the values, levels of
one attribute nest, and ``{"level": "state"}`` is then a block of one sum per state
(:func:`ffu_cvx.workloads.products.block`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from typing import Mapping

from ..model import validation
from . import counts as _counts, records as _records

__all__ = ["Attribute", "Domain"]


@dataclass(frozen=True)
class Attribute:
    """One attribute: ``name``, ``size`` (>= 1 values), ``values`` (labels, one per code: a
    tuple, or ``range(size)`` for an attribute given by its size), ``ordered`` (True: values
    have an order, ranges and prefixes make sense), ``levels`` (a geography's levels: pairs
    ``(level name, unit of each value)``, the units' labels as text, finest first)."""

    name: str
    size: int
    values: tuple | range
    ordered: bool
    levels: tuple = ()

    def level(self, name: str) -> tuple:
        """The unit of each value (size,) at level ``name``; ``ValueError`` naming the levels otherwise."""
        for level, units in self.levels:
            if level == name:
                return units
        known = [lv for lv, _ in self.levels]
        raise ValueError(f"attribute `{self.name}` has no level {name!r}; "
                         + (f"its levels are {known}" if known else
                            "it has none (Domain(..., levels={'" + self.name + "': {level: unit of each value}}))"))

    @property
    def sized(self) -> bool:
        """True when the attribute was given by its size (its labels are its codes)."""
        return isinstance(self.values, range)

    def label(self, code: int) -> str:
        """The label of value ``code``."""
        return str(self.values[code])

    def code(self, value) -> int:
        """The code of the value labelled ``value`` (a label or its text); ``ValueError`` if none."""
        if self.sized:
            return int(_counts.text_codes(self, [value], lambda i: f"attribute `{self.name}`")[0])
        key = _counts.label_key(value)
        for code, label in enumerate(self.values):
            if str(label) == key:
                return code
        raise ValueError(f"attribute `{self.name}` has no value {value!r}; it has {_counts.known_values(self)}")


def _attribute(name, spec, ordered) -> Attribute:
    if not isinstance(name, str) or not name:
        raise ValueError(f"attribute names must be non-empty strings, got {name!r}")
    if isinstance(spec, (bool, float)) or spec is None:
        raise ValueError(f"attribute `{name}`: give a size (int >= 1) or a list of value labels, got {spec!r}")
    if isinstance(spec, int) or hasattr(spec, "__index__"):
        size = validation.positive_int(spec, name)
        values = range(size)  # lazy: a size of 10^9 costs nothing
    else:
        if isinstance(spec, str):
            raise ValueError(f"attribute `{name}`: value labels must be a list, got the string {spec!r}")
        values = tuple(spec)
        odd = [v for v in values if isinstance(v, bool) or not isinstance(v, (str, int, float))]
        if odd:
            raise ValueError(f"attribute `{name}`: value labels must be strings or numbers, got {odd[0]!r}")
        if not values:
            raise ValueError(f"attribute `{name}`: the list of value labels is empty")
        if len(set(map(str, values))) != len(values):
            raise ValueError(f"attribute `{name}`: value labels must be distinct, got {list(values)!r}")
        size = len(values)
    return Attribute(name, size, values, bool(ordered))


def _units(attr: Attribute, level, parents) -> tuple:
    """The unit (as text) of each value of ``attr`` at ``level`` from ``parents``: one unit per value
    in code order, or a mapping {value label: unit}."""
    where = f"`levels.{attr.name}.{level}`"
    if not isinstance(level, str) or not level:
        raise ValueError(f"`levels.{attr.name}`: level names must be non-empty strings, got {level!r}")
    if isinstance(parents, Mapping):
        codes = None if attr.sized else {str(label): code for code, label in enumerate(attr.values)}
        by_code = {}
        for value, unit in parents.items():
            try:
                code = attr.code(value) if codes is None else codes[_counts.label_key(value)]
            except (KeyError, ValueError):
                raise ValueError(f"{where}: {value!r} is not a value of `{attr.name}`; it has "
                                 f"{_counts.known_values(attr)}") from None
            by_code[code] = unit
        missing = [attr.label(c) for c in range(attr.size) if c not in by_code]
        if missing:
            raise ValueError(f"{where}: the value {missing[0]!r} of `{attr.name}` has no unit ({len(missing)} "
                             "values have none); give every value its unit")
        parents = [by_code[c] for c in range(attr.size)]
    elif isinstance(parents, (str, bytes)) or not hasattr(parents, "__len__"):
        raise ValueError(f"{where}: give one unit per value of `{attr.name}` (a list in code order) or a mapping "
                         f"{{value: unit}}, got {parents!r:.60}")
    parents = list(parents)
    if len(parents) != attr.size:
        raise ValueError(f"{where}: {len(parents)} units for the {attr.size} values of `{attr.name}`; give one "
                         "unit per value, in code order")
    odd = [(c, u) for c, u in enumerate(parents)
           if isinstance(u, bool) or not isinstance(u, (str, int, float)) or u != u]
    if odd:
        c, u = odd[0]
        raise ValueError(f"{where}: the unit of value {attr.label(c)!r} is {u!r}; units are strings or numbers")
    return tuple(_counts.label_key(u) for u in parents)


def _check_nested(attr: Attribute, levels: tuple) -> None:
    """Every two levels of ``attr`` nest: each unit of the one with more units lies in one unit of the other."""
    for (a, ua), (b, ub) in itertools.combinations(levels, 2):
        (fine, units), (coarse, parents) = sorted([(a, ua), (b, ub)], key=lambda lv: -len(set(lv[1])))
        seen = {}
        for code, (unit, parent) in enumerate(zip(units, parents)):
            first, first_parent = seen.setdefault(unit, (code, parent))
            if first_parent != parent:
                raise ValueError(
                    f"`levels.{attr.name}`: levels `{fine}` and `{coarse}` do not nest: {fine} {unit!r} holds "
                    f"{attr.label(first)!r} (in {coarse} {first_parent!r}) and {attr.label(code)!r} (in {coarse} "
                    f"{parent!r})")


def _with_levels(attr: Attribute, spec) -> Attribute:
    if not isinstance(spec, Mapping) or not spec:
        raise ValueError(f"`levels.{attr.name}` must be a non-empty mapping {{level: unit of each value}}, "
                         f"got {spec!r:.60}")
    levels = tuple((level, _units(attr, level, parents)) for level, parents in spec.items())
    _check_nested(attr, levels)
    levels = tuple(sorted(levels, key=lambda lv: -len(set(lv[1]))))
    return dataclasses.replace(attr, levels=levels)


class Domain:
    """Named attributes of a product histogram.

    ``Domain({"age": 116, "sex": ["F", "M"], "race": 63}, ordered=("age",))``: an int is
    a size (values 0..size-1), a list the value labels. ``ordered`` names the attributes
    whose values are ordered (default: those given by a size). ``levels`` makes attributes
    geographies: ``{"county": {"state": units, "region": units}}``, each ``units`` the unit of
    every value (a list in code order, or a mapping {value label: unit}); the levels of one
    attribute must nest. Attributes: ``names`` (a,), ``sizes`` (a,), ``size`` (number of cells,
    a Python int: may exceed 2^63), ``levels`` (what was given, units as text).
    """

    def __init__(self, attributes: Mapping, ordered=None, levels=None):
        if not isinstance(attributes, Mapping) or not attributes:
            raise ValueError("`attributes` must be a non-empty mapping {name: size or value labels}, "
                             f"got {attributes!r}")
        if ordered is None:
            ordered = [n for n, s in attributes.items() if isinstance(s, int) and not isinstance(s, bool)]
        elif isinstance(ordered, str):
            ordered = [ordered]
        unknown = set(ordered) - set(attributes)
        if unknown:
            raise ValueError(f"`ordered` names unknown attributes {sorted(unknown)}; known: {list(attributes)}")
        attrs = {n: _attribute(n, s, n in ordered) for n, s in attributes.items()}
        if levels is not None:
            if not isinstance(levels, Mapping):
                raise ValueError(f"`levels` must be a mapping {{attribute: {{level: unit of each value}}}}, "
                                 f"got {levels!r:.60}")
            unknown = sorted(set(levels) - set(attributes), key=str)
            if unknown:
                raise ValueError(f"`levels` names unknown attributes {unknown}; known: {list(attributes)}")
            attrs.update({n: _with_levels(attrs[n], spec) for n, spec in levels.items()})
        self.attributes = tuple(attrs.values())
        self._index = {a.name: i for i, a in enumerate(self.attributes)}

    @property
    def names(self) -> tuple:
        return tuple(a.name for a in self.attributes)

    @property
    def sizes(self) -> tuple:
        return tuple(a.size for a in self.attributes)

    @property
    def size(self) -> int:
        """Number of cells ``prod(sizes)`` (exact integer)."""
        return math.prod(self.sizes)

    def __len__(self) -> int:
        return len(self.attributes)

    def __getitem__(self, name: str) -> Attribute:
        return self.attributes[self.index(name)]

    def index(self, name: str) -> int:
        """Position of attribute ``name``; ``ValueError`` naming the known ones otherwise."""
        try:
            return self._index[name]
        except (KeyError, TypeError):
            raise ValueError(f"unknown attribute {name!r}; the domain has {list(self.names)}") from None

    def counts(self, records, *, scheduler=None) -> _counts.Counts:
        """Sparse :class:`ffu_cvx.workloads.counts.Counts` of ``records``: an (n, a) array of codes (columns in
        domain order), a mapping of named columns, a CSV, Parquet (file or folder of parts) or Arrow
        IPC file with a header, or a pandas, Polars or Dask DataFrame (values matched to the labels);
        ``scheduler`` (a Dask address or Client) counts a file on a cluster (see
        :mod:`ffu_cvx.workloads.records`). A bad record raises ``ValueError`` naming the column, the row and
        the value; the domain is never materialised."""
        return _records.count(self, records, scheduler=scheduler)

    def spec(self) -> dict:
        """``{name: size or value labels}`` (JSON-able; ``Domain(dom.spec(), ordered=dom.ordered,
        levels=dom.levels)`` rebuilds the domain)."""
        return {a.name: (a.size if a.sized else list(a.values)) for a in self.attributes}

    @property
    def levels(self) -> dict:
        """``{attribute: {level: unit of each value}}`` for the geographies (JSON-able; empty if none)."""
        return {a.name: {lv: list(units) for lv, units in a.levels} for a in self.attributes if a.levels}

    @property
    def ordered(self) -> tuple:
        """Names of the ordered attributes."""
        return tuple(a.name for a in self.attributes if a.ordered)

    def __eq__(self, other) -> bool:
        return isinstance(other, Domain) and self.attributes == other.attributes

    def __hash__(self) -> int:
        return hash(self.attributes)

    def __repr__(self) -> str:
        inner = ", ".join(f"{a.name}: {a.size}" for a in self.attributes)
        return f"Domain({{{inner}}}, {self.size} cells)"
