"""Table 9: maximum variance ratio on the age-pyramid workload (§7.5), ``B = U``.

``python -m experiments.table9``; ``--quick`` runs the same query families on 24 ages.
"""

from __future__ import annotations

import numpy as np

import ffu_cvx as ffu
from ffu_cvx import workloads

from .ratios import run_ratio_table

PAPER = {"AGE": (22.02, 18.55, 5.30, 1.00)}


def mini_age_pyramid(n_age: int = 24, voting: int = 18) -> workloads.Workload:
    """The age-pyramid query families on a (2, n_age) histogram (for ``--quick``)."""
    ages = np.arange(n_age)
    ranges = [(0, x) for x in range(n_age)] + [(voting, n_age - 1)]
    rows = np.array([(ages >= lo) & (ages <= hi) for lo, hi in ranges], dtype=float)
    c = np.array([1.0 if (lo, hi) in ((0, voting - 1), (voting, n_age - 1)) else 10.0 for lo, hi in ranges])
    W = np.vstack([np.kron(np.array([s]), rows) for s in ([1.0, 0.0], [0.0, 1.0], [1.0, 1.0])])
    return workloads.from_matrix(W, np.tile(c, 3), None, (2, n_age), name=f"mini_age_pyramid({n_age})")


def authors_age_variant() -> workloads.Workload:
    """The variant built by the authors' public code (for comparison with the paper).

    On the (2, 116) histogram: the 116 ranges ``[a, 115]`` for each sex and for both
    sexes, then every cell (580 queries); targets 2, except 1 for the two per-sex totals.
    """
    n_age = 116
    R = np.triu(np.ones((n_age, n_age)))  # row a: ages a..115
    W = np.vstack([np.kron(np.eye(2), R), np.kron(np.ones((1, 2)), R), np.eye(2 * n_age)])
    c = np.full(W.shape[0], 2.0)
    c[[0, n_age]] = 1.0
    return workloads.from_matrix(W, c, None, (2, n_age), name="age_pyramid(authors' code)")


def main(argv=None):
    cases = [("AGE", {"workload": "age_pyramid", "basis": "upper"},
              lambda: ffu.FitnessProblem.from_workload(workloads.age_pyramid(), basis="upper")),
             ("AGE (authors' code variant)", {"workload": "authors_age_variant", "basis": "upper"},
              lambda: ffu.FitnessProblem.from_workload(authors_age_variant(), basis="upper"))]
    quick = [("mini AGE", {"workload": "mini_age_pyramid", "basis": "upper"},
              lambda: ffu.FitnessProblem.from_workload(mini_age_pyramid(), basis="upper"))]
    return run_ratio_table("table9", "Table 9: age pyramid max variance ratio", cases, quick, PAPER, argv,
                           case_column="workload",
                           title="Table 9. Maximum variance ratio for age pyramids (at SM-II's privacy cost)")


if __name__ == "__main__":
    main()
