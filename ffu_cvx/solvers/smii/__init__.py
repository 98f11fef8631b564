"""SM-II: the paper's Newton-CG soft-max solver (§6), matrix-free and certified.

Solver layer: imports numpy, scipy, the model modules (``basis``, ``certificate``, ``privacy``,
``problem``, ``result``, ``status``, ``validation``), ``solvers.options``, ``openblas`` and ``version``;
never CVXPY.
``array_api_compat`` with torch or CuPy only when ``array_backend`` asks for them.

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
(Algorithm 3), from ``Sigma_0 = s^2 Q^+ Q^{+T}`` (§6.3). What goes beyond the paper is
explained in the module where it lives:

- :mod:`~ffu_cvx.solvers.smii.backend`: the array backends (numpy, the default; torch or CuPy
  through array-api-compat, option ``array_backend``) the dense kernels run on.
- :mod:`~ffu_cvx.solvers.smii.model`: the objective model (soft maxes, the iterate, the
  whitened operator with a pure ``hvp``, the preconditioner, the start, ``objective``
  and ``hessp``).
- :mod:`~ffu_cvx.solvers.smii.newton`: the one step solver (truncated CG with Steihaug's guard,
  the SM-II and gradient directions, the backtracking Cholesky line search), shared by
  the main loop and the polish.
- :mod:`~ffu_cvx.solvers.smii.bounds`: the certificate bookkeeping (best bound, when to skip
  the dual ascent).
- :mod:`~ffu_cvx.solvers.smii.options`: the validated frozen options (``Options.paper()``: Algorithm 1
  as published, every addition below switched off; ``docs/design/smii.rst`` has the table).
- :mod:`~ffu_cvx.solvers.smii.log`: the iteration log (DEBUG records of the logger ``ffu_cvx.solvers.smii``).
- :mod:`~ffu_cvx.solvers.smii.multipliers`: the damped multiplier update of the shifted soft maxes.
- :mod:`~ffu_cvx.solvers.smii.schedule`: the sub-problems' sharpness, when one ends, the update between them.
- :mod:`~ffu_cvx.solvers.smii.incumbents`: the best end, the cheapest iterate and the ends kept to be mixed.
- :mod:`~ffu_cvx.solvers.smii.mixing`: convex combinations of two iterates and their free cost bound.
- :mod:`~ffu_cvx.solvers.smii.kkt`: Newton steps on Problem 1's KKT system that finish a run.
- :mod:`~ffu_cvx.solvers.smii.polish`: the ≺R polish (:func:`refine_smii`, barrier levels).
- :mod:`~ffu_cvx.solvers.smii.driver`: Algorithm 1 (start, Newton step, end of sub-problem, KKT finish,
  next sub-problem, finish), :func:`solve_smii` and :func:`solve_gd`.
"""

from .driver import SMIIState, solve_gd, solve_smii
from .model import hessp, objective
from .options import PRECONDITION_MIN_K, Options
from .polish import REFINE_AUTO_MAX_K, refine_smii

__all__ = ["PRECONDITION_MIN_K", "REFINE_AUTO_MAX_K", "Options", "SMIIState", "objective", "hessp", "refine_smii",
           "solve_smii", "solve_gd"]
