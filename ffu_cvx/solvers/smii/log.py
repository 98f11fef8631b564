"""SM-II's iteration log: a CVXPY-style table through ``logging`` (logger ``"ffu_cvx.solvers.smii"``, DEBUG).

Solver layer (SM-II): imports ``model.problem`` and the standard library's ``contextlib``, ``logging`` and
``sys`` only. One row per Newton (or gradient) step: iteration, ``t1``, ``t2``, the objective ``F``,
the normalised cost ``alpha``, the worst variance ratio, CG iterations, the line-search step and
``gap``, the certified relative gap of the current iterate against the best lower bound so far
(``alpha / bound - 1``; NaN before the first certificate). Notes (sub-problem ends, restarts, the
polish, the final status) are indented lines. Every line is a DEBUG record, so a program's own
logging configuration decides where it goes; ``verbose=True`` (:func:`shown`) prints them on
stdout for the run.
"""

from __future__ import annotations

import contextlib
import logging
import sys

from ...model.problem import FitnessProblem

__all__ = ["LOGGER", "IterationLog", "shown"]

#: Width of the log's rules and title.
WIDTH = 96
#: The logger of every SM-II run (a child of ``"ffu_cvx"``, whose INFO records the command line shows).
LOGGER = logging.getLogger("ffu_cvx.solvers.smii")


@contextlib.contextmanager
def shown(verbose: bool):
    """With ``verbose``, the log's records printed on stdout (as they are, one a line) while the block runs."""
    if not verbose:
        yield
        return
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.setLevel(logging.DEBUG)
    level = LOGGER.level
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        LOGGER.removeHandler(handler)
        LOGGER.setLevel(level)


class IterationLog:
    """The log of one run; every method is a no-op unless ``LOGGER`` shows DEBUG records when it is built."""

    def __init__(self, title: str, problem: FitnessProblem, settings: dict):
        self.enabled = LOGGER.isEnabledFor(logging.DEBUG)
        if not self.enabled:
            return
        bar = "-" * WIDTH
        for line in (bar, f"{title:^{WIDTH}}",
                     f"  problem {problem.name}: m = {problem.m}, d = {problem.d}, k = {problem.k}, "
                     f"basis = {problem.basis}",
                     "  " + ", ".join(f"{k} = {v}" for k, v in settings.items()), bar,
                     f"{'iter':>6} {'t1':>9} {'t2':>9} {'objective':>13} {'alpha':>13} {'max ratio':>10} "
                     f"{'cg':>3} {'step':>9} {'gap':>9}"):
            LOGGER.debug(line)

    def row(self, nit: int, t1: float, t2: float, F: float, alpha: float, ratio: float, n_cg: int, step: float,
            gap: float) -> None:
        if self.enabled:
            LOGGER.debug("%6d %9.2e %9.2e %13.6e %13.6e %10.4g %3d %9.2e %9.2e", nit, t1, t2, F, alpha, ratio, n_cg,
                         step, gap)

    def note(self, text: str) -> None:
        if self.enabled:
            LOGGER.debug("  %s", text)
