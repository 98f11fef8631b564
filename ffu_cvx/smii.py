"""SM-II: the paper's Newton-CG soft-max solver (§6), matrix-free and certified.

Notation (fitness-for-use paper, §6):

- ``g_i(Sigma) = b_i^T Sigma^{-1} b_i`` (d,): the privacy profile over the columns of ``B``.
- ``h_j(Sigma) = v_j Sigma v_j^T / c_j`` (m,): variance ratios, ``v_j`` the j-th row of ``L``.
- ``smax_t(x) = (1/t) log sum_i exp(t x_i)``: the soft max, computed shifted.
- Problem 4: minimise ``F(Sigma) = smax_{t1}(g) + smax_{t2}(h)`` over symmetric positive
  definite ``Sigma`` (k, k). (The paper's eq. 8 drops the ``exp`` of the second term.)
  As ``t1, t2`` grow ``F`` tends to Problem 3's ``max g + max h``, whose minimiser divided
  by ``max h`` solves Problem 1 (Theorem 1).
- The soft-max weights ``w`` (d,) and ``u`` (m,) of the two terms are the multipliers of
  the dual certificate: at a stationary point ``Sigma Q Sigma = P`` holds with
  ``P = B diag(w) B^T`` and ``Q = L^T diag(u / c) L``, so ``lam = w``, ``mu = u / c``.

Algorithm 1 of the paper: sub-problems at increasing ``t1, t2`` (multiplied by ``mu``),
each solved by Newton steps whose direction comes from at most ``maxcg`` conjugate
gradient iterations (Algorithm 2) on matrix-free Hessian-vector products (§6.2.1),
with a backtracking line search that tests positive definiteness by Cholesky
(Algorithm 3), from ``Sigma_0 = s^2 Q^+ Q^{+T}`` (§6.3). Beyond the paper:

- CG runs in whitened coordinates ``E = R^{-1} D R^{-T}`` (``Sigma = R R^T``), i.e. it is
  preconditioned by ``Sigma (x) Sigma``, the Hessian of ``-log det`` inverted. The exact
  Newton direction is unchanged; the truncated one is far better, and the
  Hessian-vector product needs no triangular solve: with ``Y = R^{-1} B`` (k, d) and
  ``V = L R`` (m, k) it is five matrix products.
- Preconditioned CG (``precondition``, on for ``k > PRECONDITION_MIN_K``): the whitened
  frame is turned by the eigenvectors of ``M`` (one ``eigh`` per Newton step), where the
  Lyapunov part ``E M + M E`` of the Hessian is diagonal; the soft-max parts add their
  diagonals there, and their centring is an exact rank-two term (Woodbury), so applying
  the preconditioner is elementwise. It halves to quarters the Hessian products on
  random ranges; on prefix, whose columns are all tight, it gains little.
- ``float32``: the Hessian products inside CG in single precision (the direction
  only; gradient, line search and certificate stay in float64).
- Shifted soft maxes (``t_shift``): once ``t1`` reaches ``t_shift`` it stops growing and
  each sub-problem weights its soft maxes by the previous one's weights,
  ``smax = (1/t) log sum_i lam_i exp(t x_i)`` (``log lam`` moved 0.7 of the way to the
  log of the last weights, falling by at most 2 per update relative to the largest): a
  damped exponential method of multipliers, whose fixed points are Problem 3's KKT
  points at any ``t``. The soft max's bias of
  order ``log(d) / t`` is then removed by the multipliers instead of by sharpening, and
  the sub-problems stay as well conditioned as at ``t_shift``: a few truncated Newton
  steps each. ``t`` grows again (by at most 3) only when two shifted sub-problems in a row
  do not improve on the best gap (the multiplier method's iterates need not improve it
  every time).
- The default start is the cheapest of ``I``, ``B B^T``, the Gaussian mechanism on
  the target-scaled workload and the ``Sigma`` of uniform dual multipliers (at d = 512
  this start costs 22.5 on prefix and 14.0 on random ranges, against 512 and 13426 for
  ``I``).
- Every sub-problem starts from the normalised problem (``Sigma`` and ``c`` rescaled so
  that ``max g = max h = 1``), so ``t`` has the same meaning on every workload.
- Steihaug's guard: CG stops on the ball ``||E||_F <= radius sqrt(k)`` or at
  non-positive curvature (at large ``t`` the Hessian is nearly singular along
  directions no tight constraint sees).
- The CG budget starts at the paper's MAXCG and doubles (to ``maxcg_cap``) while full
  Newton steps gain less and less; a sub-problem also ends when the Newton decrement is
  below ``ntrel / t1`` (well under the soft max's own error at that ``t1``), after a
  full step that gained less than 100 times that (the step is kept and no direction is
  spent confirming the end), or when progress stalls. A shifted sub-problem whose gap is
  more than 3 times the best one sends the solver back to the best iterate with a
  sharper ``t``.
- Stopping is certified: at the end of a sub-problem :func:`ffu_cvx.certificate.certify`
  starts from ``(w, u / c)`` (for ``k > 256`` the bound of ``(w, u / c)`` alone: the
  ascent's few steps cost seconds there and barely move it), the best bound so far is
  kept, and the solver stops when
  the relative gap of the normalised cost ``alpha * max_ratio`` is at most ``tol``. The
  dual ascent is skipped when the best bound already certifies ``tol``, or when it has
  stopped improving and the gap is still above ``3 tol``. The
  soft-max error, hence the gap, falls like ``1 / t``, so near the goal ``t`` grows by
  less than ``mu``.
- Refinement polish (``refine``, :func:`refine_smii`): when Problem 1 has many optima the
  soft max does not pick the ≺R-minimal one (Theorem 5), because at the ``t`` a small gap
  needs the weights of the columns that are not tight underflow. After a certified
  solve, lexicographic levels as in :mod:`ffu_cvx.refine`, each a log-barrier path on
  the same whitened Newton-CG: minimise the largest free profile entry (its epigraph
  barrier ``phi_t``) with the fixed columns capped at their level value times
  ``1 + 1e-7`` and every target kept; the barrier multipliers tend to the strictly
  complementary ones, so those of the free columns say which are tight in every optimum.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import time
import warnings

import numpy as np
from scipy import linalg

from . import certificate
from .version import __version__
from .privacy import privacy_cost
from .problem import FitnessProblem
from .result import MAX_ITER, OPTIMAL, OPTIMAL_INACCURATE, USER_STOPPED, Solution, SolverError

__all__ = ["PRECONDITION_MIN_K", "REFINE_AUTO_MAX_K", "SMIIState", "objective", "hessp", "refine_smii", "solve_smii", "solve_gd"]

#: Soft-max weights below this fraction of the largest are dropped from the Hessian and
#: gradient products: their contribution is below double-precision rounding.
_PRUNE = 1e-17
#: Backtracking halvings before the line search gives up (step ``beta**60``).
_MAX_BACKTRACK = 60
#: A sub-problem's end skips the certificate's dual ascent when the best bound has
#: stopped improving and gives a gap above this multiple of ``tol``.
_CERTIFY_SKIP = 3.0
#: ... or, for at most ``_CERTIFY_MAX_SKIPS`` sub-problems in a row, when that gap is
#: above this multiple of ``tol`` or the last certificate moved the bound by less than
#: ``_CERTIFY_STALL`` times ``tol``.
_CERTIFY_STALL = 0.01
_CERTIFY_MAX_SKIPS = 3
#: A shifted sub-problem ends at this fraction of the Newton-decrement threshold ``ntrel / t1``
#: (at 0.1 the damped updates stalled at gap 1.1e-3 on random ranges d = 1024).
_SHIFT_NTREL = 0.01
#: Shifted sub-problems in a row that do not improve on the best gap before ``t`` grows
#: again (also after one that takes no step), by at most ``_SHIFT_GROW``.
_SHIFT_PATIENCE = 2
#: Step of the multiplier update in the log domain. At 1 (the plain exponential method of
#: multipliers) the iterates alternated between good and poor ones on random ranges
#: d = 1024 (212 s); 0.5 converged steadily (gap x 0.58 per sub-problem, 96 s), 0.7 in 80 s.
_SHIFT_DAMP = 0.7
_SHIFT_GROW = 3.0
#: Largest drop of a log multiplier (relative to the largest) per update. Uncapped, the
#: multipliers of slack constraints fall by ``0.7 t`` times their slack each time and the
#: soft max soon stops seeing them (see ``_REGRESS``); capped at 2, random ranges
#: d = 1024 took 43 / 47 / 57 s for seeds 0 / 1 / 2 against 47 / 69 / 68 s.
_SHIFT_CAP = 2.0
#: A sub-problem also ends after a full Newton step that decreased ``F`` by less than
#: this multiple of the Newton-decrement threshold: the step is kept, and the direction
#: that would only confirm the end (a frame and MAXCG products) is not computed. Random
#: ranges d = 1024: 30 took 58 s, 100 52 s, 300 82 s (seed 0).
_SETTLE = 100.0
#: A shifted sub-problem whose gap exceeds this multiple of the best gap so far has gone
#: astray: the multipliers of slack constraints decay geometrically, the soft max at
#: moderate ``t`` stops seeing them, and the iterate can drift where ``F`` is flat while
#: the cost rises (random ranges d = 1024, seed 1: gap 8e-3 to 0.7 in three steps).
#: The solver then goes back to the best iterate, sharpens ``t`` by ``_SHIFT_GROW`` and
#: no longer ends sub-problems by ``_SETTLE``.
_REGRESS = 3.0
#: Bases larger than this certify with the bound of the soft-max weights themselves
#: (:func:`ffu_cvx.certificate.lower_bound`, one singular-value evaluation): the two
#: dual-ascent steps and re-evaluations of :func:`ffu_cvx.certificate.certify` cost
#: about 4 s each time at k = 1011 and raised the bound by at most 1e-5 (relative).
_CHEAP_CERTIFY_K = 256
#: ``precondition="auto"`` preconditions CG for bases larger than this.
PRECONDITION_MIN_K = 96
#: The preconditioner's rank-two centring correction is shrunk so that at most this
#: fraction of its Woodbury denominator is used (keeps the preconditioner positive definite).
_WOODBURY_SHRINK = 0.9


@dataclasses.dataclass(frozen=True)
class SMIIState:
    """What ``callback`` receives after every iteration.

    nit : iterations so far. t1, t2 : soft-max sharpness (on the normalised problem).
    objective : ``F`` of Problem 4 on the normalised problem. alpha : privacy cost of the
    current iterate rescaled to meet every target (the normalised cost). ratio : worst
    variance ratio ``max_j var_j / c_j`` of the iterate before that rescaling.
    sigma : (k, k) the iterate rescaled to meet every target. step : line-search step.
    n_cg : CG iterations of this step. gap : certified relative gap (NaN if not computed
    this iteration).
    """

    nit: int
    t1: float
    t2: float
    objective: float
    alpha: float
    ratio: float
    sigma: np.ndarray
    step: float
    n_cg: int
    gap: float


def _logits(x: np.ndarray, t: float, shift=None) -> tuple[np.ndarray, float]:
    """``(y - top, top)`` for ``y = t x + shift`` (n,) and ``top = max y`` (``shift = None``: 0)."""
    y = t * x if shift is None else t * x + shift
    top = float(y.max())
    return y - top, top


def _softmax(x: np.ndarray, t: float, shift=None) -> tuple[float, np.ndarray]:
    """Shifted log-sum-exp: ``(smax_t(x), weights)`` with weights summing to 1.

    ``shift`` (n,): log multipliers, ``smax = (1/t) log sum_i exp(t x_i + shift_i)``.
    """
    y, top = _logits(x, t, shift)
    z = np.exp(y)
    s = float(z.sum())
    return (top + math.log(s)) / t, z / s


def _damped_shift(x: np.ndarray, t: float, shift=None) -> np.ndarray:
    """The next log multipliers (n,): ``(1 - theta) shift + theta log w``, ``w`` the
    weights of :func:`_softmax` (computed in the log domain, finite where they underflow),
    ``theta = _SHIFT_DAMP``; ``shift = None`` counts as uniform. Relative to the largest,
    no entry falls by more than ``_SHIFT_CAP`` in one update."""
    y, _ = _logits(x, t, shift)
    logw = y - math.log(float(np.exp(y).sum()))
    if shift is None:
        new, before = _SHIFT_DAMP * logw, 0.0
    else:
        new, before = (1.0 - _SHIFT_DAMP) * shift + _SHIFT_DAMP * logw, shift - shift.max()
    top = float(new.max())
    return top + np.maximum(new - top, before - _SHIFT_CAP)


class _Point:
    """An iterate with everything one Newton step needs, computed once.

    sigma (k, k), R its lower Cholesky factor, Y = R^{-1} B (k, d), g (d,), h (m,) on the
    internal targets, F and the soft-max weights w (d,), u (m,).
    """

    __slots__ = ("sigma", "R", "Y", "g", "h", "F", "w", "u", "t1", "t2", "s1", "s2")

    def __init__(self, sigma, R, Y, g, h, t1, t2, s1=None, s2=None):
        self.sigma, self.R, self.Y, self.g, self.h, self.t1, self.t2 = sigma, R, Y, g, h, t1, t2
        self.s1, self.s2 = s1, s2
        f1, self.w = _softmax(g, t1, s1)
        f2, self.u = _softmax(h, t2, s2)
        self.F = f1 + f2


def _variance_ratios(L: np.ndarray, sigma: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``diag(L Sigma L^T) / c`` (m,), O(m k^2)."""
    return np.einsum("ij,ij->i", L @ sigma, L) / c


def _evaluate(B, L, c, sigma, t1, t2, h=None, s1=None, s2=None) -> _Point | None:
    """The point at ``sigma``, or ``None`` when ``sigma`` is not positive definite.

    ``h`` may be passed when already known (it is linear in ``sigma``).
    """
    fac = _factor(sigma, B)
    if fac is None:
        return None
    if h is None:
        h = _variance_ratios(L, sigma, c)
    return _Point(sigma, *fac, h, t1, t2, s1, s2)


def _factor(sigma: np.ndarray, B: np.ndarray):
    """``(R, Y, g)``: Cholesky factor of ``sigma``, ``Y = R^{-1} B`` and the profile
    ``g_i = |y_i|^2`` (O(k^2 d)); ``None`` when ``sigma`` is not positive definite."""
    try:
        R = linalg.cholesky(sigma, lower=True, check_finite=False)
    except linalg.LinAlgError:
        return None
    if not np.all(np.isfinite(np.diag(R))):
        return None
    Y = linalg.solve_triangular(R, B, lower=True, check_finite=False)
    return R, Y, np.einsum("ij,ij->j", Y, Y)


class _Whitened:
    """Gradient and Hessian of ``F`` at a point, in whitened coordinates ``E = R^{-1} D R^{-T}``.

    With ``y_i`` the columns of ``Y = R^{-1} B`` and ``v'_j`` the rows of ``V = L R``:
    the gradient is ``-Y diag(w) Y^T + V^T diag(u/c) V`` and, for a symmetric direction E,
    with ``a_i = -y_i^T E y_i`` and ``e_j = v'_j E v'_j^T / c_j`` (the directional
    derivatives of ``g_i`` and ``h_j``),

        H[E] = E M + M E - t1 Y diag(w (a - w.a)) Y^T + t2 V^T diag(u (e - u.e) / c) V,

    ``M = Y diag(w) Y^T``: eqs. (9)-(14) of the paper under the congruence ``R``. Columns
    and rows whose weight is negligible are dropped.

    ``rotate=True`` turns the whitened frame by the eigenvectors ``Q`` (k, k) of ``M``:
    ``Y``, ``V``, ``M``, ``grad`` and every direction are then expressed in the
    orthonormal basis ``Q`` (``E -> Q^T E Q``; products and norms are unchanged), where
    :meth:`preconditioner` is elementwise. ``V`` and ``grad`` are formed in that frame
    directly (``V = L R Q``), never formed and then turned. ``RQ`` (k, k) is ``R Q``
    (``R`` without rotation): a direction ``E`` is ``D = RQ E RQ^T`` in ``Sigma``'s
    coordinates.
    """

    def __init__(self, p: _Point, L: np.ndarray, c: np.ndarray, rotate: bool = False):
        self.t1, self.t2 = p.t1, p.t2
        act = p.w > _PRUNE * p.w.max()
        self.Ya, self.wa = p.Y[:, act], p.w[act]
        self.M = (self.Ya * self.wa) @ self.Ya.T
        self.RQ, self.Q = p.R, None
        if rotate:
            lam, self.Q = linalg.eigh(self.M, check_finite=False, driver="evd")
            self.Ya = self.Q.T @ self.Ya
            self.M = np.diag(lam)
            self.lam = np.maximum(lam, 0.0)
            self.RQ = p.R @ self.Q
        self.V = L @ self.RQ  # O(m k^2)
        actu = p.u > _PRUNE * p.u.max()
        self.Va, self.ua, self.ca = (self.V, p.u, c) if actu.all() else (self.V[actu], p.u[actu], c[actu])
        self.c = c
        self.grad = _symmetrise((self.Va.T * (self.ua / self.ca)) @ self.Va) - self.M
        self.n_hvp = 0
        self.low = None

    def preconditioner(self):
        """An approximate inverse of ``H`` in the rotated frame (needs ``rotate=True``).

        The Lyapunov part ``E M + M E`` is diagonal there (``lam_a + lam_b``); the soft-max
        parts contribute ``2 K_ab`` off the diagonal and ``K_aa`` on it, with
        ``K = t1 Y^2 diag(w) Y^2T + t2 V^2T diag(u/c^2) V^2`` (squares elementwise), less
        their centring ``-t1 <E, M> M - t2 <E, N> N`` (``N = grad + M``), a rank-two term
        inverted by Woodbury (shrunk by ``_WOODBURY_SHRINK`` where it would lose
        definiteness). Applying it costs O(k^2).
        """
        lam = self.lam
        Z2 = np.square(self.Ya)
        K = (Z2 * (self.t1 * self.wa)) @ Z2.T
        Z2 = np.square(self.Va)
        K += (Z2.T * (self.t2 * self.ua / self.ca ** 2)) @ Z2
        diag = lam[:, None] + lam[None, :] + 2.0 * K
        diag[np.diag_indices_from(diag)] -= np.diag(K)
        dinv = 1.0 / np.maximum(diag, 1e-12 * float(diag.max()))
        U = np.stack([self.M, self.grad + self.M])
        DU = U * dinv
        A = np.einsum("iab,jab->ij", U, DU)
        st = np.sqrt([self.t1, self.t2])
        top = float(np.linalg.eigvalsh(A * np.outer(st, st))[-1])
        gamma = min(1.0, _WOODBURY_SHRINK / top) if top > 0 else 1.0
        Sinv = np.linalg.inv(np.diag(1.0 / (gamma * st ** 2)) - A)

        def apply(G):
            return G * dinv + np.tensordot(Sinv @ np.tensordot(DU, G, axes=2), DU, axes=1)

        return apply

    def dh(self, E: np.ndarray) -> np.ndarray:
        """Directional derivatives ``e_j`` (m,) of every ``h_j`` along whitened ``E``."""
        return np.einsum("ij,ij->i", self.V @ E, self.V) / self.c

    def hvp(self, E: np.ndarray) -> np.ndarray:
        """``H[E]`` (k, k): four matrix products, O(k^2 (2 d_act + 2 m_act)).

        With ``X = E Y`` and ``Z = X diag(w) - Y diag(t1 w (a - w.a)) / 2`` the profile
        part ``E M + M E - t1 Y diag(w (a - w.a)) Y^T`` is ``Z Y^T + (Z Y^T)^T``.
        """
        self.n_hvp += 1
        if self.low is None:
            Ya, wa, Va, ua, ca = self.Ya, self.wa, self.Va, self.ua, self.ca
        else:
            Ya, wa, Va, ua, ca = self.low
            E = E.astype(np.float32)
        X = E @ Ya
        a = -np.einsum("ij,ij->j", Ya, X)
        Z = X * wa - Ya * (0.5 * self.t1 * wa * (a - wa @ a))
        out = Z @ Ya.T
        out += out.T
        e = np.einsum("ij,ij->i", Va @ E, Va) / ca
        out += self.t2 * ((Va.T * (ua * (e - ua @ e) / ca)) @ Va)
        return out.astype(np.float64, copy=False)

    def single_precision(self):
        """Evaluate :meth:`hvp` in float32 from now on (CG directions only)."""
        self.low = tuple(x.astype(np.float32) for x in (self.Ya, self.wa, self.Va, self.ua, self.ca))


def _inner(X: np.ndarray, Y: np.ndarray) -> float:
    return float(np.vdot(X, Y))


def _to_boundary(s: np.ndarray, p: np.ndarray, radius: float) -> np.ndarray:
    """``s + tau p`` with ``tau >= 0`` on the sphere ``||.||_F = radius`` (``||s|| <= radius``)."""
    sp, pp, ss = _inner(s, p), _inner(p, p), _inner(s, s)
    if pp == 0.0:  # zero gradient: already stationary, no direction to follow
        return s
    tau = (-sp + math.sqrt(max(sp * sp + pp * (radius * radius - ss), 0.0))) / pp
    return s + tau * p


def _conjugate_gradient(op, maxcg: int, tol2: float, radius: float, precond=None) -> tuple[np.ndarray, int]:
    """Algorithm 2 on ``H[E] = -grad`` in whitened coordinates; returns ``(E, iterations)``.

    Stops after ``maxcg`` iterations or when ``<r, r> <= tol2``. As in Steihaug's
    truncated CG, an iterate that would leave the ball ``||E||_F <= radius``, or a
    direction of non-positive curvature, ends the loop on the ball's boundary: at large
    ``t`` the Hessian is nearly singular along directions no tight constraint sees,
    and an unguarded CG step there is huge and useless. ``precond`` (a symmetric
    positive definite map ``(k, k) -> (k, k)``, approximately ``H^{-1}``) turns it
    into preconditioned CG.
    """
    s = np.zeros_like(op.grad)
    r = -op.grad
    z = r if precond is None else precond(r)
    p = z.copy()
    rzold = _inner(r, z)
    it = 0
    for it in range(1, maxcg + 1):
        Hp = op.hvp(p)
        curv = _inner(p, Hp)
        if not curv > 0:
            return _to_boundary(s, p, radius), it
        a = rzold / curv
        s_next = s + a * p
        if _inner(s_next, s_next) >= radius * radius:
            return _to_boundary(s, p, radius), it
        s = s_next
        r -= a * Hp
        if _inner(r, r) <= tol2:
            break
        z = r if precond is None else precond(r)
        rznew = _inner(r, z)
        p = z + (rznew / rzold) * p
        rzold = rznew
    return s, it


def _symmetrise(X: np.ndarray) -> np.ndarray:
    return 0.5 * (X + X.T)


def _newton_direction(p: _Point, L, c, maxcg, tol2, radius, precondition=True, float32=False):
    """SM-II's step solver: truncated Newton-CG. Returns ``(D, <D, grad F>, e, n_cg, n_hvp)``.

    ``precondition``: CG in the eigenbasis of ``M`` with :meth:`_Whitened.preconditioner`;
    ``float32``: Hessian products in single precision (the direction only; the line
    search and certificate stay in float64).
    """
    op = _Whitened(p, L, c, rotate=precondition)
    RQ = op.RQ
    pre = op.preconditioner() if precondition else None
    if float32:
        op.single_precision()
    E, n_cg = _conjugate_gradient(op, maxcg, tol2, radius * math.sqrt(op.grad.shape[0]), precond=pre)
    E = _symmetrise(E)
    delta = _inner(E, op.grad)
    if not delta < 0:  # a truncated CG direction is a descent one unless rounding bites
        E = -op.grad
        delta = -_inner(E, E)
    D = _symmetrise(RQ @ E @ RQ.T)
    return D, delta, op.dh(E), n_cg, op.n_hvp


def _gradient_direction(p: _Point, L, c, maxcg, tol2, radius):
    """Plain gradient descent (Table 3): ``D = -grad F`` in the coordinates of ``Sigma``."""
    op = _Whitened(p, L, c)
    # grad F = R^{-T} G R^{-1} for the whitened gradient G (congruence back).
    A = linalg.solve_triangular(p.R, op.grad, lower=True, trans="T", check_finite=False)
    G = _symmetrise(linalg.solve_triangular(p.R, A.T, lower=True, trans="T", check_finite=False))
    D = -G
    e = np.einsum("ij,ij->i", L @ D, L) / c
    return D, -_inner(G, G), e, 0, 0


def _line_search(p: _Point, D, delta, e, B, L, c, sigma_ls, beta):
    """Algorithm 3: backtracking from step 1 with a Cholesky test; ``(step, point)`` or ``(step, None)``."""
    step = 1.0
    for _ in range(_MAX_BACKTRACK):
        q = _evaluate(B, L, c, p.sigma + step * D, p.t1, p.t2, h=p.h + step * e, s1=p.s1, s2=p.s2)
        if q is not None and np.isfinite(q.F) and q.F <= p.F + step * sigma_ls * delta:
            return step, q
        step *= beta
    return step, None


def _initial_sigma(problem: FitnessProblem, Q) -> np.ndarray:
    """§6.3: ``Sigma_0 = s^2 Q^+ Q^{+T}`` with ``s^2 = 0.99 min_j c_j / (L Q^+ Q^{+T} L^T)_jj``.

    ``Q = None``: of ``I`` (the paper's default), ``B B^T`` (the profile is then the
    leverage scores), ``(L^T diag(1/c) L)^{-1}`` (the Gaussian mechanism on
    ``diag(c)^{-1/2} W``) and the ``Sigma`` of uniform dual multipliers
    (:func:`ffu_cvx.certificate.dual_sigma`), the one of least privacy cost once scaled
    to meet every target.
    """
    k = problem.k
    if Q is None:
        B, L, c = problem.B, problem.L, problem.c
        candidates = [np.eye(k), _symmetrise(B @ B.T)]
        try:
            C = linalg.cholesky((L.T / c) @ L, lower=True, check_finite=False)
            candidates.append(_symmetrise(linalg.cho_solve((C, True), np.eye(k), check_finite=False)))
        except linalg.LinAlgError:
            pass
        uniform = certificate.dual_sigma(problem, np.ones(problem.d), 1.0 / c)
        if uniform is not None:
            candidates.append(uniform)
        costs = []
        for S in candidates:
            fac = _factor(S, B)
            costs.append(math.inf if fac is None else float(fac[2].max() * _variance_ratios(L, S, c).max()))
        S0 = candidates[int(np.argmin(costs))]
    else:
        Q = np.asarray(Q, dtype=float)
        if Q.ndim != 2 or Q.shape[1] != k:
            raise ValueError(f"`Q` must be a (q, {k}) matrix acting on the basis coordinates B x, got shape {Q.shape}")
        if not np.all(np.isfinite(Q)):
            raise ValueError("`Q` contains NaN or inf")
        try:
            C = linalg.cholesky(Q.T @ Q, lower=True, check_finite=False)
        except linalg.LinAlgError:
            raise ValueError(f"`Q` must have full column rank {k} so that Q^+ Q^+T is positive definite; "
                             "add rows (for example the identity) to Q") from None
        # Q^+ Q^{+T} = (Q^T Q)^{-1}, once at start-up.
        S0 = linalg.cho_solve((C, True), np.eye(k), check_finite=False)
        S0 = _symmetrise(S0)
    s2 = 0.99 * float(np.min(problem.c / np.einsum("ij,ij->i", problem.L @ S0, problem.L)))
    return s2 * S0


def _normalise(sigma, B, L, c_int):
    """Rescale ``sigma`` and the internal targets so that ``max g = max h = 1``.

    Returns ``(sigma', c_int', a)``; the normalised cost ``max g * max h`` is unchanged.
    """
    Y = linalg.solve_triangular(linalg.cholesky(sigma, lower=True, check_finite=False), B,
                                lower=True, check_finite=False)
    gmax = float(np.einsum("ij,ij->j", Y, Y).max())
    hmax = float(_variance_ratios(L, sigma, c_int).max())
    a = gmax * hmax
    return sigma * gmax, c_int * a, a


def objective(problem: FitnessProblem, sigma: np.ndarray, t1: float = 1.0, t2: float = 1.0):
    """Problem 4's ``F(Sigma)`` and its gradient (k, k) at ``sigma`` (k, k), on ``problem``'s targets."""
    sigma = np.asarray(sigma, dtype=float)
    p = _evaluate(problem.B, problem.L, problem.c, sigma, float(t1), float(t2))
    if p is None:
        raise ValueError("`sigma` is not positive definite")
    op = _Whitened(p, problem.L, problem.c)
    A = linalg.solve_triangular(p.R, op.grad, lower=True, trans="T", check_finite=False)
    G = linalg.solve_triangular(p.R, A.T, lower=True, trans="T", check_finite=False)
    return p.F, _symmetrise(G)


def hessp(problem: FitnessProblem, sigma: np.ndarray, direction: np.ndarray, t1: float = 1.0, t2: float = 1.0):
    """Hessian of Problem 4's ``F`` at ``sigma`` (k, k) times a symmetric ``direction`` (k, k).

    Matrix-free (the Kronecker identity of §6.2.1, evaluated in whitened coordinates).
    """
    sigma = np.asarray(sigma, dtype=float)
    p = _evaluate(problem.B, problem.L, problem.c, sigma, float(t1), float(t2))
    if p is None:
        raise ValueError("`sigma` is not positive definite")
    op = _Whitened(p, problem.L, problem.c)
    Dw = linalg.solve_triangular(p.R, np.asarray(direction, dtype=float), lower=True, check_finite=False)
    E = _symmetrise(linalg.solve_triangular(p.R, Dw.T, lower=True, check_finite=False))
    HE = op.hvp(E)
    A = linalg.solve_triangular(p.R, HE, lower=True, trans="T", check_finite=False)
    return _symmetrise(linalg.solve_triangular(p.R, A.T, lower=True, trans="T", check_finite=False))


def _check_positive(name, value, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value) or value <= 0:
        raise ValueError(f"`{name}` must be a finite positive number, got {value!r}")
    return value


class _Log:
    """CVXPY-style iteration log on stdout."""

    COLS = ("iter", "t1", "t2", "objective", "alpha", "max ratio", "cg", "step", "gap")

    def __init__(self, enabled: bool, name: str, problem: FitnessProblem, opts: dict):
        self.enabled = enabled
        if not enabled:
            return
        bar = "-" * 96
        print(bar)
        print(f"{name:^96}")
        print(f"  problem {problem.name}: m = {problem.m}, d = {problem.d}, k = {problem.k}, basis = {problem.basis}")
        print("  " + ", ".join(f"{k} = {v}" for k, v in opts.items()))
        print(bar)
        print(f"{'iter':>6} {'t1':>9} {'t2':>9} {'objective':>13} {'alpha':>13} {'max ratio':>10} "
              f"{'cg':>3} {'step':>9} {'gap':>9}")
        sys.stdout.flush()

    def row(self, nit, t1, t2, F, alpha, ratio, ncg, step, gap):
        if self.enabled:
            print(f"{nit:6d} {t1:9.2e} {t2:9.2e} {F:13.6e} {alpha:13.6e} {ratio:10.4g} {ncg:3d} "
                  f"{step:9.2e} {gap:9.2e}", flush=True)

    def note(self, text):
        if self.enabled:
            print(f"  {text}", flush=True)


def _run(problem, *, method, direction, callback, Q, t1, t2, mu, maxcg, tol2, nttol, sigma_ls, beta,
         maxiter, tol, t_max, max_time, verbose, radius, ntrel, maxcg_cap, t_shift, refine=False):
    if not isinstance(problem, FitnessProblem):
        raise ValueError(f"`problem` must be a FitnessProblem, got {type(problem).__name__}")
    for name, val in (("t1", t1), ("t2", t2), ("tol2", tol2), ("nttol", nttol), ("tol", tol), ("t_max", t_max)):
        _check_positive(name, val)
    if t_shift is None:
        t_shift = math.inf
    if isinstance(t_shift, bool) or not isinstance(t_shift, (int, float, np.integer, np.floating)) \
            or math.isnan(t_shift) or t_shift <= 0:
        raise ValueError(f"`t_shift` must be a positive number, inf or None (never shift), got {t_shift!r}")
    _check_positive("max_time", max_time, allow_none=True)
    if isinstance(ntrel, bool) or not isinstance(ntrel, (int, float, np.integer, np.floating)) \
            or not math.isfinite(ntrel) or ntrel < 0:
        raise ValueError(f"`ntrel` must be a finite number >= 0 (0 keeps only the paper's NTTOL), got {ntrel!r}")
    if not mu > 1:
        raise ValueError(f"`mu` (the factor that grows t1, t2) must be > 1, got {mu!r}")
    if not 0 < sigma_ls < 1 or not 0 < beta < 1:
        raise ValueError(f"`sigma_ls` and `beta` must lie in (0, 1), got {sigma_ls!r} and {beta!r}")
    if refine not in (True, False, "auto"):
        raise ValueError(f"`refine` must be True, False or 'auto', got {refine!r}")
    for name, val in (("maxcg", maxcg), ("maxiter", maxiter)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < 1:
            raise ValueError(f"`{name}` must be a positive integer, got {val!r}")

    start = time.perf_counter()
    B, L, c = problem.B, problem.L, problem.c
    log = _Log(verbose, ("SM-II: Newton-CG on soft maxes" if method == "smii" else "Gradient descent on soft maxes")
               + f" (ffu-cvx {__version__})", problem,
               dict(t1=t1, t2=t2, mu=mu, maxcg=maxcg, tol2=tol2, nttol=nttol, tol=tol))
    sigma, c_int, kappa = _normalise(_initial_sigma(problem, Q), B, L, c)
    t1, t2 = float(t1), float(t2)
    p = _evaluate(B, L, c_int, sigma, t1, t2)
    nit = n_hvp = n_cg_total = 0
    cg_budget, last_decrease = maxcg, math.inf
    history = []
    status, message = None, ""
    best = None  # (gap, point, kappa): the iterate with the smallest certified gap
    sub_steps, settled, settle, restarts = 0, False, _SETTLE, 0
    shift_best, misses = math.inf, 0  # best gap of the shifted sub-problems, sub-problems since

    def alpha_of(pt):
        return float(pt.g.max() * pt.h.max() * kappa)

    lb_best = [0.0, None, None]  # every certificate's bound is valid: keep the best
    lb_gain = [math.inf, 0]  # relative gain of the bound at the last certificate, skips since

    def certify(pt, force=True):
        """``(lower bound, gap)``; the dual ascent is skipped (``force=False``) when the
        best bound already certifies ``tol``, when it has stopped improving and the gap
        it gives is still far above ``tol``, and for up to a few sub-problems in a row
        when that gap is far above ``tol`` or the bound has stalled."""
        if not force and lb_best[0] > 0:
            gap = alpha_of(pt) / lb_best[0] - 1.0
            far = gap > _CERTIFY_SKIP * tol
            if gap <= tol or (lb_gain[0] < 0.1 * tol and far) or \
                    (lb_gain[1] < _CERTIFY_MAX_SKIPS and (far or lb_gain[0] < _CERTIFY_STALL * tol)):
                lb_gain[1] += 1
                return lb_best[0], gap
        lb_gain[1] = 0
        mu_w = pt.u / c  # the soft-max weights as multipliers (mu_w . c = 1)
        if problem.k > _CHEAP_CERTIFY_K:
            lb, lam, mu_q = certificate.lower_bound(problem, pt.w, mu_w), pt.w, mu_w
        else:
            s = float(pt.h.max() * kappa)
            cert = certificate.certify(problem, pt.sigma / s, lam=pt.w, mu=mu_w, profile=pt.g * s,
                                       variances=pt.h * c_int / s)
            lb, lam, mu_q = cert.lower_bound, cert.lam, cert.mu
        if lb > lb_best[0]:
            lb_gain[0] = lb / lb_best[0] - 1.0 if lb_best[0] > 0 else math.inf
            lb_best[:] = [lb, lam, mu_q]
        else:
            lb_gain[0] = 0.0
        return lb_best[0], alpha_of(pt) / lb_best[0] - 1.0

    while status is None:
        if nit >= maxiter:
            status, message = MAX_ITER, f"reached maxiter = {maxiter}"
            break
        if max_time is not None and time.perf_counter() - start > max_time:
            status, message = MAX_ITER, f"reached max_time = {max_time} s"
            break
        threshold = max(nttol, ntrel / t1)
        if p.s1 is not None:  # a shifted sub-problem must be solved more finely (see t_shift)
            threshold *= _SHIFT_NTREL
        step, q = (None, None)
        if last_decrease >= 0.1 * threshold and not settled:
            D, delta, e, n_cg, nh = direction(p, L, c_int, cg_budget, tol2, radius)
            n_hvp += nh
            n_cg_total += n_cg
        else:  # the last step gained a tenth of the threshold: stalled, end the sub-problem
            delta = 0.0
        if abs(delta) >= threshold:
            step, q = _line_search(p, D, delta, e, B, L, c_int, sigma_ls, beta)
            if q is None and abs(delta) > 1e-12 * abs(p.F):
                raise SolverError(
                    f"{method}: line search made no progress at iteration {nit} (t1 = {t1:.3g}, t2 = {t2:.3g}, "
                    f"objective = {p.F:.12g}, directional derivative = {delta:.3e}, last step = {step:.3e}); "
                    "try a smaller `mu` or a looser `tol`", status="solver_error", nit=nit, residual=abs(delta))
        if q is None:
            # Sub-problem solved: Newton decrement below threshold, progress stalled or at rounding level.
            lb, gap = certify(p, force=False)
            if best is None or gap < best[0]:
                best = (gap, p, kappa)
            log.note(f"sub-problem t1 = {t1:.3g} done: alpha = {alpha_of(p):.8g}, lower bound = {lb:.8g}, "
                     f"gap = {gap:.2e}")
            if gap <= tol:
                status, message = OPTIMAL, f"certified relative gap {gap:.2e} <= tol = {tol:g}"
                break
            if t1 >= t_max:
                status, message = OPTIMAL_INACCURATE, (f"t1 reached t_max = {t_max:g} with certified gap "
                                                       f"{gap:.2e} > tol = {tol:g}")
                break
            # The soft-max error, hence the gap, falls like 1/t: near the goal a smaller
            # factor than mu reaches it with an easier sub-problem.
            grow = min(mu, max(2.0, 2.0 * gap / tol))
            if t1 >= t_shift and gap > _REGRESS * best[0]:
                # The multiplier iterates went astray: resume from the best one, sharper.
                p, misses, settle, restarts = best[1], _SHIFT_PATIENCE, 0.0, restarts + 1
                log.note(f"gap {gap:.2e} > {_REGRESS:g} x best {best[0]:.2e}: back to the best iterate")
            s1, s2 = p.s1, p.s2
            if t1 >= t_shift:
                # Exponential multipliers: the next soft maxes are weighted by this one's weights.
                s1, s2 = _damped_shift(p.g, p.t1, s1), _damped_shift(p.h, p.t2, s2)
                # The iterates of the multiplier method need not improve the gap every
                # time: t grows only after _SHIFT_PATIENCE sub-problems without a new best.
                misses = 0 if gap < shift_best else misses + 1
                shift_best = min(shift_best, gap)
                if sub_steps > 0 and misses < _SHIFT_PATIENCE:
                    grow = 1.0
                else:
                    grow, misses = min(grow, _SHIFT_GROW), 0
            else:
                grow = min(grow, max(t_shift / t1, 1.0))
            sub_steps, settled = 0, False
            t1, t2 = t1 * grow, t2 * grow
            sigma, c_int, a = _normalise(p.sigma, B, L, c_int)
            kappa *= a
            p = _evaluate(B, L, c_int, sigma, t1, t2, s1=s1, s2=s2)
            last_decrease = math.inf
            continue
        decrease = p.F - q.F
        if maxcg_cap > cg_budget and step == 1.0 and decrease > 0.5 * last_decrease:
            # Full steps that gain less and less: the truncated direction, not the
            # line search, limits progress, so give CG more iterations.
            cg_budget = min(2 * cg_budget, maxcg_cap)
        last_decrease = decrease
        p = q
        nit += 1
        sub_steps += 1
        # End the sub-problem when the best bound so far already certifies this iterate,
        # or after a full step that gained little (see _SETTLE).
        settled = alpha_of(p) <= lb_best[0] * (1.0 + tol) or (step == 1.0 and decrease < settle * threshold)
        alpha = alpha_of(p)
        ratio = float(p.h.max() * kappa)
        history.append({"nit": nit, "t1": t1, "t2": t2, "objective": p.F, "alpha": alpha, "ratio": ratio,
                        "n_cg": n_cg, "step": step, "time": time.perf_counter() - start})
        log.row(nit, t1, t2, p.F, alpha, ratio, n_cg, step, math.nan)
        if callback is not None:
            state = SMIIState(nit=nit, t1=t1, t2=t2, objective=p.F, alpha=alpha, ratio=ratio,
                              sigma=p.sigma / (p.h.max() * kappa), step=step, n_cg=n_cg, gap=math.nan)
            try:
                callback(state)
            except StopIteration:
                status, message = USER_STOPPED, f"callback raised StopIteration at iteration {nit}"

    # The best certified iterate wins unless the run went on past it (user stop, limits).
    if status == OPTIMAL or (best is not None and status == OPTIMAL_INACCURATE):
        _, p, kappa = best
    else:
        certify(p)
    lb, lam, mu_q = lb_best
    sigma = p.sigma / float(p.h.max() * kappa)
    extra = {}
    if refine == "auto":
        refine = problem.k <= REFINE_AUTO_MAX_K
    if refine and status == OPTIMAL:
        sigma, extra, nh = _polish(problem, sigma, lb * (1.0 + tol), min(1e-7, 0.1 * tol), log)
        n_hvp += nh
    elapsed = time.perf_counter() - start
    sol = Solution.from_sigma(problem, sigma, method=method, status=status,
                              message=message, lam=lam, mu=mu_q, lower_bound=lb, nit=nit, n_hvp=n_hvp,
                              time=elapsed, history=history, n_cg=n_cg_total, t1=t1, t2=t2, restarts=restarts,
                              **extra)
    log.note(f"status {status}: {message}; alpha = {sol.privacy_cost:.10g}, lower bound = "
             f"{sol.lower_bound:.10g}, gap = {sol.gap:.2e}, {nit} iterations, {n_hvp} Hessian products, "
             f"{elapsed:.2f} s")
    return sol


# ---------------------------------------------------------------------------------------
# Refinement polish: the ≺R-minimal optimum (Theorem 5) by matrix-free barrier levels.
# ---------------------------------------------------------------------------------------

#: ``refine="auto"`` polishes up to this basis size ``k``: there a level's Newton steps
#: may run CG to ``k (k + 1) / 2`` iterations (exact directions; the barrier Hessian is
#: too ill-conditioned for truncated ones) and the polish costs at most a few seconds.
REFINE_AUTO_MAX_K = 32
#: A level's barrier path ends when its duality-gap bound ``n / t`` falls below this.
_LEVEL_GAP = 1e-9
#: A barrier sub-problem ends when the Newton decrement ``-<E, grad>`` is below this over ``t``.
_LEVEL_DECREMENT = 1e-3
#: A level's barrier path starts at ``t = _LEVEL_T0 (d + m)`` (duality-gap bound ``1 / _LEVEL_T0``).
_LEVEL_T0 = 10.0
#: CG stops when its residual is below this fraction of the gradient (inexact Newton).
_LEVEL_CG_RTOL = 1e-4
#: Default cap on CG iterations per Newton step of a level (``k (k + 1) / 2`` below it).
_LEVEL_MAXCG = 600
#: Newton steps per barrier sub-problem before moving on.
_LEVEL_MAX_NEWTON = 30


def _epigraph_max(x: np.ndarray, t: float):
    """``phi_t(x) = min_s s - (1/t) sum_i log(s - x_i)`` (the barrier-smoothed max of ``x`` (n,)).

    Returns ``(phi, lam, D)``: ``lam = dphi/dx`` (n,) (positive, summing to 1, the
    barrier multipliers) and ``D = lam^2 t`` (n,), the Hessian being
    ``diag(D) - D D^T / sum(D)``. The optimal ``s`` solves ``sum_i 1 / (s - x_i) = t``,
    found by Newton from the left, which increases monotonically to the root.
    """
    top = float(x.max())
    s = top + 1.0 / t
    for _ in range(200):
        r = 1.0 / (s - x)
        f = float(r.sum()) - t
        step = f / float((r * r).sum())
        s += step
        if step <= 1e-15 * max(1.0, abs(s - top)) + 4e-16 * abs(s):
            break
    r = 1.0 / (s - x)
    lam = r / r.sum()
    phi = s - float(np.log(s - x).sum()) / t
    return phi, lam, lam * lam * t


class _LevelPoint:
    """One iterate of a refinement level: ``sigma`` (k, k), its Cholesky factor, ``Y``, ``g``, ``h``.

    The level objective is
    ``Phi = phi_t(g_F / scale) - (1/t) [sum_{i fixed} log(1 - g_i / cap_i) + sum_j log(1 - h_j)]``;
    ``pg`` (d,), ``ph`` (m,) are its partial derivatives in ``g`` and ``h``, ``Dg``, ``Dh``
    the diagonal of its second derivatives and ``lam`` the free columns' multipliers.
    """

    __slots__ = ("sigma", "R", "Y", "g", "h", "F", "pg", "ph", "Dg", "Dh", "lam", "free")

    @classmethod
    def at(cls, B, L, c, sigma, free, caps, scale, t):
        """The point at ``sigma``, or ``None`` outside the level's open feasible set."""
        fac = _factor(sigma, B)
        if fac is None:
            return None
        R, Y, g = fac
        h = _variance_ratios(L, sigma, c)
        fixed = ~free
        sg, sh = 1.0 - g[fixed] / caps[fixed], 1.0 - h
        if not (np.all(sg > 0) and np.all(sh > 0)):
            return None
        self = cls()
        self.sigma, self.R, self.Y, self.g, self.h, self.free = sigma, R, Y, g, h, free
        phi, self.lam, D = _epigraph_max(g[free] / scale, t)
        self.F = phi - float(np.log(sg).sum() + np.log(sh).sum()) / t
        self.pg, self.Dg = np.empty_like(g), np.empty_like(g)
        self.pg[free], self.Dg[free] = self.lam / scale, D / scale ** 2
        self.pg[fixed] = 1.0 / (t * caps[fixed] * sg)
        self.Dg[fixed] = self.pg[fixed] ** 2 * t
        self.ph = 1.0 / (t * sh)
        self.Dh = self.ph ** 2 * t
        return self


class _LevelWhitened:
    """Gradient and Hessian of a level's ``Phi`` in whitened coordinates ``E = R^{-1} D R^{-T}``.

    As in :class:`_Whitened`, with the soft-max weights replaced by ``pg``, ``ph`` and the
    soft-max Hessians by ``diag(Dg) - Df Df^T / sum(Df)`` (free columns ``F``, ``Df``
    their part of ``Dg``) and ``diag(Dh)``:

        H[E] = E M + M E - Y diag(Hg a) Y^T + V^T diag(Dh e / c) V,  M = Y diag(pg) Y^T.
    """

    def __init__(self, p: _LevelPoint, L, c):
        self.p, self.c = p, c
        self.V = L @ p.R
        self.M = (p.Y * p.pg) @ p.Y.T
        self.grad = (self.V.T * (p.ph / c)) @ self.V - self.M
        self.Df = np.where(p.free, p.Dg, 0.0)
        self.n_hvp = 0

    def hvp(self, E: np.ndarray) -> np.ndarray:
        """``H[E]`` (k, k), four matrix products."""
        self.n_hvp += 1
        p = self.p
        X = E @ p.Y
        a = -np.einsum("ij,ij->j", p.Y, X)
        Ha = p.Dg * a - self.Df * (self.Df @ a) / self.Df.sum()
        out = (X * p.pg - p.Y * (0.5 * Ha)) @ p.Y.T
        out += out.T
        e = np.einsum("ij,ij->i", self.V @ E, self.V) / self.c
        out += (self.V.T * (p.Dh * e / self.c)) @ self.V
        return out


def _solve_level(problem, sigma, free, caps, *, t0, mu, maxcg, sigma_ls, beta, radius):
    """Barrier path for one level from the strictly feasible ``sigma`` (k, k).

    Minimises the largest ``g_i`` over the free columns (boolean (d,)) subject to
    ``g_i < caps_i`` on the fixed ones and ``h_j < 1``. Returns
    ``(point, value, n_newton, n_hvp)`` at the end of the path, where ``value`` is the
    level's largest free profile entry.
    """
    B, L, c = problem.B, problem.L, problem.c
    n_con = problem.d + problem.m
    p = _LevelPoint.at(B, L, c, sigma, free, caps, 1.0, t0)
    if p is None:
        raise SolverError("refinement level: the starting Sigma is not strictly feasible", status="solver_error")
    scale, t = float(p.g[free].max()), t0
    p = _LevelPoint.at(B, L, c, sigma, free, caps, scale, t)
    nit = n_hvp = 0
    while True:
        for _ in range(_LEVEL_MAX_NEWTON):
            op = _LevelWhitened(p, L, c)
            E, _ = _conjugate_gradient(op, maxcg, _LEVEL_CG_RTOL ** 2 * _inner(op.grad, op.grad),
                                       radius * math.sqrt(problem.k))
            E = _symmetrise(E)
            n_hvp += op.n_hvp
            delta = _inner(E, op.grad)
            if not delta < 0:
                break
            if -delta < _LEVEL_DECREMENT / t:  # Newton decrement: well inside the barrier's own n/t error
                break
            D = _symmetrise(p.R @ E @ p.R.T)
            step, q = 1.0, None
            for _ in range(_MAX_BACKTRACK):
                q = _LevelPoint.at(B, L, c, p.sigma + step * D, free, caps, scale, t)
                if q is not None and q.F <= p.F + step * sigma_ls * delta:
                    break
                q = None
                step *= beta
            if q is None:
                break
            p = q
            nit += 1
        if n_con / t <= _LEVEL_GAP:
            return p, float(p.g[free].max()), nit, n_hvp
        t *= mu
        p = _LevelPoint.at(B, L, c, p.sigma, free, caps, scale, t)


def refine_smii(problem: FitnessProblem, sigma: np.ndarray, *, slack: float = 1e-7, threshold: float = 1e-3,
                mu: float = 10.0, maxcg: int | None = None, sigma_ls: float = 0.01, beta: float = 0.5,
                radius: float = 1.0):
    """Lexicographic levels from an optimal ``sigma`` (k, k) to the ≺R-minimal optimum (Theorem 5).

    Each level minimises the largest profile entry over the free columns with the
    fixed ones capped at ``(1 + slack)`` times their level value and every target
    kept, by a log-barrier path (the free columns' max smoothed by its epigraph barrier)
    solved with SM-II's whitened Newton-CG and Cholesky line search. The barrier
    multipliers ``lam`` of the free columns converge to the strictly complementary ones,
    so the columns with ``lam >= threshold * max lam`` are tight in every optimum of the
    level and are fixed; a level whose value is within ``1e-6`` of the previous one is
    merged into it. At most ``d`` levels.

    ``sigma`` must be positive definite with every variance ratio at most 1 (SM-II's
    rescaled optimum); ``maxcg`` defaults to ``min(k (k + 1) / 2, 600)``.

    Returns ``(sigma, levels, n_newton, n_hvp)``: ``sigma`` strictly meets every target
    (``max h < 1``), ``levels`` a list of ``{"value", "columns"}`` in decreasing value.

    Raises
    ------
    ValueError
        On a malformed ``problem``, ``sigma``, ``slack`` or ``threshold``.
    SolverError
        When ``sigma`` is not strictly feasible after the ``1 + slack`` shrink, or a
        level's multipliers are not finite.
    """
    if not isinstance(problem, FitnessProblem):
        raise ValueError(f"`problem` must be a FitnessProblem, got {type(problem).__name__}")
    k, d = problem.k, problem.d
    sigma = np.asarray(sigma, dtype=float)
    if sigma.shape != (k, k) or not np.all(np.isfinite(sigma)):
        raise ValueError(f"`sigma` must be a finite ({k}, {k}) matrix on the basis coordinates, got shape {sigma.shape}")
    if not (math.isfinite(slack) and 0 < slack < 1e-2):
        raise ValueError(f"`slack` must lie in (0, 1e-2), got {slack!r}")
    if not (math.isfinite(threshold) and 0 < threshold < 1):
        raise ValueError(f"`threshold` must lie in (0, 1), got {threshold!r}")
    if maxcg is None:
        maxcg = min(k * (k + 1) // 2, _LEVEL_MAXCG)
    zero = ~np.any(problem.B != 0, axis=0)  # g_i = 0 for every Sigma: a last level of value 0
    free = ~zero
    caps = np.full(d, np.inf)
    sigma = sigma / (1.0 + slack)  # strictly inside h < 1
    levels, n_newton, n_hvp = [], 0, 0
    while free.any():
        p, value, nn, nh = _solve_level(problem, sigma, free, caps, t0=_LEVEL_T0 * (d + problem.m), mu=mu,
                                        maxcg=maxcg, sigma_ls=sigma_ls, beta=beta, radius=radius)
        n_newton, n_hvp = n_newton + nn, n_hvp + nh
        if not np.all(np.isfinite(p.lam)):
            raise SolverError(f"refinement level {len(levels) + 1}: non-finite barrier multipliers",
                              status="solver_error", nit=n_newton)
        lam = np.zeros(d)
        lam[free] = p.lam
        new = free & (lam >= threshold * lam.max())
        cols = np.flatnonzero(new)
        if levels and value >= levels[-1]["value"] * (1.0 - 1e-6):
            levels[-1]["columns"] = sorted(levels[-1]["columns"] + cols.tolist())
        else:
            levels.append({"value": value, "columns": cols.tolist()})
        caps[cols] = max(levels[-1]["value"], float(p.g[cols].max())) * (1.0 + slack)
        free &= ~new
        sigma = p.sigma
    if zero.any():
        levels.append({"value": 0.0, "columns": np.flatnonzero(zero).tolist()})
    return sigma, levels, n_newton, n_hvp


def _polish(problem: FitnessProblem, sigma: np.ndarray, allowed: float, slack: float,
            log) -> tuple[np.ndarray, dict, int]:
    """Run :func:`refine_smii` on SM-II's certified ``sigma`` (k, k) (max ratio 1).

    Returns ``(sigma, info, n_hvp)``. The polished ``Sigma`` is rescaled to meet every
    target exactly; it is kept only if its privacy cost is at most ``allowed`` (the
    certified lower bound times ``1 + tol``) or that of ``sigma``, so the requested gap
    still holds (the levels' relative ``slack`` is ``min(1e-7, tol / 10)``);
    otherwise (or if a level fails) ``info["refine_failed"]`` says why, a
    ``RuntimeWarning`` is issued and ``sigma`` is returned unchanged.
    """
    t0 = time.perf_counter()
    cost = privacy_cost(sigma, problem.B)
    try:
        refined, levels, n_newton, n_hvp = refine_smii(problem, sigma, slack=slack)
    except SolverError as err:
        refined, levels, n_newton, n_hvp = None, [], err.nit or 0, 0
        failed = str(err)
    else:
        refined = refined / float(_variance_ratios(problem.L, refined, problem.c).max())
        new_cost = privacy_cost(refined, problem.B)
        failed = None if new_cost <= max(cost, allowed) else \
            f"refined Sigma costs {new_cost:.10g} > {max(cost, allowed):.10g} allowed by the certified gap"
    info = {"refine_levels": levels, "refine_newton": n_newton, "refine_time": time.perf_counter() - t0}
    if failed is None:
        sigma = refined
    else:
        info["refine_failed"] = failed
        warnings.warn(f"SM-II refinement: {failed}; returning the unrefined optimum", RuntimeWarning, stacklevel=4)
    log.note(f"refinement: {len(levels)} levels, {n_newton} Newton steps, {info['refine_time']:.2f} s"
             + (f"; {info['refine_failed']}" if "refine_failed" in info else ""))
    return sigma, info, n_hvp


def solve_smii(problem: FitnessProblem, *, callback=None, Q=None, t1: float = 1.0, t2: float = 1.0,
               mu: float = 10.0, maxcg: int = 5, maxcg_cap: int | None = None, tol2: float = 1e-10, nttol: float = 1e-10,
               sigma_ls: float = 0.01, beta: float = 0.5, maxiter: int = 2000, tol: float = 1e-4,
               t_max: float = 1e9, radius: float = 1.0, ntrel: float = 1e-3, max_time: float | None = None,
               t_shift: float | None = 30.0, refine: bool | str = "auto", precondition: bool | str = "auto",
               float32: bool = False, verbose: bool = False) -> Solution:
    """Solve Problem 1 by SM-II (Algorithm 1 of the paper) with a certified stop.

    Parameters
    ----------
    problem : FitnessProblem
        ``B`` (k, d), ``L`` (m, k), targets ``c`` (m,).
    callback : callable, optional
        ``callback(SMIIState)`` after every iteration; ``StopIteration`` stops with
        status ``"user_stopped"``.
    Q : (q, k) array, optional
        Initial strategy on the basis coordinates (§6.3); full column rank. Default:
        the cheapest of ``Q = I`` (the paper's), ``Sigma_0 = B B^T``, the Gaussian
        mechanism on the target-scaled workload and the ``Sigma`` of uniform dual
        multipliers (see :func:`_initial_sigma`).
    t1, t2 : float
        Initial soft-max sharpness of the profile and variance terms (paper: 1).
    mu : float
        Factor by which ``t1, t2`` grow between sub-problems (paper: 2, 5 or 10).
    maxcg, tol2 : int, float
        CG iterations per Newton step and CG residual tolerance (paper: 5, 1e-10).
    maxcg_cap : int, optional
        When full Newton steps gain less than half of what the previous one gained (the
        truncated direction limits progress), the CG budget doubles, up to
        ``maxcg_cap``; ``maxcg_cap = maxcg`` keeps the paper's fixed budget. Default:
        ``maxcg`` when CG is preconditioned (with shifted soft maxes the sub-problems stay
        at moderate ``t``, and more products per step cost more than they save: at
        d = 512 a cap of 40 took 1.1-1.3x longer), else 40.
    nttol, ntrel : float
        A sub-problem ends when ``|<s, grad F>| < max(nttol, ntrel / t1)`` (NTTOL; the
        relative part stops early sub-problems once they are solved well past the
        accuracy the soft max itself has at that ``t1``), or after a full step that
        decreased ``F`` by less than 100 times that bound.
    sigma_ls, beta : float
        Armijo fraction and backtracking factor of the line search (paper: 0.01, 0.5).
    maxiter : int
        Newton iterations in all (MAXITER). ``max_time`` (s) caps the wall-clock time.
    tol : float
        Certified relative gap at which to stop (replaces the paper's ``(d+m)/t1 < TOL``).
    t_max : float
        Largest ``t1``: past it the best certified iterate is returned as
        ``"optimal_inaccurate"``.
    t_shift : float or None
        Sharpness at which ``t1`` stops growing by default (None or inf: never, the
        paper's schedule). From there on each sub-problem's soft maxes are weighted by
        the previous one's, ``smax = (1/t) log sum_i lam_i exp(t x_i)``, with ``log lam``
        moved 0.7 of the way to the log of the last weights but by at most 2 below the
        largest (a damped exponential method of multipliers): its fixed points are
        Problem 3's KKT points at any ``t``, so the soft-max bias no longer needs
        ``t ~ log(d) / tol``. ``t1, t2`` grow again (by at
        most 3) only when two shifted sub-problems in a row do not improve on the best
        certified gap, or one takes no step. Shifted sub-problems end at a hundredth of
        the Newton-decrement threshold below.
    radius : float
        Truncated CG stops on the ball ``||E||_F <= radius sqrt(k)`` in whitened
        coordinates (a relative change of ``Sigma`` of about ``radius`` per direction).
    refine : bool or "auto"
        After a certified ("optimal") solve, polish ``Sigma`` to the unique ≺R-minimal
        optimum (Theorem 5) by :func:`refine_smii`; "auto" does so when
        ``k <= REFINE_AUTO_MAX_K``. The soft max alone does not single it out when
        Problem 1 has many optima: at the ``t`` a small gap needs, the weights of the
        columns that are not tight underflow.
    precondition : bool or "auto"
        Run CG in the eigenbasis of the profile term's ``M`` with a diagonal-plus-rank-two
        approximate inverse of the Hessian (:meth:`_Whitened.preconditioner`); False
        gives the paper's plain CG; "auto" preconditions when ``k > PRECONDITION_MIN_K``
        (below, its eigendecomposition per Newton step costs more than it saves).
    float32 : bool
        Evaluate the Hessian products inside CG in single precision (about twice as fast
        at large ``k``); gradients, line search and certificate stay in float64.
    verbose : bool
        Print an iteration log.

    Returns
    -------
    Solution
        ``sigma`` (k, k) meeting every target (max ratio 1), ``privacy_cost``,
        ``lower_bound``, ``gap``, ``lam`` (d,) and ``mu`` (m,) (soft-max weights, ``mu``
        divided by ``c``), ``nit``, ``n_hvp``, ``time``, ``history``; ``info`` holds
        ``n_cg``, the final ``t1`` and ``t2``, ``restarts`` (returns to the best
        iterate after a shifted sub-problem went astray) and, when refined,
        ``refine_levels`` (list of ``{"value", "columns"}``, decreasing),
        ``refine_newton``, ``refine_time`` and, if the polish was rejected,
        ``refine_failed``.

    Raises
    ------
    SolverError
        When the line search cannot decrease ``F`` along a descent direction.
    """
    if precondition == "auto" and isinstance(precondition, str):
        precondition = isinstance(problem, FitnessProblem) and problem.k > PRECONDITION_MIN_K
    for name, val in (("precondition", precondition), ("float32", float32)):
        if not isinstance(val, (bool, np.bool_)):
            raise ValueError(f"`{name}` must be True or False" + (" or 'auto'" if name == "precondition" else "")
                             + f", got {val!r}")
    if maxcg_cap is None:
        maxcg_cap = maxcg if precondition else 40
    direction = functools.partial(_newton_direction, precondition=bool(precondition), float32=bool(float32))
    return _run(problem, method="smii", direction=direction, callback=callback, Q=Q, t1=t1, t2=t2,
                mu=mu, maxcg=maxcg, tol2=tol2, nttol=nttol, sigma_ls=sigma_ls, beta=beta, maxiter=maxiter,
                tol=tol, t_max=t_max, max_time=max_time, verbose=verbose, radius=radius, ntrel=ntrel,
                maxcg_cap=maxcg_cap, t_shift=t_shift, refine=refine)


def solve_gd(problem: FitnessProblem, *, callback=None, Q=None, t1: float = 1.0, t2: float = 1.0,
             mu: float = 10.0, nttol: float = 1e-10, ntrel: float = 1e-3, sigma_ls: float = 0.01, beta: float = 0.5,
             maxiter: int = 100_000, tol: float = 1e-4, t_max: float = 1e9, max_time: float | None = 60.0,
             verbose: bool = False) -> Solution:
    """Plain gradient descent on Problem 4 (Table 3's baseline): SM-II with ``s = -grad F``.

    Same objective, schedule of ``t1, t2``, line search, certificate and outputs as
    :func:`solve_smii` (see there); ``max_time`` (s, default 60) and ``maxiter`` cap
    the run, which then ends with status ``"max_iter"``.
    """
    return _run(problem, method="gd", direction=_gradient_direction, callback=callback, Q=Q, t1=t1, t2=t2,
                mu=mu, maxcg=1, tol2=1e-10, nttol=nttol, sigma_ls=sigma_ls, beta=beta, maxiter=maxiter,
                tol=tol, t_max=t_max, max_time=max_time, verbose=verbose, radius=1.0, ntrel=ntrel,
                maxcg_cap=1, t_shift=math.inf)
