"""Calibration: the smallest Laplace scale whose PML bound meets a target (spec § 4).

PML layer: imports numpy, scipy, :mod:`ffu_cvx.model.status`, :mod:`ffu_cvx.model.validation`
and the PML modules ``analysis``, ``bounds`` and ``signs``. Every bound decreases
strictly in ``b``, from ``log(1/alpha)`` at ``b -> 0`` to 0, and lies below the DP
level ``Delta_1 / b``, so ``b_DP = Delta_1 / epsilon`` brackets the root from above.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy.optimize import brentq

from ..model import validation
from ..model.status import SOLVER_ERROR, SolverError
from .analysis import Analysis, analyse, check_alpha, check_choice
from .bounds import BOUNDS, bound_value
from .signs import DEFAULT_MAX_PATTERNS

__all__ = ["DEFAULT_RTOL", "NoNoiseNeededWarning", "min_noise_scale", "calibrate"]

#: Relative accuracy of the calibrated ``b`` unless told otherwise.
DEFAULT_RTOL = 1e-12
#: Halvings of ``b`` below ``b_DP`` the bracket search tries before giving up; the bound
#: tends to log(1/alpha) > epsilon as b -> 0, so a sound bound crosses epsilon long before.
BRACKET_HALVINGS = 2000
#: Steps of ``rtol / 4`` (in ``log b``) taken upwards when rounding leaves the root's
#: ``b`` a hair above the target.
UPWARD_STEPS = 64


class NoNoiseNeededWarning(UserWarning):
    """The target is met without noise (``epsilon >= log(1/alpha)`` or ``Delta_1(W) = 0``)."""


def min_noise_scale(W, epsilon, alpha, bound: str = "safe", *, structure: str = "auto",
                    max_patterns: int = DEFAULT_MAX_PATTERNS, rtol: float = DEFAULT_RTOL) -> float:
    """Smallest Laplace scale b whose leakage bound is at most ``epsilon``.

    Parameters
    ----------
    W : array_like, (m, k)
    epsilon : float
        Target leakage in nats, > 0.
    alpha : float
        Prior lower bound on every class probability, in (0, 1/k].
    bound : {"safe", "sign", "corollary"}
        Which bound must meet the target (see :func:`leakage`).
    structure, max_patterns
        As in :func:`sign_bound`.
    rtol : float
        Relative accuracy of b for the bisected bounds; the returned b always meets the
        target (it errs upwards).

    Returns
    -------
    float
        ``b_min``, between 0 and ``b_DP = Delta_1/epsilon`` (``Delta_1`` under substitution,
        the relation of every PML bound; see :func:`~ffu_cvx.pml.l1_sensitivity`). The corollary has the closed
        form ``Delta_1 / log((1 - alpha) / (e^{-epsilon} - alpha))``; the other bounds are
        found by root bracketing on ``log b`` (each bound strictly decreases in b).
        **Returns 0.0** with a :class:`NoNoiseNeededWarning` when ``epsilon >= log(1/alpha)``
        (every bound stays below log(1/alpha) however small b is, so even the exact answers
        meet the target) or when ``Delta_1(W) = 0`` (the answers do not depend on the data).
    """
    an = analyse(W, structure)
    return calibrate(an, validation.positive(epsilon, "epsilon"), check_alpha(alpha, an.k),
                     check_choice(bound, "bound", BOUNDS), validation.positive_int(max_patterns, "max_patterns"),
                     validation.positive(rtol, "rtol"))


def calibrate(an: Analysis, eps: float, alpha: float, bound: str, max_patterns: int, rtol: float,
              stacklevel: int = 3) -> float:
    """:func:`min_noise_scale` of an analysed workload (arguments already checked).

    ``stacklevel`` points a :class:`NoNoiseNeededWarning` at the public function's caller.
    """
    delta = an.delta
    if delta == 0:
        warnings.warn("Delta_1(W) = 0: the answers do not depend on the data, so b = 0 (no noise) "
                      "meets any target", NoNoiseNeededWarning, stacklevel=stacklevel)
        return 0.0
    if eps >= -math.log(alpha):
        warnings.warn(f"epsilon = {eps:g} >= log(1/alpha) = {-math.log(alpha):g}: every bound is below "
                      "log(1/alpha) for all b, so b = 0 (no noise) meets the target under the alpha "
                      "assumption", NoNoiseNeededWarning, stacklevel=stacklevel)
        return 0.0
    b_dp = delta / eps

    def excess(log_b):
        return bound_value(an, math.exp(log_b), alpha, bound, max_patterns) - eps

    if bound == "corollary":
        log_b = math.log(delta / math.log((1 - alpha) / (math.exp(-eps) - alpha)))
    else:
        log_b = hi = math.log(b_dp)
        if excess(hi) < 0:  # else alpha is so small that the bound equals DP to rounding
            lo = hi - math.log(2)
            while excess(lo) <= 0:  # terminates: the bound tends to log(1/alpha) > eps as b -> 0
                lo -= math.log(2)
                if lo < hi - BRACKET_HALVINGS * math.log(2):
                    raise SolverError(f"min_noise_scale: no b with leakage above epsilon found down to "
                                      f"b_DP * 2^-{BRACKET_HALVINGS}; the bound should approach "
                                      "log(1/alpha) > epsilon as b -> 0: check W, alpha and epsilon",
                                      status=SOLVER_ERROR, nit=BRACKET_HALVINGS, residual=excess(lo))
            log_b = brentq(excess, lo, hi, xtol=rtol / 4, rtol=4 * np.finfo(float).eps)
    step = max(rtol / 4, 4 * np.finfo(float).eps)
    for _ in range(UPWARD_STEPS):  # err upwards: the returned b must meet the target despite rounding
        if excess(log_b) <= 0:
            return float(math.exp(log_b))
        log_b += step
    raise SolverError(f"min_noise_scale: the computed scale does not meet the target after {UPWARD_STEPS} "
                      "upward steps of rtol/4; raise `rtol`", status=SOLVER_ERROR, nit=UPWARD_STEPS,
                      residual=excess(log_b))

