"""Benchmark of the exact SDP formulations (README "Performance: exact SDP").

``python -m experiments.bench_sdp [--formulations pair schur inverse dual]
[--solvers auto CLARABEL SCS] [--sizes 16 32 64 128] [--workload prefix|ranges] [--refine]``

For every (size, formulation, solver) cell it solves Problem 1 once (``refine=False``
unless ``--refine``) and records CVXPY's compile time, the solver's time, alpha, the
certified lower bound and gap; prefix rows show the paper's Table 2 (IP row) beside
ours. Cells are cached under ``results/cache/bench_sdp`` (timings included: use
``--force`` or ``--no-cache`` to re-measure). A cell whose predicted Clarabel time is
hopeless (LMI order above ``--clarabel-max-order``, default 140) is skipped and shown
as such rather than run for hours. ``--quick`` runs d = 8 and 16 only.
"""

from __future__ import annotations

import sys
import time

from ffu_cvx import sdp, workloads
from ffu_cvx.problem import FitnessProblem

from . import common

NAME = "bench_sdp"

#: The paper's Table 2, IP row (two decimals).
PAPER_IP = {2: 1.33, 4: 1.76, 8: 2.28, 16: 2.91, 64: 4.46}

#: Bump to invalidate cached cells when the solver code changes what it measures.
CELL_VERSION = 1


def _problem(workload: str, d: int, seed: int) -> FitnessProblem:
    if workload == "prefix":
        return FitnessProblem.from_workload(workloads.prefix(d))
    return FitnessProblem.from_workload(workloads.random_ranges(d, targets="random", seed=seed), basis="auto")


def run_cell(problem: FitnessProblem, formulation: str, solver: str, refine: bool) -> dict:
    """Solve one cell and return its measurements (a JSON-able dict)."""
    t0 = time.perf_counter()
    sol = sdp.solve_sdp(problem, formulation=formulation, solver=solver, refine=refine)
    wall = time.perf_counter() - t0
    return {"solver_used": sol.info["solver"], "compile_s": sol.info["compile_time"],
            "solve_s": sol.info["solve_time"], "wall_s": wall, "alpha": sol.privacy_cost,
            "lower_bound": sol.lower_bound, "gap": sol.gap, "nit": sol.nit, "status": sol.status,
            "levels": len(sol.info.get("refine_levels", [])) or None}


def main(argv=None):
    p = common.parser("Benchmark the exact SDP formulations of Problem 1")
    p.add_argument("--formulations", nargs="+", default=list(sdp.FORMULATIONS), choices=sdp.FORMULATIONS)
    p.add_argument("--solvers", nargs="+", default=["auto"], choices=["auto", "CLARABEL", "SCS"])
    p.add_argument("--sizes", nargs="+", type=int, default=[16, 32, 64, 128])
    p.add_argument("--workload", default="prefix", choices=["prefix", "ranges"])
    p.add_argument("--seed", type=int, default=0, help="seed of the random ranges workload")
    p.add_argument("--refine", action="store_true", help="time the full refined solve")
    p.add_argument("--clarabel-max-order", type=int, default=140,
                   help="skip Clarabel cells whose LMI order exceeds this (dense KKT blocks)")
    args = p.parse_args(argv)
    sizes = [8, 16] if args.quick else args.sizes
    cache = common.Cache(NAME, force=args.force, collect=args.collect, enabled=not args.no_cache)
    cells = [(d, f, s) for d in sizes for f in args.formulations for s in args.solvers]
    rows = []
    t_start = time.perf_counter()
    for d, form, solver in common.progress(cells, NAME, args.quiet):
        problem = _problem(args.workload, d, args.seed)
        order = sdp.lmi_order(problem, form)
        used = sdp.pick_solver(problem, solver, form)
        row = {"workload": args.workload, "d": d, "k": problem.k, "m": problem.m, "formulation": form,
               "solver": solver, "order": order}
        if used == "CLARABEL" and order > args.clarabel_max_order:
            rows.append({**row, "solver_used": used, "status": f"skipped (order {order} > {args.clarabel_max_order})"})
            continue
        key = {**row, "seed": args.seed, "refine": args.refine, "version": CELL_VERSION}
        value = cache.run(key, lambda: run_cell(problem, form, solver, args.refine))
        if value is None:
            continue
        rows.append({**row, **value, "paper_IP": PAPER_IP.get(d) if args.workload == "prefix" else None})
    total = time.perf_counter() - t_start
    columns = ["workload", "d", "k", "m", "formulation", "solver", "solver_used", "order", "compile_s", "solve_s",
               "wall_s", "alpha", "paper_IP", "lower_bound", "gap", "nit", "levels", "status"]
    if not args.quiet:
        shown = [{c: r.get(c) for c in ("d", "formulation", "solver_used", "order", "compile_s", "solve_s",
                                         "alpha", "paper_IP", "gap", "nit", "status")} for r in rows]
        print(common.format_table(shown, floatfmt=".7g"))
        print(f"\n({total:.1f} s; times are wall-clock on this machine, shared with other jobs)", file=sys.stderr)
    common.write_results(NAME, rows, meta={"quick": args.quick, "refine": args.refine, "workload": args.workload,
                                           "seed": args.seed, "total_time_s": total},
                         columns=columns, title="Exact SDP: formulations and solvers", floatfmt=".7g")
    return rows


if __name__ == "__main__":
    main()
