"""The one entry point: ``solve(problem, method=..., tol=..., callback=None, options=None, **keywords)``.

Solver layer, its top: imports ``model`` (``problem``, ``result``, ``status``), ``workloads.products`` and the
solvers ``sdp``, ``smii``, ``kron`` and ``baselines`` (none imports CVXPY at module level). The shape is scipy.optimize's ``minimize``: a plain dispatch table of functions,
the same ``tol`` meaning for every method (the certified relative gap of the returned
Solution), one ``callback`` contract (:class:`ffu_cvx.model.status.IntermediateResult`;
``StopIteration`` stops with status ``"user_stopped"``), and one way to pass the
method's settings: its frozen options value (:data:`OPTIONS`) as ``options``, its fields by
keyword, or both (:func:`ffu_cvx.solvers.options.build`). ``method="auto"`` picks a method from the problem's size
and structure and records why in ``Solution.info["auto"]``.
"""

from __future__ import annotations

from ..model.problem import FitnessProblem
from ..model.result import Solution
from ..model.status import SolverError
from ..workloads.products import ProductProblem
from . import baselines  # noqa: F401  (every method loads with the package: ffu.solvers.baselines)
from .kron import KronOptions, is_marginal_union, solve_kron, solve_marginal_union, structure_of
from .sdp.driver import SDPOptions, solve_sdp
from .smii import Options, solve_gd, solve_smii

__all__ = ["METHODS", "STRUCTURED_METHODS", "OPTIONS", "AUTO_SDP_MAX_K", "solve", "auto_method", "solve_fourier"]

#: method name -> solver function ``f(problem, *, callback, options, **keywords) -> Solution`` for any
#: FitnessProblem (a product problem's dense one included).
METHODS = {"sdp": solve_sdp, "smii": solve_smii, "gd": solve_gd}
#: method name -> the class of its ``options`` ("fourier" takes none).
OPTIONS = {"sdp": SDPOptions, "smii": Options, "gd": Options, "kron": KronOptions}


def solve_fourier(problem, *, tol: float | None = None, callback=None, options=None, **keywords) -> Solution:
    """The exact Fourier optimum of a union of marginals (a product problem whose blocks are all
    identity or total); ``ValueError`` naming what to use for any other problem."""
    if keywords or options is not None:
        raise TypeError(f"method 'fourier' takes no options (it is exact), got "
                        f"{sorted(keywords) if options is None else options!r}")
    if not isinstance(problem, ProductProblem) or not is_marginal_union(problem):
        raise ValueError("method='fourier' solves unions of marginals (product groups of identity and total blocks "
                         "only); use 'kron' or 'auto' for other product workloads, 'sdp' or 'smii' for dense ones")
    return solve_marginal_union(problem, tol=tol)


#: Methods for structured (product) problems only, Sigma kept in factors.
STRUCTURED_METHODS = {"kron": solve_kron, "fourier": solve_fourier}
#: ``method="auto"`` gives dense problems of rank up to this to the exact SDP, larger ones to SM-II.
AUTO_SDP_MAX_K = 32
def auto_method(problem) -> tuple[str, str]:
    """``(method, why)`` that ``method="auto"`` uses for ``problem``."""
    if isinstance(problem, ProductProblem):
        if len(problem.groups) > 1 and is_marginal_union(problem):
            return "fourier", "a union of marginals (identity and total blocks only): the Fourier optimum is exact"
        structure, why = structure_of(problem)
        return "kron", f"product workload, structure {structure!r}: {why}"
    if problem.k <= AUTO_SDP_MAX_K:
        return "sdp", f"dense problem of rank k = {problem.k} <= {AUTO_SDP_MAX_K}: the exact SDP"
    return "smii", f"dense problem of rank k = {problem.k} > {AUTO_SDP_MAX_K}: SM-II"


def solve(problem, method: str = "auto", tol: float | None = None, callback=None, options=None,
          **keywords) -> Solution:
    """Solve Problem 1 for ``problem`` with ``method`` in :data:`METHODS`, :data:`STRUCTURED_METHODS` or ``"auto"``
    (the default).

    ``problem`` is a :class:`~ffu_cvx.model.problem.FitnessProblem`, or a
    :class:`~ffu_cvx.workloads.products.ProductProblem` (a product workload's): "kron" solves it with
    Sigma in factors (a :class:`~ffu_cvx.solvers.kron.KronSolution`), "fourier" gives the exact
    optimum of a union of marginals, the dense methods solve its dense problem when the
    domain is small enough (and refuse otherwise). ``"auto"``
    picks the SDP (rank up to :data:`AUTO_SDP_MAX_K`), SM-II, the Fourier optimum (unions
    of marginals) or the Kronecker solver, and says why in ``info["auto"]``.

    ``tol`` is the certified relative gap to reach (``None``: the method's default,
    1e-6 for "sdp", 1e-4 for "smii", "gd" and "kron"); solver-internal tolerances have their
    own names (``solver_tol`` for the SDP's CVXPY tolerance). The method's settings are
    ``options``, a value of its class in :data:`OPTIONS` (:class:`ffu_cvx.solvers.smii.Options`,
    :class:`ffu_cvx.solvers.sdp.driver.SDPOptions`, :class:`ffu_cvx.solvers.kron.KronOptions`), and/or their fields by
    keyword, which replace the value's (``tol`` too); an unknown keyword or an ``options`` of
    another method's class raises ``TypeError``. ``callback(intermediate_result)``
    is called once per iteration (SM-II, GD, the Kronecker block ascent) or level (SDP);
    raising ``StopIteration`` in it stops the solve with status ``"user_stopped"``. A
    ``SolverError`` on a badly scaled problem says so (:attr:`FitnessProblem.scaling_advice`).

    >>> import ffu_cvx as ffu
    >>> problem = ffu.FitnessProblem.from_workload(ffu.workloads.prefix(4))
    >>> sol = ffu.solve(problem, method="smii", tol=1e-6)
    >>> sol.status, round(sol.privacy_cost, 5), sol.gap <= 1e-6   # Table 2, d = 4: 1.758601
    ('optimal', 1.7586, True)
    >>> paper = ffu.solve(problem, method="smii", options=ffu.solvers.smii.Options.paper(tol=1e-6))
    >>> paper.status, round(paper.privacy_cost, 5)
    ('optimal', 1.7586)
    """
    if not isinstance(problem, (FitnessProblem, ProductProblem)):
        raise ValueError(f"`problem` must be a FitnessProblem or a ProductProblem, got {type(problem).__name__}; "
                         "build one with FitnessProblem(W, c) or FitnessProblem.from_workload(wl)")
    name = str(method).lower()
    if name not in METHODS and name not in STRUCTURED_METHODS and name != "auto":
        raise ValueError(f"unknown method {method!r}; valid methods are "
                         f"{sorted(METHODS) + sorted(STRUCTURED_METHODS) + ['auto']}")
    why = None
    if name == "auto":
        name, why = auto_method(problem)
    if isinstance(problem, ProductProblem) and name in METHODS:
        problem = problem.for_method(name)
    elif isinstance(problem, FitnessProblem) and name == "kron":
        raise ValueError("method='kron' needs a product workload (FitnessProblem.from_workload of "
                         "ffu.workloads.product(...)); use 'sdp', 'smii' or 'auto' for a dense FitnessProblem")
    if tol is not None:
        keywords["tol"] = tol
    try:
        sol = {**METHODS, **STRUCTURED_METHODS}[name](problem, callback=callback, options=options, **keywords)
    except SolverError as err:
        advice = problem.scaling_advice if isinstance(problem, FitnessProblem) else ""
        if not advice or advice in str(err):
            raise
        raise SolverError(f"{err}; {advice}", status=err.status, nit=err.nit, residual=err.residual,
                          **err.info) from err
    return sol if why is None else sol.with_info(auto=why)
