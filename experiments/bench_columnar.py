"""Benchmark: counting records by engine (CSV in Python and through pyarrow, Parquet, Polars, Dask), and the
agency example from records to published tables.

``python -m experiments.bench_columnar [--sizes 1000000 10000000 100000000] [--no-agency] [--quick]``

Interface layer (experiments): imports numpy, ``ffu_cvx``, :mod:`experiments.bench_consistent` (the agency
example) and :mod:`experiments.runner`; pyarrow, Polars and Dask (the extras) are needed by their rows.

Records: five attributes (age 116, sex 2, Hispanic origin 2, race 63, region 50; 1.46 x 10^6 cells) with a
realistic skew (each attribute's shares drawn from a Dirichlet(0.3)), written once per size to a temporary
Parquet file (row groups of 10^6) and, up to 10^7 records, a CSV file of value labels. Each count runs in a
fresh process, so its peak resident memory (``VmHWM``, interpreter and libraries included) is its own (for
``dask``, the client's: the workers' memory is the cluster's):

- ``csv-python``: :func:`ffu_cvx.workloads.counts.from_records` on the CSV file (the parser without pyarrow), 10^6 only;
- ``csv-arrow``: ``Domain.counts`` on the CSV file (pyarrow's reader and group-by);
- ``parquet``: ``Domain.counts`` on the Parquet file (pyarrow's scanner and streaming group-by);
- ``polars``: ``Domain.counts(polars.scan_parquet(file))`` (Polars' streaming group-by);
- ``dask``: ``Domain.counts(file, scheduler=...)`` on a 2-worker ``LocalCluster`` (started beforehand, not timed).

Every row records whether its counts equal the Parquet row's (a digest of the sparse counts). The
``agency`` rows time each step of the agency example end to end: 200,000 records in Parquet to counts,
solve (``method="auto"``), release, consistent tables (the default call). ``--quick``: 10^5 and 10^6 records.
Results: ``results/bench_columnar.{csv,json,md}``.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import ffu_cvx as ffu

from . import bench_consistent, runner

NAME = "bench_columnar"
CELL_VERSION = 1
SIZES, QUICK_SIZES = (1_000_000, 10_000_000, 100_000_000), (100_000, 1_000_000)
DOMAIN = {"age": 116, "sex": ["F", "M"], "hispanic": ["no", "yes"], "race": 63, "region": 50}
#: Largest CSV written (the Python parser reads only the first size).
CSV_MAX = 10_000_000
ROW_GROUP = 1_000_000
COLUMNS = ("engine", "records", "seconds", "records_per_s", "peak_MB", "same_counts", "nonzero_cells")


def write_records(folder: Path, n: int, seed: int = 0) -> tuple[Path, Path | None]:
    """The Parquet file (and, up to :data:`CSV_MAX`, the CSV file) of ``n`` skewed records."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    dom = ffu.Domain(DOMAIN)
    rng = np.random.default_rng(seed)
    shares = [rng.dirichlet(np.full(a.size, 0.3)) for a in dom.attributes]
    parquet, csv = folder / f"r{n}.parquet", (folder / f"r{n}.csv" if n <= CSV_MAX else None)
    schema = pa.schema([(a.name, pa.int16() if a.sized else pa.dictionary(pa.int8(), pa.string()))
                        for a in dom.attributes])
    fh = open(csv, "w", encoding="utf-8") if csv else None
    try:
        if fh:
            fh.write(",".join(dom.names) + "\n")
        with pq.ParquetWriter(parquet, schema, compression="zstd") as writer:
            for start in range(0, n, ROW_GROUP):
                k = min(ROW_GROUP, n - start)
                codes = [rng.choice(a.size, k, p=p) for a, p in zip(dom.attributes, shares)]
                cols = [pa.array(c.astype(np.int16)) if a.sized else
                        pa.DictionaryArray.from_arrays(pa.array(c.astype(np.int8)), pa.array(list(a.values)))
                        for a, c in zip(dom.attributes, codes)]
                writer.write_table(pa.Table.from_arrays(cols, schema=schema))
                if fh:
                    text = [np.asarray([str(v) for v in a.values])[c] for a, c in zip(dom.attributes, codes)]
                    fh.write("\n".join(",".join(r) for r in zip(*text)) + "\n")
    finally:
        if fh:
            fh.close()
    return parquet, csv


def digest(counts) -> str:
    return hashlib.sha256(counts.codes.tobytes() + counts.counts.tobytes()).hexdigest()[:16]


def measure(engine: str, path: str, scheduler: str | None) -> dict:
    """Count ``path`` with ``engine`` in this process: seconds, peak resident MB, digest, non-empty cells."""
    dom = ffu.Domain(DOMAIN)
    if engine == "polars":
        import polars as pl
    elif engine in ("parquet", "csv-arrow"):
        import pyarrow.acero  # noqa: F401  (the import, about 0.4 s, is not counting)
    t0 = time.perf_counter()
    if engine == "csv-python":
        counts = ffu.workloads.counts.from_records(dom, path)
    elif engine == "polars":
        counts = dom.counts(pl.scan_parquet(path))
    else:
        counts = dom.counts(path, scheduler=scheduler if engine == "dask" else None)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "peak_MB": peak_mb(), "digest": digest(counts), "nonzero_cells": len(counts)}


def peak_mb() -> float:
    """This process's peak resident memory in MB: ``VmHWM`` (reset by exec, unlike ``ru_maxrss``, which a
    child started by fork and exec inherits from its parent)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _in_child(engine: str, path: Path, scheduler: str | None) -> dict:
    code = ("import json, sys; from experiments.bench_columnar import measure; "
            f"print(json.dumps(measure({engine!r}, {str(path)!r}, {scheduler!r})))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800,
                         cwd=str(Path(__file__).resolve().parent.parent))
    if run.returncode != 0:
        raise RuntimeError(f"{engine} on {path} failed: {run.stderr[-2000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def _rows_for(n: int, folder: Path, scheduler: str, seed: int) -> list[dict]:
    parquet, csv = write_records(folder, n, seed)
    plan = [("parquet", parquet), ("csv-arrow", csv), ("polars", parquet), ("dask", parquet)]
    if n <= SIZES[0]:
        plan.insert(1, ("csv-python", csv))
    rows, reference = [], None
    for engine, path in plan:
        if path is None:
            continue
        got = _in_child(engine, path, scheduler)
        reference = reference or got["digest"]
        rows.append({"engine": engine, "records": n, "seconds": got["seconds"],
                     "records_per_s": n / got["seconds"], "peak_MB": got["peak_MB"],
                     "same_counts": got["digest"] == reference, "nonzero_cells": got["nonzero_cells"]})
    for p in (parquet, csv):
        if p is not None:
            p.unlink()
    return rows


def agency_rows(folder: Path) -> list[dict]:
    """The agency example end to end, step by step: records (Parquet) -> counts -> solve -> release -> tables."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    wl = bench_consistent.workload("agency")
    x = bench_consistent.histogram("agency").astype(np.int64)
    cells = np.repeat(np.arange(x.size), x)
    codes = np.stack(np.unravel_index(cells, wl.domain.sizes), axis=1)
    path = folder / "agency.parquet"
    pq.write_table(pa.table({a.name: codes[:, j].astype(np.int16) for j, a in enumerate(wl.domain.attributes)}), path)
    steps = [("counts from Parquet", lambda: wl.domain.counts(path)),
             ("solve (method auto)", lambda: ffu.solve(ffu.FitnessProblem.from_workload(wl), method="auto")),
             ("release (OpenDP's sampler)", lambda: ffu.release_product(out["solve (method auto)"], wl,
                                                                         out["counts from Parquet"])),
             ("consistent tables (default call)",
              lambda: ffu.consistent.estimate(out["release (OpenDP's sampler)"], out["solve (method auto)"], wl))]
    out, rows = {}, []
    for name, fn in steps:
        t0 = time.perf_counter()
        out[name] = fn()
        rows.append({"engine": f"agency: {name}", "records": int(x.sum()), "seconds": time.perf_counter() - t0})
    path.unlink()
    return rows


def run_cell(size: int, seed: int) -> list[dict]:
    """``size`` records by every engine (0: the agency example), in a temporary folder."""
    with tempfile.TemporaryDirectory() as tmp:
        if size == 0:
            return agency_rows(Path(tmp))
        distributed = __import__("distributed")
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster:
            return _rows_for(size, Path(tmp), cluster.scheduler_address, seed)


def main(argv=None):
    p = runner.parser(__doc__.splitlines()[0])
    p.add_argument("--sizes", type=runner.positive_count("a number of records >= 1"), nargs="+", default=None,
                   help=f"records per file (default {' '.join(map(str, SIZES))})")
    p.add_argument("--no-agency", action="store_true", help="leave out the agency example's rows")
    args = p.parse_args(argv)
    sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    cells = [runner.Cell({"size": n, "seed": 0}, label=f"{n:,} records") for n in sizes]
    if not args.no_agency:
        cells.append(runner.Cell({"size": 0, "seed": 0}, label="agency example end to end"))
    table = runner.Table("Records to counts, by engine; the agency example end to end", COLUMNS, floatfmt=".4g",
                         notes="peak_MB: the counting process's peak resident memory, interpreter included.",
                         footer="; wall-clock on this machine, shared with other jobs")
    return runner.run_grid(NAME, cells, run_cell, args, version=CELL_VERSION, table=table,
                           meta={"sizes": list(sizes), "domain": DOMAIN, "cpu_count": os.cpu_count()})


if __name__ == "__main__":
    runner.cli(main)
