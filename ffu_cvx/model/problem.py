"""``FitnessProblem``: a validated instance of Problem 1 (W, c, B, L).

Problem 1 (prioritising accuracy): minimise ``alpha`` over symmetric positive definite
``Sigma`` (k, k) subject to ``b_i^T Sigma^{-1} b_i <= alpha`` for every column ``b_i``
of ``B`` and ``diag(L Sigma L^T) <= c``. Every solver takes a ``FitnessProblem``.

Scale: Problem 1 is unchanged when row ``j`` of ``W`` is multiplied by ``s`` and ``c_j``
by ``s^2``; what matters is the normalised norm ``||w_j|| / sqrt(c_j)`` of each query,
and the privacy cost is of the order of its square. Problems whose normalised norms
leave :data:`SCALE_LIMITS` are refused (their privacy cost, or its square inside the
solvers, would overflow or underflow double precision), and
:attr:`FitnessProblem.scale_spread` tells how far apart the queries' scales are.

Model layer: imports numpy and ``basis``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import basis as _basis

__all__ = ["FitnessProblem", "validate_workload", "validate_labels", "scale_spread", "SCALE_LIMITS",
]

#: Range allowed for every query's normalised norm ``||w_j|| / sqrt(c_j)``. The privacy
#: cost is of the order of its square and the solvers square that again, so 1e+-50 keeps
#: every intermediate (about 1e+-200) inside double precision (1e+-308).
SCALE_LIMITS = (1e-50, 1e50)


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
    if c is None:
        raise ValueError("`c` (the variance targets) is required, got None: give one target per query "
                         "or one number for all")
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
    norms = _basis.row_normalised(W)[1] / np.sqrt(c)
    lo, hi = SCALE_LIMITS
    bad = np.flatnonzero(~((norms >= lo) & (norms <= hi)))
    if bad.size:
        j = int(bad[0])
        raise ValueError(
            f"`W` and `c` are badly scaled: query {j} has ||w_j|| / sqrt(c_j) = {norms[j]:.3g}, outside "
            f"[{lo:g}, {hi:g}]; its privacy cost would overflow double precision. Rescale W (counts in "
            "other units) or c"
        )
    return W, c


def scale_spread(W, c) -> float:
    """``max_j / min_j`` of the normalised norms ``||w_j|| / sqrt(c_j)`` (1 when all are equal).

    Above :data:`ffu_cvx.model.basis.BADLY_SCALED` the problem is badly scaled: the solvers may then fail or
    stop inaccurate, and the fix is to rescale the queries (rows of W with c).
    """
    norms = _basis.row_normalised(np.asarray(W, dtype=float))[1] / np.sqrt(np.asarray(c, dtype=float))
    return float(norms.max() / norms.min())


def validate_labels(labels, m: int) -> tuple:
    """``labels`` as a tuple of ``m`` strings (``None`` -> ``()``); ``ValueError`` naming `labels`.

    A single string is refused (it would be split into characters), so is anything that is
    not a sequence of strings or numbers.
    """
    if labels is None:
        return ()
    if isinstance(labels, (str, bytes)) or not hasattr(labels, "__len__") or isinstance(labels, dict):
        raise ValueError(f"`labels` must be a list of {m} strings (one per query), got {type(labels).__name__} "
                         f"{labels!r:.60}")
    bad = [v for v in labels if not isinstance(v, (str, int, float, np.integer, np.floating))
           or isinstance(v, bool)]
    if bad:
        raise ValueError(f"`labels` must hold strings (one per query), got {bad[0]!r:.60}")
    labels = tuple(str(v) for v in labels)
    if labels and len(labels) != m:
        raise ValueError(f"`labels` must have one entry per query ({m}), got {len(labels)}")
    return labels


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
        Decomposition ``W = L B`` (see :mod:`ffu_cvx.model.basis`).
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
        labels = validate_labels(labels, W.shape[0])
        B, L, basis_name = _basis.decompose(W, basis)
        self._set(W, c, basis_name, labels, name, B, L)

    def _set(self, W, c, basis_name, labels, name, B, L) -> None:
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
    def from_workload(cls, workload, basis="auto") -> "FitnessProblem":
        """Build the problem of a :class:`ffu_cvx.workloads.Workload` (read by its ``W``, ``c``, ``labels`` and
        ``name``: the workloads layer sits above this one); a workload with its own ``to_problem`` (a
        :class:`ffu_cvx.workloads.products.ProductWorkload`) builds its structured problem."""
        if hasattr(workload, "to_problem"):
            return workload.to_problem(basis=basis)
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

    @property
    def scale_spread(self) -> float:
        """Spread of the queries' normalised norms (see :func:`scale_spread`)."""
        return scale_spread(self.W, self.c)

    @property
    def scaling_advice(self) -> str:
        """"" for a well-scaled problem; else why it is badly scaled and what to do."""
        spread = self.scale_spread
        if spread <= _basis.BADLY_SCALED:
            return ""
        return (f"the problem is badly scaled: its queries' normalised norms ||w_j|| / sqrt(c_j) span {spread:.1e} "
                f"(more than {_basis.BADLY_SCALED:g}); rescale rows of W (and c by the squares) so that they are "
                "closer, or solve the far apart queries separately")

    def with_targets(self, c) -> "FitnessProblem":
        """The same workload and decomposition (``B``, ``L`` shared, not recomputed) with targets ``c`` (m,)."""
        _, c = validate_workload(self.W, c)
        new = object.__new__(FitnessProblem)
        new._set(self.W, c, self.basis, self.labels, self.name, self.B, self.L)
        return new

    def __repr__(self) -> str:
        return f"FitnessProblem(name={self.name!r}, m={self.m}, d={self.d}, k={self.k}, basis={self.basis!r})"
