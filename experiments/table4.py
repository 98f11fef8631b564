"""Table 4: maximum variance ratio on the PL94-171 workload at SM-II's privacy cost (§7.2).

``python -m experiments.table4``. The paper's targets (1, 1, 1, 2, 4 for groups a-e)
with ``B = U``; a second row uses the targets of the authors' public code (all 1).
``--quick`` runs the same five query groups on a (2, 2, 7) histogram: PL94 restricted
to the people whose races are among the first three (:func:`experiments.ratios.restrict`).
"""

from __future__ import annotations

import ffu_cvx as ffu
from ffu_cvx import workloads

from . import runner
from .ratios import restrict, run_ratio_table

PAPER = {"PL94": (42.41, 8.91, 4.64, 1.00)}
TITLE = "Table 4. Maximum variance ratio on PL94 (at SM-II's privacy cost)"
#: (label, targets of groups a-e)
VARIANTS = (("PL94", (1.0, 1.0, 1.0, 2.0, 4.0)), ("PL94, targets 1 (authors' code)", (1.0,) * 5))
#: Races kept by ``--quick`` (bits of ``workloads.PL94_RACE_MASKS``): the first three.
QUICK_RACES = 0b111


def build(workload: str, targets, basis: str) -> ffu.FitnessProblem:
    """PL94 with ``targets`` (``workload="pl94"``) or its three-race restriction (``"mini_pl94"``)."""
    wl = workloads.pl94(targets)
    if workload == "mini_pl94":
        races = [r for r, mask in enumerate(workloads.PL94_RACE_MASKS) if mask & ~QUICK_RACES == 0]
        wl = restrict(wl, [range(2), range(2), races], name=f"mini_pl94({len(races)} race values)")
    return ffu.FitnessProblem.from_workload(wl, basis=basis)


def main(argv=None):
    cases = [(label, {"workload": "pl94", "targets": list(t), "basis": "upper"}) for label, t in VARIANTS]
    quick = [(f"mini {label}", {"workload": "mini_pl94", "targets": list(t), "basis": "upper"})
             for label, t in VARIANTS]
    return run_ratio_table("table4", argv, cases, quick, build, PAPER, title=TITLE, case_column="workload")


if __name__ == "__main__":
    runner.cli(main)
