"""SM-II's driver: Algorithm 1 as a small state machine, and ``solve_smii`` / ``solve_gd``.

Solver layer (SM-II), top of the package: imports numpy, ``model`` (``problem``, ``result``, ``status``), ``version`` and
the submodules :mod:`~ffu_cvx.solvers.smii.backend`, :mod:`~ffu_cvx.solvers.smii.model`, :mod:`~ffu_cvx.solvers.smii.newton`,
:mod:`~ffu_cvx.solvers.smii.bounds`, :mod:`~ffu_cvx.solvers.smii.options`, :mod:`~ffu_cvx.solvers.smii.schedule`,
:mod:`~ffu_cvx.solvers.smii.incumbents`, :mod:`~ffu_cvx.solvers.smii.mixing`, :mod:`~ffu_cvx.solvers.smii.kkt`, :mod:`~ffu_cvx.solvers.smii.polish`
and :mod:`~ffu_cvx.solvers.smii.log`.

A run (:class:`Run`) moves between four states: **step** (a direction from the step solver and a
line search), **end of sub-problem** (the Newton decrement is below the threshold, progress stalled,
or the last full step settled it), **certify** (the best lower bound so far,
:class:`~ffu_cvx.solvers.smii.bounds.BoundKeeper`) and **next t** (sharper soft maxes, or shifted ones).
Gradient descent is the same run with the gradient as direction. The iterate, ``B``, ``L`` and the
internal targets live on the array backend of the option ``array_backend`` (numpy by default); the
history, the callback's ``sigma``, the certificate and the Solution are numpy. Beyond the paper,
each an option that can be switched off (``docs/design/smii.rst`` gives the benchmark bank's ablation
that keeps it):

- Preconditioned CG (``precondition``) in single precision from k = 256 (``float32``), past ``maxcg``
  products while each pays for itself (:func:`~ffu_cvx.solvers.smii.newton.extension_pays`); plain CG's
  budget doubles while full steps gain less and less; both up to ``maxcg_cap``.
- A certified stop (:mod:`~ffu_cvx.solvers.smii.bounds`), certificates skipped far from ``tol``
  (``skip_certificates``) and by the soft-max weights alone past k = 256 (``cheap_certificate``).
- Sub-problems end early after a full step that gains little (``settle``, :mod:`~ffu_cvx.solvers.smii.schedule`).
- Shifted soft maxes (``t_shift``): once ``t1`` reaches ``t_shift`` each sub-problem weights its soft
  maxes by the previous one's weights (a damped exponential method of multipliers,
  :func:`~ffu_cvx.solvers.smii.multipliers.damped_shift`: capped per update by ``shift_cap``, floored by
  ``shift_floor``, rising faster with ``fast_rise``), whose fixed
  points are Problem 3's KKT points at any ``t``; a shifted sub-problem whose gap is over ``restarts``
  times the best sends the solver back to the cheapest iterate, sharper.
- The dual-ascent start (``start``) at ``t_shift``, one level lower where its first sub-problem takes
  no full step; KKT steps (``kkt``, :mod:`~ffu_cvx.solvers.smii.kkt`) finish from a sub-problem end that
  certifies ``kkt.START``; past ``kkt.WORTH_K`` only where the multiplier phase likely needs more
  Newton steps than they cost, or from the best end once that phase has gone astray.
- Mixed iterates (``mixing``, :mod:`~ffu_cvx.solvers.smii.mixing`): an iterate that does not certify ``tol``
  is mixed with the best end, the cheapest iterate and the last ends; a mix whose exact cost
  certifies ``tol`` ends the run.
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from typing import NamedTuple

import numpy as np

from ...model.problem import FitnessProblem
from ...model.result import Solution
from ...model.status import MAX_ITER, OPTIMAL, OPTIMAL_INACCURATE, USER_STOPPED, IntermediateResult, SolverError
from ...version import __version__
from . import kkt
from .backend import NUMPY, Placed, select
from .bounds import BoundKeeper
from .incumbents import Best, Incumbents
from .log import IterationLog, shown
from .mixing import mix
from .model import Point, ascent_start, evaluate, initial_sigma, normalise, renormalise
from .newton import Step, gradient_direction, line_search, smii_direction
from .options import Options, gd_options, smii_options
from .polish import polish
from .schedule import Schedule

__all__ = ["SMIIState", "solve_smii", "solve_gd"]

#: The old name of what ``callback`` receives.
SMIIState = IntermediateResult

#: A failed line search along a direction whose derivative is below this fraction of
#: ``|F|`` is rounding, not failure: the sub-problem ends.
ROUNDING = 1e-12


class Method(NamedTuple):
    """What tells SM-II and gradient descent apart.

    ``direction(p, L, c, maxcg, tol2, radius) -> Step`` is the step solver's (:mod:`~ffu_cvx.solvers.smii.newton`);
    a run that ends with a status in ``warn_on`` short of ``tol`` warns, with ``remedy``.
    """

    name: str
    title: str
    direction: object
    warn_on: tuple
    remedy: str


class Run:
    """One SM-II or gradient-descent run on ``problem``: the state of Algorithm 1.

    ``opts`` are resolved :class:`~ffu_cvx.solvers.smii.options.Options`, ``Q`` the optional start (§6.3). The
    state: the iterate ``p`` on the internal targets ``c_int = kappa c`` (:func:`~ffu_cvx.solvers.smii.model.normalise`),
    the sub-problem ``schedule`` (:class:`~ffu_cvx.solvers.smii.schedule.Schedule`), the certified ``bounds``
    (:class:`~ffu_cvx.solvers.smii.bounds.BoundKeeper`), the ``incumbents`` (:class:`~ffu_cvx.solvers.smii.incumbents.Incumbents`)
    and the counters ``nit``, ``n_hvp``, ``n_cg``, ``restarts``, ``n_kkt``.
    """

    def __init__(self, problem: FitnessProblem, opts: Options, Q, method: Method, callback):
        self.problem, self.opts, self.method, self.callback = problem, opts, method, callback
        self.start = time.perf_counter()
        self.log = IterationLog(f"{method.title} (ffu-cvx {__version__})", problem,
                                dict(t1=opts.t1, t2=opts.t2, mu=opts.mu, maxcg=opts.maxcg, tol2=opts.tol2,
                                     nttol=opts.nttol, tol=opts.tol))
        self.bk = bk = select(opts.array_backend)
        self.B, self.L = bk.asarray(problem.B), bk.queries(problem.L)
        self.bounds = BoundKeeper(problem, opts.tol, on=None if bk is NUMPY else Placed(bk, self.B, self.L),
                                  skip=opts.skip_certificates, cheap=opts.cheap_certificate)
        self.incumbents = Incumbents(problem.k, bk.to_numpy)
        self.nit = self.n_hvp = self.n_cg = self.restarts = self.n_kkt = 0
        self.longest = 0.0  # seconds of the longest round of the loop (Newton step or sub-problem end) so far
        self.timed_out = False
        self.kkt_below = kkt.START if opts.kkt else 0.0
        self.history: list[dict] = []
        self.status, self.message = None, ""
        self._start(Q)

    def _start(self, Q) -> None:
        """The first iterate (§6.3), or the dual-ascent start (option ``start``: it begins at ``t_shift``,
        its bound the run's first)."""
        problem, opts, bk = self.problem, self.opts, self.bk
        ascent = ascent_start(problem, bk) if Q is None and opts.start == "ascent" else None
        if Q is None and opts.start == "identity":
            Q = np.eye(problem.k)
        start = ascent[0] if ascent else initial_sigma(problem, Q, self.B, problem.L if bk is NUMPY else self.L, self.L)
        c = bk.asarray(problem.c)
        sigma, self.c_int, self.kappa = normalise(start, self.B, self.L, c) if opts.rebalance else (start, c, 1.0)
        t1, t2 = (max(opts.t1, opts.t_shift), max(opts.t2, opts.t_shift)) if ascent else (opts.t1, opts.t2)
        self.schedule = Schedule(opts, t1, t2)
        self.p = evaluate(self.B, self.L, self.c_int, sigma, t1, t2)
        if ascent:
            bound = self.bounds.offer(*ascent[1:])
            self.log.note(f"dual-ascent start: bound {bound:.8g}, t1 = {t1:g}, t2 = {t2:g}")

    def run(self) -> Solution:
        """Newton steps and sub-problem ends until a status is set; then the Solution."""
        while self.status is None and not self._out_of_budget():
            t = time.perf_counter()
            threshold = self.schedule.threshold(self.p.s1 is not None)
            found = None if self.schedule.over(threshold) else self._newton_step(threshold)
            if found is None:
                # Sub-problem solved: Newton decrement below threshold, settled, stalled or at rounding level.
                self._end_subproblem()
            else:
                self._accept(*found, threshold)
            self.longest = max(self.longest, time.perf_counter() - t)
        return self._finish()

    def _expired(self, ahead: float = 0.0) -> bool:
        """Whether ``max_time`` is spent, or would be ``ahead`` seconds from now."""
        cap = self.opts.max_time
        return cap is not None and time.perf_counter() - self.start + ahead > cap

    def _out_of_budget(self) -> bool:
        opts = self.opts
        if self.nit >= opts.maxiter:
            self.status, self.message = MAX_ITER, f"reached maxiter = {opts.maxiter}"
        elif self._expired(ahead=self.longest):  # another round as long as the longest would overrun
            self.status, self.message = MAX_ITER, f"reached max_time = {opts.max_time} s"
            self.timed_out = True
        return self.status is not None

    def _newton_step(self, threshold: float) -> tuple[float, Point, Step] | None:
        """A direction on the soft maxes and its line search: ``(step, new point, direction)``, or None when
        the Newton decrement is below ``threshold`` or the line search fails at rounding level."""
        p, opts, sched = self.p, self.opts, self.schedule
        d = self.method.direction(p, self.L, self.c_int, sched.cg_budget, opts.tol2, opts.radius)
        self.n_hvp += d.n_cg  # each CG iteration is one Hessian product
        self.n_cg += d.n_cg
        if not abs(d.delta) >= threshold:
            return None
        B, L, c_int = self.B, self.L, self.c_int

        def at(step):
            return evaluate(B, L, c_int, p.sigma + step * d.D, p.t1, p.t2, h=p.h + step * d.e, s1=p.s1, s2=p.s2)

        step, q = line_search(at, p.F, d.delta, opts.sigma_ls, opts.beta)
        if q is None:
            if abs(d.delta) > ROUNDING * abs(p.F):
                raise SolverError(
                    f"{self.method.name}: line search made no progress at iteration {self.nit} (t1 = {sched.t1:.3g}, "
                    f"t2 = {sched.t2:.3g}, objective = {p.F:.12g}, directional derivative = {d.delta:.3e}, "
                    f"last step = {step:.3e}); try a smaller `mu` or a looser `tol`",
                    nit=self.nit, residual=abs(d.delta))
            return None
        return step, q, d

    def _accept(self, step: float, q: Point, d: Step, threshold: float) -> None:
        """Move to ``q``; decide whether the sub-problem has settled (the best bound certifies ``q``, or the
        schedule's settle rule), report, and try a mix near ``tol`` (not kept: the cost swings)."""
        decrease = self.p.F - q.F
        self.schedule.stepped(step, decrease)
        self.p = q
        self.nit += 1
        alpha = q.cost(self.kappa)
        self.incumbents.accepted(q, alpha, self.nit, self.kappa, self.c_int)
        now = self.bounds.gap(alpha)
        self.schedule.settled = self.bounds.certifies(alpha) or self.schedule.settles_after(
            step, decrease, threshold, q.s1 is not None, now, q.F, self.incumbents.best_gap)
        self._report(alpha, step, d.n_cg)
        if not self.schedule.settled and self.status is None and self._mixing_near(now):
            mixed = self._mix(q, now, keep=False)
            if mixed <= self.opts.tol:
                self.status, self.message = OPTIMAL, f"certified relative gap {mixed:.2e} <= tol = {self.opts.tol:g}"

    def _report(self, alpha: float, step: float, n_cg: int) -> None:
        """History, log row and callback for the iterate just accepted."""
        p, nit, t1, t2 = self.p, self.nit, self.schedule.t1, self.schedule.t2
        ratio, gap = p.ratio(self.kappa), self.bounds.gap(alpha)
        self.history.append({"nit": nit, "t1": t1, "t2": t2, "objective": p.F, "alpha": alpha,
                             "ratio": ratio, "n_cg": n_cg, "step": step, "time": time.perf_counter() - self.start})
        self.log.row(nit, t1, t2, p.F, alpha, ratio, n_cg, step, gap)
        if self.callback is None:
            return
        state = IntermediateResult(method=self.method.name, nit=nit, privacy_cost=alpha,
                                   lower_bound=self.bounds.lower_bound, gap=gap,
                                   sigma=self.bk.to_numpy(p.sigma) / ratio, t1=t1, t2=t2,
                                   objective=p.F, alpha=alpha, ratio=ratio, step=step, n_cg=n_cg)
        try:
            self.callback(state)
        except StopIteration:
            self.status, self.message = USER_STOPPED, f"callback raised StopIteration at iteration {nit}"

    def _end_subproblem(self) -> None:
        """Certify the sub-problem's end (mixed, or finished by KKT steps, where that pays); stop, or go on."""
        p, opts, inc = self.p, self.opts, self.incumbents
        gap = self.bounds.certify(p, self.kappa, self.c_int, force=False)
        self.log.note(f"sub-problem t1 = {self.schedule.t1:.3g} done: alpha = {p.cost(self.kappa):.8g}, "
                      f"lower bound = {self.bounds.value:.8g}, gap = {gap:.2e}")
        inc.rescored(self.bounds)
        if gap > opts.tol and self._mixing_near(gap):
            gap = self._mix(p, gap)
        if gap < (before := inc.best_gap):
            inc.best = Best(gap, p, self.kappa)
        # Unshifted ends too: KKT steps finish from any end whose gap is under kkt.START, shifted or not.
        if opts.tol < gap <= self.kkt_below and kkt.pays(gap, before, opts.tol, self.schedule.sub_steps,
                self.problem.k, kkt.qp_order(self.bk.to_numpy(p.g), self.bk.to_numpy(p.h))):
            gap = min(gap, self._kkt_finish(p, gap))
        elif self._astray(gap) and opts.tol < inc.best.gap <= self.kkt_below:
            # The multiplier phase went astray: KKT steps from the best end rather than its restart.
            gap = min(gap, self._kkt_finish(inc.best.point, inc.best.gap))
        if gap <= opts.tol:
            self.status, self.message = OPTIMAL, f"certified relative gap {gap:.2e} <= tol = {opts.tol:g}"
        elif self.schedule.t1 >= opts.t_max:
            self.status, self.message = OPTIMAL_INACCURATE, (f"t1 reached t_max = {opts.t_max:g} with certified gap "
                                                             f"{gap:.2e} > tol = {opts.tol:g}")
        else:
            self._next_subproblem(gap)

    def _kkt_finish(self, p: Point, gap: float) -> float:
        """The gap after KKT steps from the end ``p`` (of ``gap``) if they beat the best end (now theirs), else inf."""
        pr, start, bd, t = self.problem, p.to_numpy(), self.bounds, time.perf_counter()
        # A KKT step costs about what the ones before it did: none starts that would overrun max_time.
        found, n = kkt.newton(pr.B, pr.L, pr.c, start.sigma, start.w, bd.offer, self.opts.tol, bd.value,
                              expired=lambda n: self._expired(ahead=(time.perf_counter() - t) / max(n, 1)))
        self.n_kkt, self.kkt_below = self.n_kkt + n, kkt.RETRY * gap
        q = None if found is None else evaluate(self.B, self.L, self.c_int, self.bk.asarray(found.sigma), p.t1,
                                                p.t2, s1=p.s1, s2=p.s2)
        new = math.inf if q is None else self.bounds.gap(q.cost(self.kappa))
        self.log.note(f"{n} KKT steps: gap {new:.2e}")
        if q is None or not new < self.incumbents.best_gap:
            return math.inf
        self.incumbents.best = Best(new, q, self.kappa)
        self.p, self.nit = q, self.nit + 1  # the run goes on from there, and reports it as one iteration
        self._report(q.cost(self.kappa), found.step, 0)
        return new

    def _astray(self, gap: float) -> bool:
        """Whether a shifted sub-problem's end of ``gap`` is over ``restarts`` times the best end's."""
        restarts = self.opts.restarts
        return restarts is not None and self.schedule.shifting and gap > restarts * self.incumbents.best.gap

    def _mixing_near(self, gap: float) -> bool:
        """Whether mixing is on and ``gap``, the best end's or the cheapest iterate's is near ``tol``."""
        return self.opts.mixing and self.incumbents.near(gap, self.bounds, self.opts.tol)

    def _mix(self, p: Point, gap: float, keep: bool = True) -> float:
        """The gap after mixing the iterate ``p`` (gap ``gap``) with the best end so far, the cheapest
        iterate and the kept ends (:mod:`~ffu_cvx.solvers.smii.mixing`): a mix whose exact cost certifies ``tol``
        becomes the best iterate (the caller then stops); with ``keep`` ``p`` joins the kept ends."""
        kappa, inc = self.kappa, self.incumbents
        this, found = inc.partner(p, kappa, keep)
        if found is None or not self.bounds.certifies(found[0]):
            return gap
        _, theta, sigma2, scale2 = found
        q = evaluate(self.B, self.L, self.c_int, mix(p.sigma, sigma2 * (this[1] / scale2), theta),
                     p.t1, p.t2, s1=p.s1, s2=p.s2)
        mixed_gap = math.inf if q is None else self.bounds.gap(q.cost(kappa))
        if not mixed_gap <= self.opts.tol:
            return gap
        inc.best, inc.mixed = Best(mixed_gap, q, kappa), theta
        self.log.note(f"mix of this iterate (weight {theta:.3f}) and an earlier one: alpha = {q.cost(kappa):.8g}, "
                      f"gap = {mixed_gap:.2e}")
        return mixed_gap

    def _next_subproblem(self, gap: float) -> None:
        """Restart where the multiplier phase went astray, update the multipliers and ``t``
        (:meth:`~ffu_cvx.solvers.smii.schedule.Schedule.advance`), and rescale the point for the new soft maxes."""
        sched = self.schedule
        # A start too stiff for t_shift: the first sub-problem there took no full step.
        stiff = sched.shifting and self.p.s1 is None and self.nit == sched.sub_steps and \
            all(h["step"] < 1 for h in self.history)
        if self._astray(gap):
            self.p, self.restarts = self._restart_point(gap), self.restarts + 1
            sched.restarted()
        p = self.p
        s1, s2 = sched.advance(gap, p, stiff)
        if not self.opts.rebalance:
            self.p = evaluate(self.B, self.L, self.c_int, p.sigma, sched.t1, sched.t2, s1=s1, s2=s2)
        elif self.opts.rescale:
            self.p, self.c_int, a = renormalise(p, self.L, self.c_int, sched.t1, sched.t2, s1, s2)
            self.kappa *= a
        else:
            sigma, self.c_int, a = normalise(p.sigma, self.B, self.L, self.c_int, g=p.g)
            self.p = evaluate(self.B, self.L, self.c_int, sigma, sched.t1, sched.t2, s1=s1, s2=s2)
            self.kappa *= a

    def _restart_point(self, gap: float) -> Point:
        """Where a restart (this end's ``gap``) resumes: the accepted iterate of least cost when it is
        cheaper than the best sub-problem end, else that end. The iterate keeps its sub-problem's soft
        maxes, so the next multiplier update starts from its own weights."""
        low, best = self.incumbents.lowest, self.incumbents.best
        q = None
        if low is not None and low.alpha < best.point.cost(best.kappa):
            q = evaluate(self.B, self.L, low.c_int, low.end[0], low.t1, low.t2, s1=low.s1, s2=low.s2)
        where = "the best sub-problem end" if q is None else f"iteration {low.nit} (alpha = {low.alpha:.8g})"
        self.log.note(f"gap {gap:.2e} > {self.opts.restarts:g} x best {best.gap:.2e}: back to {where}")
        return best.point if q is None else q

    def _finish(self) -> Solution:
        """The one Solution: the best certified iterate (or the last), rescaled, polished if asked."""
        problem, opts, status, best = self.problem, self.opts, self.status, self.incumbents.best
        # The best certified iterate wins unless the run went on past it (user stop, iteration limit); out of
        # time it wins too, and the last iterate is certified only while time is left.
        if status == OPTIMAL or (best is not None and (status == OPTIMAL_INACCURATE or self.timed_out)):
            p, kappa = best.point, best.kappa
        else:
            p, kappa = self.p, self.kappa
            if not self.timed_out:
                self.bounds.certify(p, kappa, self.c_int)
        lb = self.bounds.value
        p = p.to_numpy()  # the Solution, its certificate and the polish are numpy float64
        sigma = p.sigma / p.ratio(kappa)
        extra = {}
        if opts.refine and status == OPTIMAL and not self._expired():
            sigma, extra, nh = polish(problem, sigma, lb, opts.tol, self.log, main_hvp=self.n_hvp,
                                      budget=opts.refine_budget)
            self.n_hvp += nh
        elapsed = time.perf_counter() - self.start
        sol = Solution.from_sigma(problem, sigma, method=self.method.name, status=status, message=self.message,
                                  lam=self.bounds.lam, mu=self.bounds.mu, lower_bound=lb, nit=self.nit,
                                  n_hvp=self.n_hvp, time=elapsed, history=self.history, n_cg=self.n_cg,
                                  t1=self.schedule.t1, t2=self.schedule.t2, restarts=self.restarts,
                                  mix=self.incumbents.mixed, kkt_steps=self.n_kkt, **extra)
        self.log.note(f"status {status}: {self.message}; alpha = {sol.privacy_cost:.10g}, lower bound = "
                      f"{sol.lower_bound:.10g}, gap = {sol.gap:.2e}, {self.nit} iterations, {self.n_hvp} Hessian "
                      f"products, {elapsed:.2f} s")
        if status in self.method.warn_on and not sol.gap <= opts.tol:
            # stacklevel: _finish <- run <- solve_smii / solve_gd <- its caller
            short = "" if status == OPTIMAL_INACCURATE else f" at certified gap {sol.gap:.2e} > tol = {opts.tol:g}"
            warnings.warn(f"{self.method.name}: {self.message}{short}; {self.method.remedy}", RuntimeWarning,
                          stacklevel=4)
        return sol


def _check_problem(problem) -> None:
    if not isinstance(problem, FitnessProblem):
        raise ValueError(f"`problem` must be a FitnessProblem, got {type(problem).__name__}")


def solve_smii(problem: FitnessProblem, *, callback=None, Q=None, options: Options | None = None,
               **keywords) -> Solution:
    """Solve Problem 1 by SM-II (Algorithm 1 of the paper) with a certified stop.

    The settings are one :class:`~ffu_cvx.solvers.smii.options.Options` (``options``), its fields by keyword, or
    both (the keywords replace the value's fields); :meth:`Options.paper() <ffu_cvx.solvers.smii.options.Options.paper>`
    runs Algorithm 1 as published (``docs/design/smii.rst`` tabulates what it switches off).

    Parameters
    ----------
    problem : FitnessProblem
        ``B`` (k, d), ``L`` (m, k), targets ``c`` (m,).
    callback : callable, optional
        ``callback(intermediate_result)`` after every iteration, with an
        :class:`ffu_cvx.model.status.IntermediateResult` (``SMIIState`` is its old name):
        ``method``, ``nit``, ``privacy_cost`` (the normalised cost ``alpha`` of the
        iterate), ``lower_bound`` and ``gap`` (the best certified bound so far and the
        iterate's gap against it; NaN before the first certificate), ``sigma`` (the
        iterate rescaled to meet every target), ``t1``, ``t2``, ``objective``, ``alpha``,
        ``ratio`` (worst variance ratio before rescaling), ``step`` and ``n_cg``.
        ``StopIteration`` stops with status ``"user_stopped"``.
    Q : (q, k) array, optional
        Initial strategy on the basis coordinates (§6.3); full column rank. Default: see ``start``.
    start : {"auto", "ascent", "cheapest", "identity"}, default "auto"
        Without ``Q``: "identity" the paper's ``Q = I``; "cheapest" of ``Q = I``, ``Sigma_0 = B B^T``, the Gaussian mechanism
        on the target-scaled workload and the ``Sigma`` of uniform dual multipliers (:func:`initial_sigma`);
        "ascent": the dual ``Sigma`` of five dual-ascent steps (:func:`ascent_start`; its bound is the run's
        first, ``t1, t2`` start at ``t_shift`` or more); "auto": "ascent" for ``64 <= k <= 2100`` on numpy.
    t1, t2 : float, default 1.0
        Initial soft-max sharpness of the profile and variance terms (paper: 1).
    mu : float, default 10.0
        Factor by which ``t1, t2`` grow between sub-problems (paper: 2, 5 or 10).
    maxcg, tol2 : int, float, default 5, 1e-10
        CG iterations per Newton step and CG residual tolerance (paper: 5, 1e-10).
    maxcg_cap : int, default 40
        The most CG iterations of one Newton step (``maxcg`` keeps the paper's fixed budget).
        Preconditioned CG goes past ``maxcg`` while each further Hessian product pays for
        itself (:func:`ffu_cvx.solvers.smii.newton.extension_pays`); plain CG's budget doubles while
        full Newton steps gain more than half of what the previous one gained.
    nttol, ntrel : float, default 1e-10, 1e-3
        A sub-problem ends when ``|<s, grad F>| < max(nttol, ntrel / t1)`` (NTTOL; the relative part
        stops early sub-problems once solved past the accuracy of their soft max); see also ``settle``.
    sigma_ls, beta : float, default 0.01, 0.5
        Armijo fraction and backtracking factor of the line search (paper: 0.01, 0.5).
    maxiter, max_time : int, float or None, default 2000, None
        Newton iterations in all (MAXITER); ``max_time`` (s) caps the wall-clock time.
    tol : float, default 1e-4
        Certified relative gap at which to stop (replaces the paper's ``(d+m)/t1 < TOL``).
    t_max : float, default 1e9
        Largest ``t1``: past it the best certified iterate is returned as ``"optimal_inaccurate"``.
    t_shift : float or None, default 30.0
        Sharpness at which ``t1`` stops growing by default (None or inf: never, the paper's
        schedule). From there on each sub-problem's soft maxes are weighted by multipliers moved
        towards the previous one's weights (:mod:`ffu_cvx.solvers.smii.multipliers`), so the soft-max bias
        no longer needs ``t ~ log(d) / tol``; ``t1, t2`` grow again (by at most 3) only when two
        shifted sub-problems in a row do not improve on the best certified gap. For ``64 <= k <=
        2100``, from a gap of 0.1 (past k = 1024 where the multiplier phase likely needs more Newton
        steps than they cost, or has gone astray), KKT steps finish (:mod:`ffu_cvx.solvers.smii.kkt`).
    radius : float or None, default 1.0
        Truncated CG stops on the ball ``||E||_F <= radius sqrt(k)`` in whitened
        coordinates (a relative change of ``Sigma`` of about ``radius`` per direction); None: no
        ball, CG stops at non-positive curvature only (the paper's Algorithm 2).
    refine : bool or "auto", default "auto"
        After a certified ("optimal") solve, polish ``Sigma`` to the unique ≺R-minimal optimum (Theorem
        5) by :func:`refine_smii`; "auto" does so when ``k <= REFINE_AUTO_MAX_K`` (the soft max alone does
        not single it out: at the ``t`` a small gap needs, the weights of slack columns underflow).
    refine_budget : float, default 20
        The polish may spend ``max(refine_budget x the main solve's Hessian products, 20000)``
        products; past that the certified main result is returned with ``info["refine_failed"]``
        and a ``RuntimeWarning``.
    precondition : bool or "auto", default "auto"
        CG in the eigenbasis of the profile term's ``M`` with a diagonal-plus-rank-two inverse
        of the Hessian (:meth:`ffu_cvx.solvers.smii.model.Whitened.preconditioner`); False: the paper's
        plain CG; "auto": when ``k > PRECONDITION_MIN_K`` (4), except on the paper's schedule
        (``t_shift=None``), where plain CG certifies more workloads.
    float32 : bool or "auto", default "auto"
        The Hessian products inside CG in single precision (about twice as fast at large
        ``k``); gradients, line search and certificate stay float64. "auto": from ``k = 256``.
    kkt : bool or "auto", default "auto"
        Finish by KKT steps (:mod:`ffu_cvx.solvers.smii.kkt`) from a sub-problem end that certifies 0.1;
        "auto": for ``64 <= k <= 2100``.
    mixing : bool, default True
        Mix an iterate near ``tol`` with earlier ends (:mod:`ffu_cvx.solvers.smii.mixing`); stop on a mix that certifies.
    restarts : float or None, default 3
        Go back to the cheapest iterate, sharper, when a shifted sub-problem's gap exceeds this multiple of
        the best (None: never).
    cheap_certificate : bool or "auto", default "auto"
        Certify sub-problem ends by the bound of the soft-max weights alone (no dual ascent); "auto": ``k > 256``.
    settle : bool, default True
        End a sub-problem after a full step that gained under 100 times the decrement threshold (shifted:
        or 1% of the gap), unless that step drifted from the best gap.
    skip_certificates : bool, default True
        Reuse the best bound instead of certifying (at most 3 ends in a row) while the gap is far above
        ``tol`` or the bound has stalled.
    shift_cap, shift_floor : float or None, default 2, 11
        Largest drop of a log multiplier per update, and how far below the largest it may fall, both
        relative to the largest (None: no bound).
    fast_rise : bool, default True
        Raise growing log multipliers up to 4 times faster than the damped update (:mod:`ffu_cvx.solvers.smii.multipliers`).
    rebalance : bool, default True
        Scale the start and each sub-problem's first point so that ``max g = max h`` (the scale at
        which ``max g + max h`` is least for the point's shape; the normalised cost is unchanged);
        False: the paper's, the iterate is kept as it is.
    rescale : bool or "auto", default "auto"
        With ``rebalance``, start each sub-problem from the last point rescaled rather than factored afresh;
        "auto": ``k >= 1000``.
    verbose : bool, default False
        Print the iteration log on stdout (:mod:`ffu_cvx.solvers.smii.log`; it is the DEBUG records of the
        logger ``"ffu_cvx.solvers.smii"`` whatever ``verbose`` says).
    array_backend : str, default "numpy"
        Where the dense kernels run (:mod:`ffu_cvx.solvers.smii.backend`): ``"numpy"`` (the default and tested
        path), ``"torch"`` (CUDA when available, else the CPU), ``"torch:cpu"``, ``"torch:cuda"`` or
        ``"cupy"``, all float64 (the extra ``ffu-cvx[gpu]``). The classic start (``k >= 1000``) and the
        cheap certificate (``k > 256``) run there too; dual ascents, KKT steps, the polish and the
        Solution are numpy float64. Iterates match numpy's to rounding step by step; over a run to
        about 1e-10 where the trajectory is stable, to the certified tolerance where not.

    Returns
    -------
    Solution
        ``sigma`` (k, k) meeting every target (max ratio 1), ``privacy_cost``, ``lower_bound``, ``gap``,
        ``lam`` (d,) and ``mu`` (m,) (the bound's multipliers, ``mu`` divided by ``c``), ``nit``, ``n_hvp``,
        ``time``, ``history``; ``info`` holds ``n_cg``, the final ``t1`` and ``t2``, ``restarts`` (returns to
        the best iterate after a shifted sub-problem went astray), ``kkt_steps`` (:mod:`ffu_cvx.solvers.smii.kkt`),
        ``mix`` (``None``, or the weight ``theta`` of the last iterate when ``sigma`` is its convex
        combination with an earlier one, :mod:`ffu_cvx.solvers.smii.mixing`) and, when refined, ``refine_levels``
        (list of ``{"value", "columns"}``, decreasing), ``refine_newton``, ``refine_time`` and, if the
        polish was rejected, ``refine_failed``.

    Raises
    ------
    ValueError
        On a malformed ``problem``, ``Q`` or option (named in the message); an unknown
        option is a ``TypeError``.
    SolverError
        When the line search cannot decrease ``F`` along a descent direction.
    """
    _check_problem(problem)
    opts = smii_options(options, **keywords).resolved(problem.k)
    direction = functools.partial(smii_direction, precondition=opts.precondition, float32=opts.float32,
                                  extend_to=opts.maxcg_cap if opts.precondition else 0)
    method = Method("smii", "SM-II: Newton-CG on soft maxes", direction, (OPTIMAL_INACCURATE,),
                    "raise `t_max` or loosen `tol`")
    with shown(opts.verbose):
        return Run(problem, opts, Q, method, callback).run()


def solve_gd(problem: FitnessProblem, *, callback=None, Q=None, options: Options | None = None,
             **keywords) -> Solution:
    """Plain gradient descent on Problem 4 (Table 3's baseline): SM-II with ``s = -grad F``.

    Same objective, schedule of ``t1, t2`` (never shifted), line search, certificate and
    outputs as :func:`solve_smii` (see there). Options: ``t1``, ``t2``, ``mu``,
    ``nttol``, ``ntrel``, ``sigma_ls``, ``beta``, ``maxiter`` (default 100000), ``tol``,
    ``t_max``, ``max_time`` (s, default 60), ``verbose`` and ``array_backend``. A run stopped by
    ``max_time`` or ``maxiter`` short of ``tol`` ends with status ``"max_iter"`` and a
    ``RuntimeWarning`` naming the gap reached: gradient descent is far slower than
    Newton-CG (Table 3), use ``method="smii"`` for a certified optimum. ``options``: an
    :class:`~ffu_cvx.solvers.smii.options.Options` used as given (with these keywords on top).
    """
    _check_problem(problem)
    opts = gd_options(options, **keywords).resolved(problem.k)
    method = Method("gd", "Gradient descent on soft maxes", gradient_direction, (MAX_ITER, OPTIMAL_INACCURATE),
                    'gradient descent converges slowly (Table 3): method="smii" runs Newton-CG on the same '
                    "objective and reaches tol far sooner")
    with shown(opts.verbose):
        return Run(problem, opts, Q, method, callback).run()
