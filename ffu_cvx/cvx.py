"""The CVXPY adapter: the only module that imports CVXPY (lazily, inside functions).

Solver layer, bottom: imports numpy and ``status``. Every conic model of the package
lives here (Problem 1's SDP formulations, Fourier's max program, CA's exact program);
callers get numpy arrays and one of our statuses back. One status map: CVXPY's
``optimal`` and ``optimal_inaccurate`` map to ours, anything else is a ``SolverError``
naming the solver, its status and a remedy.
"""

from __future__ import annotations

import numpy as np

from .status import OPTIMAL, OPTIMAL_INACCURATE, SOLVER_ERROR, SolverError

__all__ = ["STATUS_MAP", "solve_model", "reciprocal_program", "ca_program"]

#: CVXPY status -> ours. Anything unmapped (infeasible, unbounded, user limit, solver
#: error, ...) is a failure.
STATUS_MAP = {"optimal": OPTIMAL, "optimal_inaccurate": OPTIMAL_INACCURATE}


def solve_model(prob, what: str, *, solver: str, remedy: str, **solver_options) -> tuple[str, int | None]:
    """Solve the CVXPY problem ``prob`` with ``solver``; return ``(status, iterations)``.

    ``what`` names the model in messages; ``remedy`` is appended to a failure.
    Raises ``SolverError`` on a solver exception or an unmapped status.
    """
    import cvxpy as cp

    try:
        prob.solve(solver=solver, **solver_options)
    except cp.error.SolverError as exc:
        raise SolverError(f"{what}: {solver} failed ({exc}); {remedy}", status=SOLVER_ERROR) from None
    stats = prob.solver_stats
    nit = int(stats.num_iters) if stats is not None and stats.num_iters is not None else None
    status = STATUS_MAP.get(prob.status)
    if status is None:
        raise SolverError(f"{what}: {solver} returned status {prob.status!r}; {remedy}",
                          status=str(prob.status), nit=nit)
    return status, nit


def reciprocal_program(weights: np.ndarray, A: np.ndarray, *, solver: str = "CLARABEL",
                       **solver_options) -> tuple[np.ndarray, np.ndarray, str]:
    """``min sum_g weights_g / t_g`` s.t. ``A t <= 1``, ``t > 0`` (Fourier's max program).

    ``weights`` (G,) > 0, ``A`` (K, G) >= 0. Returns ``(t (G,), nu (K,), status)`` with
    ``nu`` >= 0 the constraint multipliers.
    """
    import cvxpy as cp

    t = cp.Variable(weights.size, pos=True)
    cons = [A @ t <= 1.0]
    prob = cp.Problem(cp.Minimize(cp.sum(cp.multiply(weights, cp.inv_pos(t)))), cons)
    status, _ = solve_model(prob, "fourier max program", solver=solver, remedy="try solver='SCS'",
                            **solver_options)
    if t.value is None:
        raise SolverError(f"fourier max program: {solver} reported {prob.status!r} but returned no point; "
                          "try solver='SCS'")
    tv = np.maximum(np.asarray(t.value, dtype=float), 1e-300)
    return tv, np.clip(np.asarray(cons[0].dual_value, dtype=float).ravel(), 0.0, None), status


def ca_program(R: np.ndarray, B: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray, int | None]:
    """CA as one conic program: ``min matrix_frac(R^T, X)`` s.t. ``diag(B^T X B) <= 1``, ``X >= 0``.

    ``R`` (q, k), ``B`` (k, d); Clarabel at gap and feasibility ``tol``. Returns
    ``(X (k, k) symmetric, nu (d,) >= 0, iterations)``.
    """
    import cvxpy as cp

    k = B.shape[0]
    X = cp.Variable((k, k), PSD=True)
    cons = [cp.sum(cp.multiply(B, X @ B), axis=0) <= 1]
    prob = cp.Problem(cp.Minimize(cp.matrix_frac(R.T, X)), cons)
    _, nit = solve_model(prob, "ca", solver="CLARABEL", remedy="try solver='dual'",
                         tol_gap_abs=tol, tol_gap_rel=tol, tol_feas=tol)
    if X.value is None:
        raise SolverError(f"ca: CLARABEL reported {prob.status!r} but returned no point; try solver='dual'")
    Xv = 0.5 * (X.value + X.value.T)
    return Xv, np.clip(np.asarray(cons[0].dual_value, dtype=float).ravel(), 0.0, None), nit
