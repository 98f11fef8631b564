"""Benchmark: drawing a release's noise with OpenDP's exact sampler beside numpy's floating-point one.

``python -m experiments.bench_noise [--sizes 10000 100000 1000000] [--records 1000000] [--quick]``

Interface layer (experiments): imports numpy, ``ffu_cvx`` and :mod:`experiments.runner`.
Two kinds of row, each timed for both samplers in the same cell (so their ratio shares the
machine's load):

- ``draw``: the sampler alone on ``n`` whitened answers (:class:`ffu_cvx.release.noise.Whitened`):
  OpenDP's discrete Gaussian on a lattice, chunks on ``threads`` threads, against
  ``Generator.standard_normal``; seconds, microseconds per draw, and the ratio.
- ``release``: the user's default call, ``ffu_cvx.release_product(solution, workload, counts)``
  on the census-like workload of :mod:`experiments.bench_records` (1.46 x 10^6 cells, 8,750
  queries, solved by ``method="kron"``) for ``--records`` records, against the same call with
  ``sampler="numpy"``.

``--quick``: sizes 1,000 and 10,000 and 10,000 records. The run's cells are cached under
``out/results/cache/bench_noise`` (``--force`` re-measures); its results file is
``results/bench_noise.{csv,json,md}``.
"""

from __future__ import annotations

import os
import time

import numpy as np

import ffu_cvx as ffu
from ffu_cvx.release import noise

from . import bench_records, runner

NAME = "bench_noise"
CELL_VERSION = 1
SIZES, QUICK_SIZES = (10_000, 100_000, 1_000_000), (1_000, 10_000)
RECORDS, QUICK_RECORDS = 1_000_000, 10_000
COLUMNS = ("kind", "n", "opendp_s", "numpy_s", "ratio", "opendp_us_per_draw", "threads")


def _best(fn, repeats: int) -> float:
    """The least wall-clock seconds of ``repeats`` calls (the machine is shared: the least is the cost)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def run_draw(n: int, seed: int) -> dict:
    """Both samplers on ``n`` whitened answers of sensitivity 1."""
    white = noise.Whitened(np.random.default_rng(seed).normal(0.0, 100.0, n), 1.0)
    opendp = noise.OpenDPSampler()
    repeats = 3 if n <= 100_000 else 1
    t_opendp = _best(lambda: opendp.draw(white), repeats)
    t_numpy = _best(lambda: noise.NumpySampler().draw(white, seed), max(repeats, 3))
    return {"kind": "draw", "n": n, "opendp_s": t_opendp, "numpy_s": t_numpy, "ratio": t_opendp / t_numpy,
            "opendp_us_per_draw": 1e6 * t_opendp / n, "threads": opendp.threads}


def run_release(records: int, seed: int) -> dict:
    """The default ``release_product`` call on the census-like workload, against numpy's sampler."""
    dom = ffu.Domain(bench_records.DOMAIN)
    wl = ffu.workloads.product(dom, bench_records.GROUPS, name="census-like")
    sol = ffu.solve(ffu.FitnessProblem.from_workload(wl), method="kron")
    rng = np.random.default_rng(seed)
    counts = dom.counts(np.stack([rng.integers(0, k, records) for k in dom.sizes], axis=1))
    t_opendp = _best(lambda: ffu.release_product(sol, wl, counts), 1)
    t_numpy = _best(lambda: ffu.release_product(sol, wl, counts, sampler="numpy"), 2)
    n = ffu.release_product(sol, wl, counts).noise.dimension
    return {"kind": f"release_product, {records:,} records", "n": n, "opendp_s": t_opendp, "numpy_s": t_numpy,
            "ratio": t_opendp / t_numpy, "opendp_us_per_draw": 1e6 * t_opendp / n,
            "threads": noise.OpenDPSampler().threads}


def run_cell(kind: str, n: int, seed: int) -> dict:
    return run_draw(n, seed) if kind == "draw" else run_release(n, seed)


def main(argv=None):
    p = runner.parser(__doc__.splitlines()[0])
    p.add_argument("--sizes", type=runner.positive_count("a number of draws >= 1"), nargs="+", default=None,
                   help=f"whitened answers drawn (default {' '.join(map(str, SIZES))})")
    p.add_argument("--records", type=runner.positive_count("a number of records >= 1"), default=None,
                   help=f"records behind the release (default {RECORDS:,}; --quick: {QUICK_RECORDS:,})")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    records = args.records or (QUICK_RECORDS if args.quick else RECORDS)
    cells = [runner.Cell({"kind": "draw", "n": n, "seed": args.seed}, label=f"draw {n:,}") for n in sizes]
    cells.append(runner.Cell({"kind": "release", "n": records, "seed": args.seed}, label=f"release {records:,}"))
    table = runner.Table("Noise: OpenDP's exact sampler against numpy's floating-point sampler", COLUMNS,
                         floatfmt=".4g", notes="ratio = OpenDP's seconds / numpy's, measured in the same cell.",
                         footer="; wall-clock on this machine, shared with other jobs")
    return runner.run_grid(NAME, cells, run_cell, args, version=CELL_VERSION, table=table,
                           meta={"sizes": list(sizes), "records": records, "seed": args.seed,
                                 "cpu_count": os.cpu_count()})


if __name__ == "__main__":
    runner.cli(main)
