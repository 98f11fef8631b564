"""Fourier mechanism at scale: time and optimum against the number of attributes.

``python -m experiments.fourier_scale``. Problem 1 (least privacy cost meeting every
per-cell target) for marginal workloads far beyond the reach of dense solvers (the full
domain reaches 2^30 cells and more): the fitness-for-use paper's workloads A and B, all
1- and 2-way marginals on binary and on mixed domains, and all 3-way marginals on binary
attributes; plus the time and peak memory to release from ``RECORDS`` seeded random
records, and the issue's benchmark (``BENCHMARK``: 10^6 records, 30 binary attributes).
Each row records the dual lower bound's relative gap (a certificate of optimality).
"""

from __future__ import annotations

import itertools
import math
import time
import tracemalloc

import numpy as np

from ffu_cvx.solvers import fourier as F

from . import runner

NAME = "fourier_scale"
#: The cells' version (``version`` of :func:`experiments.runner.run_grid`).
CELL_VERSION = 1
#: Attribute sizes of the mixed domain, repeated cyclically.
MIXED = (2, 3, 5, 10)
RECORDS = 100_000
RECORDS_QUICK = 5_000
#: The release benchmark of the issue: 10^6 records on 30 binary attributes (domain 2^30).
BENCHMARK = ("binary, all 1+2-way", 30, 1_000_000)
SEED = 0

FAMILIES = {
    "A (1-way, target i)": lambda n: ((2,) * n, {(i,): float(i + 1) for i in range(n)}),
    "B (2-way (1,j), target j-1)": lambda n: ((2,) * n, {(0, j): float(j) for j in range(1, n)}),
    "binary, all 1+2-way": lambda n: ((2,) * n, {A: 1.0 for k in (1, 2) for A in itertools.combinations(range(n), k)}),
    "mixed (2,3,5,10), all 1+2-way": lambda n: (tuple(MIXED[i % len(MIXED)] for i in range(n)),
                                                {A: 1.0 for k in (1, 2) for A in itertools.combinations(range(n), k)}),
    "binary, all 3-way": lambda n: ((2,) * n, {A: 1.0 for A in itertools.combinations(range(n), 3)}),
}
GRID = {
    "A (1-way, target i)": (2, 5, 10, 20, 30, 50, 100),
    "B (2-way (1,j), target j-1)": (2, 5, 10, 20, 30, 50, 100),
    "binary, all 1+2-way": (2, 5, 10, 15, 20, 25, 30),
    "mixed (2,3,5,10), all 1+2-way": (4, 8, 12, 16, 20, 25, 30),
    "binary, all 3-way": (3, 5, 10, 15, 20),
}
GRID_QUICK = {"A (1-way, target i)": (2, 10), "binary, all 1+2-way": (5, 20), "mixed (2,3,5,10), all 1+2-way": (8,)}


COLUMNS = ("workload", "n_attrs", "log2_cells", "marginals", "components", "alpha", "gap", "epsilon_at_1e-6",
           "solve_s", "records", "release_s", "release_peak_MiB")
NOTES = ("alpha: least privacy cost (Delta_M^2) meeting every per-cell target; gap: relative gap to the dual lower "
         "bound; release_peak_MiB: peak traced allocation of the release (tracemalloc), the records excluded.")


def run_cell(family: str, n_attrs: int, records: int, seed: int) -> dict:
    domain, targets = FAMILIES[family](n_attrs)
    t0 = time.perf_counter()
    mech = F.min_privacy_cost(domain, targets)
    t_solve = time.perf_counter() - t0
    rng = np.random.default_rng(seed)
    data = np.column_stack([rng.integers(0, k, records, dtype=np.int8) for k in domain])
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        mech.release(data, rng=seed + 1)
        t_release = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return {"log2_cells": sum(math.log2(k) for k in domain), "marginals": len(targets),
            "components": len(mech.components), "alpha": mech.privacy_cost, "gap": mech.gap,
            "epsilon_at_1e-6": mech.epsilon(1e-6), "solve_s": t_solve, "records": records,
            "release_s": t_release, "release_peak_MiB": peak / 2 ** 20}


def main(argv=None):
    args = runner.parser(__doc__.splitlines()[0]).parse_args(argv)
    grid = GRID_QUICK if args.quick else GRID
    n_records = RECORDS_QUICK if args.quick else RECORDS
    cells = [(fam, n, n_records) for fam, ns in grid.items() for n in ns] + ([] if args.quick else [BENCHMARK])
    import cvxpy  # noqa: F401  (imported once up front so no cell's time includes it)
    table = runner.Table("Fourier mechanism: time and optimum vs number of attributes", COLUMNS, notes=NOTES,
                         floatfmt=".5g", footer="; timings on a shared 2-core machine are noisy")
    return runner.run_grid(NAME, [runner.Cell({"family": fam, "n_attrs": n, "records": recs, "seed": SEED},
                                              row={"workload": fam, "n_attrs": n}, label=f"{fam}, n = {n}")
                                  for fam, n, recs in cells],
                           run_cell, args, version=CELL_VERSION, table=table,
                           meta={"seed": SEED, "mixed_sizes": MIXED})


if __name__ == "__main__":
    runner.cli(main)
