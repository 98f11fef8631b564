"""SM-II's objective model: Problem 4's soft maxes, the iterate, the whitened operator, the start.

Solver layer (SM-II), bottom of the package: imports numpy, scipy, ``model`` (``certificate``,
``problem``, ``status``) and :mod:`ffu_cvx.solvers.smii.backend` only.

- ``smax_t(x) = (1/t) log sum_i exp(t x_i + s_i)`` (:func:`softmax`), computed shifted;
  ``s`` are log multipliers (``None``: the paper's plain soft max).
- :class:`Point`: an iterate ``Sigma`` with its Cholesky factor ``R``, ``Y = R^{-1} B``,
  the profile ``g``, the variance ratios ``h``, ``F`` and the soft-max weights.
- :class:`Whitened`: gradient and Hessian of ``F`` in whitened coordinates
  ``E = R^{-1} D R^{-T}`` (``Sigma = R R^T``). CG runs there, i.e. it is preconditioned by
  ``Sigma (x) Sigma``, the Hessian of ``-log det`` inverted: the exact Newton direction
  is unchanged, the truncated one is far better, and the Hessian-vector product needs
  no triangular solve: with ``Y = R^{-1} B`` (k, d) and ``V = L R`` (m, k) it is five
  matrix products. Its :meth:`Whitened.hvp` is pure (no counters, no state change).
- Preconditioned CG (:meth:`Whitened.preconditioner`): the whitened frame is turned by
  the eigenvectors of ``M`` (one ``eigh`` per Newton step), where the Lyapunov part
  ``E M + M E`` of the Hessian is diagonal; the soft-max parts add their diagonals
  there, and their centring is an exact rank-two term (Woodbury), so applying the
  preconditioner is elementwise. It halves to quarters the Hessian products on random
  ranges; on prefix, whose columns are all tight, it gains little.
- ``float32``: the Hessian products inside CG and the preconditioner in single precision
  (the direction only; gradient, ``delta``, ``e``, line search and certificate stay in
  float64, and so does ``D = RQ E RQ^T``). In
  the rotated frame a product is one ``trmm`` (in ``HVP_CHUNK`` column
  blocks) and one symmetric ``syrk`` over ``W = [Y, V^T]``, the Lyapunov part being
  elementwise there; the frame's symmetric products use ``syrk`` and ``R Q`` ``trmm``
  (:mod:`ffu_cvx.solvers.smii.backend`); the preconditioner's ``K`` is one float32 ``syrk``. The
  frame's ``eigh`` stays float64: a float32 frame saves little per step and costs Newton
  steps.
- :func:`initial_sigma`: the default start is the cheapest of ``I``, ``B B^T``, the
  Gaussian mechanism on the target-scaled workload and the ``Sigma`` of uniform dual
  multipliers (often orders of magnitude cheaper than ``I``); :func:`ascent_start` (SM-II's
  default from k = 64) the dual ``Sigma`` of a few over-relaxed dual-ascent steps, usually
  cheaper still, whose multipliers give a first bound.
- Array backends: the point, the whitened operator and :func:`normalise` take their
  array namespace and linear algebra from their arrays (:func:`ffu_cvx.solvers.smii.backend.of`),
  so they run unchanged on torch or CuPy arrays, and so does the start (:func:`initial_sigma`,
  on the backend of the ``B`` it is given); ``objective`` and ``hessp`` are numpy.
- :func:`normalise`: every sub-problem starts from the normalised problem (``Sigma``
  and the targets rescaled so that ``max g = max h = 1``), so ``t`` has the same meaning
  on every workload.
"""

from __future__ import annotations

import math

import numpy as np

from ...model import certificate
from ...model.problem import FitnessProblem
from ...model.status import SolverError
from .backend import LARGE_K, NUMPY, Placed, of

__all__ = ["objective", "hessp"]

#: Soft-max weights below this fraction of the largest are dropped from the Hessian and
#: gradient products: their contribution is below double-precision rounding.
PRUNE = 1e-17
#: The preconditioner's rank-two centring correction is shrunk so that at most this
#: fraction of its Woodbury denominator is used (keeps the preconditioner positive definite).
WOODBURY_SHRINK = 0.9
#: Columns of ``W = [Y, V^T]`` per ``E W`` product in the float32 Hessian product: the
#: temporary is (k, HVP_CHUNK) instead of (k, d + m), and at this width sgemm (or numpy's
#: trmm) still runs at the full product's speed.
HVP_CHUNK = 1024
#: On the float32 path CG itself (its vectors, inner products and preconditioner) runs in
#: float32 from this basis size on; below, its vectors stay float64 and each product and
#: preconditioner application is cast (at smaller sizes float32 CG saves no time and can
#: cost Newton steps).
CG_SINGLE_MIN_K = 2000
#: The start is scaled to this fraction of the largest step that keeps every target (§6.3).
START_MARGIN = 0.99
#: The dual-ascent start (:func:`ascent_start`, ``solve_smii(start="ascent")``): this many steps of
#: :func:`ffu_cvx.model.certificate.ascend`, over-relaxed by ``ASCENT_OMEGA``, ``ASCENT_MIX`` of the uniform
#: multipliers mixed back each step: a few steps give a good start; without over-relaxation
#: (``omega = 1``) a bound needs about twice the steps.
ASCENT_STEPS = 5
ASCENT_OMEGA = 2.0
ASCENT_MIX = 1e-2


def logits(x: np.ndarray, t: float, shift=None) -> tuple[np.ndarray, float]:
    """``(y - top, top)`` for ``y = t x + shift`` (n,) and ``top = max y`` (``shift = None``: 0)."""
    y = t * x if shift is None else t * x + shift
    top = float(of(y).xp.max(y))
    return y - top, top


def softmax(x: np.ndarray, t: float, shift=None) -> tuple[float, np.ndarray]:
    """Shifted log-sum-exp: ``(smax_t(x), weights)`` with weights summing to 1.

    ``shift`` (n,): log multipliers, ``smax = (1/t) log sum_i exp(t x_i + shift_i)``.
    """
    y, top = logits(x, t, shift)
    xp = of(y).xp
    z = xp.exp(y)
    s = float(xp.sum(z))
    return (top + math.log(s)) / t, z / s


def symmetrise(X: np.ndarray) -> np.ndarray:
    return 0.5 * (X + X.T)


def inner(X: np.ndarray, Y: np.ndarray) -> float:
    """Frobenius inner product ``<X, Y>``."""
    return of(X).inner(X, Y)


class Point:
    """An iterate with everything one Newton step needs, computed once.

    sigma (k, k), R its lower Cholesky factor, Y = R^{-1} B (k, d), g (d,), h (m,) on the
    internal targets, F and the soft-max weights w (d,), u (m,); s1, s2 the log
    multipliers of the two soft maxes (``None``: unshifted).
    """

    __slots__ = ("sigma", "R", "Y", "g", "h", "F", "w", "u", "t1", "t2", "s1", "s2")

    def __init__(self, sigma, R, Y, g, h, t1, t2, s1=None, s2=None):
        self.sigma, self.R, self.Y, self.g, self.h, self.t1, self.t2 = sigma, R, Y, g, h, t1, t2
        self.s1, self.s2 = s1, s2
        f1, self.w = softmax(g, t1, s1)
        f2, self.u = softmax(h, t2, s2)
        self.F = f1 + f2

    def cost(self, kappa: float) -> float:
        """The normalised privacy cost ``max g * max h`` on the true targets (``kappa``: see :func:`normalise`)."""
        xp = of(self.g).xp
        return float(xp.max(self.g) * xp.max(self.h) * kappa)

    def to_numpy(self) -> "Point":
        """This point with its arrays on the host (itself when they are numpy arrays already)."""
        bk = of(self.sigma)
        if bk is NUMPY:
            return self
        host = Point.__new__(Point)
        for name in self.__slots__:
            value = getattr(self, name)
            setattr(host, name, bk.to_numpy(value) if hasattr(value, "shape") else value)
        return host

    def ratio(self, kappa: float) -> float:
        """The worst variance ratio ``max_j var_j / c_j`` on the true targets; ``sigma / ratio`` meets every one."""
        return float(of(self.h).xp.max(self.h) * kappa)


def variance_ratios(L: np.ndarray, sigma: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``diag(L Sigma L^T) / c`` (m,), O(m k^2)."""
    return of(L).variances(L, sigma) / c


def factor(sigma: np.ndarray, B: np.ndarray):
    """``(R, Y, g)``: Cholesky factor of ``sigma``, ``Y = R^{-1} B`` and the profile
    ``g_i = |y_i|^2`` (O(k^2 d)); ``None`` when ``sigma`` is not positive definite."""
    bk = of(sigma)
    R = bk.cholesky(sigma)
    if R is None:
        return None
    Y = bk.solve_triangular(R, B)
    return R, Y, bk.einsum("ij,ij->j", Y, Y)


def evaluate(B, L, c, sigma, t1, t2, h=None, s1=None, s2=None) -> Point | None:
    """The point at ``sigma``, or ``None`` when ``sigma`` is not positive definite.

    ``h`` may be passed when already known (it is linear in ``sigma``).
    """
    fac = factor(sigma, B)
    if fac is None:
        return None
    if h is None:
        h = variance_ratios(L, sigma, c)
    return Point(sigma, *fac, h, t1, t2, s1, s2)


def whiten(R: np.ndarray, D: np.ndarray) -> np.ndarray:
    """``E = R^{-1} D R^{-T}`` (k, k), symmetrised: a direction of ``Sigma`` in whitened coordinates."""
    bk = of(R)
    return symmetrise(bk.solve_triangular(R, bk.solve_triangular(R, D).T))


def unwhiten_dual(R: np.ndarray, G: np.ndarray) -> np.ndarray:
    """``R^{-T} G R^{-1}`` (k, k), symmetrised: a whitened gradient back in ``Sigma``'s coordinates."""
    bk = of(R)
    return symmetrise(bk.solve_triangular(R, bk.solve_triangular(R, G, trans=True).T, trans=True))


class Whitened:
    """Gradient and Hessian of ``F`` at a point, in whitened coordinates ``E = R^{-1} D R^{-T}``.

    With ``y_i`` the columns of ``Y = R^{-1} B`` and ``v'_j`` the rows of ``V = L R``:
    the gradient is ``-Y diag(w) Y^T + V^T diag(u/c) V`` and, for a symmetric direction E,
    with ``a_i = -y_i^T E y_i`` and ``e_j = v'_j E v'_j^T / c_j`` (the directional
    derivatives of ``g_i`` and ``h_j``),

        H[E] = E M + M E - t1 Y diag(w (a - w.a)) Y^T + t2 V^T diag(u (e - u.e) / c) V,

    ``M = Y diag(w) Y^T``: eqs. (9)-(14) of the paper under the congruence ``R``. Columns
    and rows whose weight is below ``PRUNE`` times the largest are dropped.

    ``rotate=True`` turns the whitened frame by the eigenvectors ``Q`` (k, k) of ``M``:
    ``Y``, ``V``, ``M``, ``grad`` and every direction are then expressed in the
    orthonormal basis ``Q`` (``E -> Q^T E Q``; products and norms are unchanged), where
    :meth:`preconditioner` is elementwise. ``V`` and ``grad`` are formed in that frame
    directly (``V = L R Q``), never formed and then turned. ``RQ`` (k, k) is ``R Q``
    (``R`` without rotation): a direction ``E`` is ``D = RQ E RQ^T`` in ``Sigma``'s
    coordinates. ``float32=True`` evaluates :meth:`hvp` in single precision (CG
    directions only; in the rotated frame from one array ``W = [Y, V^T]``, see
    :meth:`_hvp_rotated32`), the preconditioner too, and from ``k = cg_single_min_k``
    (default ``CG_SINGLE_MIN_K``) CG itself on ``cg_grad``, the gradient cast once; it forms
    ``grad`` and ``RQ`` by ``syrk`` and ``trmm`` (still float64: gradient, ``delta``, ``e``
    and ``D`` are exact). Nothing changes after construction.
    """

    def __init__(self, p: Point, L: np.ndarray, c: np.ndarray, rotate: bool = False, float32: bool = False,
                 cg_single_min_k: int = CG_SINGLE_MIN_K):
        self.bk = bk = of(p.Y)
        self.t1, self.t2 = p.t1, p.t2
        self.float32 = bool(float32)
        Ya, self.wa = _active(bk, p.Y, p.w, axis=1)
        self.RQ, self.Q = p.R, None
        if rotate:
            lam, self.Q = bk.eigh(bk.gram(Ya, self.wa) if self.float32 else (Ya * self.wa) @ Ya.T)
            if not self.float32:  # the float32 path turns Y inside W (bk.rotated_single)
                Ya = self.Q.T @ Ya
            self.M = bk.diag(lam)
            self.lam = bk.maximum(lam, 0.0)
            self.RQ = bk.triangular_times(p.R, self.Q) if self.float32 else p.R @ self.Q
        else:
            self.M = (Ya * self.wa) @ Ya.T
        self.V = L @ self.RQ  # O(m k^2); O(nnz k) for a CSR L (backend.Backend.queries)
        Va, self.ua = _active(bk, self.V, p.u, axis=0)
        self.ca = c if Va is self.V else _active(bk, c, p.u, axis=0)[0]
        if self.float32:
            self.grad = bk.gram(Va, self.ua / self.ca, trans=True) - self.M
        else:
            self.grad = symmetrise((Va.T * (self.ua / self.ca)) @ Va) - self.M
        self.cg_single = self.float32 and self.grad.shape[0] >= cg_single_min_k
        self.cg_grad = bk.single(self.grad) if self.cg_single else self.grad
        if self.float32 and self.Q is not None:
            # One float32 array for both soft maxes (see _hvp_rotated32), nothing else kept.
            # Every weight above PRUNE stays in it: pruning harder saves little per product and
            # can multiply the Newton steps.
            self.W = bk.rotated_single(self.Q, Ya, Va)
            self.weights = tuple(bk.single(x) for x in (self.wa, self.ua, self.ca))
            self.lamsum = bk.single(self.lam[:, None] + self.lam[None, :])
        else:
            arrays = (Ya, self.wa, Va, self.ua, self.ca)
            self._hvp_arrays = tuple(bk.single(x) for x in arrays) if float32 else arrays

    def _soft_max_diagonal(self):
        """``K = t1 Y^2 diag(w) Y^2T + t2 V^2T diag(u/c^2) V^2`` (squares elementwise), in the products' precision."""
        bk = self.bk
        xp = bk.xp
        if self.float32 and self.Q is not None:
            wa, ua, ca = self.weights
            return bk.gram(xp.square(self.W), xp.concat([self.t1 * wa, self.t2 * ua / ca ** 2]))
        Ya, wa, Va, ua, ca = self._hvp_arrays
        Z2 = xp.square(Ya)
        K = (Z2 * (self.t1 * wa)) @ Z2.T
        Z2 = xp.square(Va)
        K += (Z2.T * (self.t2 * ua / ca ** 2)) @ Z2
        return K

    def preconditioner(self):
        """An approximate inverse of ``H`` in the rotated frame (needs ``rotate=True``).

        The Lyapunov part ``E M + M E`` is diagonal there (``lam_a + lam_b``); the soft-max
        parts contribute ``2 K_ab`` off the diagonal and ``K_aa`` on it
        (:meth:`_soft_max_diagonal`), less their centring ``-t1 <E, M> M - t2 <E, N> N``
        (``N = grad + M``), a rank-two term inverted by Woodbury (shrunk by
        ``WOODBURY_SHRINK`` where it would lose definiteness). Applying it costs O(k^2).
        """
        bk, lam = self.bk, self.lam
        xp = bk.xp
        K = self._soft_max_diagonal()
        diag = lam[:, None] + lam[None, :] + 2.0 * K
        i = bk.arange(diag.shape[0], diag)
        diag[i, i] -= K[i, i]
        del K
        # float32: the preconditioner's arrays in single precision too (half the memory).
        cast = bk.single if self.float32 else (lambda x: x)
        dinv = cast(1.0 / bk.maximum(diag, 1e-12 * float(xp.max(diag))))
        del diag
        U = (self.M, self.grad + self.M)
        DU = tuple(cast(X) * dinv for X in U)
        # The 2 x 2 Woodbury core on the host.
        A = np.array([[bk.inner(X, Y) for Y in DU] for X in U])
        st = np.sqrt([self.t1, self.t2])
        top = float(np.linalg.eigvalsh(A * np.outer(st, st))[-1])
        gamma = min(1.0, WOODBURY_SHRINK / top) if top > 0 else 1.0
        Sinv = np.linalg.inv(np.diag(1.0 / (gamma * st ** 2)) - A)
        del U

        def apply(G):
            # G cast once (a no-op when CG runs in float32), so that no product mixes precisions
            # (mixed-precision inner products are far slower).
            G = cast(G)
            coef = Sinv @ np.array([bk.inner(X, G) for X in DU])
            out = G * dinv
            out += float(coef[0]) * DU[0]
            out += float(coef[1]) * DU[1]
            return self._in_cg_precision(out)

        return apply

    def hvp(self, E: np.ndarray) -> np.ndarray:
        """``H[E]`` (k, k): four matrix products, O(k^2 (2 d_act + 2 m_act)).

        With ``X = E Y`` and ``Z = X diag(w) - Y diag(t1 w (a - w.a)) / 2`` the profile
        part ``E M + M E - t1 Y diag(w (a - w.a)) Y^T`` is ``Z Y^T + (Z Y^T)^T``.
        In single precision in the rotated frame: :meth:`_hvp_rotated32`. The result is in
        CG's precision (``cg_grad``'s: float32 with ``float32=True`` from ``cg_single_min_k``).
        """
        if self.float32 and self.Q is not None:
            return self._hvp_rotated32(E)
        bk = self.bk
        Ya, wa, Va, ua, ca = self._hvp_arrays
        if self.float32:
            E = bk.single(E)
        X = E @ Ya
        a = -bk.einsum("ij,ij->j", Ya, X)
        Z = X * wa - Ya * (0.5 * self.t1 * wa * (a - wa @ a))
        out = Z @ Ya.T
        out = out + out.T
        e = bk.variances(Va, E) / ca
        out += self.t2 * ((Va.T * (ua * (e - ua @ e) / ca)) @ Va)
        return self._in_cg_precision(out)

    def _hvp_rotated32(self, E: np.ndarray) -> np.ndarray:
        """``H[E]`` in single precision where ``M`` is diagonal, from ``W = [Y, V^T]`` (k, d_act + m_act).

        ``diag(W^T E W)`` gives ``a`` and ``e`` at once (``quadratic_forms``: on numpy a
        ``trmm`` with ``E``'s lower triangle); the Lyapunov part is ``E_ab (lam_a +
        lam_b)`` and both soft-max parts are one ``W diag(.) W^T`` (``gram``: two ``syrk``
        by sign), so a product costs one ``trmm`` and one ``syrk`` over ``d_act + m_act``
        columns (each half a ``gemm``'s flops), against four ``gemm`` of half that.
        """
        bk = self.bk
        xp = bk.xp
        wa, ua, ca = self.weights
        E = bk.single(E)
        q = bk.quadratic_forms(E, self.W, HVP_CHUNK)
        n = wa.shape[0]
        a, e = -q[:n], q[n:] / ca
        weights = xp.concat([(-self.t1) * wa * (a - wa @ a), self.t2 * ua * (e - ua @ e) / ca])
        out = bk.gram(self.W, weights)
        out += E * self.lamsum
        return self._in_cg_precision(out)

    def _in_cg_precision(self, X):
        """``X`` in CG's precision (``cg_grad``'s dtype)."""
        return X if self.cg_single else self.bk.double(X)


def _active(bk, X, weights, axis: int):
    """``(X', weights')``: the columns (``axis=1``) or rows of ``X`` whose soft-max weight is
    above ``PRUNE`` times the largest, and their weights (``X`` itself when all are)."""
    xp = bk.xp
    keep = weights > PRUNE * xp.max(weights)
    if bool(xp.all(keep)):
        return X, weights
    idx = xp.nonzero(keep)[0]  # take: far faster than a boolean column mask
    return xp.take(X, idx, axis=axis), xp.take(weights, idx, axis=0)


def _start_candidates(problem: FitnessProblem, B, L) -> list:
    """``I``, ``B B^T``, ``(L^T diag(1/c) L)^{-1}`` (when positive definite) and the
    ``Sigma`` of uniform dual multipliers (when it exists), on the backend of ``B`` (k, d)
    and the dense ``L`` (m, k)."""
    bk = of(B)
    candidates = [bk.asarray(np.eye(problem.k)), symmetrise(B @ B.T)]
    inverse = bk.spd_inverse((L.T / bk.asarray(problem.c)) @ L)
    if inverse is not None:
        candidates.append(symmetrise(inverse))
    uniform = certificate.dual_sigma(problem, np.ones(problem.d), 1.0 / problem.c,
                                     on=None if bk is NUMPY else Placed(bk, B, L))
    if uniform is not None:
        candidates.append(uniform)
    return candidates


def _user_start(Q, k: int) -> np.ndarray:
    """``Q^+ Q^{+T} = (Q^T Q)^{-1}`` (k, k) for a user's strategy ``Q`` (q, k) of full column rank."""
    Q = np.asarray(Q, dtype=float)
    if Q.ndim != 2 or Q.shape[1] != k:
        raise ValueError(f"`Q` must be a (q, {k}) matrix acting on the basis coordinates B x, got shape {Q.shape}")
    if not np.all(np.isfinite(Q)):
        raise ValueError("`Q` contains NaN or inf")
    inverse = NUMPY.spd_inverse(Q.T @ Q)
    if inverse is None:
        raise ValueError(f"`Q` must have full column rank {k} so that Q^+ Q^+T is positive definite; "
                         "add rows (for example the identity) to Q")
    return symmetrise(inverse)


def initial_sigma(problem: FitnessProblem, Q, B=None, L=None, queries=None, large_k: int = LARGE_K):
    """§6.3: ``Sigma_0 = s^2 Q^+ Q^{+T}`` with ``s^2 = 0.99 min_j c_j / (L Q^+ Q^{+T} L^T)_jj``.

    ``B`` (k, d) and ``L`` (m, k): the problem's, dense, on the array backend where the start
    is returned and, from ``k = large_k``, computed (default ``problem.B``,
    ``problem.L``: numpy; ``large_k`` default :data:`ffu_cvx.solvers.smii.backend.LARGE_K`, where the
    start on the device pays); ``queries``:
    ``L`` as the solver holds it there for the variances (numpy: dense or CSR,
    :meth:`ffu_cvx.solvers.smii.backend.Backend.queries`; default ``L``).

    ``Q = None``: of ``I`` (the paper's default), ``B B^T`` (the profile is then the
    leverage scores), ``(L^T diag(1/c) L)^{-1}`` (the Gaussian mechanism on
    ``diag(c)^{-1/2} W``) and the ``Sigma`` of uniform dual multipliers
    (:func:`ffu_cvx.model.certificate.dual_sigma`), the one of least privacy cost once scaled
    to meet every target.
    """
    B = problem.B if B is None else B
    L = problem.L if L is None else L
    queries = L if queries is None else queries
    bk = of(B)
    if bk is not NUMPY and problem.k < large_k:
        return bk.asarray(initial_sigma(problem, Q))
    xp, c = bk.xp, bk.asarray(problem.c)
    if Q is None:
        candidates = _start_candidates(problem, B, L)
        costs = []
        for S in candidates:
            fac = factor(S, B)
            costs.append(math.inf if fac is None else float(xp.max(fac[2])) *
                         float(xp.max(variance_ratios(queries, S, c))))
        S0 = candidates[int(np.argmin(costs))]
    else:
        S0 = bk.asarray(_user_start(Q, problem.k))
    return _within_targets(S0, queries, c)


def _within_targets(S0, queries, c):
    """``S0`` scaled to ``START_MARGIN`` of the largest multiple that meets every target ``c``."""
    bk = of(S0)
    return START_MARGIN * float(bk.xp.min(c / bk.variances(queries, S0))) * S0


def ascent_start(problem: FitnessProblem, bk=NUMPY):
    """``(Sigma_0, lam, u)``: the dual ``Sigma`` of ``ASCENT_STEPS`` over-relaxed dual-ascent steps
    (:func:`ffu_cvx.model.certificate.ascend`, on the host), scaled as :func:`initial_sigma` scales its
    start and moved to the backend ``bk``, with its multipliers ``lam`` (d,) (summing to 1) and
    ``u = mu c`` (m,) per variance ratio (what :meth:`~ffu_cvx.solvers.smii.bounds.BoundKeeper.offer`
    takes); None where ``P`` is numerically singular (``Q``'s small eigenvalues are floored:
    :func:`ffu_cvx.model.certificate.dual_sigma`; without the floor, targets over decades at large
    ``d`` lose this start to the far slower classic one)."""
    lam, mu = certificate.ascend(problem, ASCENT_STEPS, ASCENT_OMEGA, ASCENT_MIX)
    sigma = certificate.dual_sigma(problem, lam, mu, floor=True)
    if sigma is None:
        return None
    return bk.asarray(_within_targets(sigma, problem.L, problem.c)), lam, mu * problem.c


def normalise(sigma, B, L, c_int, g=None):
    """Rescale ``sigma`` and the internal targets so that ``max g = max h = 1``.

    ``g`` (d,): the profile of ``sigma`` when already known (a :class:`Point`'s), which
    saves a Cholesky factorisation and a triangular solve.

    Returns ``(sigma', c_int', a)``; the normalised cost ``max g * max h`` is unchanged.
    The driver keeps ``kappa``, the product of every ``a`` so far: the internal targets
    are ``kappa`` times the true ones, so ``max g * max h * kappa`` is the true normalised
    cost (:meth:`Point.cost`).
    """
    if g is None:
        fac = factor(sigma, B)
        if fac is None:
            raise SolverError("SM-II: an iterate lost positive definiteness; try a smaller `mu` or `radius`")
        g = fac[2]
    xp = of(sigma).xp
    gmax = float(xp.max(g))
    hmax = float(xp.max(variance_ratios(L, sigma, c_int)))
    a = gmax * hmax
    return sigma * gmax, c_int * a, a


def renormalise(p: Point, L, c_int, t1, t2, s1=None, s2=None):
    """:func:`normalise` of the point ``p``, with new soft maxes, without a factorisation.

    ``Sigma' = gmax Sigma`` has ``R' = sqrt(gmax) R``, ``Y' = Y / sqrt(gmax)`` and
    ``g' = g / gmax``; the variance ratios are recomputed once from ``Sigma`` (not carried
    over from the line search's linear updates) and divided by their maximum. A
    factorisation and a triangular solve fewer per sub-problem.
    Returns ``(point, c_int', a)``.
    """
    xp = of(p.g).xp
    h = variance_ratios(L, p.sigma, c_int)
    gmax, hmax = float(xp.max(p.g)), float(xp.max(h))
    r = math.sqrt(gmax)
    point = Point(p.sigma * gmax, p.R * r, p.Y / r, p.g / gmax, h / hmax, t1, t2, s1, s2)
    return point, c_int * (gmax * hmax), gmax * hmax


def _point_on(problem: FitnessProblem, sigma, t1, t2) -> Point:
    p = evaluate(problem.B, problem.L, problem.c, np.asarray(sigma, dtype=float), float(t1), float(t2))
    if p is None:
        raise ValueError("`sigma` is not positive definite")
    return p


def objective(problem: FitnessProblem, sigma: np.ndarray, t1: float = 1.0, t2: float = 1.0):
    """Problem 4's ``F(Sigma)`` and its gradient (k, k) at ``sigma`` (k, k), on ``problem``'s targets."""
    p = _point_on(problem, sigma, t1, t2)
    return p.F, unwhiten_dual(p.R, Whitened(p, problem.L, problem.c).grad)


def hessp(problem: FitnessProblem, sigma: np.ndarray, direction: np.ndarray, t1: float = 1.0, t2: float = 1.0):
    """Hessian of Problem 4's ``F`` at ``sigma`` (k, k) times a symmetric ``direction`` (k, k).

    Matrix-free (the Kronecker identity of §6.2.1, evaluated in whitened coordinates).
    """
    p = _point_on(problem, sigma, t1, t2)
    E = whiten(p.R, np.asarray(direction, dtype=float))
    return unwhiten_dual(p.R, Whitened(p, problem.L, problem.c).hvp(E))
