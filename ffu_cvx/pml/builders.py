"""The PML paper's workload matrices (spec § 5), with their sensitivities under both relations.

PML layer: imports numpy, :mod:`ffu_cvx.model.validation`, :mod:`ffu_cvx.workloads`
(the prefix matrix) and :mod:`ffu_cvx.pml.analysis` (the name check).
"""

from __future__ import annotations

import numpy as np

from ..model import validation
from ..workloads import prefix as _prefix_workload
from .analysis import check_choice

__all__ = ["WORKLOADS", "histogram", "prefix", "all_ranges", "haar", "differences", "pml_workload"]

#: The names :func:`pml_workload` accepts.
WORKLOADS = ("histogram", "prefix", "range", "haar", "difference")


def histogram(k: int) -> np.ndarray:
    """Histogram queries: ``I_k`` (k, k); ``Delta_1 = 2`` (substitution), 1 (add/remove)."""
    return np.eye(validation.positive_int(k, "k", minimum=2))


def prefix(k: int) -> np.ndarray:
    """Prefix queries (k, k), the matrix of :func:`ffu_cvx.workloads.prefix`.

    ``Delta_1 = k - 1`` (substitution), ``k`` (add/remove: cell 0 is in every prefix).
    """
    return np.array(_prefix_workload(validation.positive_int(k, "k", minimum=2)).W)


def all_ranges(k: int) -> np.ndarray:
    """All contiguous ranges ``[i, j]``, 0 <= i <= j < k, in (i, j) order: (k(k+1)/2, k).

    ``Delta_1 = floor((k+1)^2 / 4)`` under both relations: the middle cell is in that many
    ranges, and moving a record about ``(k+1)/2`` cells changes as many.
    """
    k = validation.positive_int(k, "k", minimum=2)
    i, j = np.triu_indices(k)
    cols = np.arange(k)
    return ((cols >= i[:, None]) & (cols <= j[:, None])).astype(np.float64)


def haar(k: int) -> np.ndarray:
    """Unnormalised Haar matrix (k, k), k = 2^t, by the Kronecker recursion.

    ``H_1 = [1]``, ``H_2n = [H_n kron [1, 1]; I_n kron [1, -1]]``: the total, then one
    row per dyadic interval (+1 on its left half, -1 on its right half). ``Delta_1 = 2t``
    (substitution), ``t + 1`` (add/remove: the total and one detail row per level).
    """
    k = validation.positive_int(k, "k", minimum=2)
    if k & (k - 1):
        raise ValueError(f"`k` must be a power of 2 for the Haar workload, got {k}")
    H = np.ones((1, 1))
    while H.shape[0] < k:
        n = H.shape[0]
        H = np.vstack([np.kron(H, [1.0, 1.0]), np.kron(np.eye(n), [1.0, -1.0])])
    return H


def differences(k: int) -> np.ndarray:
    """Consecutive differences ``x_l - x_{l+1}``: (k-1, k).

    ``Delta_1 = min(k, 4)`` under substitution (a record moving between two interior,
    non-adjacent cells changes four differences by one), ``min(k - 1, 2)`` under
    add/remove (an interior cell is in two differences).
    """
    k = validation.positive_int(k, "k", minimum=2)
    W = np.zeros((k - 1, k))
    rows = np.arange(k - 1)
    W[rows, rows], W[rows, rows + 1] = 1.0, -1.0
    return W


#: The builders by name (``"range"`` is :func:`all_ranges`).
_BUILDERS = {"histogram": histogram, "prefix": prefix, "range": all_ranges, "haar": haar,
             "difference": differences}


def pml_workload(name: str, k: int) -> np.ndarray:
    """Workload matrix (m, k) by name: one of :data:`WORKLOADS` (``"range"`` is :func:`all_ranges`)."""
    return _BUILDERS[check_choice(name, "name", WORKLOADS)](k)