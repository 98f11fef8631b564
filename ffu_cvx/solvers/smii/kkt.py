"""SM-II's finishing step: Newton's method on Problem 1's KKT system, one small QP a step.

Solver layer (SM-II): imports numpy, scipy and :mod:`ffu_cvx.solvers.smii.model` only (host float64,
whatever the array backend of the run), and clarabel lazily, inside the QP fallback that uses it.

Near the optimum the soft maxes' multiplier phase (:mod:`ffu_cvx.solvers.smii.multipliers`)
converges slowly where the optimal multipliers spread over decades: a constraint whose
multiplier is e^-7 of the largest barely moves ``Sigma``, so the exponential update of its
log multiplier, ``t`` times its violation, takes many sub-problems to find it. The KKT step
does not go through the soft maxes. At ``Sigma = R R^T`` (scaled so that the largest
variance ratio is 1), with ``y_i`` the columns of ``Y = R^{-1} B`` (the profile
``g_i = |y_i|^2``) and ``v_j`` the rows of ``L R / sqrt(c)`` (the ratios ``h_j = |v_j|^2``),
a symmetric step ``E`` in whitened coordinates (``Sigma + R E R^T``) changes ``g_i`` by
``-y_i^T E y_i + y_i^T E^2 y_i + ...`` and ``h_j`` by ``v_j^T E v_j`` exactly. The step solves
the quadratic model of Problem 1 on the near-active columns ``A`` and constraints ``C``:

    min_{E, tau}  tau + <E, E M + M E> / 2
    s.t.  g_i - y_i^T E y_i <= tau  (i in A),   h_j + v_j^T E v_j <= 1  (j in C),

``M = Y diag(lam) Y^T`` with the last step's multipliers ``lam``: ``E -> E M + M E`` is the
exact Hessian of the Lagrangian (the ``h_j`` are linear), so this is Newton's method on the
KKT system (sequential quadratic programming), quadratically convergent once the active
sets are right. Its dual is a QP over the multipliers ``x = (lam_A, mu_C)``,

    max  g_A^T lam_A + (h_C - 1)^T mu_C - x^T P x / 2,   lam_A >= 0, sum lam_A = 1, mu_C >= 0,

``P_ab = s_a s_b (z_a o z_b)^T K (z_a o z_b)``, ``z`` the terms' vectors in the eigenbasis of
``M`` (``M = Q diag(m) Q^T``), ``s = +1`` for columns and ``-1`` for constraints and
``K_pq = 1 / (m_p + m_q + rho)`` (``rho`` a small proximal term that keeps the step finite where
``M`` is singular). ``P`` is formed by an exponential sum ``1/x ~ sum_l w_l exp(-s_l x)``
(:func:`expsum`; ``K`` is then a sum of rank-one terms and ``P = sum_l w_l e^(-s_l rho)
(Z^T diag(exp(-s_l m)) Z)^2`` elementwise: a few dozen ``syrk`` of order ``n`` once the terms
that weigh every eigenvector are merged (:func:`_merge`), each over the eigenvectors its term
does not weigh below ``e^-GRAM_CUT``), the QP is solved by a dense interior-point method
(:func:`_interior_point`; Clarabel where it fails), and the step is
``E = Q (K o (Z diag(s x) Z^T)) Q^T`` exactly. The QP's multipliers are a dual certificate's
(:func:`ffu_cvx.model.certificate.lower_bound`).

Safeguards: terms outside ``A`` and ``C`` that the step's linear model pushes past the level
join them and the QP is solved again (else an excluded constraint can end far above its
target); a step with an eigenvalue of ``E`` beyond ``TRUST`` is solved again with a larger
``rho`` (with multipliers on few columns ``M`` is singular and the step unbounded); a full
step that gains less than ``SOC_GAIN`` of the model's decrease is compared with its
second-order correction (a column of tiny multiplier can rise by its curvature
``y^T E^2 y``, which the linear constraints miss); a step that still does not lower the exact
cost ``max g max h`` backtracks.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import scipy.linalg as sla
import scipy.linalg.blas as blas
import scipy.sparse as sp

from .model import factor, variance_ratios

__all__ = ["START", "start", "MIN_K", "MAX_K", "RETRY", "WORTH", "WORTH_K", "pays", "qp_order",
           "KKTStep", "kkt_step", "newton", "expsum", "cost"]

#: KKT steps (:mod:`ffu_cvx.solvers.smii.driver`) finish from a sub-problem end whose certified gap is at
#: most ``START`` (and over ``tol``), on bases of ``MIN_K`` to ``MAX_K``; after stopping short of
#: ``tol``, again only once the gap is ``RETRY`` times lower. Lower ``START`` leaves more runs to
#: the slower multiplier phase.
START = 0.1
MIN_K = 64
MAX_K = 2100
RETRY = 0.1
#: Past ``k = WORTH_K`` KKT steps run only where :func:`pays` forecasts them cheaper than the
#: multiplier phase, pricing a KKT finish at ``WORTH (order / k)^2`` Newton steps.
WORTH = 3.0
WORTH_K = 1024
#: Columns and constraints within this fraction of the largest profile value / of ratio 1
#: enter the step's QP (the rest are linearised away: their multipliers are 0 there).
ACTIVE = 0.3
#: The proximal term ``rho`` of ``K``, relative to ``M``'s largest eigenvalue: ``RHO``, or
#: ``RHO_SINGULAR`` where ``M``'s least eigenvalue is below ``SINGULAR`` times its largest (the
#: multipliers vanish on some columns); starting there spares the trust rule's regrowths.
RHO = 1e-8
RHO_SINGULAR = 1e-5
SINGULAR = 1e-7
#: A step whose whitened ``E`` has an eigenvalue beyond ``TRUST`` in modulus is solved again with
#: ``rho`` ``RHO_GROW`` times larger (up to ``RHO_MAX`` times ``M``'s largest eigenvalue): where
#: ``M`` is singular only ``rho`` bounds the step. Larger factors overshoot and converge linearly.
TRUST = 0.5
RHO_GROW = 10.0
#: The next step of :func:`newton` starts at this fraction of the last step's relative ``rho`` (at
#: least ``RHO`` / ``RHO_SINGULAR``): fewer regrowths, each a QP matrix and a QP.
RHO_CARRY = 0.1
RHO_MAX = 1.0
#: Relative accuracy of the exponential sum for ``1/x`` on ``[2 min m + rho, 2 max m + rho]``.
EXPSUM_ACCURACY = 1e-5
#: Terms ``exp(-s m_p)`` of the exponential sum below ``exp(-GRAM_CUT)`` are dropped from the QP's
#: matrix (their rows of ``Z`` skipped): each ``K_pq`` moves by at most about ``GRAM_CUT e^-GRAM_CUT``
#: (3e-7) of itself, and the terms of large ``s`` need only the eigenvectors of small ``m``.
GRAM_CUT = 18.0
#: Entries below ``FLUSH`` of the QP matrix's float32 factors are dropped: their products would be
#: slow subnormals adding below 1e-30.
FLUSH = 1e-15
#: The QP's active sets grow at most this many times by the terms its step's linear model pushes
#: more than ``LEVEL_SLACK`` (relative) past the level (max profile / ratio 1).
AUGMENT = 3
LEVEL_SLACK = 1e-9
#: KKT steps of one :func:`newton` call at most, and the least reduction of the certified gap
#: a step must make for the next to be taken.
MAXIT = 8
PROGRESS = 0.8
#: A full step that gains less than this fraction of the QP's predicted decrease is compared
#: with its second-order correction.
SOC_GAIN = 0.5
#: The QP's interior-point method stops at relative residuals and complementarity below
#: ``QP_TOL``, or gives up after ``QP_MAXIT`` iterations (Clarabel then solves the QP).
QP_TOL = 1e-10
QP_MAXIT = 60
#: A warm start (the last QP's solution on the sets they share) is moved this fraction of the
#: cold start into the interior: far fewer interior-point iterations, the same solutions.
WARM = 1e-2
#: Where its factorisation fails, ``P``'s unit diagonal is raised by ``QP_SHIFT``, then
#: ``QP_SHIFT_GROW``-fold, up to ``QP_SHIFT_MAX`` (:func:`_factor`).
QP_SHIFT = 1e-10
QP_SHIFT_GROW = 10.0
QP_SHIFT_MAX = 1e-6
#: Backtracking of the line search on the exact cost (halvings before the step is refused).
BACKTRACKS = 12


class KKTStep(NamedTuple):
    """One KKT step: the new ``sigma`` (k, k), its cost ``alpha`` (the
    normalised privacy cost ``max g max h``), the QP's multipliers ``lam`` (d,; on the
    simplex) and ``mu`` (m,; per ratio ``h_j``, so ``mu / c`` weighs the variances), the
    step length taken, the sizes of the active sets, ``warm``: the QP's solution and its
    bounds' multipliers over all columns then constraints ((2, d + m), 0 off its sets; None
    from Clarabel), the next step's warm start, and ``rho``: its proximal term relative to the
    largest eigenvalue of ``M``."""

    sigma: np.ndarray
    alpha: float
    lam: np.ndarray
    mu: np.ndarray
    step: float
    n_active: tuple
    warm: np.ndarray | None = None
    rho: float = 0.0


def pays(gap: float, before: float, tol: float, steps: int, k: int, order: int) -> bool:
    """Whether KKT steps likely cost less than SM-II's multiplier phase from a sub-problem end of
    certified ``gap`` (``before``: the best earlier end's gap against the same bound, ``steps``: its
    Newton steps; basis size ``k``, ``order``: the QP's likely order, :func:`qp_order`): always up to
    ``k = WORTH_K``; beyond, where the multiplier phase, going on at this end's rate
    ``before / gap``, would take more than ``WORTH (order / k)^2`` Newton steps to reach ``tol``."""
    if k <= WORTH_K or not gap < before:
        return True
    return math.log(gap / tol) / math.log(before / gap) * max(steps, 1) > WORTH * (order / k) ** 2


def start(k: int) -> float:
    """The certified gap under which KKT steps may finish a run on a basis of size ``k`` (0: never)."""
    return START if MIN_K <= k <= MAX_K else 0.0


def qp_order(g: np.ndarray, h: np.ndarray) -> int:
    """The order of a KKT step's first QP from an iterate of profile ``g`` (d,) and ratios ``h`` (m,)."""
    cols, rows = _near_active(g, h)
    return len(cols) + len(rows)


def _near_active(g: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The columns and constraints within ``ACTIVE`` of the largest profile value and ratio."""
    return np.flatnonzero(g >= (1 - ACTIVE) * g.max()), np.flatnonzero(h >= (1 - ACTIVE) * h.max())


def expsum(lo: float, hi: float, accuracy: float = EXPSUM_ACCURACY) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``s`` and weights ``w`` with ``sum_l w_l exp(-s_l x) ~ 1/x`` to relative ``accuracy``
    for ``x`` in ``[lo, hi]`` (``0 < lo <= hi``): the trapezoid rule on
    ``1/x = int exp(u - x e^u) du``, whose error falls like ``exp(-pi^2 / h)`` in the step ``h``."""
    h = math.pi ** 2 / (math.log(1 / accuracy) + 3)
    u_lo = math.log(accuracy / hi)  # the tail below: e^u x <= accuracy
    u_hi = math.log((math.log(1 / accuracy) + 3) / lo)  # the tail above: exp(-x e^u) tiny
    u = np.arange(u_lo, u_hi + h, h)
    s = np.exp(u)
    return s, h * s


def cost(B: np.ndarray, L, c: np.ndarray, sigma: np.ndarray) -> float:
    """The normalised privacy cost ``max_i b_i^T Sigma^-1 b_i * max_j (L Sigma L^T)_jj / c_j``;
    inf where ``sigma`` is not positive definite."""
    g, h = _terms(B, L, c, sigma)
    return float(np.max(g) * np.max(h)) if g is not None else math.inf


def _terms(B: np.ndarray, L, c: np.ndarray, sigma: np.ndarray):
    """``(g, h)``: the profile (d,) and variance ratios (m,) of ``sigma``; ``(None, None)`` where
    it is not positive definite."""
    fac = factor(sigma, B)
    return (None, None) if fac is None else (fac[2], variance_ratios(L, sigma, c))


def _gram(Z: np.ndarray, m: np.ndarray, rho: float) -> np.ndarray:
    """``(z_a o z_b)^T K (z_a o z_b)`` for all column pairs of ``Z`` (k, n), ``K_pq = 1 / (m_p + m_q + rho)``.

    Each exponential-sum term (:func:`expsum`, its terms that weigh every eigenvector merged by
    :func:`_merge`) is ``c (Z_s^T Z_s)^2`` (elementwise): a float32 ``syrk`` with ``sqrt(c)`` as its
    factor, squared in place and summed in float64 (float32 sums stall the certified gaps of KKT
    steps near float32's rounding). The columns of ``Z`` are scaled to unit norm first,
    so that float32 neither under- nor overflows. The rounding (1e-7 of ``|z_a o z_b|^T K |z_a o z_b|``)
    is far below ``EXPSUM_ACCURACY``; every term is a semidefinite square, so ``P`` is semidefinite to
    that rounding (:func:`_factor` copes with the rest)."""
    order = np.argsort(m)  # ascending (as from eigh): the terms of large s need only its first rows
    m, Z = np.maximum(m[order], 0.0), Z[order]
    norms = np.sqrt(np.einsum("ij,ij->j", Z, Z))
    norms[norms == 0] = 1.0
    Z = Z / norms
    lo, hi = 2 * m[0] + rho, 2 * m[-1] + rho
    nodes, weights = expsum(lo, hi)
    nodes, weights = _merge(nodes, weights * np.exp(-nodes * rho), lo, hi, GRAM_CUT / max(m[-1], 1e-300))
    P = np.zeros((Z.shape[1], Z.shape[1]), order="F")
    for s, w in zip(nodes, weights):
        r = int(np.searchsorted(m, GRAM_CUT / s, side="right"))  # m ascending: the rows that count
        G = _syrk(Z[:r] * np.exp(-0.5 * s * m[:r])[:, None], math.sqrt(w))
        np.add(P, np.square(G, out=G), out=P)  # upper triangles
    P *= np.outer(np.square(norms), np.square(norms))
    return P + np.triu(P, 1).T


def _syrk(A: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """``alpha A^T A`` (upper triangle, float32) of ``A`` (r, n), its entries below ``FLUSH`` (in
    modulus) dropped: their products would be float32 subnormals (slow) and weigh nothing."""
    A = A.astype(np.float32)
    A[np.abs(A) < FLUSH] = 0.0
    return blas.ssyrk(alpha, A, trans=1)


def _merge(nodes: np.ndarray, weights: np.ndarray, lo: float, hi: float, full: float):
    """``(nodes, weights)`` with the terms of ``s <= full`` (in the QP's matrix, those weigh every
    eigenvector: about half the terms, and most of the work) replaced by the Gauss quadrature of
    their discrete measure ``sum_l w_l delta(s - s_l)``: nodes inside their range, positive
    weights, exact for polynomials in ``s`` of degree ``2J - 1``; ``J`` the least whose sum
    ``sum w exp(-s x)`` is within ``EXPSUM_ACCURACY / 10`` of theirs relative to ``1/x`` on
    ``[lo, hi]`` (typically a third of the terms)."""
    few = nodes <= full
    s, w = nodes[few], weights[few]
    if len(s) < 2:
        return nodes, weights
    x = np.geomspace(lo, hi, 400)
    target = np.exp(-np.outer(x, s)) @ w
    # Lanczos on diag(s) from sqrt(w): the Jacobi matrix of the measure (Golub-Welsch).
    basis, alpha, beta = np.zeros((len(s), len(s))), [], []
    q = np.sqrt(w / w.sum())
    for J in range(1, len(s)):
        basis[:, J - 1] = q
        v = s * q
        alpha.append(q @ v)
        for _ in range(2):  # full reorthogonalisation, twice
            v -= basis[:, :J] @ (basis[:, :J].T @ v)
        theta, U = sla.eigh_tridiagonal(np.array(alpha), np.array(beta))
        merged = w.sum() * U[0] ** 2
        if np.max(np.abs(np.exp(-np.outer(x, theta)) @ merged - target) * x) <= 0.1 * EXPSUM_ACCURACY:
            return np.concatenate([theta, nodes[~few]]), np.concatenate([merged, weights[~few]])
        beta.append(np.linalg.norm(v))
        if beta[-1] <= 1e-14 * s.max():
            break
        q = v / beta[-1]
    return nodes, weights


def _qp(P: np.ndarray, q: np.ndarray, n_cols: int, start=None) -> tuple | None:
    """``(x, z)``: ``argmax q^T x - x^T P x / 2`` over ``x >= 0`` with the first ``n_cols`` entries
    summing to 1, and the bounds' multipliers ``z`` (n,): :func:`_interior_point` (from ``start``,
    a nearby QP's ``(x, z)``, then cold), or Clarabel where that fails (``z`` None); None unless solved."""
    found = _interior_point(P, q, n_cols, start)
    if found is None and start is not None:
        found = _interior_point(P, q, n_cols)
    if found is None:
        x = _clarabel(P, q, n_cols)
        return None if x is None else (x, None)
    return found


def _interior_point(P: np.ndarray, q: np.ndarray, n_cols: int, start=None) -> tuple | None:
    """``(x, z)`` of the QP of :func:`_qp` by Mehrotra's predictor-corrector method on its dense KKT
    system, scaled to a unit diagonal (``P``'s diagonal can span many decades);
    one Cholesky factorisation of ``P + diag(z / x)`` an iteration (:func:`_factor`). ``start``: a
    nearby QP's ``(x, z)`` (``z`` may be None: a cold start), moved ``WARM`` into the interior.
    None when it does not reach ``QP_TOL`` in ``QP_MAXIT`` iterations or a factorisation fails."""
    n = len(q)
    diag = np.diag(P)
    dscale = 1.0 / np.sqrt(np.maximum(diag, 1e-300 + 1e-30 * diag.max()))
    P, q = np.asfortranarray(P * dscale[:, None] * dscale[None, :]), q * dscale
    H = np.empty_like(P, order="F")  # LAPACK's order: factorised in place, no copies
    a = np.zeros(n)
    a[:n_cols] = dscale[:n_cols]  # the simplex constraint a^T x = 1 in the scaled variables
    size = max(float(np.abs(q).max()), 1.0)
    x, z = np.full(n, 1.0 / a.sum()), np.full(n, size)
    if start is not None and start[1] is not None:
        x, z = start[0] / dscale + WARM * x, start[1] * dscale + WARM * z
    nu, added = 0.0, 0.0
    for _ in range(QP_MAXIT):
        rd, rp, mu = P @ x - q - a * nu - z, a @ x - 1.0, x @ z / n
        if np.abs(rd).max() <= QP_TOL * size and abs(rp) <= QP_TOL and mu <= QP_TOL * size / n:
            return x * dscale, z / dscale
        cf, added = _factor(H, P, z / x, added)
        if cf is None:
            return None
        Ha = sla.cho_solve(cf, a, check_finite=False)

        def newton_system(rc):
            Hr = sla.cho_solve(cf, -rd - rc / x, check_finite=False)
            dnu = (-rp - a @ Hr) / (a @ Ha)
            dx = Hr + Ha * dnu
            return dx, dnu, (-rc - z * dx) / x

        dx, _, dz = newton_system(x * z)  # predictor: the affine direction
        ap, ad = _to_boundary(x, dx), _to_boundary(z, dz)
        sigma = ((x + ap * dx) @ (z + ad * dz) / n / mu) ** 3
        dx, dnu, dz = newton_system(x * z + dx * dz - sigma * mu)  # corrector
        ap, ad = 0.99 * _to_boundary(x, dx), 0.99 * _to_boundary(z, dz)
        x, z, nu = x + ap * dx, z + ad * dz, nu + ad * dnu
    return None


def _factor(H: np.ndarray, P: np.ndarray, d: np.ndarray, added: float):
    """``(Cholesky factor of P + diag(d), added)``, factorised in ``H`` (F-ordered, as ``P``). ``P``
    is semidefinite only to its rounding (scaled to a unit diagonal, its least eigenvalues can be
    slightly negative): where the factorisation fails, ``P``'s diagonal is raised in place
    (the QP gains a proximal term ``added |x|^2 / 2``) to ``QP_SHIFT``, then ``QP_SHIFT_GROW``-fold;
    ``(None, added)`` past ``QP_SHIFT_MAX``."""
    while True:
        np.copyto(H, P)
        H.flat[::len(d) + 1] += d
        try:
            return sla.cho_factor(H, lower=True, overwrite_a=True, check_finite=False), added
        except np.linalg.LinAlgError:
            raised = QP_SHIFT if added == 0 else added * QP_SHIFT_GROW
            if raised > QP_SHIFT_MAX:
                return None, added
            P.flat[::len(d) + 1] += raised - added
            added = raised


def _to_boundary(v: np.ndarray, dv: np.ndarray) -> float:
    """The largest step in [0, 1] that keeps ``v + step dv >= 0``."""
    neg = dv < 0
    return min(1.0, float(np.min(-v[neg] / dv[neg]))) if neg.any() else 1.0


def _clarabel(P: np.ndarray, q: np.ndarray, n_cols: int) -> np.ndarray | None:
    """The QP of :func:`_qp` by Clarabel (its upper triangle of ``P`` as a sparse matrix).

    Clarabel is imported here, when a step needs it, so that importing SM-II does not load it.
    """
    import clarabel

    n = len(q)
    A = sp.vstack([sp.csc_matrix((np.ones(n_cols), (np.zeros(n_cols, int), np.arange(n_cols))), shape=(1, n)),
                   -sp.identity(n, format="csc")]).tocsc()
    b = np.zeros(n + 1)
    b[0] = 1.0
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    solver = clarabel.DefaultSolver(sp.triu(P, format="csc"), -q, A, b,
                                    [clarabel.ZeroConeT(1), clarabel.NonnegativeConeT(n)], settings)
    sol = solver.solve()
    if str(sol.status) not in ("Solved", "AlmostSolved"):
        return None
    return np.maximum(np.asarray(sol.x), 0.0)


class _Model(NamedTuple):
    """The quadratic model at one point: the point scaled to ratio 1 (``base``), its factor
    ``R``, ``Y = R^{-1} B``, ``V = L R / sqrt(c)``, profile ``g`` and ratios ``h``, and the
    frame ``Q`` of ``M`` with its eigenvalues ``m`` (clipped at 0) and proximal term ``rho``."""

    base: np.ndarray
    R: np.ndarray
    Y: np.ndarray
    V: np.ndarray
    g: np.ndarray
    h: np.ndarray
    Q: np.ndarray
    m: np.ndarray
    rho: float

    def direction(self, Z: np.ndarray, x: np.ndarray) -> np.ndarray:
        """The whitened step ``E`` (k, k) for signed QP multipliers ``x`` of the terms ``Z`` (frame ``Q``)."""
        K = 1.0 / (self.m[:, None] + self.m[None, :] + self.rho)
        return self.Q @ (K * ((Z * x) @ Z.T)) @ self.Q.T

    def linear(self, E: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The profile and ratios (d,), (m,) of the step ``E``'s first-order model."""
        return self.g - np.einsum("ij,ij->j", self.Y, E @ self.Y), self.h + np.einsum("ij,ij->i", self.V @ E, self.V)


def _model(B: np.ndarray, L, c: np.ndarray, sigma: np.ndarray, lam: np.ndarray, least: float = 0.0) -> _Model:
    R = sla.cholesky(sigma, lower=True)
    V = np.asarray(L @ R) / np.sqrt(c)[:, None]
    scale = float(np.max(np.einsum("ij,ij->i", V, V)))
    R, V = R / math.sqrt(scale), V / math.sqrt(scale)
    Y = sla.solve_triangular(R, B, lower=True)
    m, Q = np.linalg.eigh((Y * (lam / lam.sum())) @ Y.T)
    m = np.maximum(m, 0.0)
    rho = max(RHO_SINGULAR if m[0] < SINGULAR * m[-1] else RHO, least) * float(m[-1])  # least: relative
    return _Model(sigma / scale, R, Y, V, np.einsum("ij,ij->j", Y, Y), np.einsum("ij,ij->i", V, V), Q, m, rho)


class _QP(NamedTuple):
    """The dual QP on the columns ``cols`` and constraints ``rows``: the terms' vectors ``Z``
    (frame ``Q``), their ``signs`` and the matrix ``P``."""

    cols: np.ndarray
    rows: np.ndarray
    Z: np.ndarray
    signs: np.ndarray
    P: np.ndarray


def _dual(md: _Model, cols: np.ndarray, rows: np.ndarray) -> _QP:
    Z = md.Q.T @ np.concatenate([md.Y[:, cols], md.V[rows].T], axis=1)
    signs = np.concatenate([np.ones(len(cols)), -np.ones(len(rows))])
    return _QP(cols, rows, Z, signs, signs[:, None] * _gram(Z, md.m, md.rho) * signs[None, :])


def _solve(md: _Model, qp: _QP, bent: np.ndarray | None = None, start=None):
    """``(x, E, z)``: the QP's multipliers, step and bounds' multipliers (for a warm ``start`` of
    the next, :func:`_qp`), or None (``bent``: shifts of the columns' constraints, the
    second-order correction)."""
    g = md.g[qp.cols]
    found = _qp(qp.P, np.concatenate([g if bent is None else g + bent, md.h[qp.rows] - 1.0]), len(qp.cols), start)
    return None if found is None else (found[0], md.direction(qp.Z, qp.signs * found[0]), found[1])


def _spread(md: _Model, qp: _QP, x: np.ndarray, z: np.ndarray | None) -> np.ndarray | None:
    """A QP's solution ``x`` and bounds' multipliers ``z`` over all columns then constraints
    ((2, d + m), 0 off its sets; None without ``z``): a warm start for :func:`_restrict`."""
    if z is None:
        return None
    full = np.zeros((2, len(md.g) + len(md.h)))
    full[:, np.concatenate([qp.cols, len(md.g) + qp.rows])] = x, z
    return full


def _restrict(md: _Model, cols: np.ndarray, rows: np.ndarray, warm: np.ndarray | None):
    """``(x, z)`` of :func:`_spread`'s ``warm`` on ``cols`` and ``rows`` (None without one)."""
    return None if warm is None else tuple(warm[:, np.concatenate([cols, len(md.g) + rows])])


def _active(md: _Model, warm: np.ndarray | None = None):
    """``(model, qp, x, E, z)``: the QP on the near-active terms (``ACTIVE``), enlarged by every
    term its step's linear model pushes past the level (at most ``AUGMENT`` times), with ``rho``
    grown while the step leaves the trust region (``z``: its bounds' multipliers, :func:`_qp`);
    None if a QP fails. Each QP starts warm from the last (the first from ``warm``, :func:`_spread`)."""
    cols, rows = _near_active(md.g, md.h)
    for _ in range(AUGMENT + 1):
        qp = _dual(md, cols, rows)
        found = _solve(md, qp, start=_restrict(md, cols, rows, warm))
        while found is not None and np.abs(sla.eigvalsh(found[1])).max() > TRUST and md.rho < RHO_MAX * md.m.max():
            md = md._replace(rho=md.rho * RHO_GROW)
            qp = _dual(md, cols, rows)
            found = _solve(md, qp, start=(found[0], found[2]))
        if found is None:
            return None
        x, E, z = found
        warm = _spread(md, qp, x, z)
        g1, h1 = md.linear(E)
        level = float(x[:len(cols)] @ g1[cols])
        more_cols = np.setdiff1d(np.flatnonzero(g1 > level + LEVEL_SLACK * abs(level)), cols)
        more_rows = np.setdiff1d(np.flatnonzero(h1 > 1 + LEVEL_SLACK), rows)
        if not len(more_cols) and not len(more_rows):
            break
        cols, rows = np.union1d(cols, more_cols), np.union1d(rows, more_rows)
    return md, qp, x, E, z


def kkt_step(B: np.ndarray, L, c: np.ndarray, sigma: np.ndarray, lam: np.ndarray, warm=None,
             rho: float = 0.0) -> KKTStep | None:
    """One KKT step from ``sigma`` (k, k) with multipliers ``lam`` (d,) for the Lagrangian's
    Hessian (see the module docstring); ``B`` (k, d), ``L`` (m, k; dense or sparse), targets
    ``c`` (m,); ``warm``: the last step's :attr:`KKTStep.warm`; ``rho``: the least proximal term
    relative to the largest eigenvalue of ``M`` (see ``RHO_CARRY``). When the full step does not lower
    the cost, a second-order correction (the QP again, each column's constraint shifted by the
    curvature the step met) is tried before backtracking. None when the QP fails or no step
    length lowers the cost."""
    md = _model(B, L, c, sigma, lam, rho)
    found = _active(md, warm)
    if found is None:
        return None
    md, qp, x, E, z = found
    cols, rows = qp.cols, qp.rows
    before, D = float(md.g.max()), md.R @ E @ md.R.T
    g1, h1 = _terms(B, L, c, md.base + D)
    full = math.inf if g1 is None else float(g1.max() * h1.max())
    linear = md.linear(E)[0][cols]
    if before - full < SOC_GAIN * (before - float(x[:len(cols)] @ linear)):
        # Second-order correction: the columns' curvature along E, which the QP's linear constraints miss.
        again = _solve(md, qp, np.zeros(len(cols)) if g1 is None else g1[cols] - linear, start=(x, z))
        D2 = None if again is None else md.R @ again[1] @ md.R.T
        if D2 is not None and cost(B, L, c, md.base + D2) < full:
            x, D, z = again[0], D2, again[2]
    step = 1.0
    for _ in range(BACKTRACKS):
        trial = md.base + step * D
        alpha = cost(B, L, c, trial)
        if alpha < before:
            lam_new, mu_new = np.zeros(B.shape[1]), np.zeros(len(c))
            lam_new[cols], mu_new[rows] = x[:len(cols)], x[len(cols):]
            return KKTStep(0.5 * (trial + trial.T), alpha, lam_new, mu_new, step, (len(cols), len(rows)),
                           _spread(md, qp, x, z), md.rho / float(md.m[-1]))
        step *= 0.5
    return None


def newton(B: np.ndarray, L, c: np.ndarray, sigma: np.ndarray, lam: np.ndarray, bound, tol: float,
           floor: float = 0.0, maxit: int = MAXIT, expired=None) -> tuple[KKTStep | None, int]:
    """KKT steps from ``sigma`` with Hessian multipliers ``lam`` (d,) until the certified gap
    ``alpha / max(floor, bounds so far) - 1`` is at most ``tol``, a step fails, after ``maxit``
    steps, (before each step) once ``expired(n)`` is true (``n`` steps taken), or when a step falls short of ``PROGRESS``
    times the last gap both against the best bound and against its own. ``bound(lam, mu, alpha)`` is
    the lower bound certified by a step's multipliers (``mu`` per ratio; ``alpha`` its cost); ``floor`` a bound known
    before (it can lag far behind a step's, and a gap against it alone would call a step that
    halves the true one stalled). Returns ``(the step of least cost or None, steps taken)``."""
    best, last, last_own, warm, rho = None, math.inf, math.inf, None, 0.0
    for n in range(1, maxit + 1):
        if expired is not None and expired(n - 1):
            return best, n - 1
        found = kkt_step(B, L, c, sigma, lam, warm, rho)
        if found is None:
            return best, n
        own = bound(found.lam, found.mu, found.alpha)
        floor = max(floor, own)
        gap, own_gap = (found.alpha / b - 1.0 if b > 0 else math.inf for b in (floor, own))
        if best is None or found.alpha < best.alpha:
            best = found
        if gap <= tol or (gap > PROGRESS * last and own_gap > PROGRESS * last_own):
            return best, n
        sigma, lam, last, last_own, warm, rho = found.sigma, found.lam, gap, own_gap, found.warm, found.rho * RHO_CARRY
    return best, maxit
