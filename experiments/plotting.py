"""Small pieces the figures share: curves read from results rows, and coinciding curves found.

Interfaces layer (experiments): imports ``ffu_cvx.io.jsonio`` only (no matplotlib: the
figure modules draw). A curve that lies on another is drawn once with both names in
its legend entry, so a reader is told rather than left to guess where it went.
"""

from __future__ import annotations

from typing import Sequence

from ffu_cvx.io.jsonio import number

__all__ = ["curve", "coinciding", "COINCIDE_RTOL"]

#: Two curves closer than this (relative, at every point) are drawn as one.
COINCIDE_RTOL = 1e-6


def curve(rows: Sequence[dict], x: str, y: str) -> tuple[list[float], list[float]]:
    """The points ``(row[x], row[y])`` of the rows that have ``y`` (``null`` read as NaN)."""
    pts = [(number(r[x]), number(r[y])) for r in rows if r.get(y) is not None]
    return [p[0] for p in pts], [p[1] for p in pts]


def _same(a: Sequence[float], b: Sequence[float], rtol: float) -> bool:
    return len(a) == len(b) > 0 and all(abs(u - v) <= rtol * max(abs(u), abs(v)) for u, v in zip(a, b))


def coinciding(curves: dict[str, Sequence[float]], rtol: float = COINCIDE_RTOL) -> list[list[str]]:
    """The names of ``curves`` (name -> y values on a common x) in groups of equal curves, in order."""
    groups: list[list[str]] = []
    for name, ys in curves.items():
        for group in groups:
            if _same(curves[group[0]], ys, rtol):
                group.append(name)
                break
        else:
            groups.append([name])
    return groups
