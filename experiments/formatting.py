"""Text tables of result rows: aligned plain text for the terminal and GitHub markdown.

Interfaces layer (experiments): imports the standard library only. A row is a dict;
``None`` prints as an empty cell, NaN as ``nan``, other floats with ``floatfmt``.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

__all__ = ["cell_text", "format_table", "markdown_table"]


def cell_text(value: Any, floatfmt: str = ".4g") -> str:
    """One cell as text: ``""`` for None, ``nan`` for NaN, floats with ``floatfmt``."""
    if value is None:
        return ""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else format(value, floatfmt)
    return str(value)


def _columns(rows: Sequence[dict], columns: Sequence[str] | None) -> list[str]:
    return list(columns or (rows[0].keys() if rows else []))


def format_table(rows: Sequence[dict], columns: Sequence[str] | None = None, floatfmt: str = ".4g") -> str:
    """Plain-text table of ``rows`` for the terminal, right-aligned, a rule under the header."""
    columns = _columns(rows, columns)
    cells = [[str(c) for c in columns]] + [[cell_text(r.get(c), floatfmt) for c in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = ["  ".join(s.rjust(w) for s, w in zip(row, widths)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(rows: Sequence[dict], columns: Sequence[str] | None = None, floatfmt: str = ".4g") -> str:
    """GitHub-flavoured markdown table of ``rows``."""
    columns = _columns(rows, columns)
    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    out += ["| " + " | ".join(cell_text(r.get(c), floatfmt) for c in columns) + " |" for r in rows]
    return "\n".join(out)
