"""Argument checks shared by every module: one place, one argument order ``(value, name)``.

Model layer: imports numpy only. Each check returns the cleaned value or raises
``ValueError`` naming the argument (in backticks), what was seen and what is allowed.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

__all__ = ["positive", "nonnegative", "fraction", "positive_int", "choice", "flag", "finite_array"]


def _real(value, name: str, what: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Real):
        raise ValueError(f"`{name}` must be {what}, got {value!r}")
    return float(value)


def positive(value, name: str, *, allow_none: bool = False, allow_inf: bool = False) -> float | None:
    """A finite (or, with ``allow_inf``, infinite) number > 0; ``None`` passes with ``allow_none``."""
    if value is None and allow_none:
        return None
    what = "a positive number" + (" or inf" if allow_inf else " (finite)")
    v = _real(value, name, what)
    if math.isnan(v) or v <= 0 or (math.isinf(v) and not allow_inf):
        raise ValueError(f"`{name}` must be {what}, got {value!r}")
    return v


def nonnegative(value, name: str) -> float:
    """A finite number >= 0."""
    v = _real(value, name, "a finite number >= 0")
    if not (math.isfinite(v) and v >= 0):
        raise ValueError(f"`{name}` must be a finite number >= 0, got {value!r}")
    return v


def fraction(value, name: str) -> float:
    """A number strictly between 0 and 1."""
    v = _real(value, name, "a number in (0, 1)")
    if not 0 < v < 1:
        raise ValueError(f"`{name}` must lie in (0, 1), got {value!r}")
    return v


def positive_int(value, name: str, *, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (bools refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Integral) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}, got {value!r}")
    return int(value)


def choice(value, name: str, allowed) -> str:
    """One of ``allowed`` (strings; compared as given)."""
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"`{name}` must be one of {tuple(allowed)}, got {value!r}")
    return value


def flag(value, name: str, *, extra=()) -> bool | str:
    """True or False (or one of the strings in ``extra``, e.g. ``("auto",)``)."""
    if isinstance(value, str) and value in extra:
        return value
    if not isinstance(value, (bool, np.bool_)):
        alts = " or ".join(["True", "False", *map(repr, extra)])
        raise ValueError(f"`{name}` must be {alts}, got {value!r}")
    return bool(value)


def finite_array(value, name: str, *, ndim: int | None = None, shape: tuple | None = None) -> np.ndarray:
    """A float64 array with no NaN or inf, of ``ndim`` dimensions or exactly ``shape``."""
    if value is None:
        raise ValueError(f"`{name}` is missing (got None); give an array of numbers")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be an array of numbers, got {type(value).__name__}") from None
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"`{name}` must have {ndim} dimension(s), got shape {arr.shape}")
    if shape is not None and arr.shape != tuple(shape):
        raise ValueError(f"`{name}` must have shape {tuple(shape)}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"`{name}` contains NaN or inf")
    return arr
