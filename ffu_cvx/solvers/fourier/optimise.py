"""The optimisation of a Fourier mechanism: closed-form sum, max program, dual bound, Problem 1.

Solver layer, top of :mod:`ffu_cvx.solvers.fourier`: imports numpy, :mod:`ffu_cvx.solvers.sdp.cvx` (the max
program, the only conic model), :mod:`ffu_cvx.model.status`, :mod:`ffu_cvx.model.validation` and
the Fourier modules ``workload``, ``groups`` and ``mechanism``. Every objective is solved
on the frequency-group form of :mod:`ffu_cvx.solvers.fourier.groups` (variances ``V = M eta``,
privacy cost ``sum_g n_g / eta_g``) and returned as a
:class:`~ffu_cvx.solvers.fourier.FourierMechanism`.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Mapping

import numpy as np

from ...model import validation
from ...model.status import INACCURATE, OPTIMAL
from ..sdp import cvx
from .groups import marginal_tables, product_groups
from .mechanism import FourierMechanism
from .workload import MarginalWorkload, as_workload, closure, set_size

__all__ = ["sum_optimal", "max_optimal", "dual_bound", "min_privacy_cost", "marginal_workload_optimum"]


# ----------------------------------------------------------------------------- the common engine
def _sum_closed_form(n, M, w, Nq, P):
    """min ``sum_k w_k Nq_k V_k`` s.t. ``sum_g n_g / eta_g <= P``: Cauchy-Schwarz (spec § 3a)."""
    a = (w * Nq) @ M
    T = float(np.sum(np.sqrt(n * a)))
    eta = np.sqrt(n / a) * T / P
    return eta, T * T / P


def _dual_value(n, M, c, lam) -> float:
    """``(sum_g sqrt(n_g sum_k (lam_k / c_k) M_kg))^2``: a lower bound on the max-program optimum."""
    return float(np.sum(np.sqrt(n * ((lam / c) @ M)))) ** 2


def _max_program(n, M, c, *, solver="CLARABEL", **solver_options):
    """c* = min ``sum_g n_g / eta_g`` s.t. ``M eta <= c`` (one variable per group), by
    :func:`ffu_cvx.solvers.sdp.cvx.reciprocal_program`.

    Returns ``(eta, lam, status)`` with ``eta`` exactly feasible (rescaled so the tightest
    constraint is met with equality) and ``lam`` (K,) the worst-case marginal weights
    from the constraint duals (simplex).
    """
    # Warm scale: the sum-optimal eta for weights 1/c, scaled to feasibility, makes the
    # unknown t = eta / eta0 of order one whatever the domain sizes.
    eta0, _ = _sum_closed_form(n, M, 1.0 / c, np.ones_like(c), 1.0)
    eta0 = eta0 / np.max((M @ eta0) / c)
    obj_scale = float(np.sum(n / eta0))
    tv, nu, status = cvx.reciprocal_program(n / eta0 / obj_scale, (M * eta0) / c[:, None], solver=solver,
                                            **solver_options)
    if status in INACCURATE:
        warnings.warn(f"fourier max program: {solver} reports an inaccurate solution", RuntimeWarning, stacklevel=3)
    eta = eta0 * tv
    eta = eta * np.max((M @ eta) / c) ** -1.0
    lam = nu if nu.sum() > 0 else np.ones_like(c)
    return eta, lam / lam.sum(), status


# ----------------------------------------------------------------------------- building the mechanism
def _marginal_mechanism(wl, comps, N, dS, M, eta, objective, loss, lam, lb, status, t0):
    tau = eta / N
    return FourierMechanism(wl, comps, tuple(float(x) for x in tau), float(np.sum(dS / eta)),
                            M @ eta, objective, float(loss), lam, float(lb), status, time.perf_counter() - t0)


def _product_mechanism(wl, comps, labels, n, M, eta, objective, loss, lam, lb, status, t0):
    spectra = []
    for lab in labels:
        s = np.full(lab.shape, np.inf)
        s[lab >= 0] = eta[lab[lab >= 0]]
        s.setflags(write=False)
        spectra.append(s)
    return FourierMechanism(wl, comps, tuple(spectra), float(np.sum(n / eta)), M @ eta, objective,
                            float(loss), lam, float(lb), status, time.perf_counter() - t0)


def _setup(workload):
    wl = as_workload(workload)
    if isinstance(wl, MarginalWorkload):
        comps = closure(wl.sets)
        N, dS, M = marginal_tables(wl, comps)
        return wl, (comps, N, dS, M), dS, M, np.array([set_size(wl.domain, A) for A in wl.sets], float)
    comps, labels, n, M = product_groups(wl)
    Nq = np.array([set_size(wl.domain, f.attrs) for f in wl.families], float)
    return wl, (comps, labels, n, M), n, M, Nq


def _build(wl, parts, eta, *args):
    if isinstance(wl, MarginalWorkload):
        return _marginal_mechanism(wl, *parts, eta, *args)
    return _product_mechanism(wl, *parts, eta, *args)


def sum_optimal(workload, privacy_cost: float = 1.0) -> FourierMechanism:
    """Optimal mechanism for the weighted sum ``sum_k w_k N_k Var_k`` at ``privacy_cost`` P.

    Closed form (spec § 3a, § 4): ``eta_g ∝ sqrt(n_g / a_g)``; the optimal loss is
    ``(sum_g sqrt(n_g a_g))^2 / P``. Optimal among all factorization mechanisms.
    """
    t0 = time.perf_counter()
    P = validation.positive(privacy_cost, "privacy_cost")
    wl, parts, n, M, Nq = _setup(workload)
    eta, loss = _sum_closed_form(n, M, np.array(wl.weights), Nq, P)
    return _build(wl, parts, eta, "sum", loss, None, math.nan, OPTIMAL, t0)


def max_optimal(workload, privacy_cost: float | None = None, *, solver: str = "CLARABEL",
                **solver_options) -> FourierMechanism:
    """Optimal mechanism for ``max_k w_k Var_k`` (fitness for use with targets ``c_k = 1/w_k``).

    With ``privacy_cost=None`` returns Problem 1's solution: every target met (the
    tightest with equality) at the smallest privacy cost ``c*``. With a privacy cost P
    returns the same mechanism rescaled to P, whose max weighted variance is ``c* / P``.
    Solves the convex program of spec § 3b with CVXPY (``solver``, default Clarabel), one
    variable per component (marginals) or frequency group (product families), and
    attaches the dual lower bound of the worst-case weights ``lam``.
    """
    t0 = time.perf_counter()
    wl, parts, n, M, _ = _setup(workload)
    c = np.array(wl.targets)
    eta, lam, status = _max_program(n, M, c, solver=solver, **solver_options)
    lb = _dual_value(n, M, c, lam)
    mech = _build(wl, parts, eta, "max", float(np.max((M @ eta) / c)), lam, lb, status, t0)
    return mech if privacy_cost is None else mech.scaled(privacy_cost)


def dual_bound(workload, lam) -> float:
    """Dual form of the max program: for weights ``lam`` (K,) in the simplex,
    ``(sum_S d_S sqrt(sum_{A ⊇ S} lam_A w_A / N_A^2))^2`` (marginals; the product analogue
    otherwise) is a lower bound on Problem 1's optimal privacy cost, attained at the
    worst-case ``lam``."""
    wl, _, n, M, _ = _setup(workload)
    lam = np.asarray(lam, dtype=float)
    if lam.shape != (len(wl.sets),) or np.any(lam < 0) or not lam.sum() > 0:
        raise ValueError(f"`lam` must be a non-negative ({len(wl.sets)},) array, not all zero")
    return _dual_value(n, M, np.array(wl.targets), lam / lam.sum())


def min_privacy_cost(domain, targets: Mapping, *, solver: str = "CLARABEL") -> FourierMechanism:
    """Problem 1 for marginals: the least privacy cost meeting per-cell variance ``targets``.

    Parameters
    ----------
    domain : tuple of int
        Attribute sizes, each >= 2.
    targets : dict {attrs: c_A}
        Attribute sets (0-based tuples, or an int for one attribute) and their per-cell
        variance targets, all > 0.

    Returns
    -------
    FourierMechanism with ``privacy_cost`` (= the SDP's alpha on the dense workload),
    ``taus`` {S: tau_S}, ``variances`` (K,) and ``epsilon(delta)`` / ``delta(eps)`` / ``rho``.

    >>> mech = min_privacy_cost((2, 2), {(0,): 1.0, (1,): 1.0})
    >>> round(mech.privacy_cost, 6)  # (1 + sqrt 2)^2 / 4
    1.457107
    """
    return max_optimal(MarginalWorkload.from_targets(domain, targets), solver=solver)


def marginal_workload_optimum(n_attrs: int, kind: str = "A") -> FourierMechanism:
    """The fitness-for-use paper's marginal workloads on ``n_attrs`` binary attributes.

    ``kind="A"``: 1-way marginals, attribute i (0-based) has target ``i + 1``.
    ``kind="B"``: 2-way marginals (0, j), j = 1..n-1, target ``j``. Returns
    :func:`min_privacy_cost` of the workload (its ``privacy_cost`` is alpha*).
    """
    kind = validation.choice(kind, "kind", ("A", "B"))
    n_attrs = validation.positive_int(n_attrs, "n_attrs", minimum=1 if kind == "A" else 2)
    if kind == "A":
        targets = {(i,): float(i + 1) for i in range(n_attrs)}
    else:
        targets = {(0, j): float(j) for j in range(1, n_attrs)}
    return min_privacy_cost((2,) * n_attrs, targets)
