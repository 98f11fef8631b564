"""SM-II on the workloads of the paper's authors' public scripts (docs/performance.rst, "Other benchmarks").

``python -m experiments.bench_authors [--quick] [--seeds S ...] [--tol 1e-4] [--workloads ...]``

Interface layer (experiments): imports numpy, ``ffu_cvx`` and :mod:`experiments.runner`.
The authors' public SM-II code ships six scripts (``1_range.py`` ... ``6_related.py``);
this module rebuilds the workload each one solves, from its description and at its
sizes, in this project's own code, and solves it with ``method="smii"`` (default
options: the ≺R polish runs for ``k <= 32`` within its Hessian-product budget). Their
code is not run here: time it by hand with ``OPENBLAS_NUM_THREADS=1 /usr/bin/time python <script>.py`` in a
checkout of cmla-psu/matrixqueries (numpy >= 1.24 needs ``numpy.int = int`` patched in first).

- ``range``: ``2 d`` random ranges on ``d = 64`` (end points uniform, sorted), targets 1;
- ``discrete``: ``2 d`` rows of random +-1 entries on ``d = 64``, each +1 with
  probability 1/2 (what the script's call draws) and integer targets uniform on 1..10;
- ``pl94``: the PL94 marginals and identity on (2, 2, 63), every target 1 (319 x 252);
- ``age``: the suffix ranges ``[a, 115]`` of the (2, 116) sex x age histogram for each
  sex and for both (348 x 232), targets 1;
- ``marginal``: all one- and two-way marginals of a 4 x 4 x 4 table (60 x 64), targets 1;
- ``related``: ``W = C A`` with Gaussian ``C`` (32 x 32) and ``A`` (32 x 64), targets 1.

Randomised workloads use ``numpy.random.default_rng(seed)``, so their instances differ
from the scripts' (numpy's legacy seed 0); ``pl94``, ``age`` and ``marginal`` are the
scripts' exact matrices. One row per workload and seed: time, Newton steps, Hessian
products, alpha, the certified gap and what the polish did (``polished``, ``-`` when
not run, or ``stopped`` with the reason in ``refine_failed``).
"""

from __future__ import annotations

import time
import warnings

import numpy as np

import ffu_cvx as ffu
from ffu_cvx import workloads

from . import runner

NAME = "bench_authors"
#: The cells' version (``version`` of :func:`experiments.runner.run_grid`).
CELL_VERSION = 1
#: Domain size of the authors' range, discrete and related scripts.
D = 64
#: Size of the related workload's factors: ``C`` (RELATED_M, RELATED_S), ``A`` (RELATED_S, D).
RELATED_M = RELATED_S = D // 2
#: Ages 0..115 of the age script's histogram.
AGES = 116
#: The marginal script's table: 3 attributes of 4 values each.
MARGINAL_DOMAIN = (4, 4, 4)
#: The discrete script's targets are integers drawn uniformly from 1..DISCRETE_MAX_TARGET.
DISCRETE_MAX_TARGET = 10
WORKLOADS = ("range", "discrete", "pl94", "age", "marginal", "related")
RANDOM = ("range", "discrete", "related")

COLUMNS = ("workload", "seed", "m", "d", "k", "time_s", "nit", "n_hvp", "alpha", "gap", "polish", "status")


def one_and_two_way(domain: tuple) -> np.ndarray:
    """Every one- and two-way marginal of a table of shape ``domain`` (rows: queries, columns: cells)."""
    n = len(domain)
    attrs = [(i,) for i in range(n)] + [(i, j) for i in range(n) for j in range(i + 1, n)]
    return np.vstack([workloads.marginal_queries(domain, a) for a in attrs])


def build(workload: str, seed: int = 0) -> ffu.FitnessProblem:
    """The problem of one authors' script (see the module docstring)."""
    rng = np.random.default_rng(seed)
    if workload == "range":
        return ffu.FitnessProblem.from_workload(workloads.random_ranges(D, targets="uniform", seed=seed))
    if workload == "discrete":
        W = np.where(rng.random((2 * D, D)) < 0.5, 1.0, -1.0)
        return ffu.FitnessProblem(W, rng.integers(1, DISCRETE_MAX_TARGET + 1, size=2 * D).astype(float))
    if workload == "pl94":
        return ffu.FitnessProblem.from_workload(workloads.pl94(targets=(1.0,) * len(workloads.PL94_GROUPS)))
    if workload == "age":
        suffix = np.triu(np.ones((AGES, AGES)))
        W = np.vstack([np.kron(np.eye(2), suffix), np.kron(np.ones((1, 2)), suffix)])
        return ffu.FitnessProblem(W, np.ones(W.shape[0]))
    if workload == "marginal":
        W = one_and_two_way(MARGINAL_DOMAIN)
        return ffu.FitnessProblem(W, np.ones(W.shape[0]))
    if workload == "related":
        A = rng.standard_normal((RELATED_S, D))
        C = rng.standard_normal((RELATED_M, RELATED_S))
        return ffu.FitnessProblem(C @ A, np.ones(RELATED_M))
    raise ValueError(f"`workload` must be one of {WORKLOADS}, got {workload!r}")


def run_cell(workload: str, seed: int, tol: float) -> dict:
    """One default SM-II solve of ``build(workload, seed)`` with its time and counters."""
    problem = build(workload, seed)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a stopped polish is reported in the row
        sol = ffu.solve(problem, method="smii", tol=tol)
    wall = time.perf_counter() - t0
    failed = sol.info.get("refine_failed")
    polish = "-" if "refine_levels" not in sol.info else ("stopped" if failed else "polished")
    return {"m": problem.m, "d": problem.d, "k": problem.k, "time_s": wall, "nit": sol.nit, "n_hvp": sol.n_hvp,
            "alpha": sol.privacy_cost, "gap": sol.gap, "polish": polish, "refine_failed": failed,
            "status": sol.status}


def main(argv=None):
    p = runner.parser("SM-II on the workloads of the authors' scripts")
    p.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    p.add_argument("--seeds", nargs="+", type=int, default=[0], help="seeds of range, discrete and related")
    p.add_argument("--tol", type=float, default=1e-4, help="certified relative gap to stop at")
    args = p.parse_args(argv)
    names = [w for w in args.workloads if not args.quick or w in ("marginal", "related")]
    cells = [runner.Cell({"workload": w, "seed": s, "tol": args.tol}, row={"workload": w, "seed": s},
                         label=f"{w}, seed {s}")
             for w in names for s in (args.seeds if w in RANDOM else [0])]
    table = runner.Table("SM-II on the authors' workloads", COLUMNS, floatfmt=".6g",
                         footer="; wall-clock on this machine, shared with other jobs")
    return runner.run_grid(NAME, cells, run_cell, args, version=CELL_VERSION, table=table,
                           meta={"tol": args.tol, "seeds": args.seeds})


if __name__ == "__main__":
    runner.cli(main)
