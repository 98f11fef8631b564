"""Records where they live: columnar files streamed, data frames and a Dask cluster, counted by a group-by.

Workloads layer, beside :mod:`ffu_cvx.workloads.counts`: imports numpy, the standard library and ``counts``;
pyarrow, Polars, pandas and Dask (optional extras) only inside the reader that needs them.

:func:`count` turns records in any supported form into :class:`ffu_cvx.workloads.counts.Counts`. Every
engine computes the same thing where the records are: the distinct tuples of the domain's
columns and how many records hold each (a group-by), so memory grows with the number of
non-empty cells, not of records, and only the sparse counts reach Python:

- a Parquet file or a folder of Parquet parts, an Arrow IPC (Feather) file, or a CSV file:
  pyarrow's dataset scanner feeding its streaming hash group-by (``pyarrow.acero``), batch by
  batch on every core (``pip install 'ffu-cvx[columnar]'``); a CSV file without pyarrow is
  read by the Python parser of :mod:`ffu_cvx.workloads.counts`;
- a Polars DataFrame or LazyFrame: ``group_by`` inside Polars (its streaming engine);
- a pandas DataFrame (categoricals and nullable dtypes included): ``groupby(observed=True,
  dropna=False)``;
- a Dask DataFrame, or a file with ``scheduler=ADDRESS`` (or a ``distributed.Client``): the
  group-by runs on the cluster's workers and the sparse counts come back.

The distinct values are matched to the attributes' labels by
:func:`ffu_cvx.workloads.counts.column_codes`, as every other form of records is, so the counts are
identical whatever the engine. A value that matches no label (outside the domain, NaN,
missing, of a wrong type) is then located by a second pass, only then, and the message
names the file, the row (and a Parquet file's row group) and the column.
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from . import counts as _counts
from .counts import Counts, column_codes

__all__ = ["count", "Grouped", "PARQUET", "IPC"]

#: File suffixes read as Parquet (a folder is read as Parquet parts).
PARQUET = (".parquet", ".parq", ".pq")
#: File suffixes read as Arrow IPC (Feather).
IPC = (".feather", ".arrow", ".ipc")
#: Name of the count column the engines add (not a name a domain can take in practice).
_N = "__ffu_cvx_records"


@dataclass(frozen=True)
class Grouped:
    """What every engine returns: ``keys``, one ``(values, inverse)`` per attribute (the column's
    distinct values (u,), missing ones as NaN, and the index (n_g,) of each group's value among
    them), ``counts`` (n_g,) int64, and ``locate(name, bad)`` -> ``(where, k)``: the first record
    whose column ``name`` holds one of the values ``bad``, described for a message, and the index
    in ``bad`` of the value it holds. Only the few distinct values per column are matched to labels."""

    keys: list
    counts: np.ndarray
    locate: Callable


def count(domain, records, *, scheduler=None) -> Counts:
    """:class:`~ffu_cvx.workloads.counts.Counts` of ``records`` over ``domain`` (see the module docstring).

    records : Counts; a path (Parquet file or folder, Arrow IPC file, CSV file); a Polars,
        pandas or Dask DataFrame (or Polars LazyFrame); or what :func:`ffu_cvx.workloads.counts.from_records`
        takes (an (n, a) code array, a mapping of columns).
    scheduler : None, or a Dask scheduler address or ``distributed.Client``: count a file (or a
        Dask DataFrame) on that cluster.

    ``ValueError`` naming the file, row and column of the first bad record, or what is missing.
    """
    if isinstance(records, Counts):
        return records
    grouped = _group(list(domain.names), records, scheduler)
    if grouped is None:
        return _counts.from_records(domain, records)
    return Counts.from_code_counts(domain, _codes(domain, grouped), grouped.counts)


def _group(names: list, records, scheduler) -> Grouped | None:
    """The records grouped by the engine their form calls for (None: the core's own readers)."""
    if isinstance(records, (str, os.PathLike)):
        path = Path(records)
        kind = _file_kind(path)
        if scheduler is not None:
            return _dask(names, _dask_frame(names, path, kind), scheduler, str(path))
        if kind == "csv" and not _have("pyarrow"):
            return None
        return _arrow(names, path, kind)
    module = type(records).__module__.split(".")[0]
    if module == "polars":
        return _polars(names, records)
    if module in ("dask", "dask_expr"):
        return _dask(names, records, scheduler, "records")
    if scheduler is not None:
        raise ValueError("`scheduler` counts a file or a Dask DataFrame on a cluster; give a path or a Dask DataFrame")
    if module == "pandas" and hasattr(records, "groupby"):
        return _pandas(names, records)
    return None


def _codes(domain, grouped: Grouped) -> np.ndarray:
    """Codes (n_g, a) of the distinct tuples; a bad value is located and reported with its record."""
    cols = []
    for attr, (values, inverse) in zip(domain.attributes, grouped.keys):
        values = _numeric(_nan_for_missing(np.asarray(values)))
        try:
            cols.append(column_codes(attr, values, lambda i: "records")[inverse])
        except ValueError:
            bad = [i for i in range(len(values)) if _fails(attr, values[i:i + 1])]
            where, k = grouped.locate(attr.name, [values[i] for i in bad])
            column_codes(attr, values[bad[k]:bad[k] + 1], lambda i: where)  # raises, naming the record
            raise
    if not cols:
        return np.zeros((len(grouped.counts), 0), dtype=np.int64)
    return np.stack(cols, axis=1)


def _fails(attr, value: np.ndarray) -> bool:
    try:
        column_codes(attr, value, lambda i: "")
    except ValueError:
        return True
    return False


def _factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct values, inverse)`` of a numpy column (object columns: missing values as one NaN)."""
    values = np.asarray(values)
    if values.dtype.kind != "O":
        return np.unique(values, return_inverse=True)
    missing = np.array([_missing(v) for v in values], dtype=bool) if values.size else np.zeros(0, dtype=bool)
    text = np.where(missing, "", values.astype(str))
    uniques, first, inverse = np.unique(text, return_index=True, return_inverse=True)
    out = values[first].copy()
    out[missing[first]] = np.nan
    return out, inverse.reshape(-1)


def _missing(value) -> bool:
    """A missing value as any engine gives it: None, NaN, pandas' NA or NaT."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def _nan_for_missing(values: np.ndarray) -> np.ndarray:
    """Object arrays with missing values as float NaN (so every path calls them NaN)."""
    if values.dtype.kind != "O":
        return values
    out = values.copy()
    out[[_missing(v) for v in out]] = np.nan
    return out


def _first_bad(bad: list, value) -> int:
    """Index in ``bad`` of ``value`` (missing values match any missing one)."""
    for k, b in enumerate(bad):
        if (_missing(b) and _missing(value)) or (not _missing(b) and not _missing(value) and b == value):
            return k
    return 0


def _have(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def _need(module: str, what: str):
    try:
        return __import__(module)
    except ImportError:
        raise ImportError(f"{what} needs {module}: pip install 'ffu-cvx[columnar]' (pyarrow), "
                          f"'ffu-cvx[polars]' or 'ffu-cvx[dask]'") from None


def _check_columns(names: list, have, where: str) -> None:
    missing = [n for n in names if n not in list(have)]
    if missing:
        raise ValueError(f"{where} has no column `{missing[0]}` (it has {list(have)}); every attribute of the "
                         "domain needs a column of that name")


# ---------------------------------------------------------------------------- files: pyarrow
def _file_kind(path: Path) -> str:
    """``"parquet"``, ``"ipc"`` or ``"csv"`` by the suffix (a folder holds Parquet parts)."""
    if path.is_dir():
        return "parquet"
    if not path.exists():
        raise ValueError(f"cannot read records {path}: no such file or folder")
    suffix = path.suffix.lower()
    if suffix in PARQUET:
        return "parquet"
    if suffix in IPC:
        return "ipc"
    return "csv"


def _arrow_dataset(names: list, path: Path, kind: str):
    """A pyarrow dataset of the file (CSV: every column as text, header checked as by the Python parser)."""
    _need("pyarrow", f"reading {kind} records")
    import pyarrow as pa
    import pyarrow.dataset as ds

    try:
        if kind != "csv":
            return ds.dataset(str(path), format="feather" if kind == "ipc" else "parquet")
        from pyarrow import csv as pacsv

        with _counts.open_csv(path) as fh:
            header = _counts.csv_header(names, path, csv.reader(fh))
        fmt = ds.CsvFileFormat(read_options=pacsv.ReadOptions(column_names=header, skip_rows=1),
                               convert_options=pacsv.ConvertOptions(column_types={h: pa.string() for h in header},
                                                                    strings_can_be_null=False))
        return ds.dataset(str(path), format=fmt)
    except (OSError, pa.ArrowInvalid) as exc:
        if kind == "csv":
            return None
        raise ValueError(f"cannot read records {path}: {exc}") from None


def _arrow(names: list, path: Path, kind: str) -> Grouped | None:
    """The file grouped by pyarrow; None for a CSV file Arrow cannot parse (a ragged row, say): the
    Python parser then reads it and names the line exactly."""
    import pyarrow as pa
    import pyarrow.acero as ac

    dataset = _arrow_dataset(names, path, kind)
    if dataset is None:
        return None
    _check_columns(names, dataset.schema.names, f"records {path}")
    plan = ac.Declaration.from_sequence([
        ac.Declaration("scan", ac.ScanNodeOptions(dataset, columns=names)),
        ac.Declaration("aggregate", ac.AggregateNodeOptions([([], "hash_count_all", None, _N)], keys=names))])
    try:
        table = plan.to_table(use_threads=True)
    except (OSError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        if kind == "csv":
            return None
        raise ValueError(f"cannot read records {path}: {exc}") from None
    keys = [_arrow_factorize(table[n]) for n in names]
    return Grouped(keys, table[_N].to_numpy().astype(np.int64),
                   lambda name, bad: _arrow_locate(dataset, path, kind, name, bad))


def _arrow_factorize(column) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct values, inverse)`` of an Arrow column, by Arrow's dictionary encoding (nulls last, as NaN)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    enc = pc.dictionary_encode(column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column)
    values = np.asarray(enc.dictionary.to_numpy(zero_copy_only=False))
    if enc.indices.null_count:
        values = np.append(values.astype(object), np.nan)
    inverse = pc.fill_null(enc.indices, len(enc.dictionary)).to_numpy(zero_copy_only=False).astype(np.int64)
    return values, inverse


def _arrow_locate(dataset, path: Path, kind: str, name: str, bad: list) -> tuple[str, int]:
    """The first record holding a bad value: its file, row (0-based, in that file) and row group."""
    if kind == "csv":
        return _csv_locate(path, name, bad)
    import pyarrow as pa
    import pyarrow.compute as pc

    for fragment in dataset.get_fragments():
        offset = 0
        for batch in fragment.to_batches(columns=[name]):
            col = batch.column(0)
            if pa.types.is_dictionary(col.type):
                col = col.cast(col.type.value_type)
            mask = pc.is_null(col, nan_is_null=True) if any(_missing(b) for b in bad) else None
            values = [b for b in bad if not _missing(b)]
            if values:
                hit = pc.is_in(col, value_set=pa.array(values).cast(col.type, safe=False))
                mask = hit if mask is None else pc.or_(mask, hit)
            i = pc.index(pc.fill_null(mask, False), True).as_py() if mask is not None else -1
            if i >= 0:
                row = offset + i
                return f"records {fragment.path}, row {row}{_row_group(fragment, row)}", _first_bad(bad, col[i].as_py())
            offset += batch.num_rows
    return f"records {path}", 0


def _row_group(fragment, row: int) -> str:
    meta = getattr(fragment, "metadata", None)
    if meta is None:
        return ""
    end = 0
    for g in range(meta.num_row_groups):
        end += meta.row_group(g).num_rows
        if row < end:
            return f" (row group {g})"
    return ""


def _csv_locate(path: Path, name: str, bad: list) -> tuple[str, int]:
    """The first line of a CSV file whose column ``name`` holds a bad value (exact line numbers)."""
    text = [str(b) for b in bad]
    with _counts.open_csv(path) as fh:
        reader = csv.reader(fh)
        header = [h.strip() for h in next(reader)]
        j = header.index(name)
        for fields in reader:
            if len(fields) == len(header) and fields[j] in text:
                return f"records {path}, line {reader.line_num}", text.index(fields[j])
    return f"records {path}", 0


# ---------------------------------------------------------------------------- data frames
def _polars(names: list, frame) -> Grouped:
    import polars as pl

    lazy = frame.lazy()
    _check_columns(names, lazy.collect_schema().names(), "`records`")
    out = lazy.select(names).group_by(names).agg(pl.len().alias(_N)).collect(engine="streaming")
    keys = [_factorize(np.asarray(_polars_plain(out[n]).to_numpy())) for n in names]
    return Grouped(keys, out[_N].to_numpy().astype(np.int64), lambda name, bad: _polars_locate(lazy, name, bad))


def _polars_plain(series):
    import polars as pl

    return series.cast(pl.String) if series.dtype in (pl.Categorical, pl.Enum) else series


def _polars_locate(lazy, name: str, bad: list) -> tuple[str, int]:
    import polars as pl

    col = pl.col(name)
    dtype = lazy.collect_schema()[name]
    cond = col.is_null()
    if dtype.is_float():
        cond = cond | col.is_nan()
    values = [str(b) for b in bad if not _missing(b)]
    if values:
        cond = cond | col.cast(pl.String).is_in(values)
    hit = lazy.with_row_index("__ffu_cvx_row").filter(cond).select("__ffu_cvx_row", name).head(1).collect()
    if hit.height == 0:
        return "records", 0
    value = _polars_plain(hit[name]).to_list()[0]
    return f"records row {hit['__ffu_cvx_row'][0]}", _first_bad(bad, value)


def _pandas(names: list, frame) -> Grouped:
    _check_columns(names, frame.columns, "`records`")
    sizes = frame[names].groupby(names, observed=True, dropna=False, sort=False).size()
    return _grouped_sizes(names, sizes, lambda name, bad: _frame_locate(frame[name], bad, 0) or ("records", 0))


def _grouped_sizes(names: list, sizes, locate) -> Grouped:
    """A Grouped from a pandas Series of group sizes indexed by the distinct tuples."""
    import pandas as pd

    index = sizes.index
    keys = []
    for i in range(len(names)):
        inverse, values = pd.factorize(index.get_level_values(i), use_na_sentinel=False)
        keys.append((np.asarray(values.to_numpy(dtype=object) if hasattr(values, "to_numpy") else values,
                                dtype=object), np.asarray(inverse, dtype=np.int64)))
    return Grouped(keys, sizes.to_numpy().astype(np.int64), locate)


def _numeric(values: np.ndarray) -> np.ndarray:
    """An object array of plain numbers as a numeric array (so numbers meet the numeric checks)."""
    if values.dtype.kind == "O" and values.size and all(isinstance(v, (int, float, np.number)) and
                                                        not isinstance(v, bool) for v in values):
        return values.astype(float) if any(isinstance(v, (float, np.floating)) for v in values) else \
            values.astype(np.int64)
    return values


def _frame_locate(column, bad: list, offset: int) -> tuple[str, int] | None:
    """The first row of a pandas column holding a bad value (``offset``: rows before this part)."""
    values = column.to_numpy(dtype=object)
    mask = np.array([_missing(v) for v in values], dtype=bool) if any(_missing(b) for b in bad) else \
        np.zeros(len(values), dtype=bool)
    plain = [b for b in bad if not _missing(b)]
    if plain:
        mask |= column.isin(plain).to_numpy(dtype=bool)
    hit = np.flatnonzero(mask)
    if not hit.size:
        return None
    return f"records row {offset + int(hit[0])}", _first_bad(bad, values[hit[0]])


# ---------------------------------------------------------------------------- Dask
def _dask_frame(names: list, path: Path, kind: str):
    """A Dask DataFrame of a file's domain columns (Parquet, or CSV read as text)."""
    _need("dask.dataframe", "counting records on a Dask cluster")
    import dask.dataframe as dd

    if kind == "parquet":
        return dd.read_parquet(str(path), columns=names)
    if kind == "csv":
        with _counts.open_csv(path) as fh:
            _counts.csv_header(names, path, csv.reader(fh))
        return dd.read_csv(str(path), dtype=str, usecols=names, keep_default_na=False, skipinitialspace=False)
    raise ValueError(f"records {path}: a Dask cluster reads Parquet or CSV records; convert the Arrow IPC file "
                     "to Parquet")


def _dask(names: list, frame, scheduler, where: str) -> Grouped:
    _check_columns(names, frame.columns, f"`records` ({where})")
    sizes = frame[names].groupby(names, dropna=False, observed=True).size()
    with _Connection(scheduler) as client:
        result = client.compute(sizes).result() if client is not None else sizes.compute()
    return _grouped_sizes(names, result, lambda name, bad: _dask_locate(frame, name, bad, scheduler, where))


def _dask_locate(frame, name: str, bad: list, scheduler, where: str) -> tuple[str, int]:
    """The first row of a Dask frame holding a bad value (rows counted across partitions, in order)."""
    offset = 0
    with _Connection(scheduler) as client:
        for i in range(frame.npartitions):
            part = frame.get_partition(i)[name]
            part = client.compute(part).result() if client is not None else part.compute()
            found = _frame_locate(part, bad, offset)
            if found is not None:
                row = found[0].replace("records ", f"records {where}, " if where != "records" else "records ", 1)
                return row + f" (partition {i})", found[1]
            offset += len(part)
    return "records", 0


class _Connection:
    """``with _Connection(scheduler) as c``: None without a scheduler; the given Client; or a Client
    connected to the address for the block."""

    def __init__(self, scheduler):
        self.scheduler, self.own = scheduler, None

    def __enter__(self):
        if self.scheduler is None or not isinstance(self.scheduler, (str, os.PathLike)):
            return self.scheduler
        distributed = _need("distributed", "counting records on a Dask cluster")
        try:
            self.own = distributed.Client(str(self.scheduler), set_as_default=False)
        except OSError as exc:
            raise ValueError(f"cannot reach the Dask scheduler {self.scheduler}: {exc}") from None
        return self.own

    def __exit__(self, *exc):
        if self.own is not None:
            self.own.close()
        return False
