"""``FitnessProblem``: a validated instance of Problem 1 (W, c, B, L).

Problem 1 (prioritising accuracy): minimise ``alpha`` over symmetric positive definite
``Sigma`` (k, k) subject to ``b_i^T Sigma^{-1} b_i <= alpha`` for every column ``b_i``
of ``B`` and ``diag(L Sigma L^T) <= c``. Every solver takes a ``FitnessProblem``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from . import basis as _basis

if TYPE_CHECKING:  # pragma: no cover
    from .workloads import Workload

__all__ = ["FitnessProblem", "validate_workload"]


def validate_workload(W, c) -> tuple[np.ndarray, np.ndarray]:
    """Check a workload ``W`` (m, d) and targets ``c`` (m,); return float64 copies.

    Raises ``ValueError`` naming the argument: wrong shapes, NaN/inf, non-positive
    targets, all-zero queries, an empty workload.
    """
    try:
        W = np.array(W, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`W` must be a numeric (m, d) array: {exc}") from None
    if W.ndim != 2:
        raise ValueError(f"`W` must be a 2-D (m, d) array, got {W.ndim} dimension(s)")
    m, d = W.shape
    if m == 0 or d == 0:
        raise ValueError(f"`W` is empty (shape {W.shape}): a workload needs at least one query and one cell")
    if not np.all(np.isfinite(W)):
        bad = np.argwhere(~np.isfinite(W))[0]
        raise ValueError(f"`W` contains NaN or inf (first at row {bad[0]}, column {bad[1]})")
    zero = np.flatnonzero(~W.any(axis=1))
    if zero.size:
        raise ValueError(
            f"`W` has all-zero queries (rows {zero[:5].tolist()}{'...' if zero.size > 5 else ''}); "
            "they need no noise: drop them"
        )
    try:
        c = np.array(c, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`c` must be a numeric (m,) array: {exc}") from None
    if c.ndim == 0:
        c = np.full(m, float(c))
    if c.shape != (m,):
        raise ValueError(f"`c` must have shape ({m},) to match W's {m} rows, got {c.shape}")
    if not np.all(np.isfinite(c)):
        raise ValueError("`c` contains NaN or inf: every query needs a finite variance target")
    if np.any(c <= 0):
        j = int(np.flatnonzero(c <= 0)[0])
        raise ValueError(f"`c` must be > 0 (variance targets), but c[{j}] = {c[j]!r}")
    return W, c


@dataclass(frozen=True, eq=False)
class FitnessProblem:
    """Problem 1 for workload ``W`` (m, d) with variance targets ``c`` (m,).

    Parameters
    ----------
    W : (m, d) array_like
        Workload: one linear query per row.
    c : (m,) array_like or float
        Variance targets, all > 0 (a scalar is broadcast).
    basis : {"auto", "identity", "upper", "rows"} or (k, d) array
        Decomposition ``W = L B`` (see :mod:`ffu_cvx.basis`).
    labels : sequence of str, optional
        One label per query (for example the group it belongs to).
    name : str, optional
        Human-readable name used in logs and results.

    Attributes
    ----------
    B : (k, d) ndarray, L : (m, k) ndarray, basis : str (the basis actually used).
    """

    W: np.ndarray
    c: np.ndarray
    basis: str = "auto"
    labels: tuple = ()
    name: str = "workload"
    B: np.ndarray = field(init=False, repr=False)
    L: np.ndarray = field(init=False, repr=False)

    def __init__(self, W, c, basis="auto", labels=None, name="workload"):
        W, c = validate_workload(W, c)
        B, L, basis_name = _basis.decompose(W, basis)
        if labels is None:
            labels = ()
        labels = tuple(str(s) for s in labels)
        if labels and len(labels) != W.shape[0]:
            raise ValueError(f"`labels` must have one entry per query ({W.shape[0]}), got {len(labels)}")
        for arr in (W, c, B, L):
            arr.setflags(write=False)
        object.__setattr__(self, "W", W)
        object.__setattr__(self, "c", c)
        object.__setattr__(self, "basis", basis_name)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "name", str(name))
        object.__setattr__(self, "B", B)
        object.__setattr__(self, "L", L)

    @classmethod
    def from_workload(cls, workload: "Workload", basis="auto") -> "FitnessProblem":
        """Build the problem of a :class:`ffu_cvx.workloads.Workload`."""
        return cls(workload.W, workload.c, basis=basis, labels=workload.labels, name=workload.name)

    @property
    def m(self) -> int:
        """Number of queries."""
        return self.W.shape[0]

    @property
    def d(self) -> int:
        """Number of histogram cells."""
        return self.W.shape[1]

    @property
    def k(self) -> int:
        """Rank of W (rows of B)."""
        return self.B.shape[0]

    def with_targets(self, c) -> "FitnessProblem":
        """The same workload and basis with new targets ``c`` (m,)."""
        return FitnessProblem(self.W, c, basis=self.B if self.basis == "custom" else self.basis,
                              labels=self.labels or None, name=self.name)

    def __repr__(self) -> str:
        return f"FitnessProblem(name={self.name!r}, m={self.m}, d={self.d}, k={self.k}, basis={self.basis!r})"
