"""SM-II's schedule: the sharpness of each sub-problem, when one ends, and the multiplier update between them.

Solver layer (SM-II): imports :mod:`~ffu_cvx.solvers.smii.multipliers` and :mod:`~ffu_cvx.solvers.smii.options` only.

Algorithm 1 solves Problem 4 at increasing soft-max sharpness ``t1, t2``. A sub-problem ends when the
Newton decrement falls below ``max(nttol, ntrel / t1)`` (a hundredth of it once shifted), when progress
stalls, or, with the option ``settle``, after a full step that gains little. Between sub-problems ``t``
grows by ``mu`` up to ``t_shift``;
from there each sub-problem's soft maxes are weighted by the damped log multipliers of the last one
(:func:`~ffu_cvx.solvers.smii.multipliers.damped_shift`) and ``t`` grows again (by at most ``SHIFT_GROW``) only
after ``SHIFT_PATIENCE`` shifted sub-problems in a row without a new best certified gap.
"""

from __future__ import annotations

import math

from .multipliers import damped_shift
from .options import Options

__all__ = ["Schedule", "settles"]

#: A shifted sub-problem ends at this fraction of the Newton-decrement threshold ``ntrel / t1``.
SHIFT_NTREL = 0.01
#: Shifted sub-problems in a row without a new best gap before ``t`` grows again, by at most ``SHIFT_GROW``.
SHIFT_PATIENCE = 2
SHIFT_GROW = 3.0
#: ``settle``: a sub-problem ends after a full Newton step that decreased ``F`` by less than ``SETTLE``
#: times the Newton-decrement threshold or (shifted) ``SETTLE_GAP`` times ``|F|`` times the iterate's gap,
#: unless that step's iterate has a gap over ``DRIFT`` times the best (after a multiplier update one full
#: step can land far from the new minimiser while ``F`` barely moves).
SETTLE = 100.0
SETTLE_GAP = 1e-2
DRIFT = 3.0
#: A sub-problem has stalled when the last step decreased ``F`` by less than this fraction of the threshold.
STALL = 0.1
#: Plain (unpreconditioned) CG's budget doubles, up to ``maxcg_cap``, after a full step that gained more
#: than this fraction of the previous one's gain: the truncated direction, not the line search, limits
#: progress.
CG_GROW_GAIN = 0.5


def settles(step: float, decrease: float, small: float, gap: float, best_gap: float) -> bool:
    """Whether a sub-problem ends after a step: a full step that decreased ``F`` by less than ``small``,
    unless ``gap`` (the iterate's certified gap in a shifted sub-problem; NaN otherwise or before the
    first certificate) is more than ``DRIFT`` times ``best_gap`` (the best certified gap so far)."""
    return step == 1.0 and decrease < small and not gap > DRIFT * best_gap


class Schedule:
    """The current sub-problem: its sharpness ``t1, t2``, its Newton steps so far (``sub_steps``), whether
    it has ``settled``, the CG budget, the last step's decrease of ``F``, and across shifted sub-problems
    the best gap they reached (``shift_best``) and the sub-problems since (``misses``).

    ``opts``: resolved :class:`~ffu_cvx.solvers.smii.options.Options`."""

    def __init__(self, opts: Options, t1: float, t2: float):
        self.opts, self.t1, self.t2 = opts, t1, t2
        self.sub_steps, self.settled = 0, False
        self.settle = SETTLE if opts.settle else 0.0
        self.cg_budget, self.last_decrease = opts.maxcg, math.inf
        self.shift_best, self.misses = math.inf, 0

    @property
    def shifting(self) -> bool:
        """Whether ``t1`` has reached ``t_shift``."""
        return self.t1 >= self.opts.t_shift

    def threshold(self, shifted: bool) -> float:
        """The Newton-decrement threshold of the current sub-problem (``shifted``: its soft maxes are)."""
        threshold = max(self.opts.nttol, self.opts.ntrel / self.t1)
        return threshold * SHIFT_NTREL if shifted else threshold

    def over(self, threshold: float) -> bool:
        """Whether the sub-problem is over before another direction: settled or stalled."""
        return self.settled or not self.last_decrease >= STALL * threshold

    def stepped(self, step: float, decrease: float) -> None:
        """Count a step of length ``step`` that decreased ``F`` by ``decrease``; plain CG's budget grows
        (``CG_GROW_GAIN``)."""
        opts = self.opts
        if not opts.precondition and opts.maxcg_cap > self.cg_budget and step == 1.0 and \
                decrease > CG_GROW_GAIN * self.last_decrease:
            self.cg_budget = min(2 * self.cg_budget, opts.maxcg_cap)
        self.last_decrease = decrease
        self.sub_steps += 1

    def settles_after(self, step: float, decrease: float, threshold: float, shifted: bool, gap: float,
                      objective: float, best_gap: float) -> bool:
        """Whether the step just counted settles the sub-problem (option ``settle``; ``gap``: the
        iterate's certified gap, ``objective``: its ``F``, ``best_gap``: the best end's)."""
        small = self.settle * threshold
        if shifted and self.settle > 0 and gap > 0:
            small = max(small, SETTLE_GAP * gap * abs(objective))
        first = gap if shifted and self.sub_steps == 1 else math.nan
        return settles(step, decrease, small, first, best_gap)

    def restarted(self) -> None:
        """After a restart: ``t`` grows at the next update and sub-problems no longer settle."""
        self.misses, self.settle = SHIFT_PATIENCE, 0.0

    def advance(self, gap: float, point, stiff: bool) -> tuple:
        """Move to the next sub-problem from the end ``point`` of certified ``gap``: returns its log
        multipliers ``(s1, s2)`` (None while unshifted) and sets the next ``t1, t2``. ``stiff``: the
        start was too stiff for ``t_shift`` (the first sub-problem there took no full step): one level down."""
        opts = self.opts
        grow = opts.mu
        shifted = self.shifting and not stiff
        if stiff:
            grow = 1.0 / SHIFT_GROW
        s1, s2 = point.s1, point.s2
        if shifted:
            s1, s2 = (damped_shift(x, t, s, cap=opts.shift_cap, floor=opts.shift_floor, fast_rise=opts.fast_rise)
                      for x, t, s in ((point.g, point.t1, s1), (point.h, point.t2, s2)))
            self.misses = 0 if gap < self.shift_best else self.misses + 1
            self.shift_best = min(self.shift_best, gap)
            if self.sub_steps > 0 and self.misses < SHIFT_PATIENCE:
                grow = 1.0
            else:
                grow, self.misses = min(grow, SHIFT_GROW), 0
        else:
            grow = min(grow, max(opts.t_shift / self.t1, 1.0))
        self.sub_steps, self.settled, self.last_decrease = 0, False, math.inf
        self.t1, self.t2 = self.t1 * grow, self.t2 * grow
        return s1, s2
