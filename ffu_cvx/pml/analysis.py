"""Input checks and structure detection for the PML bounds.

PML layer, bottom of :mod:`ffu_cvx.pml`: imports numpy, scipy,
:mod:`ffu_cvx.model.privacy` (the neighbouring relations) and :mod:`ffu_cvx.model.validation`. :func:`analyse` reduces a query matrix to an
:class:`Analysis`: its non-constant rows (constant rows shift every ``c_j`` alike and
change no bound), the recognised structure and the common entry magnitude of the
structured kinds, with the sensitivities under both neighbouring relations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.spatial.distance import cdist

from ..model import validation
from ..model.privacy import ADD_REMOVE, NEIGHBOURS

__all__ = ["STRUCTURES", "Analysis", "analyse", "check_matrix", "check_alpha", "check_choice",
           "check_neighbours", "l1_distances"]

#: The algorithms of the sign bound (``"auto"`` recognises the workload).
STRUCTURES = ("auto", "two_valued", "difference", "haar", "general")


# --------------------------------------------------------------------------- validation

def check_matrix(W) -> np.ndarray:
    """The query matrix ``W`` (m, k) as float64: finite, non-empty, k >= 2 (or a ``Workload``'s ``.W``)."""
    W = getattr(W, "W", W)  # a ffu_cvx.workloads.Workload is accepted as its matrix
    try:
        W = np.array(W, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`W` must be a real (m, k) array, got {type(W).__name__}: {exc}") from None
    if W.ndim != 2 or W.size == 0:
        raise ValueError(f"`W` must be a non-empty 2-D (m, k) array, got shape {W.shape}")
    if not np.all(np.isfinite(W)):
        raise ValueError("`W` contains NaN or inf entries; pass a finite query matrix")
    if W.shape[1] < 2:
        raise ValueError(f"`W` needs k >= 2 columns (classes), got k = {W.shape[1]}: one class leaks nothing")
    return W


def check_alpha(alpha, k: int) -> float:
    """The context assumption ``alpha`` in (0, 1/k] (a rounding excess above 1/k is clipped)."""
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise ValueError(f"`alpha` must be a number in (0, 1/k], got {alpha!r}") from None
    if not (math.isfinite(a) and 0 < a <= (1 + 1e-12) / k):
        raise ValueError(
            f"`alpha` must lie in (0, 1/k] = (0, {1 / k:.6g}] for k = {k} classes (it lower-bounds every "
            f"class probability, so k * alpha <= 1), got {alpha!r}")
    return min(a, 1.0 / k)


def check_choice(value, name: str, allowed) -> str:
    """One of the lower-case names ``allowed``, given in any case."""
    return validation.choice(value.lower() if isinstance(value, str) else value, name, allowed)


def check_neighbours(neighbours) -> str:
    """One of :data:`ffu_cvx.model.privacy.NEIGHBOURS` (``ADD_REMOVE`` or ``SUBSTITUTE``)."""
    return validation.choice(neighbours, "neighbours", NEIGHBOURS)


# --------------------------------------------------------------------------- structure

@dataclass(frozen=True)
class Analysis:
    """A workload reduced for the bounds: non-constant rows ``Wr`` (None for the implicit
    histogram of :func:`~ffu_cvx.pml.laplace_release`), recognised ``kind``, the common
    entry magnitude ``scale`` of the structured kinds and ``add_remove``, the largest
    column L1 norm ``max_j ||w_j||_1`` of the whole matrix (constant rows included: adding
    a record moves them too)."""

    Wr: np.ndarray
    k: int
    kind: str
    scale: float
    add_remove: float

    def sensitivity(self, neighbours: str) -> float:
        """``Delta_1`` under ``neighbours``: :attr:`delta` for substitution, ``add_remove`` for add/remove."""
        return self.add_remove if neighbours == ADD_REMOVE else self.delta

    @property
    def delta(self) -> float:
        """``Delta_1(W) = max_{j,j'} ||w_j - w_j'||_1``, the substitution sensitivity every PML bound uses."""
        if self.kind == "histogram":
            return 2 * self.scale
        if self.Wr.shape[0] == 0:
            return 0.0
        if self.kind == "difference":
            return self.scale * min(4, self.k)
        if self.kind == "haar":
            return self.scale * 2 * int(round(math.log2(self.k)))
        return float(self.distances().max())

    def distances(self) -> np.ndarray:
        """``D`` (k, k), computed once: O(m k^2)."""
        D = self.__dict__.get("_D")
        if D is None:
            D = l1_distances(self.Wr, self.k)
            object.__setattr__(self, "_D", D)
        return D


def l1_distances(Wr: np.ndarray, k: int) -> np.ndarray:
    """``D_jp = ||w_j - w_p||_1`` (k, k).

    Dense: O(m k^2). Sparse rows (differences, Haar) go faster through
    ``D_jp = n_j + n_p - sum_l (|W_lj| + |W_lp| - |W_lj - W_lp|)`` with ``n_j = ||w_j||_1``,
    where only rows with both entries nonzero contribute: O(sum_l nnz_l^2).
    """
    nnz = np.count_nonzero(Wr, axis=1)
    if float(np.sum(nnz.astype(float) ** 2)) + 1e3 * Wr.shape[0] >= Wr.shape[0] * float(k) ** 2:
        return cdist(Wr.T, Wr.T, metric="cityblock")
    absW = np.abs(Wr)
    norms = absW.sum(axis=0)
    D = norms[:, None] + norms[None, :]
    for row in Wr:
        idx = np.flatnonzero(row)
        v = row[idx]
        D[np.ix_(idx, idx)] -= np.abs(v)[:, None] + np.abs(v)[None, :] - np.abs(v[:, None] - v[None, :])
    np.fill_diagonal(D, 0.0)
    return D


def _is_two_valued(Wr: np.ndarray) -> bool:
    lo, hi = Wr.min(axis=1, keepdims=True), Wr.max(axis=1, keepdims=True)
    return bool(np.all((Wr == lo) | (Wr == hi)))


def _histogram_scale(Wr: np.ndarray) -> float | None:
    """``a`` when the rows are ``+-a e_j``, one per class; else None."""
    m, k = Wr.shape
    nz = Wr != 0
    if m != k or not np.all(nz.sum(axis=1) == 1):
        return None
    cols = nz.argmax(axis=1)
    a = np.abs(Wr[np.arange(m), cols])
    return float(a[0]) if np.all(a == a[0]) and np.array_equal(np.sort(cols), np.arange(k)) else None


def _difference_scale(Wr: np.ndarray) -> float | None:
    """``a`` when the rows are ``+-a (e_l - e_{l+1})`` for l = 0..k-2, each once; else None."""
    m, k = Wr.shape
    nz = Wr != 0
    if m != k - 1 or not np.all(nz.sum(axis=1) == 2):
        return None
    rows = np.arange(m)
    first = nz.argmax(axis=1)
    if np.any(first >= k - 1) or not np.all(nz[rows, np.minimum(first + 1, k - 1)]):
        return None
    v1, v2 = Wr[rows, first], Wr[rows, first + 1]
    a = abs(v1[0])
    if not (np.all(v1 == -v2) and np.all(np.abs(v1) == a)):
        return None
    return float(a) if np.array_equal(np.sort(first), np.arange(k - 1)) else None


def _haar_scale(Wr: np.ndarray) -> float | None:
    """``a`` when the rows are ``+-a`` times the detail rows of :func:`haar`, each once; else None."""
    m, k = Wr.shape
    if k < 2 or k & (k - 1) or m != k - 1:
        return None
    nz = Wr != 0
    a = None
    seen = set()
    for row, support in zip(Wr, nz):
        idx = np.flatnonzero(support)
        lo, n = int(idx[0]), idx.size
        if n < 2 or n & (n - 1) or lo % n or idx[-1] != lo + n - 1:
            return None
        v = row[lo]
        a = abs(v) if a is None else a
        if abs(v) != a or not (np.all(row[lo:lo + n // 2] == v) and np.all(row[lo + n // 2:lo + n] == -v)):
            return None
        seen.add((lo, n))
    return float(a) if len(seen) == k - 1 else None


def analyse(W, structure: str = "auto") -> Analysis:
    """Check ``W`` and recognise its structure (``structure="auto"``) or confirm the one named."""
    W = check_matrix(W)
    structure = check_choice(structure, "structure", STRUCTURES)
    k = W.shape[1]
    Wr = W[W.max(axis=1) > W.min(axis=1)]  # constant rows shift every c_j alike
    add_remove = float(np.abs(W).sum(axis=0).max())

    def found(kind: str, scale: float = 1.0) -> Analysis:
        return Analysis(Wr, k, kind, scale, add_remove)

    if structure == "general":
        return found("general")
    if structure == "auto":
        a = _histogram_scale(Wr)
        if a is not None:
            return found("histogram", a)
    if structure in ("auto", "two_valued") and _is_two_valued(Wr):
        return found("two_valued")
    for kind, detect in (("difference", _difference_scale), ("haar", _haar_scale)):
        if structure in ("auto", kind):
            a = detect(Wr)
            if a is not None:
                return found(kind, a)
    if structure != "auto":
        raise ValueError(
            f"`structure`={structure!r} does not match W (after dropping constant rows, up to a common "
            f"scale, row order and row signs); use structure='auto' or 'general'")
    return found("general")

