"""Benchmark: records -> sparse counts -> exact answers of a census-like product workload.

``python -m experiments.bench_records [--records 1000000] [--seed 0] [--csv] [--quick]``

Interface layer (experiments): imports numpy, ``ffu_cvx`` and :mod:`experiments.runner`.
Domain age 116 x sex 2 x hispanic 2 x race 63 x region 50 (about 1.46 x 10^6 cells);
groups: age bands of 5 x sex x region, race x hispanic x region, totals per region.
One row per step: wall-clock seconds (an untraced run) and the ``tracemalloc`` peak of the
step (a second, traced run; numpy's allocations are traced), beside the number of records,
of non-empty cells and of queries. ``--csv`` also writes the records to a temporary CSV and
times reading it (``Domain.counts(path)``). Nothing here forms the 1.46e6-cell histogram
except the check at the end of the cell, which compares the sparse answers with it.
``--quick`` draws 10,000 records. The run is one cell, cached under
``out/results/cache/bench_records`` (timings included: ``--force`` re-measures); its results
file is ``results/bench_records.{csv,json,md}``.
"""

from __future__ import annotations

import os
import tempfile
import time
import tracemalloc

import numpy as np

import ffu_cvx as ffu
from ffu_cvx.model import fingerprint
from ffu_cvx.release.product_release import release_product

from . import runner

NAME = "bench_records"
#: The cells' version (``version`` of :func:`experiments.runner.run_grid`).
CELL_VERSION = 1
#: Records drawn by default and with ``--quick``.
RECORDS, QUICK_RECORDS = 1_000_000, 10_000
DOMAIN = {"age": 116, "sex": ["F", "M"], "hispanic": ["no", "yes"], "race": 63, "region": 50}
GROUPS = [({"age": {"bands": 5}, "sex": "identity", "region": "identity"}, 20.0, "age bands x sex x region"),
          ({"race": "identity", "hispanic": "identity", "region": "identity"}, 10.0, "race x hispanic x region"),
          ({"region": "identity"}, 2.0, "total per region")]
COLUMNS = ("step", "records", "nonzero_cells", "queries", "time_s", "peak_mb")


def _timed(rows: list, name: str, fn):
    """Run ``fn`` twice: untraced for the time (tracemalloc slows Python code down), traced for the peak."""
    t0 = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t0
    tracemalloc.start()
    fn()
    rows.append({"step": name, "time_s": seconds, "peak_mb": tracemalloc.get_traced_memory()[1] / 1e6})
    tracemalloc.stop()
    return out


def _write_csv(dom, codes: np.ndarray, path: str) -> None:
    cols = [np.asarray([str(v) for v in a.values])[codes[:, j]] for j, a in enumerate(dom.attributes)]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(",".join(dom.names) + "\n")
        fh.write("\n".join(",".join(r) for r in zip(*cols)) + "\n")


def run_cell(records: int, seed: int, csv: bool) -> list[dict]:
    """Every step of one run, timed, on ``records`` records drawn uniformly with ``seed``."""
    dom = ffu.Domain(DOMAIN)
    wl = ffu.workloads.product(dom, GROUPS, name="census-like")
    rng = np.random.default_rng(seed)
    codes = np.stack([rng.integers(0, n, records) for n in dom.sizes], axis=1)
    rows: list = []
    counts = _timed(rows, "counts from (n, a) codes", lambda: dom.counts(codes))
    answers = _timed(rows, "exact answers W x (sparse)", lambda: wl.apply(counts))
    if csv:
        fd, path = tempfile.mkstemp(suffix=".csv")
        os.close(fd)
        try:
            _write_csv(dom, codes, path)
            from_csv = _timed(rows, "counts from a CSV file", lambda: dom.counts(path))
        finally:
            os.unlink(path)
        assert np.array_equal(from_csv.counts, counts.counts)
    standin = _StandIn(np.repeat([g[1] for g in GROUPS], [g.m for g in wl.groups]), fingerprint.of(wl))
    release = _timed(rows, "release (answers + noise + labels)", lambda: release_product(standin, wl, counts, rng=1))
    _timed(rows, "answers CSV bytes", release.csv_bytes)
    assert np.allclose(answers, wl.apply(counts.dense()))  # the dense check, outside the timings
    return [{**r, "records": records, "nonzero_cells": len(counts), "queries": wl.m} for r in rows]


class _StandIn:
    """Independent noise at the targets: a noise source with the structured Solution's interface, bound to
    its workload by the workload's fingerprint."""

    method = "independent (benchmark stand-in)"
    privacy_cost = 1.0

    def __init__(self, variances, mark: str):
        self.variances, self.fingerprint = variances, mark

    def sample_answer_noise(self, rng):
        return np.sqrt(self.variances) * rng.standard_normal(self.variances.size)


def main(argv=None):
    p = runner.parser(__doc__.splitlines()[0])
    p.add_argument("--records", type=runner.positive_count("a number of records >= 1"), default=None,
                   help=f"records drawn (default {RECORDS:,}; --quick: {QUICK_RECORDS:,})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--csv", action="store_true", help="also time reading the records from a CSV file")
    args = p.parse_args(argv)
    records = args.records or (QUICK_RECORDS if args.quick else RECORDS)
    dom = ffu.Domain(DOMAIN)
    cells = [runner.Cell({"records": records, "seed": args.seed, "csv": args.csv},
                         label=f"{records:,} records, seed {args.seed}")]
    table = runner.Table("Records to counts to answers (census-like domain)", COLUMNS, floatfmt=".4g",
                         notes=f"Domain {dom!r}; peak_mb is the tracemalloc peak of each step.",
                         footer="; wall-clock on this machine, shared with other jobs")
    return runner.run_grid(NAME, cells, run_cell, args, version=CELL_VERSION, table=table,
                           meta={"records": records, "seed": args.seed, "csv": args.csv, "domain_cells": dom.size,
                                 "groups": [g[2] for g in GROUPS]})


if __name__ == "__main__":
    runner.cli(main)
