"""Shared plumbing for experiments: paths, atomic writes, result tables, cell cache, CLI.

Every experiment module (``python -m experiments.<name>``) uses these so that results
land in ``results/<name>.{csv,json,md}`` and figures in ``figures/<name>.{png,pdf}``,
written atomically; finished cells are cached under ``results/cache/<name>/`` so an
interrupted run resumes; failures are never cached.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from ffu_cvx.files import atomic_write_bytes as _atomic_write_bytes

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "results"
FIGURES_DIR = ROOT / "figures"
CACHE_DIR = RESULTS_DIR / "cache"

__all__ = [
    "ROOT", "RESULTS_DIR", "FIGURES_DIR", "CACHE_DIR", "atomic_write_text", "atomic_write_bytes",
    "environment", "format_table", "markdown_table", "write_results", "save_figure", "Cache",
    "parser", "progress", "to_jsonable",
]


def atomic_write_bytes(path: Path | str, data: bytes) -> Path:
    """Atomic write (temporary file in the same folder, then a rename); creates the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return _atomic_write_bytes(path, data)


def atomic_write_text(path: Path | str, text: str) -> Path:
    """Atomic text write (UTF-8)."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def to_jsonable(obj: Any) -> Any:
    """Convert numpy scalars/arrays, tuples and non-finite floats to JSON-safe values."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None
    if np is not None:
        if isinstance(obj, np.ndarray):
            return to_jsonable(obj.tolist())
        if isinstance(obj, np.generic):
            return to_jsonable(obj.item())
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else str(obj)
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def environment() -> dict:
    """Versions of Python and the numerical stack, the platform and the time of the run."""
    versions = {"python": platform.python_version(), "platform": platform.platform()}
    for mod in ("numpy", "scipy", "cvxpy", "clarabel", "scs", "matplotlib", "ffu_cvx"):
        try:
            versions[mod] = getattr(__import__(mod), "__version__", "unknown")
        except ImportError:
            versions[mod] = None
    versions["time_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    versions["cpu_count"] = os.cpu_count()
    return versions


def _fmt(v: Any, floatfmt: str) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return "nan" if math.isnan(v) else format(v, floatfmt)
    return str(v)


def format_table(rows: Sequence[dict], columns: Sequence[str] | None = None, floatfmt: str = ".4g") -> str:
    """Plain-text table of ``rows`` (dicts) for the terminal."""
    columns = list(columns or (rows[0].keys() if rows else []))
    cells = [[str(c) for c in columns]] + [[_fmt(r.get(c), floatfmt) for c in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = ["  ".join(s.rjust(w) for s, w in zip(row, widths)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(rows: Sequence[dict], columns: Sequence[str] | None = None, floatfmt: str = ".4g") -> str:
    """GitHub-flavoured markdown table of ``rows``."""
    columns = list(columns or (rows[0].keys() if rows else []))
    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    out += ["| " + " | ".join(_fmt(r.get(c), floatfmt) for c in columns) + " |" for r in rows]
    return "\n".join(out)


def write_results(name: str, rows: Sequence[dict], meta: dict | None = None,
                  columns: Sequence[str] | None = None, title: str | None = None,
                  notes: str = "", floatfmt: str = ".4g") -> dict[str, Path]:
    """Write ``results/<name>.csv``, ``.json`` (rows + meta + environment) and ``.md`` atomically."""
    columns = list(columns or (rows[0].keys() if rows else []))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({c: r.get(c) for c in columns})
    payload = {"name": name, "meta": meta or {}, "environment": environment(), "columns": columns, "rows": list(rows)}
    md = f"# {title or name}\n\n{markdown_table(rows, columns, floatfmt)}\n"
    if notes:
        md += f"\n{notes.strip()}\n"
    return {
        "csv": atomic_write_text(RESULTS_DIR / f"{name}.csv", buf.getvalue()),
        "json": atomic_write_text(RESULTS_DIR / f"{name}.json",
                                  json.dumps(to_jsonable(payload), indent=2, allow_nan=False) + "\n"),
        "md": atomic_write_text(RESULTS_DIR / f"{name}.md", md),
    }


def save_figure(fig, name: str) -> list[Path]:
    """Save a matplotlib figure as ``figures/<name>.png`` and ``.pdf``, atomically, and close it."""
    import matplotlib.pyplot as plt

    paths = []
    for ext in ("png", "pdf"):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, dpi=150, bbox_inches="tight")
        paths.append(atomic_write_bytes(FIGURES_DIR / f"{name}.{ext}", buf.getvalue()))
    plt.close(fig)
    return paths


class Cache:
    """Per-experiment cache of finished cells: one JSON file per key under ``results/cache/<name>/``.

    ``run(key, fn)`` returns the cached value for ``key`` (any JSON-able dict) or calls
    ``fn()`` and stores its (JSON-able) result. Exceptions propagate and nothing is
    stored, so failures are never cached. ``force=True`` recomputes; ``collect=True``
    never computes (returns ``None`` for missing cells).
    """

    def __init__(self, name: str, *, force: bool = False, collect: bool = False, enabled: bool = True):
        self.dir = CACHE_DIR / name
        self.force, self.collect, self.enabled = force, collect, enabled

    def _path(self, key: dict) -> Path:
        blob = json.dumps(to_jsonable(key), sort_keys=True)
        return self.dir / (hashlib.sha256(blob.encode()).hexdigest()[:20] + ".json")

    def get(self, key: dict):
        path = self._path(key)
        if not self.enabled or self.force or not path.exists():
            return None
        return json.loads(path.read_text())["value"]

    def put(self, key: dict, value) -> None:
        if self.enabled:
            atomic_write_text(self._path(key), json.dumps(to_jsonable({"key": key, "value": value}), indent=1) + "\n")

    def run(self, key: dict, fn: Callable[[], Any]):
        hit = self.get(key)
        if hit is not None:
            return hit
        if self.collect:
            return None
        value = to_jsonable(fn())
        self.put(key, value)
        return value


def parser(description: str) -> argparse.ArgumentParser:
    """Argument parser with the flags every experiment shares."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="small version that finishes in seconds (used by tests)")
    p.add_argument("--force", action="store_true", help="recompute cached cells")
    p.add_argument("--collect", action="store_true", help="only report cells already cached; compute nothing")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cell cache")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    return p


def progress(items: Iterable, desc: str = "", quiet: bool = False, total: int | None = None):
    """Yield ``items``, printing ``desc [i/n] item (elapsed)`` to stderr as each one starts."""
    items = list(items) if total is None else items
    n = total if total is not None else len(items)
    t0 = time.perf_counter()
    for i, item in enumerate(items, 1):
        if not quiet:
            print(f"{desc} [{i}/{n}] {item} ({time.perf_counter() - t0:.1f}s elapsed)", file=sys.stderr, flush=True)
        yield item
