"""Table 9: maximum variance ratio on the age-pyramid workload (§7.5), ``B = U``.

``python -m experiments.table9``; ``--quick`` runs the same query families on 24 ages
(the age pyramid restricted to ages 0..23, :func:`experiments.ratios.restrict`).
"""

from __future__ import annotations

import numpy as np

import ffu_cvx as ffu
from ffu_cvx import workloads

from . import runner
from .ratios import restrict, run_ratio_table

PAPER = {"AGE": (22.02, 18.55, 5.30, 1.00)}
TITLE = "Table 9. Maximum variance ratio for age pyramids (at SM-II's privacy cost)"
#: Ages kept by ``--quick``.
QUICK_AGES = 24


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


def build(workload: str, basis: str) -> ffu.FitnessProblem:
    """The case's problem: ``age_pyramid``, ``authors_age_variant`` or ``mini_age_pyramid``."""
    if workload == "authors_age_variant":
        wl = authors_age_variant()
    elif workload == "mini_age_pyramid":
        wl = restrict(workloads.age_pyramid(), [range(2), range(QUICK_AGES)], name=f"mini_age_pyramid({QUICK_AGES})")
    else:
        wl = workloads.age_pyramid()
    return ffu.FitnessProblem.from_workload(wl, basis=basis)


def main(argv=None):
    cases = [("AGE", {"workload": "age_pyramid", "basis": "upper"}),
             ("AGE (authors' code variant)", {"workload": "authors_age_variant", "basis": "upper"})]
    quick = [("mini AGE", {"workload": "mini_age_pyramid", "basis": "upper"})]
    return run_ratio_table("table9", argv, cases, quick, build, PAPER, title=TITLE, case_column="workload")


if __name__ == "__main__":
    runner.cli(main)
