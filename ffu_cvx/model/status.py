"""Solver statuses (named constants with groups), ``SolverError`` and ``IntermediateResult``.

Model layer, its bottom: imports numpy only. Callers test group membership
(``status in SUCCESS``), never literal strings.
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np

__all__ = [
    "OPTIMAL", "OPTIMAL_INACCURATE", "MAX_ITER", "BASELINE", "USER_STOPPED", "SOLVER_ERROR",
    "SUCCESS", "SUCCESS_STATUSES", "INACCURATE", "STOPPED", "STATUSES", "SolverError", "IntermediateResult",
]

#: Solved to the requested tolerance (certified relative gap <= ``tol``).
OPTIMAL = "optimal"
#: Stopped short of ``tol`` with a usable result; a ``RuntimeWarning`` is issued.
OPTIMAL_INACCURATE = "optimal_inaccurate"
#: An iteration or time limit (``maxiter``, ``max_time``) was reached; feasible, certified
#: only as far as the Solution's ``gap`` says. The exact SDP stopped by ``max_time`` during
#: its ≺R refinement is an optimum of Problem 1 certified to its ``gap`` (at most ``tol``
#: when the first SDP reached it), only not the ≺R-minimal one (``info["refine_complete"]``
#: False).
MAX_ITER = "max_iter"
#: A fixed strategy (GM, HM, CA, ...) rather than an optimiser of Problem 1.
BASELINE = "baseline"
#: A callback raised ``StopIteration``.
USER_STOPPED = "user_stopped"
#: A numerical failure; carried by ``SolverError``, never by a ``Solution``.
SOLVER_ERROR = "solver_error"

#: The statuses whose Solution is a usable answer (``Solution.success``).
SUCCESS = (OPTIMAL, OPTIMAL_INACCURATE, BASELINE)
SUCCESS_STATUSES = SUCCESS  # the older name
#: Usable but short of the requested tolerance.
INACCURATE = (OPTIMAL_INACCURATE,)
#: Ended before convergence by a limit or the user.
STOPPED = (MAX_ITER, USER_STOPPED)
#: Every status a Solution may carry.
STATUSES = (OPTIMAL, OPTIMAL_INACCURATE, MAX_ITER, BASELINE, USER_STOPPED)


class SolverError(RuntimeError):
    """A solver failed; ``status``, ``nit`` and ``residual`` say where and how."""

    def __init__(self, message: str, *, status: str = SOLVER_ERROR, nit: int | None = None,
                 residual: float | None = None, **info):
        super().__init__(message)
        self.status = status
        self.nit = nit
        self.residual = residual
        self.info = info

    def __reduce__(self):
        # Keep status, nit, residual and info through pickling (batch workers re-raise it).
        return _rebuild_solver_error, (str(self), self.status, self.nit, self.residual, self.info)


def _rebuild_solver_error(message, status, nit, residual, info):
    return SolverError(message, status=status, nit=nit, residual=residual, **info)


class IntermediateResult:
    """What every iterative method passes to ``callback`` (immutable).

    Always present: ``method`` (str), ``nit`` (iterations or levels so far),
    ``privacy_cost`` (alpha of the current iterate rescaled to meet every target),
    ``lower_bound`` and ``gap`` (the best certified bound so far and the relative gap;
    NaN before the first certificate), ``sigma`` (k, k) the rescaled iterate (read-only).
    Each method adds its own fields (SM-II: ``t1``, ``t2``, ``objective``, ``alpha``,
    ``ratio``, ``step``, ``n_cg``; SDP levels: ``level``, ``value``, ``columns``, ``n_fixed``,
    ``n_free``, ``elapsed``).
    Fields are read as attributes or items (``r.nit == r["nit"]``).
    """

    __slots__ = ("_fields",)
    _REQUIRED = ("method", "nit", "privacy_cost", "lower_bound", "gap", "sigma")

    def __init__(self, **fields):
        missing = [k for k in self._REQUIRED if k not in fields]
        if missing:
            raise TypeError(f"IntermediateResult needs {missing}")
        sigma = fields["sigma"]
        if isinstance(sigma, np.ndarray):
            sigma = sigma.view()
            sigma.flags.writeable = False
            fields["sigma"] = sigma
        object.__setattr__(self, "_fields", MappingProxyType(dict(fields)))

    def __getattr__(self, name):
        try:
            return self._fields[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, name):
        return self._fields[name]

    def __contains__(self, name) -> bool:
        return name in self._fields

    def keys(self):
        return self._fields.keys()

    def __setattr__(self, name, value):
        raise AttributeError("IntermediateResult is immutable")

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={'array' + str(v.shape) if isinstance(v, np.ndarray) else v!r}"
                          for k, v in self._fields.items())
        return f"IntermediateResult({items})"
