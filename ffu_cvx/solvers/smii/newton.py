"""SM-II's step solver: truncated Newton-CG directions and one backtracking Cholesky line search.

Solver layer (SM-II): imports numpy, :mod:`ffu_cvx.solvers.smii.backend` and
:mod:`ffu_cvx.solvers.smii.model` only. Like the model, it takes its array namespace from the
operator's arrays, so the same code runs on every array backend. Shared by
the main loop (:mod:`ffu_cvx.solvers.smii.driver`, Problem 4) and the ≺R polish levels
(:mod:`ffu_cvx.solvers.smii.polish`, a barrier objective): both hand it an operator with
``grad`` (k, k), ``cg_grad`` (the same in the precision CG runs in), ``RQ`` (k, k)
and a pure ``hvp(E)`` returning that precision, and a function that evaluates a trial
point.

- :func:`conjugate_gradient`: Algorithm 2 of the paper, with Steihaug's guard: CG stops
  on the ball ``||E||_F <= radius sqrt(k)`` or at non-positive curvature (at large
  ``t`` the Hessian is nearly singular along directions no tight constraint sees);
  without a ball (option ``radius=None``) it stops at non-positive curvature only.
  Each iteration is one Hessian-vector product, so its count is the product count.
  Past ``maxcg`` it may go on while each product still lowers the quadratic model by
  enough to pay for itself against a whole Newton step's cost (:func:`extension_pays`):
  on random ranges d = 2048 one shifted sub-problem's full steps each got 42% of the
  Newton decrease from five products (68% from ten, 94% from twenty) and took 16 steps.
- :func:`newton_direction`: the whitened CG solution turned into ``D`` in ``Sigma``'s
  coordinates; :func:`smii_direction` and :func:`gradient_direction` are the main
  loop's two directions (SM-II and plain gradient descent, Table 3).
- :func:`line_search`: Algorithm 3, backtracking from step 1 with the Cholesky test of
  positive definiteness (the trial evaluation returns ``None`` outside the domain).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .backend import of
from .model import Point, Whitened, inner, symmetrise, unwhiten_dual, variance_ratios

#: Backtracking halvings before the line search gives up (step ``beta**60``).
MAX_BACKTRACK = 60
#: A Newton step's work besides its CG iterations (the frame's ``eigh``, the
#: preconditioner, ``V = L R Q``, mapping ``D`` back, the line search), in Hessian
#: products: in a profile at k = 2048 a step of five products takes 4.8 s, the products 1.85 s of it
#: (``python -m experiments.bench_smii --profile 2048``).
STEP_OVERHEAD = 8.0
#: CG goes on past ``maxcg`` (up to ``extend_to``) while its last iteration lowered the
#: quadratic model by at least this multiple of the step's average per product, the
#: overhead counted (:func:`extension_pays`). Newton steps at tol 1e-4, d = 512
#: (``bench_workloads`` prefix-decades, tree and ranges seeds 0 / 1, prefix seed 0; one
#: BLAS thread), without -> 1.5 / 2 / 3: 568 -> 460 / 431 / 491; at tol 1e-3,
#: ``bench_smii`` ranges d = 1,024 seeds 0-2 and prefix 116 -> 112 at 2 (114 at 3).
EXTEND_PAYOFF = 2.0


class Step(NamedTuple):
    """A search direction of the main loop: ``D`` (k, k) in ``Sigma``'s coordinates,
    ``delta = <D, grad F>``, ``e`` (m,) the directional derivatives of ``h`` and ``n_cg``
    the CG iterations (= Hessian products) it cost."""

    D: np.ndarray
    delta: float
    e: np.ndarray
    n_cg: int


def _to_boundary(s: np.ndarray, p: np.ndarray, radius: float) -> np.ndarray:
    """``s + tau p`` with ``tau >= 0`` on the sphere ``||.||_F = radius`` (``||s|| <= radius``); ``s``
    itself without a ball (``radius`` inf: the paper's CG, stopped at non-positive curvature)."""
    if math.isinf(radius):
        return s
    sp, pp, ss = inner(s, p), inner(p, p), inner(s, s)
    if pp == 0.0:  # zero gradient: already stationary, no direction to follow
        return s
    tau = (-sp + math.sqrt(max(sp * sp + pp * (radius * radius - ss), 0.0))) / pp
    return s + tau * p


def extension_pays(gain: float, q: float, done: int) -> bool:
    """Whether CG's next iteration is worth a Hessian product: the last one lowered the
    model by ``gain`` >= 0, to ``q`` < 0 after ``done`` products, and ``gain`` is at least
    ``EXTEND_PAYOFF`` times the step's average gain per product, ``-q / (done + STEP_OVERHEAD)``."""
    return gain * (done + STEP_OVERHEAD) >= EXTEND_PAYOFF * -q


def conjugate_gradient(op, maxcg: int, tol2: float, radius: float, precond=None,
                       extend_to: int = 0) -> tuple[np.ndarray, int]:
    """Algorithm 2 on ``H[E] = -grad`` in whitened coordinates; returns ``(E, iterations)``.

    Stops after ``maxcg`` iterations or when ``<r, r> <= tol2``; with ``extend_to >
    maxcg`` it goes on, up to ``extend_to`` iterations, while :func:`extension_pays`
    (the model ``q(s) = <grad, s> + <s, H s> / 2`` equals ``<grad, s> / 2`` at CG's
    iterates, one inner product each). As in Steihaug's
    truncated CG, an iterate that would leave the ball ``||E||_F <= radius``, or a
    direction of non-positive curvature, ends the loop on the ball's boundary: at large
    ``t`` the Hessian is nearly singular along directions no tight constraint sees,
    and an unguarded CG step there is huge and useless. ``precond`` (a symmetric
    positive definite map ``(k, k) -> (k, k)``, approximately ``H^{-1}``) turns it
    into preconditioned CG. Every iteration calls ``op.hvp`` once. CG's vectors and
    inner products are in the precision of ``op.cg_grad``: on the float32 path no array
    is cast between precisions inside the loop.
    """
    grad = op.cg_grad
    s = of(grad).xp.zeros_like(grad)
    r = -grad
    z = r if precond is None else precond(r)
    # r, p and the product are updated in place (one fresh k x k array per iteration, s's,
    # instead of five); p must not share r's memory (a second negation: a copy on any
    # backend), and op.hvp returns a fresh array.
    p = -grad if z is r else z
    rzold = inner(r, z)
    it, q_last = 0, 0.0
    for it in range(1, max(maxcg, extend_to) + 1):
        if extend_to > maxcg and it >= maxcg:
            q = 0.5 * inner(grad, s)
            if it > maxcg and not extension_pays(q_last - q, q, it - 1):
                return s, it - 1
            q_last = q
        Hp = op.hvp(p)
        curv = inner(p, Hp)
        if not curv > 0:
            return _to_boundary(s, p, radius), it
        a = rzold / curv
        s_next = p * a
        s_next += s  # s + a p
        if inner(s_next, s_next) >= radius * radius:
            return _to_boundary(s, p, radius), it
        s = s_next
        Hp *= a
        r -= Hp  # r - a H p
        del Hp, s_next  # at most s, r, p and one product alive at the next hvp (k x k each)
        if inner(r, r) <= tol2:
            break
        z = r if precond is None else precond(r)
        rznew = inner(r, z)
        p *= rznew / rzold
        p += z  # z + beta p
        del z
        rzold = rznew
    return s, it


def newton_direction(op, maxcg: int, tol2: float, radius: float, precond=None, *, descent_fallback: bool = False,
                     extend_to: int = 0) -> tuple[np.ndarray, np.ndarray, float, int]:
    """Truncated Newton-CG at ``op``: ``(E, D, delta, n_cg)``.

    ``E`` (k, k) is the symmetrised whitened CG solution (ball of radius
    ``radius sqrt(k)``), ``D = RQ E RQ^T`` the same direction in ``Sigma``'s coordinates
    and ``delta = <E, grad>``. A truncated CG direction is a descent one unless rounding
    bites; then ``descent_fallback=True`` takes ``E = -grad`` instead, and otherwise
    the caller sees ``delta >= 0``. ``extend_to``: see :func:`conjugate_gradient`.
    """
    ball = math.inf if radius is None else radius * math.sqrt(op.grad.shape[0])
    E, n_cg = conjugate_gradient(op, maxcg, tol2, ball, precond=precond, extend_to=extend_to)
    E = symmetrise(of(E).double(E))
    delta = inner(E, op.grad)
    if descent_fallback and not delta < 0:
        E = -op.grad
        delta = -inner(E, E)
    return E, of(E).congruence(op.RQ, E), delta, n_cg


def smii_direction(p: Point, L, c, maxcg, tol2, radius, precondition=True, float32=False, extend_to=0) -> Step:
    """SM-II's step solver: truncated Newton-CG on Problem 4 at ``p``.

    ``precondition``: CG in the eigenbasis of ``M`` with :meth:`Whitened.preconditioner`;
    ``extend_to``: CG past ``maxcg`` iterations, up to this many, while they pay
    (:func:`conjugate_gradient`; the driver asks for it with preconditioning only);
    ``float32``: Hessian products and the preconditioner in single precision (the
    direction only; gradient, ``delta``, the line search and the certificate stay in
    float64).
    """
    op = Whitened(p, L, c, rotate=precondition, float32=float32)
    pre = op.preconditioner() if precondition else None
    E, D, delta, n_cg = newton_direction(op, maxcg, tol2, radius, pre, descent_fallback=True, extend_to=extend_to)
    # e from D itself (the step the line search takes), through L: O(nnz k) for a sparse L.
    return Step(D, delta, variance_ratios(L, D, c), n_cg)


def gradient_direction(p: Point, L, c, maxcg, tol2, radius) -> Step:
    """Plain gradient descent (Table 3): ``D = -grad F`` in the coordinates of ``Sigma``."""
    G = unwhiten_dual(p.R, Whitened(p, L, c).grad)  # grad F = R^{-T} G R^{-1}
    D = -G
    return Step(D, -inner(G, G), variance_ratios(L, D, c), 0)


def line_search(at, F0: float, delta: float, sigma_ls: float, beta: float):
    """Algorithm 3: backtracking from step 1 with a Cholesky test; ``(step, point)`` or ``(step, None)``.

    ``at(step)`` evaluates the trial point ``sigma + step D`` (``None`` when it is not
    positive definite or leaves the objective's domain); a step is accepted when the
    point's ``F`` is finite and at most ``F0 + step sigma_ls delta`` (Armijo).
    """
    step = 1.0
    for _ in range(MAX_BACKTRACK):
        q = at(step)
        if q is not None and math.isfinite(q.F) and q.F <= F0 + step * sigma_ls * delta:
            return step, q
        step *= beta
    return step, None
