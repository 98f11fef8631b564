"""The one entry point: ``solve(problem, method=..., tol=..., callback=None, **options)``.

Interfaces to the solver layer: imports ``problem``, ``result``, ``sdp`` and ``smii``
(neither imports CVXPY at module level). The shape is scipy.optimize's ``minimize``:
a plain dispatch table of functions, the same ``tol`` meaning for every method (the
certified relative gap of the returned Solution), one ``callback`` contract
(:class:`ffu_cvx.status.IntermediateResult`; ``StopIteration`` stops with status
``"user_stopped"``), and every method-specific option passed through by name.
"""

from __future__ import annotations

from .problem import FitnessProblem
from .result import Solution
from .status import SolverError
from .sdp import solve_sdp
from .smii import solve_gd, solve_smii

__all__ = ["METHODS", "solve"]

#: method name -> solver function ``f(problem, *, tol, callback, **options) -> Solution``.
METHODS = {"sdp": solve_sdp, "smii": solve_smii, "gd": solve_gd}


def solve(problem: FitnessProblem, method: str = "sdp", tol: float | None = None, callback=None,
          **options) -> Solution:
    """Solve Problem 1 for ``problem`` with ``method`` in :data:`METHODS`.

    ``tol`` is the certified relative gap to reach (``None``: the method's default,
    1e-6 for "sdp", 1e-4 for "smii" and "gd"); solver-internal tolerances have their
    own names (``solver_tol`` for the SDP's CVXPY tolerance). ``options`` go to the
    method; an unknown option raises ``TypeError``. ``callback(intermediate_result)``
    is called once per iteration (SM-II, GD) or level (SDP); raising ``StopIteration``
    in it stops the solve with status ``"user_stopped"``. A ``SolverError`` on a badly
    scaled problem says so (:attr:`FitnessProblem.scaling_advice`).

    >>> import ffu_cvx as ffu
    >>> problem = ffu.FitnessProblem.from_workload(ffu.workloads.prefix(4))
    >>> sol = ffu.solve(problem, method="smii", tol=1e-6)
    >>> sol.status, round(sol.privacy_cost, 5), sol.gap <= 1e-6   # Table 2, d = 4: 1.758601
    ('optimal', 1.7586, True)
    """
    if not isinstance(problem, FitnessProblem):
        raise ValueError(f"`problem` must be a FitnessProblem, got {type(problem).__name__}; "
                         "build one with FitnessProblem(W, c) or FitnessProblem.from_workload(wl)")
    name = str(method).lower()
    if name not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid methods are {sorted(METHODS)}")
    if tol is not None:
        options["tol"] = tol
    try:
        return METHODS[name](problem, callback=callback, **options)
    except SolverError as err:
        advice = problem.scaling_advice
        if not advice or advice in str(err):
            raise
        raise SolverError(f"{err}; {advice}", status=err.status, nit=err.nit, residual=err.residual,
                          **err.info) from err
