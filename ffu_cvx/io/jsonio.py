"""The one JSON encoding for results files (CLI and experiments).

IO layer, its bottom: imports numpy only. numpy scalars and arrays become plain numbers and
lists, tuples lists, paths strings; a non-finite float becomes ``null`` (JSON has no
NaN or inf), and :func:`number` reads ``null`` back as NaN.
"""

from __future__ import annotations

import json
import math
from pathlib import PurePath
from typing import Any

import numpy as np

__all__ = ["jsonable", "dumps", "number"]


def jsonable(obj: Any) -> Any:
    """``obj`` with numpy values, tuples and paths converted; NaN and inf -> ``None``."""
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return jsonable(obj.item())
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, PurePath):
        return str(obj)
    return obj


def dumps(obj: Any, **kwargs) -> str:
    """``json.dumps(jsonable(obj))``, refusing anything still not JSON (``allow_nan=False``)."""
    return json.dumps(jsonable(obj), allow_nan=False, **kwargs)


def number(value) -> float:
    """A float read from JSON: ``None`` (a non-finite value written by :func:`jsonable`) is NaN."""
    return math.nan if value is None else float(value)
