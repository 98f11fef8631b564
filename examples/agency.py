"""From accuracy needs to published tables: the worked example of docs/guide/worked.rst as a script.

``python examples/agency.py [out_dir]``: reads ``examples/agency.json`` (three tables over
county x age x sex, targets as margins at 95%, one joint) and ``examples/agency_records.csv``;
prints the least epsilon meeting every target and what each table gets; releases at that
budget with consistent, non-negative integer tables and their exact intervals; writes
``agency.csv`` and its privacy statement ``agency.privacy.json`` into ``out_dir`` (default:
the current folder), replacing an earlier run's.
"""

import sys
from pathlib import Path

import ffu_cvx as ffu
from ffu_cvx.io.specfile import load_spec

HERE = Path(__file__).resolve().parent

problem, _ = load_spec(HERE / "agency.json")                      # the spec the command line reads, too
wl = problem.workload
need = ffu.budget.smallest_budget(problem, delta=1e-6)
print(f"the least budget meeting every target: {need.text()}")

counts = wl.domain.counts(HERE / "agency_records.csv")            # sparse counts, never published
rel = ffu.release_product(need.solution, wl, counts)             # rng=None: the operating system's entropy
tables = ffu.consistent.estimate(rel, need.solution, wl)
published = tables.to_release(rel)

out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
answers, statement = published.to_csv(out / "agency.csv", overwrite=True)
print(f"wrote {answers} and {statement}")
print(published.statement()["text"])
