"""Benchmark of consistent tables from a release (:mod:`ffu_cvx.estimate.consistent`).

``python -m experiments.bench_consistent [--quick] [--parts accuracy time scale] [--cases NAME ...]``

Four data sets, each solved with ``method="auto"`` and released with the default (OpenDP) sampler,
every margin at 95% (variances ``(margin / 1.959964)^2``):

- ``sparse``: age 50 x race 10 x county 10 = 5,000 cells, 20,000 lumpy records (most cells empty,
  a few very large); county totals +-40, race x county +-25, age band (10 years) x county +-25,
  cells +-10;
- ``sparse_3840``: age 24 x race 8 x county 20 = 3,840 cells, 15,000 lumpy records; the total
  +-30, county totals +-30, age band (6 years) x county +-20, race x county +-20, cells +-8;
- ``agency`` (dense): county 200 x age band 21 x sex 2 x race 5 = 42,000 cells, 200,000
  records; county totals +-50, age band x sex x county +-30, race x county +-40;
- ``geography``: 300 counties in 20 states of unequal sizes x sex 2 x age band 23 = 13,800
  cells, 60,000 lumpy records; the nation +-60, state totals +-50, county totals +-30,
  state x sex x age +-30, county x sex +-20, county x sex x age +-8.

Parts:

- ``accuracy``: over 200 releases, for every table (and the grand total, the sum of any table)
  and every cell-size class of the true value (0, 1-2, 3-9, >= 10): RMSE of the raw answers and
  of the published integers, their ratio, the largest |bias| of a cell in raw standard
  deviations, and the coverage of the 95% intervals with its Clopper-Pearson 95% interval;
- ``time``: seconds of one estimate (median of 3) per data set, intervals included;
- ``scale``: seconds and peak memory of one estimate on 10^6 cells (county 1,000 x age 100 x
  sex 2 x race 5, the agency's tables).

Run it as ``OPENBLAS_NUM_THREADS=1 python -m experiments.bench_consistent``.
"""

from __future__ import annotations

import resource
import time
import tracemalloc

import numpy as np
from scipy import stats

import ffu_cvx as ffu
from ffu_cvx.estimate import consistent

from . import runner

NAME = "bench_consistent"
CELL_VERSION = 3
#: Two-sided 95% normal quantile: a margin at 95% is this many standard deviations.
Z95 = 1.959963984540054
AGENCY_TABLES = (("county totals", {"county": "identity"}, 50.0),
                 ("age x sex x county", {"county": "identity", "age": "identity", "sex": "identity"}, 30.0),
                 ("race x county", {"county": "identity", "race": "identity"}, 40.0))


def _states(counties: int, states: int, seed: int) -> list:
    """Contiguous county ranges of unequal sizes, one per state."""
    cuts = np.sort(np.random.default_rng(seed).choice(np.arange(1, counties), states - 1, replace=False))
    edges = np.r_[0, cuts, counties]
    return [(int(lo), int(hi) - 1) for lo, hi in zip(edges[:-1], edges[1:])]


STATES = _states(300, 20, 7)
#: name -> (attribute sizes, records, lumpy, tables (name, blocks, margin at 95%)).
CASES = {
    "sparse": ({"age": 50, "race": 10, "county": 10}, 20_000, True, (
        ("county totals", {"county": "identity"}, 40.0),
        ("race x county", {"race": "identity", "county": "identity"}, 25.0),
        ("age band x county", {"age": {"bands": 10}, "county": "identity"}, 25.0),
        ("cells", {"age": "identity", "race": "identity", "county": "identity"}, 10.0))),
    "sparse_3840": ({"age": 24, "race": 8, "county": 20}, 15_000, True, (
        ("total", {}, 30.0),
        ("county totals", {"county": "identity"}, 30.0),
        ("age band x county", {"age": {"bands": 6}, "county": "identity"}, 20.0),
        ("race x county", {"race": "identity", "county": "identity"}, 20.0),
        ("cells", {"age": "identity", "race": "identity", "county": "identity"}, 8.0))),
    "agency": ({"county": 200, "age": 21, "sex": 2, "race": 5}, 200_000, False, AGENCY_TABLES),
    "geography": ({"county": 300, "sex": 2, "age": 23}, 60_000, True, (
        ("nation", {}, 60.0),
        ("state totals", {"county": {"ranges": STATES}}, 50.0),
        ("county totals", {"county": "identity"}, 30.0),
        ("state x sex x age", {"county": {"ranges": STATES}, "sex": "identity", "age": "identity"}, 30.0),
        ("county x sex", {"county": "identity", "sex": "identity"}, 20.0),
        ("county x sex x age", {"county": "identity", "sex": "identity", "age": "identity"}, 8.0))),
    "product_1e6": ({"county": 1000, "age": 100, "sex": 2, "race": 5}, 1_000_000, False, AGENCY_TABLES),
}
DATA_SETS = ("sparse", "sparse_3840", "agency", "geography")
#: Cell-size classes of the true value: (name, lowest, highest).
CLASSES = (("0", 0, 0), ("1-2", 1, 2), ("3-9", 3, 9), (">=10", 10, np.inf))
PARTS = ("accuracy", "time", "scale")
COLUMNS = ("case", "part", "table", "size", "values", "releases", "rmse_raw", "rmse_published", "ratio",
           "bias_sd_max", "coverage", "coverage_low", "coverage_high", "cells", "queries", "estimate_s", "peak_MB",
           "max_rss_MB")


def workload(case: str):
    sizes, _, _, tables = CASES[case]
    groups = [(blocks, (margin / Z95) ** 2, name) for name, blocks, margin in tables]
    return ffu.workloads.product(ffu.Domain(sizes), groups, name=case)


def histogram(case: str, seed: int = 0) -> np.ndarray:
    """Synthetic counts: Zipf-like first attribute, thinning ages, skewed others; ``lumpy`` sets
    multiply each cell by a gamma(0.3) weight and empty about half of them."""
    sizes, records, lumpy, _ = CASES[case]
    rng = np.random.default_rng(seed)
    p = np.ones(())
    for i, (name, n) in enumerate(sizes.items()):
        k = np.arange(n)
        w = {0: 1.0 / (k + 1) ** 0.8, 1: 0.6 ** k}.get(i, np.exp(-k / (n / 1.75)))
        if name == "sex":
            w = np.ones(n)
        p = np.multiply.outer(p, w / w.sum())
    p = p.reshape(-1)
    if lumpy:
        p = p * rng.gamma(0.3, 1.0, p.size) * (rng.random(p.size) >= 0.5)
    return rng.multinomial(records, p / p.sum()).astype(float)


def _setup(case: str):
    wl = workload(case)
    return wl, ffu.solve(ffu.FitnessProblem.from_workload(wl), method="auto"), histogram(case)


def _coverage_row(hits: np.ndarray) -> dict:
    n, k = hits.size, int(hits.sum())
    low = stats.beta.ppf(0.025, k, n - k + 1) if k > 0 else 0.0
    high = stats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return {"coverage": k / n, "coverage_low": float(low), "coverage_high": float(high)}


def _errors(raw: np.ndarray, pub: np.ndarray) -> dict:
    """RMSE of the raw and the published values and their ratio."""
    mse_raw, mse_pub = float(np.mean(raw ** 2)), float(np.mean(pub ** 2))
    return {"rmse_raw": np.sqrt(mse_raw), "rmse_published": np.sqrt(mse_pub), "ratio": np.sqrt(mse_pub / mse_raw)}


def _rows(case, name, raw, pub, hits, true, sd, releases) -> list:
    """One row per cell-size class (and all) of one table: raw and published errors (releases, q)."""
    rows = []
    for size, lo, hi in (("all", -np.inf, np.inf),) + CLASSES:
        on = (true >= lo) & (true <= hi)
        if not on.any():
            continue
        r, p = raw[:, on], pub[:, on]
        bias = np.abs(p.mean(axis=0)) / sd[on]
        rows.append({"case": case, "part": "accuracy", "table": name, "size": size, "values": int(on.sum()),
                     "releases": releases, **_errors(r, p), "bias_sd_max": float(bias.max()),
                     **_coverage_row(hits[:, on])})
    return rows


def accuracy_cell(case: str, releases: int) -> list:
    wl, sol, x = _setup(case)
    true, off = wl.apply(x), wl.offsets
    raw, pub, hits = [], [], []
    for seed in range(releases):
        rel = ffu.release_product(sol, wl, x, rng=1000 + seed, sampler="numpy")
        est = consistent.estimate(rel, sol, wl)
        raw.append(rel.answers - true)
        pub.append(est.published - true)
        hits.append((est.lower <= true) & (true <= est.upper))
    raw, pub, hits = np.array(raw), np.array(pub), np.array(hits)
    sd = np.sqrt(wl.c)
    rows = []
    for g, group in enumerate(wl.groups):
        s = slice(off[g], off[g + 1])
        rows += _rows(case, group.name, raw[:, s], pub[:, s], hits[:, s], true[s], sd[s], releases)
    first = slice(off[0], off[1])
    grand_raw, grand_pub = raw[:, first].sum(axis=1), pub[:, first].sum(axis=1)
    grand_sd = float(np.sqrt(np.sum(wl.c[first])))
    rows.append({"case": case, "part": "accuracy", "table": "grand total", "size": "all", "values": 1,
                 "releases": releases, **_errors(grand_raw, grand_pub),
                 "bias_sd_max": float(abs(grand_pub.mean()) / grand_sd)})
    return rows


def time_cell(case: str, repeats: int) -> dict:
    wl, sol, x = _setup(case)
    rel = ffu.release_product(sol, wl, x, rng=1)
    seconds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        consistent.estimate(rel, sol, wl)
        seconds.append(time.perf_counter() - t0)
    return {"case": case, "part": "time", "cells": wl.d, "queries": wl.m, "estimate_s": float(np.median(seconds))}


def scale_cell(case: str) -> dict:
    wl, sol, x = _setup(case)
    rel = ffu.release_product(sol, wl, x, rng=1)
    tracemalloc.start()
    t0 = time.perf_counter()
    est = consistent.estimate(rel, sol, wl)
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    true = wl.apply(x)
    return {"case": case, "part": "scale", "cells": wl.d, "queries": wl.m, "estimate_s": seconds,
            "rmse_raw": float(np.sqrt(np.mean((rel.answers - true) ** 2))),
            "rmse_published": float(np.sqrt(np.mean((est.published - true) ** 2))),
            "peak_MB": peak / 1e6, "max_rss_MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3}


def _cells(parts, cases, quick: bool) -> list:
    cells = []
    if "accuracy" in parts:
        cells += [runner.Cell({"part": "accuracy", "case": c, "releases": 20 if quick else 200}, label=f"accuracy {c}")
                  for c in cases]
    if "time" in parts:
        cells += [runner.Cell({"part": "time", "case": c, "repeats": 1 if quick else 3}, label=f"time {c}")
                  for c in cases]
    if "scale" in parts:
        cells.append(runner.Cell({"part": "scale", "case": "sparse" if quick else "product_1e6"}, label="scale"))
    return cells


def cell(part: str, **key):
    return {"accuracy": accuracy_cell, "time": time_cell, "scale": scale_cell}[part](**key)


NOTES = ("Published: the non-negative integer tables of consistent.estimate (method auto: top down). ratio = RMSE of "
         "the published values / RMSE of the raw answers over the releases and the values of the table in that "
         "cell-size class (size: the true value; all: the whole table); grand total: the sum of the first table. "
         "bias_sd_max: the largest |mean error| of a value over the releases, in raw standard deviations (its "
         "noise alone is about 1/sqrt(releases) = 0.07 per value). coverage: share of true values inside the "
         "published 95% intervals, with its Clopper-Pearson 95% interval (values of one release are "
         "correlated). Releases drawn with numpy's sampler (seeded, reproducible); estimate_s: one estimate "
         "(median of 3), intervals included; scale: peak_MB is tracemalloc's peak during the estimate, "
         "max_rss_MB the process's peak resident set.")


def main(argv=None):
    p = runner.parser("Consistent non-negative integer tables: accuracy against the raw answers, coverage, speed")
    p.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    p.add_argument("--cases", nargs="+", default=list(DATA_SETS), choices=DATA_SETS,
                   help="data sets of the accuracy and time parts (default: all four)")
    args = p.parse_args(argv)
    return runner.run_grid(NAME, _cells(args.parts, args.cases, args.quick), cell, args, version=CELL_VERSION,
                           table=runner.Table("Consistent tables from a release", COLUMNS, notes=NOTES,
                                              floatfmt=".4g"))


if __name__ == "__main__":
    runner.cli(main)
