"""Benchmark: records -> sparse counts -> exact answers of a census-like product workload.

``python -m experiments.bench_records [--records 1000000] [--seed 0] [--csv]``

Domain age 116 x sex 2 x hispanic 2 x race 63 x region 50 (about 1.46 x 10^6 cells);
groups: age bands of 5 x sex x region, race x hispanic x region, totals per region.
Prints one row per step: wall-clock seconds (an untraced run) and the ``tracemalloc``
peak of the step (a second, traced run; numpy's allocations are traced). ``--csv`` also writes the records to a temporary CSV
and times reading it (``Domain.counts(path)``). Nothing here forms the 1.46e6-cell
histogram except the check at the end, which compares with it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import tracemalloc

import numpy as np

import ffu_cvx as ffu
from ffu_cvx.product_release import release_product

DOMAIN = {"age": 116, "sex": ["F", "M"], "hispanic": ["no", "yes"], "race": 63, "region": 50}
GROUPS = [({"age": {"bands": 5}, "sex": "identity", "region": "identity"}, 20.0, "age bands x sex x region"),
          ({"race": "identity", "hispanic": "identity", "region": "identity"}, 10.0, "race x hispanic x region"),
          ({"region": "identity"}, 2.0, "total per region")]


def _timed(rows: list, name: str, fn):
    """Run ``fn`` twice: untraced for the time (tracemalloc slows Python code down), traced for the peak."""
    t0 = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t0
    tracemalloc.start()
    fn()
    rows.append((name, seconds, tracemalloc.get_traced_memory()[1]))
    tracemalloc.stop()
    return out


def _write_csv(dom, codes: np.ndarray, path: str) -> None:
    cols = [np.asarray([str(v) for v in a.values])[codes[:, j]] for j, a in enumerate(dom.attributes)]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(",".join(dom.names) + "\n")
        fh.write("\n".join(",".join(r) for r in zip(*cols)) + "\n")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--csv", action="store_true", help="also time reading the records from a CSV file")
    args = p.parse_args(argv)
    dom = ffu.Domain(DOMAIN)
    wl = ffu.workloads.product(dom, GROUPS, name="census-like")
    rng = np.random.default_rng(args.seed)
    codes = np.stack([rng.integers(0, n, args.records) for n in dom.sizes], axis=1)
    rows: list = []
    counts = _timed(rows, "counts from (n, a) codes", lambda: dom.counts(codes))
    answers = _timed(rows, "exact answers W x (sparse)", lambda: wl.apply(counts))
    if args.csv:
        fd, path = tempfile.mkstemp(suffix=".csv")
        os.close(fd)
        try:
            _write_csv(dom, codes, path)
            from_csv = _timed(rows, "counts from a CSV file", lambda: dom.counts(path))
        finally:
            os.unlink(path)
        assert np.array_equal(from_csv.counts, counts.counts)
    standin = _StandIn(np.repeat([g[1] for g in GROUPS], [g.m for g in wl.groups]))
    release = _timed(rows, "release (answers + noise + labels)",
                     lambda: release_product(standin, wl, counts, rng=1))
    _timed(rows, "answers CSV bytes", release.csv_bytes)
    assert np.allclose(answers, wl.apply(counts.dense()))  # the dense check, outside the timings
    print(f"domain {dom!r}; {args.records} records in {len(counts)} cells; m = {wl.m} queries")
    print(f"{'step':<38}{'time (s)':>10}{'peak (MB)':>12}")
    for name, sec, peak in rows:
        print(f"{name:<38}{sec:>10.3f}{peak / 1e6:>12.1f}")


class _StandIn:
    """Independent noise at the targets: a noise source with the structured Solution's interface."""

    method = "independent (benchmark stand-in)"
    privacy_cost = 1.0

    def __init__(self, variances):
        self.variances = variances

    def sample_answer_noise(self, rng):
        return np.sqrt(self.variances) * rng.standard_normal(self.variances.size)


if __name__ == "__main__":
    main()
