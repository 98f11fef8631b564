"""Tables 5-8: random range queries (§7.3) and random +-1 queries (§7.4) against ``d``.

One module for the four tables: each is a workload builder, a target kind and the
paper's basis; ``table5`` ... ``table8`` are thin entry points. Workloads are drawn
with ``numpy.random.default_rng(seed)`` (seed recorded), so they are not the paper's
draw; ``basis`` falls back to a row basis when the draw is not of full column rank.
"""

from __future__ import annotations

import ffu_cvx as ffu
from ffu_cvx.model import basis as _basis
from ffu_cvx import workloads

from .ratios import run_ratio_table

SIZES = (64, 128, 256, 512, 1024)
QUICK_SIZES = (16, 24)
SEED = 0

#: name -> (builder, targets, paper basis, title, paper rows by d)
SPECS = {
    "table5": (workloads.random_ranges, "uniform", "upper",
               "Table 5. Max variance ratio, random range queries, uniform targets",
               {64: (10.63, 2.84, 1.27, 1.00), 128: (17.45, 3.48, 1.25, 1.00), 256: (28.43, 3.90, 1.29, 1.00),
                512: (47.36, 4.68, 1.23, 1.00), 1024: (77.26, 5.42, 1.24, 1.00)}),
    "table6": (workloads.random_ranges, "random", "upper",
               "Table 6. Max variance ratio, random range queries, random targets U(1, 10)",
               {64: (16.04, 4.63, 2.53, 1.00), 128: (21.28, 5.87, 2.14, 1.00), 256: (41.76, 6.05, 1.91, 1.00),
                512: (71.51, 7.35, 1.80, 1.00), 1024: (109.34, 7.68, 1.69, 1.00)}),
    "table7": (workloads.random_pm1, "uniform", "identity",
               "Table 7. Max variance ratio, random +-1 queries (P(+1) = 0.2), uniform targets",
               {64: (1.14, 2.29, 1.14, 1.00), 128: (1.14, 2.29, 1.07, 1.00), 256: (1.14, 3.39, 1.06, 1.00),
                512: (1.15, 3.40, 1.05, 1.00), 1024: (1.15, 3.41, 1.04, 1.00)}),
    "table8": (workloads.random_pm1, "random", "identity",
               "Table 8. Max variance ratio, random +-1 queries, 10% targets U(1, 3), rest U(10, 15)",
               {64: (6.38, 12.73, 5.56, 1.00), 128: (6.05, 12.10, 5.35, 1.00), 256: (5.68, 16.60, 5.11, 1.00),
                512: (6.12, 17.94, 5.54, 1.00), 1024: (5.83, 17.17, 5.26, 1.00)}),
}


#: Builders by the name recorded in a cell's key.
BUILDERS = {b.__name__: b for b in (workloads.random_ranges, workloads.random_pm1)}


def build(workload: str, d: int, targets: str, seed: int, paper_basis: str, **extra) -> ffu.FitnessProblem:
    """The drawn workload on the paper's basis (a row basis when the draw is rank-deficient)."""
    wl = BUILDERS[workload](d, targets, seed, **extra)
    basis = paper_basis if _basis.numerical_rank(wl.W) == d else "rows"
    return ffu.FitnessProblem.from_workload(wl, basis=basis)


def _case(name, d, seed, **extra):
    builder, targets, basis, _, _ = SPECS[name]
    label = f"d = {d}" + "".join(f", {k} = {v}" for k, v in extra.items())
    return label, {"workload": builder.__name__, "d": d, "targets": targets, "seed": seed, "paper_basis": basis,
                   **extra}


def run(name, argv=None):
    """Run Table ``name`` (one of :data:`SPECS`) and return its rows."""
    builder, targets, basis, title, paper_by_d = SPECS[name]
    paper = {f"d = {d}": v for d, v in paper_by_d.items()}
    cases = [_case(name, d, SEED) for d in SIZES]
    quick = [_case(name, d, SEED) for d in QUICK_SIZES]
    if builder is workloads.random_pm1:
        # The authors' public code draws a fair coin (its probabilities never reach numpy).
        cases.append(_case(name, 64, SEED, p_plus=0.5))
    notes = (f"Workloads drawn with numpy.random.default_rng({SEED}); the paper's draw is unknown. Paper basis: "
             f"B = {'U' if basis == 'upper' else 'I'} (a row basis when a draw is rank-deficient; the "
             "mechanisms, hence the ratios, do not depend on the basis).")
    return run_ratio_table(name, argv, cases, quick, build, paper, case_column="d", title=title, notes=notes,
                           meta={"seed": SEED, "sizes": SIZES, "quick_sizes": QUICK_SIZES})
