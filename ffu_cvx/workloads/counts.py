"""Records to sparse counts over a product domain, and the marginals the queries need.

Workloads layer, its bottom: imports numpy, ``model.memory`` and the standard library. It works on any domain
object with ``attributes`` (each with ``name``, ``size`` and ``values``) and ``sizes``,
so :mod:`ffu_cvx.workloads.domain` can import it (``Domain.counts`` is :func:`from_records`).

A domain of 10^9 cells is never materialised: :class:`Counts` keeps only the non-empty
cells, as unique code rows ``codes`` (n_u, a) in cell order (row-major, the last
attribute fastest) with their ``counts`` (n_u,). A query group touches few attributes;
:meth:`Counts.marginal` projects the counts onto them (a dense array over those
attributes only), which is all :meth:`ffu_cvx.workloads.products.ProductGroup.apply` needs.

Records come as an (n, a) array of integer codes (columns in domain order), a mapping
or pandas DataFrame of named columns, or a CSV file with a header; in the last two the
values are matched to the attributes' value labels (for an attribute given by its size
the labels are the numbers ``0 .. size - 1``). Columns the domain does not name are
ignored. A bad record raises ``ValueError`` naming the column, the row and the value.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Mapping
from itertools import repeat
from pathlib import Path

import numpy as np

from ..model.memory import check_dense

__all__ = ["Counts", "from_records", "label_key", "known_values", "text_codes", "column_codes", "csv_header", "open_csv", "MARGINAL_MAX_CELLS", "FLAT_LIMIT", "CSV_CHUNK"]

#: ``marginal`` and ``dense`` refuse to form an array of more cells than this (256 MiB of
#: float64) unless asked for more: a projection onto the attributes a group needs is
#: small, a dense histogram of a large domain is not.
MARGINAL_MAX_CELLS = 1 << 25
#: Cells are numbered by one int64 (``cells``) only below this; above it, by code rows.
FLAT_LIMIT = 2 ** 63 - 1
#: Rows of a CSV file coded at a time (bounds the strings held in memory at once).
CSV_CHUNK = 1 << 16
#: How many value labels an error message lists.
_SHOW = 10


def _is_sized(attr) -> bool:
    """True when the attribute's labels are its codes ``0 .. size - 1`` (given by a size)."""
    return isinstance(attr.values, range)


def known_values(attr) -> str:
    """The values of ``attr`` for an error message (the first few labels, or the code range)."""
    if _is_sized(attr):
        return f"codes 0..{attr.size - 1}"
    shown = ", ".join(map(str, attr.values[:_SHOW]))
    return f"values {shown}{', ...' if attr.size > _SHOW else ''}"


def label_key(value) -> str:
    """The label text a record's value is matched by (integral numbers without ``.0``)."""
    if isinstance(value, (float, np.floating)) and math.isfinite(value) and value == int(value):
        value = int(value)
    return str(value).strip()


def _plain(value):
    """A numpy scalar as the Python value it holds (for error messages)."""
    return value.item() if isinstance(value, np.generic) else value


def _is_nan(value) -> bool:
    """Whether ``value`` is a float NaN (a missing value in a numeric or pandas column)."""
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def column_codes(attr, values, where, first: int = 0) -> np.ndarray:
    """Codes (n,) of one column of labels; ``where(i)`` names record ``first + i`` in errors.

    Every reader of records matches its values through this function, so a value means the
    same code, and a bad one gets the same message, in every path.
    """
    if _is_sized(attr):
        arr = np.asarray(values)
        return _integer_codes(attr, arr, where, first) if arr.dtype.kind in "iuf" else \
            text_codes(attr, values, where, first)
    seq = values.tolist() if isinstance(values, np.ndarray) else list(values)
    lookup = {str(v): c for c, v in enumerate(attr.values)}
    try:  # fast path: text exactly as labelled (a CSV's usual case)
        codes = np.fromiter(map(lookup.get, seq, repeat(-1)), dtype=np.int64, count=len(seq))
    except TypeError:  # unhashable values: every one through its text
        codes = np.full(len(seq), -1, dtype=np.int64)
    for i in np.flatnonzero(codes < 0):  # numbers, padded text, or unknown values
        code = lookup.get(label_key(seq[i]), -1)
        if code < 0 and _is_nan(seq[i]):
            raise ValueError(f"{where(first + int(i))}, column `{attr.name}`: value nan is NaN (not a number: a "
                             f"missing value?); `{attr.name}` has {known_values(attr)}")
        if code < 0:
            raise ValueError(f"{where(first + int(i))}, column `{attr.name}`: unknown value {_plain(seq[i])!r}; "
                             f"`{attr.name}` has {known_values(attr)}")
        codes[i] = code
    return codes


def _not_a_code(number: float, text: str | None = None) -> str:
    """Why ``number`` (read from ``text``, where it was text) is not a code: NaN, blank, not a number, ..."""
    if text is not None and not text.strip():
        return "is empty (a missing value)"
    if math.isnan(number):
        is_nan = text is None or text.strip().lower() == "nan"
        return "is NaN (not a number: a missing value?)" if is_nan else "is not a number"
    if math.isinf(number):
        return "is infinite"
    if number != round(number):
        return "is not a whole number (codes are integers)"
    return "is outside the domain"


def _not_a_count(number: float) -> str:
    """Why ``number`` is not a count of records: NaN, infinite, negative or fractional."""
    if math.isnan(number):
        return "is NaN (not a number: a missing count?)"
    if math.isinf(number):
        return "is infinite"
    return "is negative" if number < 0 else "is not a whole number"


def _number(text) -> float:
    try:
        return float(str(text).strip())
    except ValueError:
        return math.nan


def text_codes(attr, values, where, first: int = 0) -> np.ndarray:
    """Codes (n,) of a sized attribute from values written as text (``"20"``, ``"20.0"``)."""
    values = list(values) if not isinstance(values, np.ndarray) else values.ravel()
    try:  # fast path for text or integers; a float (1.5, NaN) must not be truncated to an integer
        arr = np.asarray(values)
        if arr.dtype.kind not in "iuU":
            raise TypeError
        numbers = arr.astype(np.int64).astype(float)
    except (ValueError, OverflowError, TypeError):
        numbers = np.fromiter((_number(v) for v in values), dtype=float, count=len(values))
    ok = (numbers >= 0) & (numbers < attr.size) & (numbers == np.round(numbers))  # NaN fails every test
    bad = np.flatnonzero(~ok)
    if bad.size:
        i = int(bad[0])
        what = _not_a_code(numbers[i], str(values[i]))
        raise ValueError(f"{where(first + i)}, column `{attr.name}`: value {_plain(values[i])!r} {what}; "
                         f"`{attr.name}` has {known_values(attr)}")
    return numbers.astype(np.int64)


def _integer_codes(attr, arr: np.ndarray, where, first: int = 0) -> np.ndarray:
    """Integer codes (n,) from a numeric column; out of range or fractional values refused."""
    arr = arr.ravel()
    if arr.dtype.kind == "f":
        ok = np.isfinite(arr) & (arr == np.round(arr))
    else:
        ok = np.ones(arr.shape, dtype=bool)
    ok &= (arr >= 0) & (arr < attr.size)
    bad = np.flatnonzero(~ok)
    if bad.size:
        i = int(bad[0])
        labels = "" if _is_sized(attr) else f" ({known_values(attr)})"
        raise ValueError(f"{where(first + i)}, column `{attr.name}`: value {_plain(arr[i])!r} "
                         f"{_not_a_code(float(arr[i]))}; `{attr.name}` has codes 0..{attr.size - 1}{labels}")
    return arr.astype(np.int64)


def _row(i: int) -> str:
    return f"records row {i}"


def _code_array(domain, records) -> np.ndarray:
    """Validated codes (n, a) from an (n, a) array in domain order."""
    arr = np.asarray(records)
    a = len(domain.attributes)
    if arr.ndim != 2 or arr.shape[1] != a:
        raise ValueError(f"`records` as an array must have shape (n, {a}): one column of codes per attribute "
                         f"{[x.name for x in domain.attributes]}, got shape {arr.shape}")
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"`records` as an array must hold integer codes, got dtype {arr.dtype}; give named "
                         "columns (a DataFrame, a mapping or a CSV file) to match value labels")
    cols = [_integer_codes(attr, arr[:, j], _row) for j, attr in enumerate(domain.attributes)]
    return np.stack(cols, axis=1) if cols else np.zeros((0, 0), dtype=np.int64)


def _column(records, name: str):
    try:
        return records[name]
    except (KeyError, IndexError, TypeError):
        have = list(records.columns) if hasattr(records, "columns") else list(records)
        raise ValueError(f"`records` has no column `{name}` (it has {have}); every attribute of the domain "
                         "needs a column of that name") from None


def _code_columns(domain, records) -> np.ndarray:
    """Validated codes (n, a) from named columns (a mapping or a DataFrame)."""
    cols = []
    for attr in domain.attributes:
        col = _column(records, attr.name)
        col = col.to_numpy() if hasattr(col, "to_numpy") else np.asarray(col)
        if cols and col.shape[0] != cols[0].shape[0]:
            raise ValueError(f"`records` column `{attr.name}` has {col.shape[0]} values where "
                             f"`{domain.attributes[0].name}` has {cols[0].shape[0]}")
        cols.append(column_codes(attr, col, _row))
    return np.stack(cols, axis=1)


def csv_header(names, path: Path, reader) -> list[str]:
    """The header of a CSV file (``reader`` at its first line), checked: not empty, no name twice,
    every name of ``names`` (the domain's attributes) present. ``ValueError`` naming the file otherwise."""
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise ValueError(f"records {path} is empty; it needs a header naming the columns "
                         f"{list(names)}") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"cannot read records {path}: {exc}") from None
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise ValueError(f"records {path}: the header names {dup} more than once")
    missing = [n for n in names if n not in header]
    if missing:
        raise ValueError(f"records {path} has no column `{missing[0]}` (its header has {header}); every "
                         "attribute of the domain needs a column of that name")
    return header


def open_csv(path: Path):
    """``path`` opened for the csv module (UTF-8; a byte order mark is not part of the header)."""
    try:
        return open(path, newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise ValueError(f"cannot read records {path}: {exc.strerror or exc}") from None


def _csv_codes(domain, path: Path) -> np.ndarray:
    """Validated codes (n, a) from a CSV file with a header naming the attributes."""
    with open_csv(path) as fh:
        reader = csv.reader(fh)
        header = csv_header(domain.names, path, reader)
        take = [header.index(n) for n in domain.names]
        chunks, first = [], 0
        while True:
            lines, fields = _csv_chunk(reader, path, len(header))
            if not fields:
                break

            def where(i, lines=lines, first=first):
                return f"records {path}, line {lines[i - first]}"

            columns = list(zip(*fields))
            chunks.append(np.stack([column_codes(attr, columns[j], where, first)
                                    for attr, j in zip(domain.attributes, take)], axis=1))
            first += len(fields)
    return np.concatenate(chunks) if chunks else np.zeros((0, len(domain.attributes)), dtype=np.int64)


def _csv_chunk(reader, path: Path, width: int) -> tuple[list, list]:
    """Up to :data:`CSV_CHUNK` rows as ``(line numbers, fields)``; blank lines skipped, ragged rows refused."""
    lines, rows = [], []
    try:
        for fields in reader:
            if len(fields) != width:
                if not fields or (len(fields) == 1 and not fields[0].strip()):
                    continue
                raise ValueError(f"records {path}, line {reader.line_num}: {len(fields)} fields where the header "
                                 f"has {width}")
            lines.append(reader.line_num)
            rows.append(fields)
            if len(rows) == CSV_CHUNK:
                break
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"cannot read records {path} near line {reader.line_num}: {exc}") from None
    return lines, rows


def from_records(domain, records) -> "Counts":
    """:class:`Counts` of ``records`` over ``domain`` (see the module docstring for the forms)."""
    if isinstance(records, Counts):
        return records
    if isinstance(records, (str, os.PathLike)):
        codes = _csv_codes(domain, Path(records))
    elif isinstance(records, Mapping) or hasattr(records, "columns"):
        codes = _code_columns(domain, records)
    else:
        codes = _code_array(domain, records)
    return Counts.from_codes(domain, codes)


class Counts:
    """Sparse counts over a product ``domain``: the non-empty cells and how many records each holds.

    Attributes: ``domain``; ``codes`` (n_u, a) int64, one row of attribute codes per
    non-empty cell, in cell order; ``counts`` (n_u,) int64 (all >= 1). Read-only. Build it
    with ``domain.counts(records)``, :meth:`from_codes` or :meth:`from_histogram`.
    """

    def __init__(self, domain, codes: np.ndarray, counts: np.ndarray):
        codes = np.asarray(codes, dtype=np.int64).reshape(-1, len(domain.attributes))
        counts = np.asarray(counts, dtype=np.int64)
        for arr in (codes, counts):
            arr.setflags(write=False)
        self.domain, self.codes, self.counts = domain, codes, counts

    @classmethod
    def from_codes(cls, domain, codes) -> "Counts":
        """Counts of records given as valid codes (n, a) (one row per record)."""
        codes = np.asarray(codes, dtype=np.int64).reshape(-1, len(domain.attributes))
        if codes.shape[0] == 0:
            return cls(domain, codes, np.zeros(0, dtype=np.int64))
        sizes = tuple(domain.sizes)
        if math.prod(sizes) <= FLAT_LIMIT:
            flat, counts = np.unique(np.ravel_multi_index(tuple(codes.T), sizes), return_counts=True)
            return cls(domain, np.stack(np.unravel_index(flat, sizes), axis=1), counts)
        unique, counts = np.unique(codes, axis=0, return_counts=True)  # rows sorted = cell order
        return cls(domain, unique, counts)

    @classmethod
    def from_code_counts(cls, domain, codes, counts) -> "Counts":
        """Counts of distinct code rows (n_g, a) holding ``counts`` (n_g,) records each (rows may repeat:
        their counts add up; zero counts are dropped)."""
        codes = np.asarray(codes, dtype=np.int64).reshape(-1, len(domain.attributes))
        counts = np.asarray(counts, dtype=np.int64).reshape(-1)
        keep = counts > 0
        codes, counts = codes[keep], counts[keep]
        if codes.shape[0] == 0:
            return cls(domain, codes, counts)
        sizes = tuple(domain.sizes)
        if math.prod(sizes) <= FLAT_LIMIT:
            flat, inverse = np.unique(np.ravel_multi_index(tuple(codes.T), sizes), return_inverse=True)
            unique = np.stack(np.unravel_index(flat, sizes), axis=1)
        else:
            unique, inverse = np.unique(codes, axis=0, return_inverse=True)  # rows sorted = cell order
        total = np.zeros(len(unique), dtype=np.int64)
        np.add.at(total, inverse.reshape(-1), counts)  # whole counts, added exactly
        return cls(domain, unique, total)

    @classmethod
    def from_histogram(cls, domain, x) -> "Counts":
        """Counts of a dense histogram ``x`` (d,) of whole non-negative counts."""
        x = np.asarray(x)
        if x.shape != (domain.size,):
            raise ValueError(f"`x` must have shape ({domain.size},), one count per cell, got {x.shape}")
        if x.dtype.kind not in "iuf":
            raise ValueError(f"`x` must hold whole non-negative counts, got dtype {x.dtype}")
        bad = np.flatnonzero(~(np.isfinite(x) & (x >= 0) & (x == np.round(x))))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"`x` must hold whole non-negative counts, but x[{i}] = {_plain(x[i])!r} "
                             f"{_not_a_count(float(x[i]))}")
        cells = np.flatnonzero(x)
        return cls(domain, np.stack(np.unravel_index(cells, domain.sizes), axis=1), x[cells].astype(np.int64))

    @property
    def n_records(self) -> int:
        """Total number of records."""
        return int(self.counts.sum())

    def __len__(self) -> int:
        """Number of non-empty cells."""
        return self.counts.shape[0]

    @property
    def cells(self) -> np.ndarray:
        """Flat cell indices (n_u,) int64 of the non-empty cells (domains below 2^63 cells)."""
        if self.domain.size > FLAT_LIMIT:
            raise ValueError(f"the domain has {self.domain.size} cells, more than an int64 numbers; use `codes` "
                             "(one row of attribute codes per cell)")
        return np.ravel_multi_index(tuple(self.codes.T), tuple(self.domain.sizes)).astype(np.int64)

    def _axes(self, attrs) -> list:
        names = [a.name for a in self.domain.attributes]
        out = []
        for a in attrs:
            if isinstance(a, str):
                if a not in names:
                    raise ValueError(f"unknown attribute {a!r}; the domain has {names}")
                a = names.index(a)
            elif not (isinstance(a, (int, np.integer)) and 0 <= a < len(names)):
                raise ValueError(f"attribute position {a!r} is not in 0..{len(names) - 1}")
            out.append(int(a))
        if len(set(out)) != len(out) or out != sorted(out):
            raise ValueError(f"give distinct attributes in domain order, got {list(attrs)}")
        return out

    def marginal(self, attrs, max_cells: int = MARGINAL_MAX_CELLS) -> np.ndarray:
        """The counts summed over every other attribute: a dense array of shape (n_i for i in attrs).

        ``attrs``: names or positions, in domain order. Refused (``ValueError``) above
        ``max_cells`` cells: project onto fewer attributes.
        """
        axes = self._axes(attrs)
        shape = tuple(self.domain.sizes[i] for i in axes)
        cells = math.prod(shape)
        if cells > max_cells:
            names = [self.domain.attributes[i].name for i in axes]
            raise ValueError(f"`max_cells`: the marginal over {names} has {cells} cells > max_cells = {max_cells}; "
                             "a query group over fewer attributes (or with coarser blocks on them) needs a "
                             "smaller one, or pass a larger max_cells if it fits in memory")
        check_dense(1, cells, "the marginal", "max_cells", "project onto fewer attributes")
        if not axes:
            return np.array(float(self.counts.sum()))
        flat = np.ravel_multi_index(tuple(self.codes[:, axes].T), shape) if len(self) else np.zeros(0, dtype=np.int64)
        return np.bincount(flat, weights=self.counts.astype(float), minlength=cells).reshape(shape)

    def dense(self, max_cells: int = MARGINAL_MAX_CELLS) -> np.ndarray:
        """The full histogram (d,) (refused above ``max_cells`` cells, like :meth:`marginal`)."""
        return self.marginal(range(len(self.domain.attributes)), max_cells).reshape(-1)

    def __repr__(self) -> str:
        return f"Counts({self.n_records} records in {len(self)} of {self.domain.size} cells)"
