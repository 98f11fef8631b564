"""Consistent, non-negative, integer tables from a release, with intervals that hold at the truth.

``python examples/consistent_tables.py [out_dir]``: county (20) x age band (21) x sex (2) x
race (5) from 20,000 synthetic records; county totals, age band x sex x county and race x
county at margins of 50, 30 and 40 at 95%. Writes the release (answers CSV and privacy
statement, with the published integer tables as its ``postprocessed`` column) and
``tables.csv`` (raw answers with exact intervals beside the consistent values with
exact intervals of the unbiased values).
"""

import sys
from pathlib import Path

import numpy as np

import ffu_cvx as ffu

Z95 = 1.959963984540054
dom = ffu.Domain({"county": 20, "age": 21, "sex": ["F", "M"], "race": 5})
wl = ffu.workloads.product(dom, [({"county": "identity"}, (50 / Z95) ** 2, "county totals"),
                                 ({"county": "identity", "age": "identity", "sex": "identity"}, (30 / Z95) ** 2,
                                  "age x sex x county"),
                                 ({"county": "identity", "race": "identity"}, (40 / Z95) ** 2, "race x county")],
                           name="agency")
counts = np.random.default_rng(0).poisson(20_000 / wl.d, wl.d).astype(float)

sol = ffu.solve(ffu.FitnessProblem.from_workload(wl), method="auto")
rel = ffu.release_product(sol, wl, counts)                 # rng=None: a real release
tables = ffu.consistent.estimate(rel, sol, wl)
published = tables.to_release(rel)

out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
print(published.to_csv(out / "answers.csv", overwrite=True))
print(tables.to_csv(out / "tables.csv", rel, overwrite=True))
print(published.statement()["text"])
