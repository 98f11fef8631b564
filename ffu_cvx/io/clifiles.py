"""The command line's file handling: bad input as one error, safe outputs, strict reading.

IO layer, its top (the command line's files): imports numpy, ``io.files`` (``check_output``),
``release.mechanism`` (``check_histogram``) and the standard library. Every problem with a file is an :class:`InputError` (a ``ValueError``) naming
the file and, where there is one, the field; the command line reports it in one line
with exit status 2.

- Outputs: :func:`check_output` refuses a directory, a missing or read-only folder, a
  read-only file and, above all, any path that is one of the command's inputs (the same
  file by name, through a symbolic link or as a hard link: compared by device and inode).
- JSON: :func:`read_json` refuses ``NaN``, ``Infinity`` and numbers too large for a
  double (``1e400``) instead of reading them as non-finite floats, and a key given twice
  in one object instead of keeping the last.
- Arrays given by path (``.npy``, ``.npz``, ``.csv``): :func:`load_array`.
- Histograms: :func:`read_histogram` honours a ``cell`` column (any order, each cell
  once, none missing, none outside 0..d-1).
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np

from ..release.mechanism import check_histogram
from . import files


__all__ = ["InputError", "check_output", "read_text", "read_json", "load_array", "read_histogram"]


class InputError(ValueError):
    """Bad input from the command line: reported in one line with exit status 2."""


# ---------------------------------------------------------------------------- outputs
def check_output(path, flag: str, inputs: dict | None = None) -> Path:
    """Fail before any work if ``path`` cannot be written or would overwrite an input.

    ``inputs`` maps a description (``"spec"``, ``"--data"``) to the input's path. The
    output is refused (:func:`ffu_cvx.io.files.check_output`) when it resolves to the same
    file as an input (same device and inode: a symbolic or hard link counts), when it
    exists read-only, when it is a directory, or when its folder is missing or not writable.
    """
    try:
        return files.check_output(path, flag, inputs)
    except ValueError as exc:
        raise InputError(str(exc)) from None


# ---------------------------------------------------------------------------- reading
def read_text(path: Path, what: str) -> str:
    """The UTF-8 text of ``path`` (a byte order mark at its start dropped); ``what`` names it in the error."""
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"cannot read {what} {path}: not a UTF-8 text file") from None


def read_json(path: Path, what: str) -> dict:
    """A JSON object from ``path``, with every number finite (``NaN``, ``Infinity``, ``1e400`` refused)
    and every key once in its object."""
    text = read_text(path, what)

    def constant(name: str):
        raise InputError(f"{what} {path}: {name} is not a number JSON allows; write a finite number "
                         "(or null where a field allows it)")

    def finite(literal: str) -> float:
        value = float(literal)
        if not math.isfinite(value):
            raise InputError(f"{what} {path}: the number {literal} is out of the range of a double "
                             "(about 1.8e308); rescale the input")
        return value

    def unique(pairs: list) -> dict:
        obj = {}
        for key, value in pairs:
            if key in obj:
                raise InputError(f"{what} {path}: the key {key!r} appears twice in one object; give each key once "
                                 "(JSON readers keep only one of them)")
            obj[key] = value
        return obj

    try:
        obj = json.loads(text, parse_constant=constant, parse_float=finite, object_pairs_hook=unique)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON in {what} {path}: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise InputError(f"{what} {path}: JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise InputError(f"{what} {path} must hold a JSON object, got {type(obj).__name__}")
    return obj


def load_array(value, field: str, base: Path):
    """An inline value, or the array stored at a path (.npy, .npz, .csv) relative to ``base``."""
    if not isinstance(value, str):
        return value
    path = base / value
    if not path.is_file():
        raise InputError(f"`{field}`: file {path} not found")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            return np.load(path, allow_pickle=False)
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                if field in z.files:
                    return z[field]
                if len(z.files) == 1:
                    return z[z.files[0]]
                raise InputError(f"`{field}`: {path} holds arrays {z.files}; name one `{field}`")
        if suffix == ".csv":
            return np.loadtxt(path, delimiter=",", ndmin=2 if field in ("W", "basis") else 1, encoding="utf-8-sig")
    except InputError:
        raise
    except (OSError, ValueError, EOFError) as exc:
        raise InputError(f"`{field}`: cannot read {path}: {' '.join(str(exc).split())}") from None
    raise InputError(f"`{field}`: {path} must be .npy, .npz or .csv (or give the values inline)")


# ---------------------------------------------------------------------------- histograms
def _number(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None


def read_histogram(path: Path, d: int) -> np.ndarray:
    """The counts (d,) of a histogram CSV.

    Accepted layouts: a ``cell,count`` table (a header naming ``cell`` and ``count``, or
    two columns without a header): every cell 0..d-1 exactly once, in any order; one
    count per row (one column, or a header without ``cell``: the last column, or the one
    named ``count``), rows in cell order; or, without a header, one row of d counts.
    """
    text = read_text(path, "data")
    reader = csv.reader(io.StringIO(text))
    rows = [(reader.line_num, [f.strip() for f in r]) for r in reader if any(f.strip() for f in r)]
    if not rows:
        raise InputError(f"data {path} is empty; it needs {d} counts")
    header = None
    if _number(rows[0][1][-1]) is None:
        header = [h.lower() for h in rows[0][1]]
        rows = rows[1:]
        if not rows:
            raise InputError(f"data {path} has a header but no counts; it needs {d}")
    width = len(rows[0][1])
    for line, fields in rows:
        if len(fields) != width or (header is not None and len(fields) != len(header)):
            raise InputError(f"data {path}, line {line}: {len(fields)} columns where the "
                             f"{'header' if header is not None else 'first row'} has "
                             f"{len(header) if header is not None else width}")

    def num(line: int, s: str, col: str) -> float:
        v = _number(s)
        if v is None or not math.isfinite(v):
            what = "is not a number" if v is None else "is NaN (not a number)" if math.isnan(v) else "is infinite"
            fix = f"give a cell index in 0..{d - 1}" if col == "cell" else "give a whole count (0 if empty)"
            raise InputError(f"data {path}, line {line}: {col} {s!r} {what}; {fix}")
        return v

    if header is None and len(rows) == 1 and width == d and d > 1:
        values = [num(rows[0][0], s, f"column {j + 1}") for j, s in enumerate(rows[0][1])]
        return check_histogram(np.array(values), d, name=f"data {path}")
    if header is None:
        if width > 2:
            raise InputError(f"data {path} has {width} columns and no header; give a header naming the "
                             "`cell` and `count` columns")
        cell_col, count_col = (0, 1) if width == 2 else (None, 0)
    else:
        cell_col = header.index("cell") if "cell" in header else None
        count_col = header.index("count") if "count" in header else width - 1
    counts = [num(line, f[count_col], "count") for line, f in rows]
    if cell_col is None:
        return check_histogram(np.array(counts), d, name=f"data {path}")
    x = np.full(d, np.nan)
    seen: dict[int, int] = {}
    for (line, fields), count in zip(rows, counts):
        cell = num(line, fields[cell_col], "cell")
        if cell != int(cell) or not 0 <= cell < d:
            raise InputError(f"data {path}, line {line}: cell {fields[cell_col]!r} is not an index in 0..{d - 1} "
                             f"(the workload has d = {d} cells)")
        cell = int(cell)
        if cell in seen:
            raise InputError(f"data {path}, line {line}: cell {cell} appears again (first on line {seen[cell]}); "
                             "give each cell once")
        seen[cell] = line
        x[cell] = count
    missing = np.flatnonzero(np.isnan(x))
    if missing.size:
        raise InputError(f"data {path}: cells {missing[:5].tolist()}{'...' if missing.size > 5 else ''} are missing "
                         f"({missing.size} of {d}); give a count (0 if empty) for every cell 0..{d - 1}")
    return check_histogram(x, d, name=f"data {path}")
