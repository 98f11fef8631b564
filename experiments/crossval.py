"""Cross-validation of SM-II against the exact SDP, workload by workload.

``python -m experiments.crossval [--quick] [--sizes 8 16 32] [--tol 1e-4] [--cases prefix ...]``

``--cases`` picks workloads by label (default all); the exact SDP (SCS warm-started
from SM-II) reaches prefix d = 128 in about 10 s and d = 256 in about 3 min, random
ranges (random targets) d = 128 in about 1 min and d = 256 in about 7 min (loaded
machine), so ``--sizes 128 256 --cases prefix ranges/random`` cross-validates SM-II
where it is used.

For prefix (identity and upper-triangular bases), random ranges (uniform and random
targets) and random +-1 workloads (uniform and random targets) it solves Problem 1 by
the refined SDP and by SM-II and prints both alphas, their relative difference, SM-II's
certified gap, the relative Frobenius distance between the two ``L Sigma L^T`` and both
times. ``refined`` says whether the SDP's ≺R refinement succeeded (not when it raised,
nor when a level failed in every retry: ``Solution.info["refine_failed"]``, recorded in
``refine_failed``); ``unique`` whether it needed a single level; ``single`` the level
whose optimum was found to be the only one, the later levels read off it (0: none). Cells are cached under
``out/results/cache/crossval``; results go to ``out/results/crossval.{csv,json,md}``.
``--quick`` runs d = 8 only.
"""

from __future__ import annotations

import time

import numpy as np

import ffu_cvx as ffu
from ffu_cvx import workloads

from . import runner

NAME = "crossval"
#: The cells' version (``version`` of :func:`experiments.runner.run_grid`); 2: ``refined`` is False
#: when a refinement level failed in every retry; 3: ``single`` recorded.
CELL_VERSION = 3
SEED = 0
COLUMNS = ("workload", "d", "k", "m", "basis", "alpha_sdp", "alpha_smii", "rel_diff", "gap_smii", "gap_sdp", "cov_dist",
           "refined", "unique", "single", "refine_failed", "t_sdp", "t_smii", "nit", "n_hvp", "status")
SHOWN = ("workload", "d", "alpha_sdp", "alpha_smii", "rel_diff", "gap_smii", "cov_dist", "refined", "unique", "t_sdp",
         "t_smii", "status")
NOTES = ("cov_dist: relative Frobenius distance between the two L Sigma L^T. refined: the SDP's ≺R refinement "
         "succeeded (refine_failed says why not); unique: it needed a single level; single: the level "
         "whose optimum was the only one, the later levels read off it (0: none).")

#: (label, builder(d, seed), basis); prefix has no seed
CASES = (
    ("prefix", lambda d, seed: workloads.prefix(d), "identity"),
    ("prefix/upper", lambda d, seed: workloads.prefix(d), "upper"),
    ("ranges/uniform", lambda d, seed: workloads.random_ranges(d, targets="uniform", seed=seed), "auto"),
    ("ranges/random", lambda d, seed: workloads.random_ranges(d, targets="random", seed=seed), "auto"),
    ("pm1/uniform", lambda d, seed: workloads.random_pm1(d, targets="uniform", seed=seed), "auto"),
    ("pm1/random", lambda d, seed: workloads.random_pm1(d, targets="random", seed=seed), "auto"),
    ("tree/uniform", lambda d, seed: workloads.tree(d, targets="uniform", seed=seed), "auto"),
    ("tree/random", lambda d, seed: workloads.tree(d, targets="random", seed=seed), "auto"),
)


def run_cell(workload: str, d: int, seed: int, tol: float) -> dict:
    """Solve one problem both ways; JSON-able measurements."""
    build, basis = {label: (b, bas) for label, b, bas in CASES}[workload]
    problem = ffu.FitnessProblem.from_workload(build(d, seed), basis=basis)
    t0 = time.perf_counter()
    try:
        ref = ffu.solve(problem, method="sdp")
        # a level failed in every retry, or a budget stopped the refinement: Problem 1's optimum, not ≺R-minimal
        failed = ref.info.get("refine_failed") or (
            None if ref.info.get("refine_complete", True) else f"stopped: {ref.info.get('refine_stopped')}")
    except ffu.SolverError as exc:  # a refinement level can fail where Problem 1 itself solves
        ref, failed = ffu.solve(problem, method="sdp", refine=False), f"{type(exc).__name__}: {exc}"
    t_sdp = time.perf_counter() - t0
    t0 = time.perf_counter()
    sol = ffu.solve(problem, method="smii", tol=tol)
    t_smii = time.perf_counter() - t0
    c_ref = problem.L @ ref.sigma @ problem.L.T
    c_sm = problem.L @ sol.sigma @ problem.L.T
    refined = failed is None
    return {"k": problem.k, "m": problem.m, "basis": problem.basis, "alpha_sdp": ref.privacy_cost,
            "alpha_smii": sol.privacy_cost, "rel_diff": sol.privacy_cost / ref.privacy_cost - 1.0,
            "gap_smii": sol.gap, "gap_sdp": ref.gap,
            "cov_dist": float(np.linalg.norm(c_sm - c_ref) / np.linalg.norm(c_ref)), "refined": refined,
            "unique": refined and len(ref.info.get("refine_levels", [])) <= 1,
            "single": ref.info.get("refine_single"), "refine_failed": failed,
            "t_sdp": t_sdp, "t_smii": t_smii, "nit": sol.nit, "n_hvp": sol.n_hvp, "status": sol.status}


def main(argv=None):
    p = runner.parser("SM-II against the exact SDP")
    p.add_argument("--sizes", nargs="+", type=int, default=[8, 16, 32],
                   help="domain sizes (the refined SDP takes minutes per cell beyond 32)")
    p.add_argument("--tol", type=float, default=1e-4, help="SM-II's certified relative gap")
    p.add_argument("--cases", nargs="+", default=[label for label, _, _ in CASES],
                   choices=[label for label, _, _ in CASES], help="workloads to run (default all)")
    args = p.parse_args(argv)
    cells = [runner.Cell({"workload": label, "d": d, "seed": SEED, "tol": args.tol}, row={"workload": label, "d": d},
                         label=f"{label}, d = {d}")
             for d in ([8] if args.quick else args.sizes) for label, _, _ in CASES if label in args.cases]
    table = runner.Table("SM-II against the exact SDP", COLUMNS, notes=NOTES, floatfmt=".6g",
                         display=lambda rows: [{c: r.get(c) for c in SHOWN} for r in rows],
                         footer="; wall-clock times on this machine, shared with other jobs; cov_dist is the relative "
                                "Frobenius distance of L Sigma L^T; unique = the SDP's refinement had one level")
    return runner.run_grid(NAME, cells, run_cell, args, version=CELL_VERSION, table=table,
                           meta={"tol": args.tol, "seed": SEED})


if __name__ == "__main__":
    runner.cli(main)
