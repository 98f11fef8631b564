"""Budget from accuracy, and accuracy from a budget, table by table in the publisher's words.

Release layer, its top (above the solvers): imports numpy, ``model`` (``accuracy``, ``privacy``,
``problem``, ``validation``), ``workloads.products``, ``solvers`` and the release modules ``mechanism``
(Problem 2), ``noise`` and ``release``.

- :func:`smallest_budget`: the least privacy loss (epsilon at a given delta, and rho-zCDP)
  at which every target is met. Problem 1 finds the least privacy cost ``alpha``; the
  accounting of the release's sampler (:func:`ffu_cvx.release.noise.release_epsilon`: OpenDP's by
  default, the exact Gaussian mechanism for the ideal one) turns it into epsilon, and the
  certified lower bound on ``alpha`` into a certified lower bound on epsilon (no mechanism
  of this family released through that sampler meets the targets below it).
- :func:`accuracy_at`: at a given (epsilon, delta), what each table gets (Problem 2: the
  optimal mechanism scaled to that budget), as a margin at the table's own confidence
  level, or a variance, and whether its target is met.

Both describe the outcome per table (a product workload's group; a dense problem is
one table) with a :class:`TableAccuracy`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..model import privacy, validation
from ..model.accuracy import Target, margin_of
from ..model.problem import FitnessProblem
from ..solvers import solve
from ..workloads.products import ProductProblem
from . import noise
from .mechanism import problem2
from .release import DEFAULT_DELTA, TARGET_RTOL

__all__ = ["TableAccuracy", "Budget", "tables", "smallest_budget", "accuracy_at"]


@dataclass(frozen=True)
class TableAccuracy:
    """One table's outcome: ``name``, ``queries``, its ``target`` (as stated), ``worst_variance``
    over its queries, ``margin`` (the half-width at the target's level each query gets; None for
    a variance target) and ``met``."""

    name: str
    queries: int
    target: Target
    worst_variance: float
    margin: float | None
    met: bool

    def text(self) -> str:
        got = self.target.achieved(self.worst_variance)
        verdict = "met" if self.met else f"MISSED by a factor {self.worst_variance / self.target.variance:.4g} in variance"
        return f"{self.name}: asked {self.target.short()}, gets {got} ({verdict})"


@dataclass(frozen=True)
class Budget:
    """A privacy budget and the accuracy it buys.

    epsilon, delta, rho : the budget ((epsilon, delta)-DP and rho-zCDP of a release through
    ``sampler``); epsilon_lower_bound : certified lower bound on the least epsilon meeting
    every target (nan where the solution has no certificate); tables : one
    :class:`TableAccuracy` per table; solution : the Solution at this budget (its
    ``privacy_cost`` is ``alpha``); sampler : the release's sampler the numbers are for
    (None: the ideal continuous Gaussian mechanism); ideal_epsilon : the exact Gaussian
    mechanism's epsilon of the same ``alpha``.
    """

    epsilon: float
    delta: float
    rho: float
    epsilon_lower_bound: float
    tables: tuple
    solution: object
    sampler: str | None = "opendp"
    ideal_epsilon: float = math.nan

    @property
    def met(self) -> bool:
        return all(t.met for t in self.tables)

    def text(self) -> str:
        how = ("" if self.sampler is None else
               f" as released through the {self.sampler} sampler (an ideal continuous Gaussian: epsilon "
               f"{self.ideal_epsilon:.6g})")
        head = (f"({self.epsilon:.6g}, {self.delta:g})-DP, {self.rho:.6g}-zCDP{how}"
                + (f"; no mechanism meets every target below epsilon = {self.epsilon_lower_bound:.6g} (certified)"
                   if math.isfinite(self.epsilon_lower_bound) else ""))
        return "\n".join([head, *(f"  {t.text()}" for t in self.tables)])


def tables(solution, problem) -> tuple:
    """Per table of ``problem``: the worst variance of ``solution`` and what it delivers."""
    if isinstance(problem, ProductProblem):
        groups = problem.groups
        if solution.sigma is None and solution.variances is None:
            worst = [float(solution.group_variances(g).max()) for g in range(len(groups))]
        else:
            var, off = np.asarray(solution.variances), problem.workload.offsets
            worst = [float(var[off[g]:off[g + 1]].max()) for g in range(len(groups))]
        items = [(g.name, g.m, g.accuracy, w) for g, w in zip(groups, worst)]
    else:
        ratio = solution.variances / problem.c
        j = int(np.argmax(ratio))
        items = [(problem.name, problem.m, Target("variance", float(problem.c[j])), float(solution.variances[j]))]
    return tuple(TableAccuracy(name, m, goal, w,
                               None if goal.kind == "variance" else float(margin_of(w, goal.query_level)),
                               bool(w <= goal.variance * (1 + TARGET_RTOL)))
                 for name, m, goal, w in items)


def _check_problem(problem):
    if not isinstance(problem, (FitnessProblem, ProductProblem)):
        raise ValueError(f"`problem` must be a FitnessProblem or a ProductProblem (workload.to_problem()), got "
                         f"{type(problem).__name__}")
    return problem


def smallest_budget(problem, delta: float = DEFAULT_DELTA, method: str = "auto", sampler: str | None = "opendp",
                    **options) -> Budget:
    """The least (epsilon at ``delta``, rho) at which every target of ``problem`` is met.

    ``problem`` is solved with ``ffu_cvx.solve(problem, method, **options)`` (Problem 1:
    the least privacy cost ``alpha`` meeting every target). Returns a :class:`Budget`
    whose epsilon is what a release of ``alpha`` through ``sampler`` states (OpenDP's by
    default; None: the ideal Gaussian) and whose ``epsilon_lower_bound`` is that of the
    certified lower bound on ``alpha``.
    """
    problem = _check_problem(problem)
    delta = validation.fraction(delta, "delta")  # before any solve
    noise.inflation(sampler)
    solved = problem.for_method(method) if isinstance(problem, ProductProblem) else problem
    sol = solve(solved, method=method, **options)
    lb = sol.lower_bound
    eps_lb = (noise.release_epsilon(math.sqrt(lb), delta, sampler, inflate=False) if lb is not None and lb > 0
              else math.nan)
    dm = math.sqrt(sol.privacy_cost)
    return Budget(epsilon=noise.release_epsilon(dm, delta, sampler), delta=float(delta),
                  rho=privacy.zcdp_rho(dm * noise.inflation(sampler)), epsilon_lower_bound=eps_lb,
                  tables=tables(sol, problem), solution=sol, sampler=sampler, ideal_epsilon=sol.epsilon(delta))


def accuracy_at(problem, epsilon: float, delta: float = DEFAULT_DELTA, method: str = "auto",
                sampler: str | None = "opendp", **options) -> Budget:
    """What each table of ``problem`` gets at (``epsilon``, ``delta``): Problem 2's mechanism, table by table.

    Every variance of the optimal mechanism scales by the same factor ``k`` (certified
    optimal); each table's margin at its own confidence level follows. Returns a
    :class:`Budget` at (epsilon, delta) for a release through ``sampler`` (its statement
    states at most that budget).
    """
    problem = _check_problem(problem)
    p2 = problem2(problem, epsilon, delta, method=method, sampler=sampler, **options)
    sol = p2.solution
    return Budget(epsilon=float(epsilon), delta=float(delta), rho=privacy.zcdp_rho(p2.delta_m * noise.inflation(sampler)),
                  epsilon_lower_bound=math.nan, tables=tables(sol, problem), solution=sol, sampler=sampler,
                  ideal_epsilon=sol.epsilon(delta))
