"""SM-II's iteration log (``verbose=True``): a CVXPY-style table on stdout.

Solver layer (SM-II): imports ``problem`` only. One row per Newton (or gradient) step:
iteration, ``t1``, ``t2``, the objective ``F``, the normalised cost ``alpha``, the worst
variance ratio, CG iterations, the line-search step and ``gap``, the certified relative
gap of the current iterate against the best lower bound so far (``alpha / bound - 1``;
NaN before the first certificate). Notes (sub-problem ends, restarts, the polish, the
final status) are indented lines.
"""

from __future__ import annotations

from ..problem import FitnessProblem

#: Width of the log's rules and title.
WIDTH = 96


class IterationLog:
    """The log of one run; every method is a no-op when ``enabled`` is False."""

    def __init__(self, enabled: bool, title: str, problem: FitnessProblem, settings: dict):
        self.enabled = enabled
        if not enabled:
            return
        bar = "-" * WIDTH
        print(bar)
        print(f"{title:^{WIDTH}}")
        print(f"  problem {problem.name}: m = {problem.m}, d = {problem.d}, k = {problem.k}, basis = {problem.basis}")
        print("  " + ", ".join(f"{k} = {v}" for k, v in settings.items()))
        print(bar)
        print(f"{'iter':>6} {'t1':>9} {'t2':>9} {'objective':>13} {'alpha':>13} {'max ratio':>10} "
              f"{'cg':>3} {'step':>9} {'gap':>9}", flush=True)

    def row(self, nit: int, t1: float, t2: float, F: float, alpha: float, ratio: float, n_cg: int, step: float,
            gap: float) -> None:
        if self.enabled:
            print(f"{nit:6d} {t1:9.2e} {t2:9.2e} {F:13.6e} {alpha:13.6e} {ratio:10.4g} {n_cg:3d} "
                  f"{step:9.2e} {gap:9.2e}", flush=True)

    def note(self, text: str) -> None:
        if self.enabled:
            print(f"  {text}", flush=True)
