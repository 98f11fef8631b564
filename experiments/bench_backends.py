"""Benchmark of SM-II's array backends: numpy against torch (CPU; CUDA and CuPy where present).

``OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python -m experiments.bench_backends [--sizes 256 512 1024]
[--workloads prefix ranges] [--backends numpy torch:cpu ...] [--tol 1e-3] [--max-time 600]
[--torch-threads 1] [--float32] [--quick]``

Prefix and random ranges (random targets, seed 0) at d = 256, 512 and 1024 (``--quick``:
d = 64), solved by SM-II on every array backend usable here (``--backends`` picks some;
see :mod:`ffu_cvx.solvers.smii.backend`): wall time, its ratio to numpy's (``speedup`` > 1 is
faster than numpy; blank where ``--backends`` leaves numpy out, as at sizes where only an
accelerator is worth timing), Newton steps, Hessian products, the normalised cost ``alpha``, its
relative difference from numpy's and the certified gap. Each cell first solves a d = 32
problem on its backend, untimed, so library start-up and CUDA initialisation are not
counted. torch runs on ``--torch-threads`` CPU threads (default 1, to match
``OPENBLAS_NUM_THREADS=1`` for numpy on a shared machine). Cells are cached under
``out/results/cache/bench_backends`` (timings included: ``--force`` re-measures).

On a GPU give ``--blas-threads N``: the start and the certificate's bound run on the device
(from k = 1,000 and past k = 256), but the Solution's checks and the polish stay on numpy:
so the host's BLAS threads still count (prefix d = 4,096 on an H200: 8.29 s with 16 host threads,
11.5 s with one).

torch and CuPy are optional (``pip install 'ffu-cvx[gpu]'`` for array-api-compat, then
torch or CuPy); without them the table has numpy's rows only.
"""

from __future__ import annotations

import os
import time

import ffu_cvx as ffu
from ffu_cvx import workloads
from ffu_cvx.solvers.smii.backend import available

from . import runner

NAME = "bench_backends"
#: The cells' version (``version`` of :func:`experiments.runner.run_grid`).
CELL_VERSION = 1
SEED = 0
#: Size of the untimed solve that warms a backend up before each timed one.
WARMUP_D = 32
WORKLOADS = {"prefix": workloads.prefix,
             "ranges": lambda d: workloads.random_ranges(d, targets="random", seed=SEED)}
#: Exceptions that become a cell's error row instead of ending the run: a failed solve, and an
#: accelerator's out-of-memory or driver error (torch raises RuntimeError subclasses, CuPy
#: MemoryError ones), so that one size too large for the card keeps the other cells' table.
CELL_ERRORS = (ffu.SolverError, MemoryError, RuntimeError)
COLUMNS = ("workload", "d", "backend", "device", "time_s", "speedup", "nit", "n_hvp", "alpha", "alpha_vs_numpy",
           "gap", "status")


def device_name(backend: str) -> str:
    """What ``backend`` computes on: ``"cpu"`` or the GPU's name."""
    if backend == "cupy":
        import cupy

        return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    if backend.startswith("torch"):
        import torch

        if backend == "torch:cuda" or (backend == "torch" and torch.cuda.is_available()):
            return torch.cuda.get_device_name(0)
    return "cpu"


def run_cell(workload: str, d: int, backend: str, tol: float, max_time: float, torch_threads: int,
             float32: bool) -> dict:
    """One timed SM-II solve of ``workload`` at ``d`` on ``backend`` (after an untimed warm-up)."""
    if backend.startswith("torch"):
        import torch

        torch.set_num_threads(torch_threads)
    options = {"array_backend": backend, "float32": float32}
    ffu.solve(ffu.FitnessProblem.from_workload(workloads.prefix(WARMUP_D)), method="smii", **options)
    problem = ffu.FitnessProblem.from_workload(WORKLOADS[workload](d))
    t0 = time.perf_counter()
    sol = ffu.solve(problem, method="smii", tol=tol, max_time=max_time, **options)
    wall = time.perf_counter() - t0
    return {"device": device_name(backend), "time_s": wall, "nit": sol.nit, "n_hvp": sol.n_hvp,
            "alpha": sol.privacy_cost, "gap": sol.gap, "status": sol.status}


def against_numpy(rows: list) -> list:
    """Add ``speedup`` (numpy's time over the row's) and ``alpha_vs_numpy`` (relative) to every row."""
    ref = {(r["workload"], r["d"]): r for r in rows if r.get("backend") == "numpy" and "error" not in r}
    out = []
    for r in rows:
        base = ref.get((r["workload"], r["d"]))
        if base is not None and "error" not in r:
            r = {**r, "speedup": base["time_s"] / r["time_s"], "alpha_vs_numpy": r["alpha"] / base["alpha"] - 1.0}
        out.append(r)
    return out


def main(argv=None):
    usable = [b for b in available() if b != "torch"]  # "torch" is torch:cuda or torch:cpu again
    p = runner.parser("Benchmark SM-II's array backends (numpy, torch, CuPy)")
    p.add_argument("--sizes", nargs="+", type=int, default=None)
    p.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    p.add_argument("--backends", nargs="+", default=usable, choices=usable,
                   help=f"array backends to compare (usable here: {', '.join(usable)})")
    p.add_argument("--tol", type=float, default=1e-3, help="certified relative gap to stop at")
    p.add_argument("--max-time", type=float, default=600.0, help="per-solve time cap in seconds")
    p.add_argument("--torch-threads", type=int, default=1, help="CPU threads of torch (numpy: OPENBLAS_NUM_THREADS)")
    p.add_argument("--float32", action="store_true", help="single-precision Hessian products inside CG")
    args = p.parse_args(argv)
    sizes = args.sizes or ([64] if args.quick else [256, 512, 1024])
    # numpy first: the reference of `speedup` and `alpha_vs_numpy` (left blank where it is not asked for).
    backends = sorted(dict.fromkeys(args.backends), key=lambda b: b != "numpy")
    cells = [runner.Cell({"workload": w, "d": d, "backend": b, "tol": args.tol, "max_time": args.max_time,
                          "torch_threads": args.torch_threads, "float32": args.float32},
                         row={"workload": w, "d": d, "backend": b}, label=f"{w}, d = {d}, {b}")
             for w in args.workloads for d in sizes for b in backends]
    threads = os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")
    table = runner.Table("SM-II on array backends", COLUMNS, floatfmt=".5g",
                         footer="; wall-clock on this machine, shared with other jobs")
    return runner.run_grid(NAME, cells, run_cell, args, version=CELL_VERSION, table=table, combine=against_numpy,
                           errors=CELL_ERRORS,
                           meta={"tol": args.tol, "max_time": args.max_time, "blas_threads": threads,
                                 "torch_threads": args.torch_threads, "float32": args.float32})


if __name__ == "__main__":
    runner.cli(main)
