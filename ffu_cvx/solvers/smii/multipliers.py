"""The multiplier update of SM-II's shifted soft maxes: a damped exponential method of multipliers.

Solver layer (SM-II): imports numpy and :mod:`ffu_cvx.solvers.smii.backend` /
:mod:`ffu_cvx.solvers.smii.model` only (it takes its array namespace from its argument, so it runs
on every array backend).

Past ``t_shift`` each sub-problem weights its soft maxes by log multipliers ``s``,
``smax = (1/t) log sum_i exp(t x_i + s_i)`` (:func:`ffu_cvx.solvers.smii.model.softmax`), and the
driver (:mod:`ffu_cvx.solvers.smii.driver`) moves ``s`` towards the log of the last sub-problem's
weights between sub-problems (:func:`damped_shift`). Its fixed points are Problem 3's KKT
points at any ``t``, so the soft max's bias of order ``log(d) / t`` is removed by the
multipliers instead of by sharpening ``t``.
"""

from __future__ import annotations

import math

import numpy as np

from .backend import of
from .model import logits

__all__ = ["SHIFT_DAMP", "SHIFT_CAP", "SHIFT_FLOOR", "RISE_MAX", "RISE_RATE", "damped_shift"]

#: Step of the multiplier update in the log domain (1, the plain exponential method of multipliers,
#: alternates between good and poor iterates).
SHIFT_DAMP = 0.7
#: Largest drop of a log multiplier relative to the largest per update (option ``shift_cap``): uncapped,
#: the multipliers of slack constraints fall by ``0.7 t`` times their slack and the soft max stops seeing them.
SHIFT_CAP = 2.0
#: No log multiplier falls more than this below the largest (option ``shift_floor``): the soft max keeps
#: seeing every constraint (weight at least e^-11 before its own ``exp(t x)``, a bias far below ``tol`` at
#: ``t >= t_shift``), so ``F`` is not flat along directions that violate a slack constraint.
SHIFT_FLOOR = 11.0
#: With the option ``fast_rise`` a log multiplier that rises moves ``min(exp(RISE_RATE (max s - s_j)),
#: RISE_MAX)`` times further than ``SHIFT_DAMP`` alone moves it: the plain update raises a violated
#: constraint's log multiplier by only ``SHIFT_DAMP t`` times its small excess; larger factors overshoot.
RISE_MAX = 4.0
RISE_RATE = 0.5


def damped_shift(x: np.ndarray, t: float, shift=None, *, cap: float | None = SHIFT_CAP,
                 floor: float | None = SHIFT_FLOOR, fast_rise: bool = True) -> np.ndarray:
    """The next log multipliers (n,): ``shift + theta (log w - shift)``, ``w`` the
    weights of :func:`ffu_cvx.solvers.smii.model.softmax` (computed in the log domain, finite
    where they underflow), ``theta = SHIFT_DAMP`` (with ``fast_rise``, times the
    ``RISE_MAX``-bounded factor where ``log w > shift``); ``shift = None`` counts as uniform.
    Relative to the largest, no entry falls by more than ``cap`` in one update, nor
    ever below ``-floor`` (None: no such bound)."""
    bk = of(x)
    xp = bk.xp
    y, _ = logits(x, t, shift)
    logw = y - math.log(float(xp.sum(xp.exp(y))))
    if shift is None:
        new, before = SHIFT_DAMP * logw, 0.0
    else:
        before = shift - xp.max(shift)
        step = logw - shift
        if fast_rise:
            step = xp.where(step > 0, step * bk.minimum(xp.exp(-RISE_RATE * before), RISE_MAX), step)
        new = shift + SHIFT_DAMP * step
    top = float(xp.max(new))
    new = new - top
    if cap is not None:
        new = bk.maximum(new, before - cap)
    if floor is not None:
        new = bk.maximum(new, -floor)
    return top + new
