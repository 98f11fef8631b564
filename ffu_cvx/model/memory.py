"""How much memory a dense array needs, and a refusal that says so before allocating it.

Model layer: imports the standard library only. Used by the workload builders (a dense
``W`` of ``m d`` float64 entries) and the command line (what a solve would need).
"""

from __future__ import annotations

import os

__all__ = ["FLOAT_BYTES", "DENSE_FRACTION", "physical_memory", "human_bytes", "dense_bytes", "check_dense"]

#: Bytes per float64 entry.
FLOAT_BYTES = 8
#: Largest share of the machine's memory one dense input matrix may take: a problem holds
#: ``W``, ``L`` and ``B`` and a solver several more arrays of the same order.
DENSE_FRACTION = 0.25


def physical_memory() -> int | None:
    """Total physical memory in bytes, or ``None`` where the system does not say."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return None


def human_bytes(n: float) -> str:
    """``n`` bytes as a short decimal string: ``"8 TB"``, ``"1.5 GB"``."""
    for unit in ("B", "kB", "MB", "GB", "TB", "PB", "EB"):
        if n < 1000 or unit == "EB":
            return f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:.3g} EB"  # pragma: no cover (the loop always returns)


def dense_bytes(rows: int, cols: int) -> int:
    """Bytes of a dense float64 (rows, cols) array."""
    return FLOAT_BYTES * int(rows) * int(cols)


def check_dense(rows: int, cols: int, what: str, name: str, fix: str) -> None:
    """Refuse (``ValueError`` naming ``name``) a dense (rows, cols) float64 ``what`` that cannot fit.

    It cannot fit when it needs more than :data:`DENSE_FRACTION` of the machine's memory;
    the message says how much it needs, how much there is, and ``fix``.
    """
    need = dense_bytes(rows, cols)
    total = physical_memory()
    if total is not None and need > DENSE_FRACTION * total:
        raise ValueError(f"`{name}`: {what} is a dense {rows} x {cols} matrix needing {human_bytes(need)}, "
                         f"more than {DENSE_FRACTION:.0%} of this machine's {human_bytes(total)}; {fix}")
