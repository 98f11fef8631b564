"""The multiplier update of SM-II's shifted soft maxes: a damped exponential method of multipliers.

Solver layer (SM-II): imports numpy and :mod:`ffu_cvx.smii.backend` /
:mod:`ffu_cvx.smii.model` only (it takes its array namespace from its argument, so it runs
on every array backend).

Past ``t_shift`` each sub-problem weights its soft maxes by log multipliers ``s``,
``smax = (1/t) log sum_i exp(t x_i + s_i)`` (:func:`ffu_cvx.smii.model.softmax`), and the
driver (:mod:`ffu_cvx.smii.driver`) moves ``s`` towards the log of the last sub-problem's
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

#: Step of the multiplier update in the log domain. At 1 (the plain exponential method of
#: multipliers) the iterates alternated between good and poor ones on random ranges
#: d = 1024 (212 s); 0.5 converged steadily (gap x 0.58 per sub-problem, 96 s), 0.7 in 80 s.
SHIFT_DAMP = 0.7
#: Largest drop of a log multiplier (relative to the largest) per update. Uncapped, the
#: multipliers of slack constraints fall by ``0.7 t`` times their slack each time and the
#: soft max soon stops seeing them (see the driver's restarts); capped at 2, random ranges
#: d = 1024 took 43 / 47 / 57 s for seeds 0 / 1 / 2 against 47 / 69 / 68 s.
SHIFT_CAP = 2.0
#: No log multiplier falls more than this below the largest, however many updates: the
#: soft max keeps seeing every constraint (weight >= e^-11 before its own exp(t x)), so a
#: sub-problem's ``F`` is not flat along directions that violate a slack constraint and
#: the iterate drifts there less often (fewer the driver's restarts restarts). Its bias, e^-11
#: exp(-t slack) per slack constraint, is far below ``tol`` at ``t >= t_shift``. Newton
#: steps at tol 1e-4, d = 512, without a floor -> floor 11: prefix with decades targets
#: 100 -> 94, 4-ary tree with random targets 118 -> 82, random ranges seeds 0 / 1
#: 39 / 48 -> 39 / 40, prefix 22 -> 22 (floor 10: 76, 95, 39 / 42; floor 9: 89, 129,
#: 41 / 53). At d = 256 floor 10 did as well, but a torch run of random ranges d = 32
#: then parted from numpy's by 1.5e-10; bench_smii at tol 1e-3 (d = 512, 1,024) is unchanged.
#: A floor closer to the largest as t grows past ``t_shift`` (11 t_shift / t: slack constraints
#: stay visible at smaller violations) weakens the bound of the weights: seven d = 256 cells
#: (``bench_workloads`` problems, tol 1e-4, one BLAS thread) took 347 -> 1,185 Newton steps.
#: Over 36 d = 256 cells (decades, trees, ranges, seeds 0-11) floors 9 / 8 / 6 took 1,861 /
#: 1,865 / 2,129 steps against 1,873 (measured without ``RISE_MAX``'s faster rises).
SHIFT_FLOOR = 11.0
#: A log multiplier that rises is moved ``min(exp(RISE_RATE (max s - s_j)), RISE_MAX)`` times
#: further than ``SHIFT_DAMP`` alone would move it. The plain update raises the multiplier of a
#: constraint above the soft max's level by ``SHIFT_DAMP t`` times its excess, in the log:
#: near a gap of 1e-3 on prefix with targets over decades (d = 256, t = 30) the largest variance
#: ratios belong to constraints 7 to 11 below the largest log multiplier, 4e-4 to 2.5e-3 above
#: the level, and rise by about 0.02 a sub-problem. Newton steps (Hessian products), tol 1e-4,
#: one BLAS thread, ``bench_workloads`` targets over decades, 4-ary trees and random ranges,
#: seeds 0-11: d = 256 1,965 (11,081) -> 1,845 (10,090), d = 512 2,474 (15,182) -> 2,200
#: (12,554); ``RISE_MAX`` 2 / 10 / 25: 1,915 / 1,887 / 1,964 at d = 256; 100 (``RISE_RATE`` 1)
#: 4,012: large rises overshoot.
RISE_MAX = 4.0
RISE_RATE = 0.5


def damped_shift(x: np.ndarray, t: float, shift=None, *, cap: float | None = SHIFT_CAP,
                 floor: float | None = SHIFT_FLOOR, fast_rise: bool = True) -> np.ndarray:
    """The next log multipliers (n,): ``shift + theta (log w - shift)``, ``w`` the
    weights of :func:`ffu_cvx.smii.model.softmax` (computed in the log domain, finite
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
