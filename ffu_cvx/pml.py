"""Context-aware pointwise maximal leakage (PML) of Laplace-released linear queries.

Zhao, Saeidian and Oechtering, "Context-aware Privacy Bounds for Linear Queries"
(arXiv:2601.02855), specified with derivations in ``specs/pml.md``.

Notation (used once here, then throughout)
------------------------------------------
- ``k`` classes (histogram cells); every record ``D_i`` falls in one class, and the
  histogram ``x`` (k,) counts them.
- ``W`` (m, k): m linear queries; column ``w_j = W e_j`` is what one record of class
  ``j`` adds to the answers. The release is ``y = W x + Z`` with ``Z_l`` i.i.d.
  Laplace of scale ``b``.
- ``alpha``: the context assumption ``P(D_i = j) >= alpha`` for every record and
  class, so ``0 < alpha <= 1/k``.
- ``Delta_1(W) = max_{j,j'} ||w_j - w_j'||_1``: the L1 sensitivity under substitution
  neighbours (one record changes class), so the mechanism is ``Delta_1/b``-DP.
- PML of a record: ``l(D_i -> y) = log max_j f_j(y) / sum_j P(D_i=j) f_j(y)`` with
  ``f_j(y) = p(y | D_i = j)``. A release is ``eps``-PML when ``l <= eps`` for every y.
- ``s`` in {-1, +1}^m: a sign pattern (the paper's index set ``I`` is where s = +1);
  ``c_j = s . w_j``; gaps ``g_j = c_j - min_j c_j``.
- ``D_jp = ||w_j - w_p||_1``: pairwise L1 distances of the columns.

The three bounds
----------------
``F(g) = alpha sum_j exp(-g_j/b) + (1 - k alpha) exp(-max_j g_j/b)`` is the
denominator under the worst admissible prior (spec §2, Lemma A).

- ``"sign"``: ``max_s -log F(g(s))`` (Theorem 2). Tight when the other records may be
  arbitrary (it is the leakage far out in the orthant of ``s``), but for small
  datasets whose other records are also alpha-bounded the exact leakage can exceed
  it (spec §2, caveat).
- ``"safe"``: ``max_p -log F(D_{.p})``, the exact worst case over the other records,
  attained at ``y = W x' + w_p``. Always a valid bound. Equal to ``"sign"`` when
  every row of W takes at most two values (histogram, prefix, ranges).
- ``"corollary"``: ``-log(alpha + (1 - alpha) exp(-Delta_1/b))`` (Corollary 1), a
  closed form above both; exact for the histogram.

``"sign" <= "safe" <= "corollary" < Delta_1/b``, all tend to ``Delta_1/b`` as
``alpha -> 0`` and to ``log(1/alpha)`` as ``b -> 0``, and all decrease strictly in b.

Algorithms for ``"sign"`` (spec §3)
------------------------------------
``structure="auto"`` recognises the workload (after dropping constant rows, which
change no bound, and up to a common scale, row order and row signs):

- ``"histogram"`` (auto only): rows ``+-a e_j``, one per class; all three bounds equal
  Corollary 1 with ``Delta_1 = 2a``, O(1) after recognition.
- ``"two_valued"``: every row takes two values; then ``"sign" == "safe"`` in closed
  form, O(m k^2) time and O(k^2) memory.
- ``"difference"``: consecutive differences ``x_l - x_{l+1}``; a Viterbi pass along the
  chain for all classes at once, O(k^2).
- ``"haar"``: the Haar detail rows of :func:`haar`; a tree programme over
  (subtree height, offset), O(log(k)^3).
- ``"general"``: the forced-sign reduction. For each class p, a row where ``W_lp`` is
  the row's minimum (maximum) takes s_l = +1 (-1), since that lowers every term of F
  at once; only the ``r_p`` rows where ``W_lp`` is strictly inside the row's range are
  enumerated, ``sum_p 2^{r_p}`` patterns in all (see :func:`sign_pattern_count`).
  Beyond ``max_patterns`` it raises :class:`TooManyPatternsError` instead of hanging.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.spatial.distance import cdist

from .result import SolverError
from .workloads import prefix as _prefix_workload

__all__ = [
    "BOUNDS", "STRUCTURES", "WORKLOADS", "TooManyPatternsError", "NoNoiseNeededWarning",
    "SignBound", "LaplaceRelease",
    "l1_sensitivity", "dp_leakage", "leakage", "sign_bound", "sign_pattern_count",
    "min_noise_scale", "laplace_release",
    "histogram", "prefix", "all_ranges", "haar", "differences", "pml_workload",
]

BOUNDS = ("sign", "safe", "corollary")
STRUCTURES = ("auto", "two_valued", "difference", "haar", "general")
WORKLOADS = ("histogram", "prefix", "range", "haar", "difference")
DEFAULT_MAX_PATTERNS = 2**20


class TooManyPatternsError(ValueError):
    """The general forced-sign algorithm would enumerate more than ``max_patterns`` patterns."""


class NoNoiseNeededWarning(UserWarning):
    """The target is met without noise (``epsilon >= log(1/alpha)`` or ``Delta_1(W) = 0``)."""


# --------------------------------------------------------------------------- validation

def _matrix(W) -> np.ndarray:
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


def _positive(value, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be a positive number, got {value!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"`{name}` must be a finite number > 0, got {value!r}")
    return v


def _alpha(alpha, k: int) -> float:
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise ValueError(f"`alpha` must be a number in (0, 1/k], got {alpha!r}") from None
    if not (math.isfinite(a) and 0 < a <= (1 + 1e-12) / k):
        raise ValueError(
            f"`alpha` must lie in (0, 1/k] = (0, {1 / k:.6g}] for k = {k} classes (it lower-bounds every "
            f"class probability, so k * alpha <= 1), got {alpha!r}")
    return min(a, 1.0 / k)


def _choice(value, name: str, allowed) -> str:
    if not isinstance(value, str) or value.lower() not in allowed:
        raise ValueError(f"`{name}` must be one of {', '.join(map(repr, allowed))}, got {value!r}")
    return value.lower()


def _max_patterns(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"`max_patterns` must be a positive integer, got {n!r}")
    return int(n)


# --------------------------------------------------------------------------- the bound's value

def _neg_log(f, f_minus_1):
    """``-log F`` given F and ``F - 1`` (each computed without cancellation): ``log1p`` keeps
    full relative accuracy when the leakage is small (large b), ``log`` when F is small."""
    with np.errstate(invalid="ignore", divide="ignore"):  # inf entries mark infeasible DP states
        return np.where(f_minus_1 > -0.5, -np.log1p(f_minus_1), -np.log(f))


def _neg_log_f(sum_expm1, max_gap, b: float, alpha: float, k: int):
    """``-log F`` from ``E = sum_j expm1(-g_j/b)`` and ``max_j g_j``.

    ``F - 1 = alpha E + (1 - k alpha) expm1(-max g/b)`` because ``k alpha + (1 - k alpha)
    = 1``, and ``F = alpha (k + E) + (1 - k alpha) e^{-max g/b}``.
    """
    rest = max(1.0 - k * alpha, 0.0)
    max_gap = np.asarray(max_gap, dtype=float)
    return _neg_log(alpha * (k + sum_expm1) + rest * np.exp(-max_gap / b),
                    alpha * sum_expm1 + rest * np.expm1(-max_gap / b))


def _corollary(delta: float, b: float, alpha: float) -> float:
    """``-log(alpha + (1 - alpha) e^{-Delta_1/b})``."""
    return float(_neg_log(alpha + (1 - alpha) * math.exp(-delta / b), (1 - alpha) * math.expm1(-delta / b)))


def _from_distances(D: np.ndarray, b: float, alpha: float) -> float:
    """``max_p -log F(D_{.p})``: the safe bound, and the sign bound for two-valued rows."""
    k = D.shape[0]
    vals = _neg_log_f(np.expm1(-D / b).sum(axis=0), D.max(axis=0), b, alpha, k)
    return float(np.max(vals))


# --------------------------------------------------------------------------- structure

@dataclass(frozen=True)
class _Analysis:
    """A workload reduced for the bounds: non-constant rows ``Wr`` (None for the implicit
    histogram of :func:`laplace_release`), recognised ``kind`` and the common entry
    magnitude ``scale`` of the structured kinds."""

    Wr: np.ndarray
    k: int
    kind: str
    scale: float

    @property
    def delta(self) -> float:
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
            D = _l1_distances(self.Wr, self.k)
            object.__setattr__(self, "_D", D)
        return D


def _l1_distances(Wr: np.ndarray, k: int) -> np.ndarray:
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


def _analyse(W, structure: str = "auto") -> _Analysis:
    W = _matrix(W)
    structure = _choice(structure, "structure", STRUCTURES)
    k = W.shape[1]
    Wr = W[W.max(axis=1) > W.min(axis=1)]  # constant rows shift every c_j alike
    if structure == "general":
        return _Analysis(Wr, k, "general", 1.0)
    if structure == "auto":
        a = _histogram_scale(Wr)
        if a is not None:
            return _Analysis(Wr, k, "histogram", a)
    if structure in ("auto", "two_valued") and _is_two_valued(Wr):
        return _Analysis(Wr, k, "two_valued", 1.0)
    for kind, detect in (("difference", _difference_scale), ("haar", _haar_scale)):
        if structure in ("auto", kind):
            a = detect(Wr)
            if a is not None:
                return _Analysis(Wr, k, kind, a)
    if structure != "auto":
        raise ValueError(
            f"`structure`={structure!r} does not match W (after dropping constant rows, up to a common "
            f"scale, row order and row signs); use structure='auto' or 'general'")
    return _Analysis(Wr, k, "general", 1.0)


# --------------------------------------------------------------------------- sign bound algorithms

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
    Wr = _analyse(W, "general").Wr
    _, free = _forced_sign_masks(Wr)
    return sum(2 ** int(r) for r in free.sum(axis=0))


def _sign_general(Wr: np.ndarray, k: int, b: float, alpha: float, max_patterns: int) -> tuple[float, int]:
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
            vals = _neg_log_f(np.expm1(-g / b).sum(axis=1), g.max(axis=1), b, alpha, k)
            best = max(best, float(vals.max()))
    return best, n_patterns


def _hit_combine(a0, a1, b0, b1):
    """Join two independent parts, each as (min sum without hitting M, min sum hitting M)."""
    return a0 + b0, np.minimum(np.minimum(a0 + b1, a1 + b0), a1 + b1)


def _sign_difference(k: int, b: float, alpha: float) -> float:
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
    vals = _neg_log_f(E, Ms[None, :], b, alpha, k)
    return float(np.max(np.where(np.isfinite(E), vals, -inf)))


def _sign_haar(k: int, b: float, alpha: float) -> float:
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
    vals = _neg_log_f(E1, Ms, b, alpha, k)
    return float(np.max(np.where(np.isfinite(E1), vals, -inf)))


@dataclass(frozen=True)
class SignBound:
    """The Theorem 2 (``"sign"``) bound with how it was computed.

    Attributes
    ----------
    value : float
        ``max_s -log F(g(s))`` in nats.
    structure : str
        ``"histogram"``, ``"two_valued"``, ``"difference"``, ``"haar"`` or ``"general"``.
    n_patterns : int
        Sign patterns evaluated one by one: ``sum_p 2^{r_p}`` for ``"general"``, ``k``
        (one forced pattern per class) for ``"two_valued"``, 0 for the closed form of
        ``"histogram"`` and the dynamic programmes.
    """

    value: float
    structure: str
    n_patterns: int


def _sign(an: _Analysis, b: float, alpha: float, max_patterns: int) -> SignBound:
    if an.kind == "histogram":  # D_jp = 2a for all j != p: every bound is Corollary 1
        return SignBound(_corollary(an.delta, b, alpha), an.kind, 0)
    if an.Wr.shape[0] == 0:
        return SignBound(0.0, an.kind, 0)
    if an.kind == "two_valued":
        return SignBound(_from_distances(an.distances(), b, alpha), an.kind, an.k)
    if an.kind == "difference":
        return SignBound(_sign_difference(an.k, b / an.scale, alpha), an.kind, 0)
    if an.kind == "haar":
        return SignBound(_sign_haar(an.k, b / an.scale, alpha), an.kind, 0)
    value, n = _sign_general(an.Wr, an.k, b, alpha, max_patterns)
    return SignBound(value, an.kind, n)


def _bound(an: _Analysis, b: float, alpha: float, bound: str, max_patterns: int) -> float:
    if bound == "sign":
        return _sign(an, b, alpha, max_patterns).value
    if bound == "safe" and an.kind != "histogram":
        return _from_distances(an.distances(), b, alpha)
    return _corollary(an.delta, b, alpha)


# --------------------------------------------------------------------------- public API

def l1_sensitivity(W) -> float:
    """``Delta_1(W) = max_{j,j'} ||w_j - w_j'||_1`` (substitution neighbours).

    Parameters
    ----------
    W : array_like, (m, k)

    Returns
    -------
    float
        For the histogram it is 2 (one record moves between two cells), not the
        add/remove value 1.
    """
    return _analyse(W).delta


def dp_leakage(W, b) -> float:
    """The pure-DP level of the Laplace release, ``Delta_1(W) / b``.

    Parameters
    ----------
    W : array_like, (m, k)
    b : float
        Laplace scale, > 0.
    """
    return l1_sensitivity(W) / _positive(b, "b")


def sign_bound(W, b, alpha, *, structure: str = "auto", max_patterns: int = DEFAULT_MAX_PATTERNS) -> SignBound:
    """Theorem 2's bound with the algorithm used and the patterns it enumerated.

    Parameters
    ----------
    W : array_like, (m, k)
    b : float
        Laplace scale, > 0.
    alpha : float
        Prior lower bound on every class probability, in (0, 1/k].
    structure : {"auto", "two_valued", "difference", "haar", "general"}
        Algorithm; ``"auto"`` recognises the workload (module docstring).
    max_patterns : int
        Largest number of sign patterns ``"general"`` may enumerate; beyond it
        :class:`TooManyPatternsError` is raised before any work.

    Returns
    -------
    SignBound
    """
    an = _analyse(W, structure)
    return _sign(an, _positive(b, "b"), _alpha(alpha, an.k), _max_patterns(max_patterns))


def leakage(W, b, alpha, bound: str = "safe", *, structure: str = "auto",
            max_patterns: int = DEFAULT_MAX_PATTERNS) -> float:
    """Worst-case PML (nats) of releasing ``W x + Lap(b)^m`` when every class has prior >= alpha.

    Parameters
    ----------
    W : array_like, (m, k)
        Query matrix (or a ``Workload``); column j is one record of class j.
    b : float
        Laplace scale, > 0.
    alpha : float
        Prior lower bound on every class probability, in (0, 1/k].
    bound : {"safe", "sign", "corollary"}
        ``"safe"`` (default) is the exact worst case over the other records and always
        holds; ``"sign"`` is Theorem 2 (equal to ``"safe"`` for 0/1 workloads, possibly
        optimistic for small datasets otherwise); ``"corollary"`` is the closed form of
        Corollary 1. See the module docstring.
    structure, max_patterns
        Only used by ``bound="sign"``; see :func:`sign_bound`.

    Returns
    -------
    float
        The leakage bound, in ``[0, min(log(1/alpha), Delta_1/b))``.
    """
    an = _analyse(W, structure)
    b = _positive(b, "b")
    alpha = _alpha(alpha, an.k)
    bound = _choice(bound, "bound", BOUNDS)
    return _bound(an, b, alpha, bound, _max_patterns(max_patterns))


def min_noise_scale(W, epsilon, alpha, bound: str = "safe", *, structure: str = "auto",
                    max_patterns: int = DEFAULT_MAX_PATTERNS, rtol: float = 1e-12) -> float:
    """Smallest Laplace scale b whose leakage bound is at most ``epsilon``.

    Parameters
    ----------
    W : array_like, (m, k)
    epsilon : float
        Target leakage in nats, > 0.
    alpha : float
        Prior lower bound on every class probability, in (0, 1/k].
    bound : {"safe", "sign", "corollary"}
        Which bound must meet the target (see :func:`leakage`).
    structure, max_patterns
        As in :func:`sign_bound`.
    rtol : float
        Relative accuracy of b for the bisected bounds; the returned b always meets the
        target (it errs upwards).

    Returns
    -------
    float
        ``b_min``, between 0 and ``b_DP = Delta_1/epsilon``. The corollary has the closed
        form ``Delta_1 / log((1 - alpha) / (e^{-epsilon} - alpha))``; the other bounds are
        found by root bracketing on ``log b`` (each bound strictly decreases in b).
        **Returns 0.0** with a :class:`NoNoiseNeededWarning` when ``epsilon >= log(1/alpha)``
        (every bound stays below log(1/alpha) however small b is, so even the exact answers
        meet the target) or when ``Delta_1(W) = 0`` (the answers do not depend on the data).
    """
    an = _analyse(W, structure)
    return _min_scale(an, _positive(epsilon, "epsilon"), _alpha(alpha, an.k), _choice(bound, "bound", BOUNDS),
                      _max_patterns(max_patterns), _positive(rtol, "rtol"))


def _min_scale(an: _Analysis, eps: float, alpha: float, bound: str, max_patterns: int, rtol: float,
               stacklevel: int = 3) -> float:
    delta = an.delta
    if delta == 0:
        warnings.warn("Delta_1(W) = 0: the answers do not depend on the data, so b = 0 (no noise) "
                      "meets any target", NoNoiseNeededWarning, stacklevel=stacklevel)
        return 0.0
    if eps >= -math.log(alpha):
        warnings.warn(f"epsilon = {eps:g} >= log(1/alpha) = {-math.log(alpha):g}: every bound is below "
                      "log(1/alpha) for all b, so b = 0 (no noise) meets the target under the alpha "
                      "assumption", NoNoiseNeededWarning, stacklevel=stacklevel)
        return 0.0
    b_dp = delta / eps

    def excess(log_b):
        return _bound(an, math.exp(log_b), alpha, bound, max_patterns) - eps

    if bound == "corollary":
        log_b = math.log(delta / math.log((1 - alpha) / (math.exp(-eps) - alpha)))
    else:
        log_b = hi = math.log(b_dp)
        if excess(hi) < 0:  # else alpha is so small that the bound equals DP to rounding
            lo = hi - math.log(2)
            while excess(lo) <= 0:  # terminates: the bound tends to log(1/alpha) > eps as b -> 0
                lo -= math.log(2)
                if lo < hi - 2000 * math.log(2):
                    raise SolverError("min_noise_scale: no b with leakage above epsilon found down to "
                                      "b_DP * 2^-2000", status="bracket_failed", nit=2000, residual=excess(lo))
            log_b = brentq(excess, lo, hi, xtol=rtol / 4, rtol=4 * np.finfo(float).eps)
    step = max(rtol / 4, 4 * np.finfo(float).eps)
    for _ in range(64):  # err upwards: the returned b must meet the target despite rounding
        if excess(log_b) <= 0:
            return float(math.exp(log_b))
        log_b += step
    raise SolverError("min_noise_scale: the computed scale does not meet the target",
                      status="not_converged", nit=64, residual=excess(log_b))


@dataclass(frozen=True)
class LaplaceRelease:
    """A Laplace release calibrated to a PML target.

    Attributes
    ----------
    answers : numpy.ndarray, (m,)
        ``W x + Z``, ``Z_l`` i.i.d. Laplace(b).
    b : float
        The calibrated scale (0.0 when no noise is needed, see :func:`min_noise_scale`).
    epsilon, alpha : float
        The target and the context assumption.
    bound : str
        The bound that certifies the release.
    leakage : float
        That bound at ``b`` (<= epsilon); ``log(1/alpha)`` when ``b = 0``.
    dp_epsilon : float
        ``Delta_1(W)/b``, the plain DP level of the same release (inf when b = 0).
    """

    answers: np.ndarray
    b: float
    epsilon: float
    alpha: float
    bound: str
    leakage: float
    dp_epsilon: float


def laplace_release(x, epsilon, alpha, *, rng, W=None, bound: str = "safe", structure: str = "auto",
                    max_patterns: int = DEFAULT_MAX_PATTERNS) -> LaplaceRelease:
    """Release ``W x`` with Laplace noise at the smallest scale meeting ``epsilon``-PML.

    Parameters
    ----------
    x : array_like, (k,)
        Histogram of non-negative integer counts.
    epsilon : float
        Target leakage in nats, > 0.
    alpha : float
        Prior lower bound on every class probability, in (0, 1/k].
    rng : numpy.random.Generator or int
        Source of the noise (an int seeds a new Generator; use a fresh
        ``numpy.random.default_rng()`` for a real release).
    W : array_like, (m, k), optional
        Queries; the identity (the histogram itself) by default.
    bound : {"safe", "sign", "corollary"}
        The bound used for calibration; the default always holds.
    structure, max_patterns
        As in :func:`sign_bound`.

    Returns
    -------
    LaplaceRelease
    """
    try:
        counts = np.array(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"`x` must be a 1-D array of counts, got {type(x).__name__}") from None
    if counts.ndim != 1 or counts.size < 2:
        raise ValueError(f"`x` must be a 1-D histogram with k >= 2 cells, got shape {counts.shape}")
    if not np.all(np.isfinite(counts)) or np.any(counts < 0) or np.any(counts != np.round(counts)):
        raise ValueError("`x` must hold finite non-negative integer counts (a histogram)")
    if W is None:  # the histogram itself, without materialising I_k
        an = _Analysis(None, counts.size, "histogram", 1.0)
        exact = counts
    else:
        an = _analyse(W, structure)
        if an.k != counts.size:
            raise ValueError(f"`x` has {counts.size} cells but `W` has {an.k} columns")
        exact = _matrix(W) @ counts
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        rng = np.random.default_rng(int(rng))
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"`rng` must be a numpy.random.Generator or an int seed, got {rng!r}")
    eps, alpha = _positive(epsilon, "epsilon"), _alpha(alpha, an.k)
    bound, max_patterns = _choice(bound, "bound", BOUNDS), _max_patterns(max_patterns)
    b = _min_scale(an, eps, alpha, bound, max_patterns, 1e-12)
    if b == 0.0:  # _min_scale has warned why
        return LaplaceRelease(exact, 0.0, eps, alpha, bound, -math.log(alpha), math.inf)
    answers = exact + rng.laplace(0.0, b, size=exact.size)
    return LaplaceRelease(answers, b, eps, alpha, bound, _bound(an, b, alpha, bound, max_patterns), an.delta / b)


# --------------------------------------------------------------------------- workloads

def _size(k, name="k", minimum=2) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}, got {k!r}")
    return int(k)


def histogram(k: int) -> np.ndarray:
    """Histogram queries: ``I_k`` (k, k); ``Delta_1 = 2``."""
    return np.eye(_size(k))


def prefix(k: int) -> np.ndarray:
    """Prefix queries (k, k), the matrix of :func:`ffu_cvx.workloads.prefix`; ``Delta_1 = k - 1``."""
    return np.array(_prefix_workload(_size(k)).W)


def all_ranges(k: int) -> np.ndarray:
    """All contiguous ranges ``[i, j]``, 0 <= i <= j < k, in (i, j) order: (k(k+1)/2, k).

    ``Delta_1 = floor((k+1)^2 / 4)``.
    """
    k = _size(k)
    i, j = np.triu_indices(k)
    cols = np.arange(k)
    return ((cols >= i[:, None]) & (cols <= j[:, None])).astype(np.float64)


def haar(k: int) -> np.ndarray:
    """Unnormalised Haar matrix (k, k), k = 2^t, by the Kronecker recursion.

    ``H_1 = [1]``, ``H_2n = [H_n kron [1, 1]; I_n kron [1, -1]]``: the total, then one
    row per dyadic interval (+1 on its left half, -1 on its right half). ``Delta_1 = 2t``.
    """
    k = _size(k)
    if k & (k - 1):
        raise ValueError(f"`k` must be a power of 2 for the Haar workload, got {k}")
    H = np.ones((1, 1))
    while H.shape[0] < k:
        n = H.shape[0]
        H = np.vstack([np.kron(H, [1.0, 1.0]), np.kron(np.eye(n), [1.0, -1.0])])
    return H


def differences(k: int) -> np.ndarray:
    """Consecutive differences ``x_l - x_{l+1}``: (k-1, k); ``Delta_1 = min(k, 4)``."""
    k = _size(k)
    W = np.zeros((k - 1, k))
    rows = np.arange(k - 1)
    W[rows, rows], W[rows, rows + 1] = 1.0, -1.0
    return W


_BUILDERS = {"histogram": histogram, "prefix": prefix, "range": all_ranges, "haar": haar,
             "difference": differences}


def pml_workload(name: str, k: int) -> np.ndarray:
    """Workload matrix (m, k) by name: one of :data:`WORKLOADS` (``"range"`` is :func:`all_ranges`)."""
    return _BUILDERS[_choice(name, "name", WORKLOADS)](k)
