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
"""

from __future__ import annotations

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
    have an order, ranges and prefixes make sense)."""

    name: str
    size: int
    values: tuple | range
    ordered: bool

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


class Domain:
    """Named attributes of a product histogram.

    ``Domain({"age": 116, "sex": ["F", "M"], "race": 63}, ordered=("age",))``: an int is
    a size (values 0..size-1), a list the value labels. ``ordered`` names the attributes
    whose values are ordered (default: those given by a size). Attributes: ``names``
    (a,), ``sizes`` (a,), ``size`` (number of cells, a Python int: may exceed 2^63).
    """

    def __init__(self, attributes: Mapping, ordered=None):
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
        self.attributes = tuple(_attribute(n, s, n in ordered) for n, s in attributes.items())
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
        """``{name: size or value labels}`` (JSON-able; ``Domain(dom.spec(), ordered=dom.ordered)``
        rebuilds the domain)."""
        return {a.name: (a.size if a.sized else list(a.values)) for a in self.attributes}

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
