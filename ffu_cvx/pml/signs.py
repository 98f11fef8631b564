"""Algorithms of Theorem 2's sign bound ``max_s -log F(g(s))`` (spec § 3).

PML layer: imports numpy and the PML modules ``analysis`` and ``formulas``. The
general forced-sign reduction enumerates only the free signs of each class
(:func:`sign_general`, :func:`sign_pattern_count`); the chain of consecutive
differences (:func:`sign_difference`) and the Haar tree (:func:`sign_haar`) have
dynamic programmes that cover every class at once; these two work on unit-scale rows
(pass ``b`` over the rows' entry magnitude).
"""

from __future__ import annotations

import math

import numpy as np

from .analysis import analyse
from .formulas import neg_log_f

__all__ = ["DEFAULT_MAX_PATTERNS", "TooManyPatternsError", "sign_pattern_count", "sign_general",
           "sign_difference", "sign_haar"]

#: Sign patterns the general algorithm may enumerate unless told otherwise: beyond it
#: the work is refused up front (TooManyPatternsError) rather than left to run for hours.
DEFAULT_MAX_PATTERNS = 2**20


class TooManyPatternsError(ValueError):
    """The general forced-sign algorithm would enumerate more than ``max_patterns`` patterns."""



def _forced_sign_masks(Wr: np.ndarray):
    lo, hi = Wr.min(axis=1, keepdims=True), Wr.max(axis=1, keepdims=True)
    at_min, at_max = Wr == lo, Wr == hi
    return at_min, ~(at_min | at_max)


def sign_pattern_count(W) -> int:
    """Number of sign patterns the general forced-sign algorithm enumerates, ``sum_p 2^{r_p}``.

    Parameters
    ----------
    W : array_like, (m, k)

    Returns
    -------
    int
        ``r_p`` counts the non-constant rows where ``W_lp`` lies strictly inside the row's
        range; the other rows have a forced sign.
    """
    Wr = analyse(W, "general").Wr
    _, free = _forced_sign_masks(Wr)
    return sum(2 ** int(r) for r in free.sum(axis=0))


def sign_general(Wr: np.ndarray, k: int, b: float, alpha: float, max_patterns: int) -> tuple[float, int]:
    """The forced-sign reduction for any ``Wr`` (non-constant rows): ``(bound, patterns enumerated)``.

    Raises :class:`TooManyPatternsError` before any work when ``sum_p 2^{r_p}`` exceeds
    ``max_patterns``.
    """
    if Wr.shape[0] == 0:
        return 0.0, 0
    at_min, free = _forced_sign_masks(Wr)
    r = free.sum(axis=0)
    n_patterns = sum(2 ** int(rp) for rp in r)
    if n_patterns > max_patterns:
        raise TooManyPatternsError(
            f"the forced-sign algorithm would enumerate {n_patterns} sign patterns (sum over classes p of "
            f"2^r_p, largest r_p = {int(r.max())}), more than `max_patterns`={max_patterns}; raise "
            f"`max_patterns`, or use bound='safe' (a guaranteed upper bound, O(m k^2))")
    best = -np.inf
    chunk = max(1, 2**22 // k)
    for p in range(k):
        fixed = ~free[:, p]
        base = np.where(at_min[fixed, p], 1.0, -1.0) @ Wr[fixed]  # (k,)
        Wf = Wr[free[:, p]]
        bits = np.arange(Wf.shape[0])
        for start in range(0, 2 ** Wf.shape[0], chunk):
            idx = np.arange(start, min(start + chunk, 2 ** Wf.shape[0]))
            S = ((idx[:, None] >> bits) & 1) * 2.0 - 1.0  # (n, r_p)
            c = base + S @ Wf
            g = c - c.min(axis=1, keepdims=True)
            vals = neg_log_f(np.expm1(-g / b).sum(axis=1), g.max(axis=1), b, alpha, k)
            best = max(best, float(vals.max()))
    return best, n_patterns


def _hit_combine(a0, a1, b0, b1):
    """Join two independent parts, each as (min sum without hitting M, min sum hitting M)."""
    return a0 + b0, np.minimum(np.minimum(a0 + b1, a1 + b0), a1 + b1)


def sign_difference(k: int, b: float, alpha: float) -> float:
    """Chain DP for rows ``x_l - x_{l+1}`` (unit scale): ``c_j = s_j - s_{j-1}``.

    For every class p at once and every maximal gap M in 0..4, a Viterbi pass over the
    columns j with state ``s_j`` minimises ``sum_j expm1(-g_j/b)`` subject to
    ``0 <= g_j <= M``, tracking whether some ``g_j == M``. Class p forces ``s_p = -1``
    and ``s_{p-1} = +1``. Arrays are (sign s_j, previous sign, p, M); cost O(k^2).
    """
    S = np.array([-1.0, 1.0])
    Ms = np.arange(5.0)
    P = np.arange(k)
    cp = -(P <= k - 2).astype(float) - (P >= 1)
    inf = np.inf

    def costs(c):
        g = c[..., None] - cp
        e = np.where(g >= 0, np.expm1(-np.maximum(g, 0.0) / b), inf)[..., None]
        val = np.where(g[..., None] <= Ms, e, inf)
        hit = g[..., None] == Ms
        return np.where(hit, inf, val), np.where(hit, val, inf)  # (no-hit, hit) costs

    def forbid(V0, V1, j):  # row j: class j forces s_j = -1, class j+1 forces s_j = +1
        V0[1, j] = V1[1, j] = inf
        if j + 1 < k:
            V0[0, j + 1] = V1[0, j + 1] = inf
        return V0, V1

    V0, V1 = forbid(*costs(S), 0)  # column 0: c_0 = s_0; shapes (2, k, 5)
    inner = costs(S[:, None] - S[None, :])  # c_j = s_j - s_{j-1}, the same for every j
    for j in range(1, k - 1):
        n0, n1 = _hit_combine(V0[None], V1[None], *inner)
        V0, V1 = forbid(n0.min(axis=1), n1.min(axis=1), j)
    nohit, hit = costs(-S)  # column k-1 has no row of its own
    E = _hit_combine(V0, V1, nohit, hit)[1].min(axis=0)
    vals = neg_log_f(E, Ms[None, :], b, alpha, k)
    return float(np.max(np.where(np.isfinite(E), vals, -inf)))


def sign_haar(k: int, b: float, alpha: float) -> float:
    """Tree DP for the Haar detail rows (unit scale), k = 2^t.

    A subtree of height h whose leaves all receive offset o from the signs above it has a
    table ``T_h[o, M]`` = (min sum of expm1(-g/b) over its leaves with all gaps <= M, and
    the same with some gap == M); each free node's sign s sends ``o + s`` to the left
    child and ``o - s`` to the right one. On the path to class p every node takes its
    forced sign, so the sibling subtree at depth d (height h = t-d-1) starts at offset
    h + 2; p itself has gap 0. The path looks the same for every p (mirror symmetry),
    so one pass serves all classes. Cost O(t^3).
    """
    t = int(round(math.log2(k)))
    Ms = np.arange(2.0 * t + 1)
    inf = np.inf
    offsets = np.arange(2 * t + 3, dtype=float)
    hit = offsets[:, None] == Ms
    val = np.where(offsets[:, None] <= Ms, np.expm1(-offsets / b)[:, None], inf)
    tables = [(np.where(hit, inf, val), np.where(hit, val, inf))]
    pad = np.full((1, Ms.size), inf)
    for _ in range(1, t):
        t0, t1 = tables[-1]
        up0, up1 = np.vstack([t0[1:], pad]), np.vstack([t1[1:], pad])      # entry o -> T[o+1]
        dn0, dn1 = np.vstack([pad, t0[:-1]]), np.vstack([pad, t1[:-1]])    # entry o -> T[o-1]
        # s = +1 and s = -1 swap the children, and both children share one table
        tables.append(_hit_combine(up0, up1, dn0, dn1))
    E0, E1 = np.where(Ms > 0, 0.0, inf), np.where(Ms == 0, 0.0, inf)  # the leaf p, gap 0
    for d in range(t):
        h = t - d - 1
        s0, s1 = tables[h]
        E0, E1 = _hit_combine(E0, E1, s0[h + 2], s1[h + 2])
    vals = neg_log_f(E1, Ms, b, alpha, k)
    return float(np.max(np.where(np.isfinite(E1), vals, -inf)))

