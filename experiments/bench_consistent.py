"""Benchmark of consistent tables from a release (:mod:`ffu_cvx.consistent`).

``python -m experiments.bench_consistent [--quick] [--parts estimate rmse coverage scale] [--force]``

The agency example: 200,000 synthetic records over county (200) x age band (21) x sex (2)
x race (5) = 42,000 cells; county totals within +-50, age band x sex x county within
+-30 and race x county within +-40, each at 95% (variances ``(margin / 1.959964)^2``),
solved with ``method="auto"`` (a marginal union: the structured Fourier optimum).

- ``estimate``: one release; seconds to estimate, seconds of a 200-replicate bootstrap,
  and checks that every published table adds up to the totals it nests in, with no
  negative or fractional value;
- ``rmse``: root mean squared error over the workload's queries of the raw answers and
  of the consistent (non-integer and integer) ones over 200 releases, overall and per group;
  beside them the same from the tight solve (the stall rule off, ``fdec=0``): its integer
  RMSE, the largest shift of a consistent answer in standard deviations of its noise and
  the share of published integers that differ;
- ``coverage``: coverage of the true answers by the bootstrap intervals (95%, B = 60
  replicates) over 60 releases (576,000 intervals), overall and per group, beside the raw
  answers' exact intervals;
- ``scale``: a 10^7-cell product (county 1,000 x age 100 x sex 2 x race 50, the same three
  tables): seconds and peak memory of one estimate (``tracemalloc`` peak of Python and
  numpy allocations, and the process's peak resident set).

Cells are cached under ``results/cache/bench_consistent``; run it as
``OPENBLAS_NUM_THREADS=1 python -m experiments.bench_consistent`` on a shared machine.
"""

from __future__ import annotations

import resource
import time
import tracemalloc

import numpy as np

import ffu_cvx as ffu
from ffu_cvx import consistent

from . import runner

NAME = "bench_consistent"
CELL_VERSION = 2
#: Two-sided 95% normal quantile: a margin at 95% is this many standard deviations.
Z95 = 1.959963984540054
#: The agency example and the large product: attribute sizes and records.
CASES = {"agency": ({"county": 200, "age": 21, "sex": 2, "race": 5}, 200_000),
         "product_1e7": ({"county": 1000, "age": 100, "sex": 2, "race": 50}, 10_000_000)}
#: Margins at 95% of the three tables.
MARGINS = {"county totals": ({"county": "identity"}, 50.0),
           "age x sex x county": ({"county": "identity", "age": "identity", "sex": "identity"}, 30.0),
           "race x county": ({"county": "identity", "race": "identity"}, 40.0)}
PARTS = ("estimate", "rmse", "coverage", "scale")
COLUMNS = ("case", "part", "cells", "queries", "releases", "replicates", "estimate_s", "bootstrap_s", "adds_up",
           "negative", "fractional", "rmse_raw", "rmse_consistent", "rmse_integer", "ratio", "ratio_county",
           "ratio_cells", "ratio_race", "rmse_integer_tight", "max_shift_sd", "changed_integers", "coverage",
           "coverage_county", "coverage_cells", "coverage_race", "raw_coverage", "peak_MB", "max_rss_MB")
SHORT = ("county", "cells", "race")


def workload(case: str):
    sizes, _ = CASES[case]
    groups = [(blocks, (margin / Z95) ** 2, name) for name, (blocks, margin) in MARGINS.items()]
    return ffu.workloads.product(ffu.Domain(sizes), groups, name=case)


def histogram(case: str, seed: int = 0) -> np.ndarray:
    """Synthetic counts: Zipf-like county sizes, ages thinning out, even sexes, skewed races."""
    sizes, records = CASES[case]
    rng = np.random.default_rng(seed)
    county = 1.0 / np.arange(1, sizes["county"] + 1) ** 0.8
    age = np.exp(-np.arange(sizes["age"]) / (sizes["age"] / 1.75))
    race = 0.6 ** np.arange(sizes["race"])
    p = np.einsum("c,a,s,r->casr", county / county.sum(), age / age.sum(), np.full(2, 0.5), race / race.sum())
    return rng.poisson(records * p.reshape(-1)).astype(float)


def _setup(case: str):
    wl = workload(case)
    return wl, ffu.solve(ffu.FitnessProblem.from_workload(wl), method="auto"), histogram(case)


def _adds_up(wl, values: np.ndarray) -> bool:
    """County totals = sums of their age x sex cells = sums of their race cells."""
    off, n = wl.offsets, wl.domain.sizes[0]
    county = values[off[0]:off[1]]
    cells = values[off[1]:off[2]].reshape(n, -1).sum(axis=1)
    race = values[off[2]:off[3]].reshape(n, -1).sum(axis=1)
    return bool(np.array_equal(county, cells) and np.array_equal(county, race))


def estimate_cell(case: str, replicates: int) -> dict:
    wl, sol, x = _setup(case)
    rel = ffu.release_product(sol, wl, x, rng=1)
    t0 = time.perf_counter()
    est = consistent.estimate(rel, sol, wl, bootstrap=0)
    seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    consistent.estimate(rel, sol, wl, bootstrap=replicates, rng=2)
    pub = est.published
    return {"cells": wl.d, "queries": wl.m, "releases": 1, "replicates": replicates, "estimate_s": seconds,
            "bootstrap_s": time.perf_counter() - t0 - seconds, "adds_up": _adds_up(wl, pub),
            "negative": int(np.sum(pub < 0)), "fractional": int(np.sum(pub != np.round(pub)))}


def _rms(err, mask=None) -> float:
    err = np.asarray(err)
    return float(np.sqrt(np.mean(np.square(err if mask is None else err[:, mask]))))


def rmse_cell(case: str, releases: int) -> dict:
    wl, sol, x = _setup(case)
    true, g = wl.apply(x), wl.group_index()
    raw, cons, integ, tight, shift, changed = [], [], [], [], 0.0, []
    for seed in range(releases):
        rel = ffu.release_product(sol, wl, x, rng=1000 + seed)
        est = consistent.estimate(rel, sol, wl, bootstrap=0)
        ref = consistent.estimate(rel, sol, wl, bootstrap=0, fdec=0.0)
        raw.append(rel.answers - true)
        cons.append(est.answers - true)
        integ.append(est.published - true)
        tight.append(ref.published - true)
        shift = max(shift, float(np.max(np.abs(est.answers - ref.answers) / rel.std)))
        changed.append(np.mean(est.published != ref.published))
    out = {"cells": wl.d, "queries": wl.m, "releases": releases, "rmse_raw": _rms(raw), "rmse_consistent": _rms(cons),
           "rmse_integer": _rms(integ), "ratio": _rms(integ) / _rms(raw), "rmse_integer_tight": _rms(tight),
           "max_shift_sd": shift, "changed_integers": float(np.mean(changed))}
    for k, short in enumerate(SHORT):
        out[f"ratio_{short}"] = _rms(integ, g == k) / _rms(raw, g == k)
    return out


def coverage_cell(case: str, releases: int, replicates: int) -> dict:
    wl, sol, x = _setup(case)
    true, g = wl.apply(x), wl.group_index()
    hits, raw = [], []
    t0 = time.perf_counter()
    for seed in range(releases):
        rel = ffu.release_product(sol, wl, x, rng=2000 + seed)
        est = consistent.estimate(rel, sol, wl, bootstrap=replicates, rng=seed)
        hits.append((est.lower <= true) & (true <= est.upper))
        raw.append((rel.lower <= true) & (true <= rel.upper))
    hits = np.array(hits)
    out = {"cells": wl.d, "queries": wl.m, "releases": releases, "replicates": replicates,
           "bootstrap_s": (time.perf_counter() - t0) / releases, "coverage": float(hits.mean()),
           "raw_coverage": float(np.mean(raw))}
    for k, short in enumerate(SHORT):
        out[f"coverage_{short}"] = float(hits[:, g == k].mean())
    return out


def scale_cell(case: str) -> dict:
    wl, sol, x = _setup(case)
    rel = ffu.release_product(sol, wl, x, rng=1)
    tracemalloc.start()
    t0 = time.perf_counter()
    est = consistent.estimate(rel, sol, wl, bootstrap=0)
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    pub = est.published
    return {"cells": wl.d, "queries": wl.m, "releases": 1, "estimate_s": seconds, "adds_up": _adds_up(wl, pub),
            "negative": int(np.sum(pub < 0)), "fractional": int(np.sum(pub != np.round(pub))),
            "rmse_raw": _rms([rel.answers - wl.apply(x)]), "rmse_integer": _rms([pub - wl.apply(x)]),
            "peak_MB": peak / 1e6, "max_rss_MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3}


def _cells(parts, quick: bool) -> list:
    n = 10 if quick else 1
    plan = {"estimate": (estimate_cell, {"case": "agency", "replicates": 200 // n}),
            "rmse": (rmse_cell, {"case": "agency", "releases": 200 // n}),
            "coverage": (coverage_cell, {"case": "agency", "releases": 60 // n, "replicates": 60}),
            "scale": (scale_cell, {"case": "agency" if quick else "product_1e7"})}
    return [runner.Cell({"part": p, **plan[p][1]}, row={"case": plan[p][1]["case"], "part": p}, label=p)
            for p in PARTS if p in parts]


def cell(part: str, **key) -> dict:
    return {"estimate": estimate_cell, "rmse": rmse_cell, "coverage": coverage_cell, "scale": scale_cell}[part](**key)


NOTES = ("Agency example: 42,000 cells (county 200 x age band 21 x sex 2 x race 5), 200,000 synthetic records. "
         "ratio = RMSE of the published integer tables / RMSE of the raw answers over the workload's queries "
         "(per group: county totals, age x sex x county cells, race x county). rmse_integer_tight: the same from "
         "the tight solve (fdec=0); max_shift_sd: the largest difference of a consistent answer between the two, "
         "in standard deviations of its noise, over the 200 releases; changed_integers: share of published "
         "integers that differ (systematic rounding moves with any change of the histogram, at no cost in RMSE). "
         "coverage: share of true answers inside the 95% bootstrap intervals (published value +- t quantile x "
         "the replicates' standard deviation); raw_coverage: the raw answers' exact 95% intervals. bootstrap_s: "
         "seconds of the bootstrap of one release. Scale: 10^7 cells; peak_MB is tracemalloc's peak during the "
         "estimate, max_rss_MB the process's peak resident set. Other intervals from the same draws (the first "
         "19 of the coverage releases, B = 60, computed from the saved replicates; overall / county / cells / "
         "race): percentile 96.5 / 82.5 / 97.3 / 93.2%, basic 62.7 / 92.3 / 59.0 / 87.5%, their union 97.4 / "
         "96.9 / 97.6 / 95.9%, normal with the z quantile 93.9 / 93.6 / 93.8 / 94.5%, with the t quantile 94.3 / "
         "94.3 / 94.2 / 94.9%. The fit's start (40 multiplicative updates, consistent.START_ITERATIONS) cuts the "
         "projected L-BFGS from 195 to 129 iterations on a 10^6-cell product (county 100 x age 100 x sex 2 x race "
         "50); from 20 updates, 141. On the 10^7-cell product the stall rule (nonneg.FDEC) stops at an objective "
         "0.0016 above the tight solve's (20948.1659), after 177 iterations where the tight solve takes 385. "
         "At 42,000 cells, from the same start, scipy's L-BFGS-B takes 0.6 s and the projected solver 0.3 s to "
         "the same objective (724.3771).")


def main(argv=None):
    p = runner.parser("Consistent non-negative integer tables: speed, accuracy against the raw answers, coverage")
    p.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    args = p.parse_args(argv)
    return runner.run_grid(NAME, _cells(args.parts, args.quick), cell, args, version=CELL_VERSION,
                           table=runner.Table("Consistent tables from a release", COLUMNS, notes=NOTES,
                                              floatfmt=".4g"))


if __name__ == "__main__":
    runner.cli(main)
