"""Table 4: maximum variance ratio on the PL94-171 workload at SM-II's privacy cost (§7.2).

``python -m experiments.table4``. The paper's targets (1, 1, 1, 2, 4 for groups a-e)
with ``B = U``; a second row uses the targets of the authors' public code (all 1).
``--quick`` runs the same five query groups on a (2, 2, 7) histogram (three races).
"""

from __future__ import annotations

import numpy as np

import ffu_cvx as ffu
from ffu_cvx import workloads

from .ratios import run_ratio_table

PAPER = {"PL94": (42.41, 8.91, 4.64, 1.00)}

#: (label, targets of groups a-e)
VARIANTS = (("PL94", (1.0, 1.0, 1.0, 2.0, 4.0)), ("PL94, targets 1 (authors' code)", (1.0,) * 5))


def _case(label, targets):
    def build():
        return ffu.FitnessProblem.from_workload(workloads.pl94(targets), basis="upper")
    return label, {"workload": "pl94", "targets": list(targets), "basis": "upper"}, build


def mini_pl94(targets, n_races: int = 3) -> workloads.Workload:
    """PL94's five query groups on a (2, 2, 2**n_races - 1) histogram (for ``--quick``).

    Race values ``0..n_races-1`` are the single races, the others their combinations.
    """
    domain = (2, 2, 2**n_races - 1)
    race = workloads.marginal_queries(domain, (2,))
    blocks = [workloads.marginal_queries(domain, (0,)), workloads.marginal_queries(domain, (1,)),
              race[:n_races], race[n_races:], np.eye(int(np.prod(domain)))]
    c = np.concatenate([np.full(b.shape[0], t) for b, t in zip(blocks, targets)])
    labels = [g for g, b in zip(workloads.PL94_GROUPS, blocks) for _ in range(b.shape[0])]
    return workloads.from_matrix(np.vstack(blocks), c, labels, domain, name=f"mini_pl94({n_races} races)")


def main(argv=None):
    cases = [_case(*v) for v in VARIANTS]
    quick = [(f"mini {label}", {"workload": "mini_pl94", "targets": list(t), "basis": "upper"},
              (lambda t=t: ffu.FitnessProblem.from_workload(mini_pl94(t), basis="upper")))
             for label, t in VARIANTS]
    return run_ratio_table(
        "table4", "Table 4: PL94 max variance ratio", cases, quick, PAPER, argv, case_column="workload",
        title="Table 4. Maximum variance ratio on PL94 (at SM-II's privacy cost)")


if __name__ == "__main__":
    main()
