"""Benchmark of the exact SDP formulations (README "Performance: exact SDP").

``python -m experiments.bench_sdp [--formulations pair schur inverse dual]
[--solvers auto CLARABEL SCS] [--sizes 16 32 64 128] [--workload prefix|ranges|related]
[--refine] [--warm-start auto|none]``

For every (size, formulation, solver) cell it solves Problem 1 once (``refine=False``
unless ``--refine``) and records CVXPY's compile time, the solver's time, alpha, the
certified lower bound and gap, the warm start and the fallbacks ``solver="auto"``
took; prefix rows show the paper's Table 2 (IP row) beside ours. ``related`` is the
seed authors' dense Gaussian workload ``W = C A`` (``C`` (d/2, d/2), ``A`` (d/2, d)
standard Gaussian, seeded by ``--seed``, targets 1; their script ``6_related.py``). Cells are cached under ``results/cache/bench_sdp`` (timings included: use
``--force`` or ``--no-cache`` to re-measure). A cell whose predicted Clarabel time is
hopeless (LMI order above ``--clarabel-max-order``, default 140) is skipped and shown
as such rather than run for hours. ``--quick`` runs d = 8 and 16 only.
"""

from __future__ import annotations

import time

import numpy as np

from ffu_cvx import sdp, workloads
from ffu_cvx.problem import FitnessProblem

from . import runner

NAME = "bench_sdp"

#: The paper's Table 2, IP row (two decimals).
PAPER_IP = {2: 1.33, 4: 1.76, 8: 2.28, 16: 2.91, 64: 4.46}

#: The cells' version (``version`` of :func:`experiments.runner.run_grid`); 2: warm starts,
#: fallbacks and the solver's status recorded.
CELL_VERSION = 2


WORKLOADS = ("prefix", "ranges", "related")


def gaussian_product(d: int, seed: int) -> FitnessProblem:
    """``W = C A`` with ``C`` (d/2, d/2) and ``A`` (d/2, d) standard Gaussian (seeded), targets 1."""
    rng = np.random.default_rng(seed)
    k = d // 2
    W = rng.standard_normal((k, k)) @ rng.standard_normal((k, d))
    return FitnessProblem(W, np.ones(k), name=f"gaussian C A (d = {d}, seed {seed})")


def _problem(workload: str, d: int, seed: int) -> FitnessProblem:
    if workload == "prefix":
        return FitnessProblem.from_workload(workloads.prefix(d))
    if workload == "related":
        return gaussian_product(d, seed)
    return FitnessProblem.from_workload(workloads.random_ranges(d, targets="random", seed=seed), basis="auto")


COLUMNS = ("workload", "d", "k", "m", "formulation", "solver", "solver_used", "order", "compile_s", "solve_s",
           "wall_s", "alpha", "paper_IP", "lower_bound", "gap", "nit", "levels", "status", "warm_start",
           "fallbacks", "solver_status", "refine_failed")
SHOWN = ("d", "formulation", "solver_used", "order", "compile_s", "solve_s", "wall_s", "alpha", "paper_IP", "gap",
         "nit", "levels", "status", "warm_start")


def run_cell(workload: str, d: int, seed: int, formulation: str, solver: str, refine: bool,
             warm_start: str = "auto") -> dict:
    """Solve one cell and return its measurements (a JSON-able dict)."""
    problem = _problem(workload, d, seed)
    t0 = time.perf_counter()
    sol = sdp.solve_sdp(problem, formulation=formulation, solver=solver, refine=refine,
                        warm_start=None if warm_start == "none" else warm_start)
    wall = time.perf_counter() - t0
    return {"solver_used": sol.info["solver"], "compile_s": sol.info["compile_time"],
            "solve_s": sol.info["solve_time"], "wall_s": wall, "alpha": sol.privacy_cost,
            "lower_bound": sol.lower_bound, "gap": sol.gap, "nit": sol.nit, "status": sol.status,
            "levels": len(sol.info.get("refine_levels", [])) or None, "warm_start": sol.info.get("warm_start"),
            "fallbacks": "; ".join(sol.info.get("fallbacks", [])) or None,
            "solver_status": sol.info.get("solver_status"), "refine_failed": sol.info.get("refine_failed")}


def main(argv=None):
    p = runner.parser("Benchmark the exact SDP formulations of Problem 1")
    p.add_argument("--formulations", nargs="+", default=list(sdp.FORMULATIONS), choices=sdp.FORMULATIONS)
    p.add_argument("--solvers", nargs="+", default=["auto"], choices=["auto", "CLARABEL", "SCS"])
    p.add_argument("--sizes", nargs="+", type=int, default=[16, 32, 64, 128])
    p.add_argument("--workload", default="prefix", choices=WORKLOADS)
    p.add_argument("--seed", type=int, default=0, help="seed of the random ranges and related workloads")
    p.add_argument("--warm-start", default="auto", choices=["auto", "none"],
                   help="solve_sdp's warm_start ('auto': SCS from SM-II where auto picks SCS)")
    p.add_argument("--refine", action="store_true", help="time the full refined solve")
    p.add_argument("--clarabel-max-order", type=int, default=140,
                   help="skip Clarabel cells whose LMI order exceeds this (dense KKT blocks)")
    args = p.parse_args(argv)
    sizes = [8, 16] if args.quick else args.sizes
    cells, skipped = [], []
    for d in sizes:
        problem = _problem(args.workload, d, args.seed)
        for form in args.formulations:
            for solver in args.solvers:
                order, used = sdp.lmi_order(problem, form), sdp.pick_solver(problem, solver, form)
                row = {"workload": args.workload, "d": d, "k": problem.k, "m": problem.m, "formulation": form,
                       "solver": solver, "order": order,
                       "paper_IP": PAPER_IP.get(d) if args.workload == "prefix" else None}
                if used == "CLARABEL" and order > args.clarabel_max_order:  # hours: shown, not run
                    skipped.append({**row, "solver_used": used,
                                    "status": f"skipped (order {order} > {args.clarabel_max_order})"})
                else:
                    cells.append(runner.Cell({"workload": args.workload, "d": d, "seed": args.seed, "formulation": form,
                                              "solver": solver, "refine": args.refine,
                                              "warm_start": args.warm_start}, row=row,
                                             label=f"d = {d}, {form}, {solver}"))
    table = runner.Table("Exact SDP: formulations and solvers", COLUMNS, floatfmt=".7g",
                         display=lambda rows: [{c: r.get(c) for c in SHOWN} for r in rows],
                         footer="; times are wall-clock on this machine, shared with other jobs")
    return runner.run_grid(NAME, cells, run_cell, args, version=CELL_VERSION, table=table,
                           combine=lambda rows: rows + skipped,
                           meta={"refine": args.refine, "workload": args.workload, "seed": args.seed,
                                 "warm_start": args.warm_start})


if __name__ == "__main__":
    runner.cli(main)
