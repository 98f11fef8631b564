"""``solve_kron``: Problem 1 for a product workload, Sigma in factors.

Solver layer, top of ``ffu_cvx.kron``: imports numpy, ``problem``, ``products``, ``smii``,
``status``, ``validation`` and the package's ``factors``, ``reduce``, ``simple`` and
``solution``. The structure is chosen from the workload:

- one product group: the exact product of per-attribute optima (``"product"``);
- a union whose structured attributes (those with a block other than identity or
  total) span at most :data:`ffu_cvx.kron.reduce.DENSE_D_MAX` cells (:data:`ONE_BLOCK_D_MAX`
  when the reduction has a single block): the symmetry
  reduction, solved exactly with a certified gap (``"symmetric"``; one block is a dense
  Problem 1 for SM-II, several go to the block dual ascent);
- otherwise the better of the two simple structures (one Kronecker Sigma by
  block-coordinate descent, ``"kronecker"``; independent per-group products,
  ``"independent"``), certified against the best single-group optimum (a valid bound:
  dropping groups can only lower the optimum), the honest gap in the Solution.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

from .. import validation
from ..problem import FitnessProblem
from ..products import ProductProblem
from ..smii import solve_smii
from ..status import OPTIMAL, OPTIMAL_INACCURATE, USER_STOPPED
from .factors import FACTOR_METHODS, FactorSolver
from .reduce import DENSE_D_MAX, ascent, reached_parts, reduce, split_attributes
from .simple import independent, kronecker_bcd, product_bound, product_term
from .solution import KronSolution

__all__ = ["STRUCTURES", "ONE_BLOCK_D_MAX", "solve_kron", "structure_of"]

#: A union whose reduction has a single block is a dense Problem 1 over the structured
#: attributes' joint space; SM-II takes it up to this many cells.
ONE_BLOCK_D_MAX = 4096

#: Structures ``solve_kron(structure=...)`` accepts ("auto" picks as the module docstring says).
STRUCTURES = ("auto", "product", "symmetric", "kronecker", "independent")


def structure_of(problem: ProductProblem) -> tuple[str, str]:
    """``(structure, why)`` that ``structure="auto"`` picks for ``problem``."""
    groups, sizes = problem.groups, problem.domain.sizes
    if len(groups) == 1:
        return "product", "one product group: the product of per-attribute optima is exact"
    sym, ns = split_attributes(groups, sizes)
    D = math.prod(sizes[i] for i in ns)
    parts = reached_parts(groups, sizes, sym)
    if D <= (ONE_BLOCK_D_MAX if len(parts) == 1 else DENSE_D_MAX):
        return "symmetric", (f"union of {len(groups)} groups; the structured attributes {[problem.domain.names[i] for i in ns]} "
                             f"span {D} cells, {len(parts)} block(s): exact symmetry reduction")
    return "best simple", (f"union of {len(groups)} groups over structured attributes of {D} > {DENSE_D_MAX} cells: "
                           "best of one Kronecker Sigma and independent group mechanisms")


def _factor_info(sols) -> list:
    return [dict(kind=s.problem.name, k=s.problem.k, privacy_cost=s.privacy_cost, lower_bound=s.lower_bound,
                 method=s.method, gap=s.gap) for s in sols]


def _product(problem, solver, t0, why):
    grp = problem.groups[0]
    term, sols = product_term(grp, 0, solver)
    return KronSolution.from_terms(problem, [term], lower_bound=product_bound(sols, grp.target),
                                   nit=len(sols), time=time.perf_counter() - t0, structure="product", why=why,
                                   factors=_factor_info(sols))


def _one_block(red, tol):
    """The reduction with a single block is a dense Problem 1 on the structured joint space."""
    blk = red.blocks[0]
    used = sorted(blk.L)
    L = np.vstack([blk.L[g] for g in used])
    c = np.concatenate([np.full(blk.L[g].shape[0], red.targets[g] / blk.beta[g]) for g in used])
    # W = L B on the block's basis: the same Sigma meets beta * var <= c, at cost kappa * alpha'
    sol = solve_smii(FitnessProblem(L @ blk.B, c, basis=blk.B), tol=tol)
    return (sol.sigma,), sol.lower_bound * blk.kappa, sol.nit, sol.status, sol.history


def _symmetric(problem, tol, callback, max_iter, t0, why):
    red = reduce(problem.workload)
    if len(red.blocks) == 1:
        sigmas, lb, nit, status, history = _one_block(red, tol)
    else:
        res = ascent(red, tol=tol, max_iter=max_iter, callback=callback)
        sigmas, lb, nit, status, history = res.sigmas, res.lower_bound, res.nit, res.status, res.history
    sol = KronSolution.from_terms(problem, red.terms(sigmas), status=status, lower_bound=lb, nit=nit,
                                  time=time.perf_counter() - t0, history=history, structure="symmetric", why=why,
                                  symmetric=[problem.domain.names[i] for i in red.sym],
                                  structured=[problem.domain.names[i] for i in red.ns], blocks=len(red.blocks),
                                  D=red.D)
    if status == OPTIMAL and sol.gap > tol:
        return KronSolution.from_terms(problem, sol.terms, status=OPTIMAL_INACCURATE, lower_bound=lb, nit=nit,
                                       time=sol.time, history=history, **sol.info)
    return sol


def _simple(problem, solver, which, tol, t0, why):
    groups = problem.groups
    terms_ind, bounds = independent(groups, solver)
    lb = max(bounds)
    candidates = {}
    if which in ("best simple", "independent"):
        candidates["independent"] = terms_ind
    if which in ("best simple", "kronecker"):
        term, _, _ = kronecker_bcd(groups, solver)
        candidates["kronecker"] = (term,)
    sols = {k: KronSolution.from_terms(problem, t, lower_bound=lb, structure=k) for k, t in candidates.items()}
    name = min(sols, key=lambda k: sols[k].privacy_cost * sols[k].max_ratio)
    costs = {k: s.privacy_cost * s.max_ratio for k, s in sols.items()}
    gap = sols[name].gap
    status = OPTIMAL if gap <= tol else OPTIMAL_INACCURATE
    message = "" if status == OPTIMAL else (
        f"structure {name!r}: certified gap {gap:.3g} against the best single-group bound; the true optimum may "
        "be anywhere in between")
    if status != OPTIMAL:
        warnings.warn(f"solve_kron: {message}", RuntimeWarning, stacklevel=3)
    return KronSolution.from_terms(problem, sols[name].terms, status=status, message=message, lower_bound=lb,
                                   nit=solver.n_solves, time=time.perf_counter() - t0, structure=name, why=why,
                                   costs=costs, bound="best single group")


def solve_kron(problem: ProductProblem, *, tol: float = 1e-4, callback=None, factor_method: str = "auto",
               structure: str = "auto", max_iter: int = 20_000) -> KronSolution:
    """Solve Problem 1 for a :class:`ffu_cvx.products.ProductProblem` with Sigma in factors.

    Parameters
    ----------
    problem : ProductProblem
        From ``FitnessProblem.from_workload(ffu.workloads.product(...))``.
    tol : float
        Certified relative gap to reach (each factor solve gets a share of it).
    callback : callable, optional
        Called with an :class:`ffu_cvx.status.IntermediateResult` per dual-ascent step
        (``sigma`` is None: the iterate is structured); ``StopIteration`` stops it.
    factor_method : {"auto", "sdp", "smii"}
        Solver of the per-attribute problems ("auto": closed forms for identity and
        total, the SDP up to rank 8, SM-II above).
    structure : {"auto", "product", "symmetric", "kronecker", "independent"}
        See :mod:`ffu_cvx.kron.driver`; "auto" records its choice in ``info["why"]``.
    max_iter : int
        Most dual-ascent steps of the symmetric structure.

    Returns
    -------
    KronSolution: ``privacy_cost``, ``variances`` (m,), ``lower_bound``, ``gap``, ``status``,
    ``terms`` and ``sample_answer_noise(rng)``; ``info["structure"]``, ``info["factors"]``.
    """
    if not isinstance(problem, ProductProblem):
        raise ValueError(f"`problem` must be a ProductProblem (FitnessProblem.from_workload of a product workload), "
                         f"got {type(problem).__name__}; for a dense FitnessProblem use method='sdp' or 'smii'")
    tol = validation.positive(tol, "tol")
    structure = validation.choice(structure, "structure", STRUCTURES)
    validation.choice(factor_method, "factor_method", FACTOR_METHODS)
    max_iter = validation.positive_int(max_iter, "max_iter")
    t0 = time.perf_counter()
    a = len(problem.domain.sizes)
    solver = FactorSolver(factor_method, tol=min(1e-6, tol / (4 * a)))
    auto, why = structure_of(problem)
    if structure == "auto":
        structure = auto
    else:
        why = f"structure={structure!r} requested"
    if structure == "product":
        if len(problem.groups) != 1:
            raise ValueError(f"`structure`='product' needs one product group, the workload has {len(problem.groups)}; "
                             "use 'auto'")
        return _product(problem, solver, t0, why)
    if structure == "symmetric":
        sol = _symmetric(problem, tol, callback, max_iter, t0, why)
        if sol.status == USER_STOPPED:
            warnings.warn("solve_kron: stopped by the callback", RuntimeWarning, stacklevel=2)
        return sol
    return _simple(problem, solver, structure, tol, t0, why)
