"""Benchmark of SM-II at scale (docs/performance.rst, "SM-II at scale").

``python -m experiments.bench_smii [--large] [--quick] [--sizes ...] [--tol 1e-3]
[--max-time 600] [--float32 | --float64] [--no-precondition] [--profile D] [--seeds S ...] [--draws N]``

Prefix and random ranges (random targets, seed 0; ``--seeds`` for others) for d = 64,
128, 256, 512, 1024 (and 2048 with ``--large``): wall time, the process's CPU time
(``cpu_s``: with one BLAS thread, the measure that other jobs on the machine disturb
least), Newton iterations, CG
iterations, Hessian products, restarts of the multiplier phase (``Solution.info["restarts"]``:
where the trajectory went astray; the count moves with the processor's rounding), alpha,
certified gap and peak memory (``tracemalloc`` peak
of the solve and the process's maximum resident set size). ``--profile D`` runs the
first of ``--workloads`` at D under cProfile and prints where the time goes. ``--quick`` runs d = 64 only. Cells are
cached under ``out/results/cache/bench_smii`` (timings included: ``--force`` re-measures).
``--float32`` / ``--float64`` evaluate CG's Hessian products in single / double precision
(default: the solver's ``"auto"``, single for k >= 256) and
``--no-precondition`` runs the paper's plain CG (see :func:`ffu_cvx.solvers.smii.solve_smii`).
``--draws N`` solves each cell N times, draw ``j`` with every target multiplied by
``1 + j DRAW_STEP`` (a few units in the last place): from d = 2,048 on, rounding of that size
moves SM-II's Newton steps by up to 2x (random ranges d = 2,048, seed 0: 29-63 steps), so one run of a cell is one draw; compare code versions over the same draws.
On a shared machine run it as ``OPENBLAS_NUM_THREADS=1 python -m experiments.bench_smii``:
oversubscribed BLAS threads slow small products down many times over.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import resource
import time
import tracemalloc

import ffu_cvx as ffu
from ffu_cvx import workloads

from . import runner

NAME = "bench_smii"
#: The cells' version (``version`` of :func:`experiments.runner.run_grid`).
CELL_VERSION = 6
SEED = 0
#: ``--draws``: draw ``j`` multiplies every target by ``1 + j DRAW_STEP`` (about 4.5 ulps per step).
DRAW_STEP = 1e-15


def _problem(workload: str, d: int, seed: int = SEED, draw: int = 0) -> ffu.FitnessProblem:
    if workload == "prefix":
        problem = ffu.FitnessProblem.from_workload(workloads.prefix(d))
    else:
        problem = ffu.FitnessProblem.from_workload(workloads.random_ranges(d, targets="random", seed=seed))
    return problem.with_targets(problem.c * (1.0 + draw * DRAW_STEP)) if draw else problem


COLUMNS = ("workload", "d", "seed", "draw", "k", "m", "time_s", "cpu_s", "nit", "n_cg", "n_hvp", "restarts", "alpha",
           "lower_bound", "gap", "peak_mb", "maxrss_mb", "status")


def run_cell(workload: str, d: int, seed: int, tol: float, max_time: float, draw: int = 0, **options) -> dict:
    """One SM-II solve (``options`` passed on) of draw ``draw`` with its time, counters and peak memory."""
    problem = _problem(workload, d, seed, draw)
    tracemalloc.start()
    t0, c0 = time.perf_counter(), time.process_time()
    sol = ffu.solve(problem, method="smii", tol=tol, max_time=max_time, **options)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"k": problem.k, "m": problem.m, "time_s": wall, "cpu_s": cpu, "nit": sol.nit, "n_cg": sol.info["n_cg"],
            "n_hvp": sol.n_hvp, "restarts": sol.info["restarts"], "alpha": sol.privacy_cost,
            "lower_bound": sol.lower_bound, "gap": sol.gap,
            "status": sol.status, "peak_mb": peak / 2**20, "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def profile(d: int, tol: float, max_time: float, top: int = 15, workload: str = "prefix", **options) -> str:
    """cProfile of ``workload`` at ``d``: the ``top`` functions by own time."""
    problem = _problem(workload, d)
    prof = cProfile.Profile()
    prof.enable()
    ffu.solve(problem, method="smii", tol=tol, max_time=max_time, **options)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(argv=None):
    p = runner.parser("Benchmark SM-II on prefix and random ranges")
    p.add_argument("--large", action="store_true", help="add d = 2048")
    p.add_argument("--sizes", nargs="+", type=int, default=None)
    p.add_argument("--workloads", nargs="+", default=["prefix", "ranges"], choices=["prefix", "ranges"])
    p.add_argument("--seeds", nargs="+", type=int, default=[SEED],
                   help="seeds of the random-ranges instances (prefix has none)")
    p.add_argument("--draws", type=runner.positive_count("a number of draws >= 1"), default=1, metavar="N",
                   help="solve each cell N times, draw j with the targets times 1 + j 1e-15 (rounding-level)")
    p.add_argument("--tol", type=float, default=1e-3, help="certified relative gap to stop at")
    p.add_argument("--max-time", type=float, default=600.0, help="per-solve time cap in seconds")
    precision = p.add_mutually_exclusive_group()
    precision.add_argument("--float32", action="store_const", const=True, dest="float32", default="auto",
                           help="single-precision Hessian products inside CG (default: auto, k >= 256)")
    precision.add_argument("--float64", action="store_const", const=False, dest="float32",
                           help="double-precision Hessian products inside CG")
    p.add_argument("--no-precondition", action="store_true", help="the paper's plain CG")
    p.add_argument("--profile", type=int, default=None, metavar="D",
                   help="profile the first of --workloads at D and exit")
    args = p.parse_args(argv)
    options = {"float32": args.float32, "precondition": "auto" if not args.no_precondition else False}
    if args.profile:
        print(profile(args.profile, args.tol, args.max_time, workload=args.workloads[0], **options))
        return []
    sizes = args.sizes or ([64] if args.quick else [64, 128, 256, 512, 1024] + ([2048] if args.large else []))
    cells = [runner.Cell({"workload": w, "d": d, "seed": s, "draw": j, "tol": args.tol, "max_time": args.max_time,
                          **options},
                         row={"workload": w, "d": d, "seed": s, "draw": j}, label=f"{w}, d = {d}, seed {s}, draw {j}")
             for w in args.workloads for d in sizes for s in (args.seeds if w == "ranges" else [SEED])
             for j in range(args.draws)]
    table = runner.Table("SM-II at scale", COLUMNS, floatfmt=".5g",
                         footer="; wall-clock on this machine, shared with other jobs")
    return runner.run_grid(NAME, cells, run_cell, args, version=CELL_VERSION, table=table,
                           meta={"tol": args.tol, "max_time": args.max_time, "seeds": args.seeds,
                                 "draws": args.draws, "draw_step": DRAW_STEP,
                                 "blas_threads": args.blas_threads, **options})


if __name__ == "__main__":
    runner.cli(main)
