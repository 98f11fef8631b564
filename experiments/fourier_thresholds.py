"""Threshold (prefix) queries through the Z_2m embedding vs the true prefix optimum (spec § 5).

``python -m experiments.fourier_thresholds``. A numeric attribute on ``[0, m)`` is padded
to ``Z_{2m}``; the prefix queries ``1[x <= t]`` become shifts of the indicator of
``[0, m)`` (with their complements), a product family the Fourier mechanism answers
optimally *for that family*. We report, per ``m``: the embedding's optimum from the
max program and from the closed form ``(1/2 + (1/2m) sum_{b odd} 1/sin(pi b/2m))^2``,
the true optimum for the m prefix queries (``ffu.solve(prefix(m), method="sdp")``, when
``m <= SDP_MAX_M``), their ratio, the spec's table and
the asymptotic ``(ln m / pi + 0.9813)^2``. Privacy cost 1 (``rho = 1/2``).
"""

from __future__ import annotations

import math
import time

import ffu_cvx as ffu
from ffu_cvx.solvers import fourier as F

from . import runner

NAME = "fourier_thresholds"
#: The cells' version (``version`` of :func:`experiments.runner.run_grid`).
CELL_VERSION = 2
#: spec § 5 table: m -> (embedding, optimum)
SPEC = {4: (2.0274, 1.7586), 8: (2.7011, 2.2816), 16: (3.4741, 2.9053), 32: (4.3450, 3.6307), 64: (5.3134, 4.4579)}
GRID = (4, 8, 16, 32, 64, 128, 1024, 65536)
GRID_QUICK = (4, 8)
#: Largest m for which the exact SDP on the m prefix queries is run.
SDP_MAX_M = 64
#: Largest m for which the embedding's max program is solved (the closed form covers all m).
PROGRAM_MAX_M = 1024


COLUMNS = ("m", "embedding", "closed_form", "spec_embedding", "prefix_optimum", "spec_optimum", "ratio", "asymptotic",
           "offset", "released_frequencies", "embedding_s", "sdp_s", "sdp_status")
NOTES = ("Max variance at privacy cost 1. offset = sqrt(closed_form) - ln(m)/pi (spec: 0.9813 for large m). "
         "prefix_optimum = SDP's privacy_cost * max_ratio on prefix(m) with unit targets.")


def run_cell(m: int) -> dict:
    out = {"closed_form": F.embedding_max_variance(m)}
    if m <= PROGRAM_MAX_M:
        wl = F.CirculantWorkload((2 * m,), [F.ProductFamily((0,), [F.threshold_vector(m)], 1.0)])
        t0 = time.perf_counter()
        mech = F.max_optimal(wl)
        out.update({"embedding": mech.privacy_cost, "embedding_s": time.perf_counter() - t0,
                    "released_frequencies": int(sum((s < float("inf")).sum() for s in mech.spectra))})
    out["prefix_optimum"], out["sdp_s"], out["sdp_status"] = None, None, "not run (m > SDP_MAX_M)"
    if m <= SDP_MAX_M:
        problem = ffu.FitnessProblem.from_workload(ffu.workloads.prefix(m))
        t0 = time.perf_counter()
        sol = ffu.solve(problem, method="sdp")
        out.update({"prefix_optimum": float(sol.privacy_cost * sol.max_ratio), "sdp_s": time.perf_counter() - t0,
                    "sdp_status": sol.status})
    return out


def with_derived(rows: list[dict]) -> list[dict]:
    """Each row with the embedding's ratio to the optimum, the asymptotic form and its offset."""
    out = []
    for r in rows:
        m, emb, opt = r["m"], r.get("embedding"), r.get("prefix_optimum")
        out.append({**r, "ratio": None if emb is None or opt is None else emb / opt,
                    "asymptotic": (math.log(m) / math.pi + 0.9813) ** 2,
                    "offset": math.sqrt(r["closed_form"]) - math.log(m) / math.pi})
    return out


def main(argv=None):
    args = runner.parser(__doc__.splitlines()[0]).parse_args(argv)
    import cvxpy  # noqa: F401  (imported once up front so no cell's time includes it)
    cells = [runner.Cell({"m": m}, row={"m": m, "spec_embedding": SPEC.get(m, (None, None))[0],
                                        "spec_optimum": SPEC.get(m, (None, None))[1]}, label=f"m = {m}")
             for m in (GRID_QUICK if args.quick else GRID)]
    table = runner.Table("Thresholds via the Z_2m embedding vs the prefix optimum", COLUMNS, notes=NOTES,
                         floatfmt=".5g", display=lambda rows: [{c: r.get(c) for c in COLUMNS[:9] + ("sdp_status",)}
                                                               for r in rows])
    return runner.run_grid(NAME, cells, run_cell, args, version=CELL_VERSION, table=table, combine=with_derived,
                           meta={"privacy_cost": 1.0})


if __name__ == "__main__":
    runner.cli(main)
