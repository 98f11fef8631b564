"""The documentation's tables of measured numbers, generated from the committed results files.

``python -m experiments.perf_tables [--check] [--readme]``

Interfaces layer (experiments): imports the standard library, :mod:`experiments.paths` and, for the SM-II
benchmark bank's summary and verdict, :mod:`experiments.bench_bank`.
Reads ``results/<name>.json`` (written by the experiments, see :mod:`experiments.runner`) and
writes one reStructuredText table per file into ``docs/generated/`` (included by
``docs/performance.rst`` and ``docs/reproduction.rst``), each followed by the run's provenance:
the command, the commit, the date, the processor, the load and the BLAS thread setting. A
number in the documentation is therefore always the number in a committed results file; to
update it, run the experiment again with ``--update-results`` (without it, the experiments
write the git-ignored ``out/``, which this module never reads), commit its results file and
run this module.

The same command rewrites the README's short performance table (Markdown, the block that opens
with :data:`README_HEADER`) from the same files. ``--check`` writes nothing and exits 1 when a
generated file or the README's table differs from what the results files give (the
documentation's test runs it); a file whose text is the same and whose numbers agree to
:data:`CHECK_TOLERANCE` (:func:`same_text`) is up to date, and left as it is.
``--readme`` prints the README's table instead.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

from . import paths

RESULTS = paths.committed_results()
OUT = paths.REPO / "docs" / "generated"
README = paths.REPO / "README.md"
#: The first line of the README's performance table; the table runs to the first line not starting with ``|``.
README_HEADER = "| problem | method | result | time (s) | results file |"
#: Results files the documentation draws on; each must be committed (see ``.gitignore``).
SOURCES = ("table2", "bench_smii", "bench_bank", "bench_bank_ablation", "bench_bank_ablation_large", "census",
           "bench_kron_scale", "table3", "table4", "table5", "table6", "table7", "table8",
           "table9", "figures23", "bench_sdp", "bench_workloads", "bench_authors", "bench_backends", "bench_records",
           "bench_noise", "bench_columnar", "bench_consistent", "census_tables")
#: Relative tolerance on the numbers of a generated file (:func:`same_text`).
CHECK_TOLERANCE = 1e-6
#: A number as the generated tables write it (``1,024`` is two, with the comma as text between).
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
#: The ratio tables of the paper's §7 (one layout, :mod:`experiments.ratios`).
RATIO_TABLES = ("table4", "table5", "table6", "table7", "table8", "table9")


def load(name: str) -> dict:
    """The results file ``results/<name>.json`` of the clone (never the ``FFU_CVX_EXPERIMENTS_OUT`` folder)."""
    with open(RESULTS / f"{name}.json", encoding="utf-8") as f:
        return json.load(f)


def _num(x, fmt: str) -> str:
    return "–" if x is None else format(x, fmt)


def _cell(text: str) -> str:
    return text if text.strip() else "–"


def list_table(header: list[str], rows: list[list[str]], widths: str | None = None) -> str:
    """An rST ``list-table`` with one header row."""
    lines = [".. list-table::", "   :header-rows: 1"]
    if widths:
        lines.append(f"   :widths: {widths}")
    lines.append("")
    for row in [header] + rows:
        for j, value in enumerate(row):
            lines.append(("   * - " if j == 0 else "     - ") + _cell(str(value)))
    return "\n".join(lines) + "\n"


def provenance(data: dict, name: str) -> str:
    """One paragraph: where the numbers come from and the conditions of the run."""
    env = data.get("environment", {})
    load_avg = env.get("load_average")
    threads = (env.get("blas_threads_env") or {}).get("OPENBLAS_NUM_THREADS")
    commit = env.get("commit")
    parts = [f"From ``results/{name}.json``"]
    if env.get("command"):
        parts.append(f"written by ``{env['command']}``")
    facts = []
    if commit:
        facts.append(f"commit ``{commit[:12]}{'+dirty' if commit.endswith('+dirty') else ''}``")
    if env.get("time_utc"):
        facts.append(env["time_utc"][:10])
    if env.get("cpu"):
        facts.append(f"{env.get('cpu_count')} cores of an {env['cpu']}")
    if load_avg:
        facts.append(f"load average {load_avg[0]:.1f}")
    facts.append(f"OPENBLAS_NUM_THREADS={threads}" if threads else "default BLAS threads")
    return " ".join(parts) + " (" + "; ".join(facts) + ").\n"


def table2(data: dict) -> str:
    header = ["d", "exact SDP α", "SM-II α", "paper", "rel. difference", "Σ rel. difference", "SDP gap",
              "SM-II gap", "SDP time (s)", "SM-II time (s)"]
    rows = []
    for r in data["rows"]:
        rows.append([str(r["d"]), _num(r.get("IP"), ".4f"), _num(r.get("SM-II"), ".4f"), _num(r.get("IP_paper"), ".2f"),
                     _num(r.get("rel_diff"), ".1e"), _num(r.get("sigma_rel_diff"), ".1e"), _num(r.get("IP_gap"), ".1e"), _num(r.get("SM-II_gap"), ".1e"),
                     _num(r.get("IP_time"), ".2f"), _num(r.get("SM-II_time"), ".2f")])
    return list_table(header, rows)


def bench_smii(data: dict) -> str:
    header = ["workload", "d", "k", "m", "wall (s)", "CPU (s)", "Newton steps", "Hessian products", "α",
              "certified gap", "peak MB", "status"]
    rows = [[r["workload"], str(r["d"]), str(r["k"]), str(r["m"]), _num(r.get("time_s"), ".1f"),
             _num(r.get("cpu_s"), ".1f"), str(r.get("nit")), str(r.get("n_hvp")), _num(r.get("alpha"), ".4f"),
             _num(r.get("gap"), ".1e"), _num(r.get("peak_mb"), ".0f"), r.get("status", "")]
            for r in data["rows"]]
    tol = data.get("meta", {}).get("tol")
    return (f"SM-II at ``tol = {tol}``, random targets for the range workloads.\n\n" if tol else "") \
        + list_table(header, rows)


def census(data: dict) -> str:
    header = ["mechanism", "privacy cost α", "ε at δ = 1e-6", "worst variance / target at the optimum's α",
              "solve time (s)"]
    rows = [[r["mechanism"], _num(r.get("privacy_cost"), ".4g"), _num(r.get("epsilon_1e-6"), ".3g"),
             _num(r.get("ratio"), ".3g"), _num(r.get("time_s"), ".2f")] for r in data["rows"]]
    cells = data.get("meta", {}).get("cells")
    first = data["rows"][0]
    intro = (f"The census-like example (``examples/census.json``, {cells:,} cells): the Kronecker solver's "
             f"optimum, certified to a gap of {first.get('gap'):.1e}, against the Kronecker strategies "
             f"that reach that scale, each compared at the optimum's privacy cost.\n\n") if cells else ""
    return intro + list_table(header, rows)


def bench_kron_scale(data: dict) -> str:
    header = ["case", "cells", "queries", "structure", "privacy cost", "certified gap", "time (s)", "peak MB"]
    rows = [[r["case"], f"{r['cells']:,}", f"{r['queries']:,}", r.get("structure", ""), _num(r.get("privacy_cost"), ".4g"),
             _num(r.get("gap"), ".1e"), _num(r.get("time_s"), ".2f"), _num(r.get("peak_MB"), ".1f")]
            for r in data["rows"]]
    return list_table(header, rows)


def table3(data: dict) -> str:
    """Table 3: seconds until gradient descent and SM-II reach the optimum's cost within ``rtol``."""
    header = ["d", "GD (ours)", "GD (paper)", "SM-II (ours)", "SM-II (paper)", "optimum α"]
    rows = []
    for r in data["rows"]:
        if r.get("GD_reached"):
            gd = f"{r['GD_time']:.2f} s"
        else:
            gd = (f"not reached ({r.get('GD_status')} after {r.get('GD_time', 0):.0f} s, {r.get('GD_nit')} it., "
                  f"α = {_num(r.get('GD_alpha'), '.4f')})")
        sm = f"{r['SM-II_time']:.3f} s ({r.get('SM-II_nit')} it.)" if r.get("SM-II_reached") else "not reached"
        rows.append([str(r["d"]), gd, f"{_num(r.get('GD_paper'), '.2f')} s", sm, f"{_num(r.get('SM-II_paper'), '.3f')} s",
                     _num(r.get("alpha_ref"), ".4f")])
    return list_table(header, rows)


def ratios(data: dict) -> str:
    """A ratio table of §7: each mechanism's worst variance / target at SM-II's privacy cost."""
    header = ["case", "GM", "HM (b)", "CA", "SM-II", "IM", "HM3 (b)", "α (SM-II)", "certified α* ≥", "SM-II gap",
              "paper GM / HM / CA"]
    rows = []
    for r in data["rows"]:
        paper = [r.get(f"{m}_paper") for m in ("GM", "HM", "CA")]
        rows.append([r["case"], _num(r.get("GM"), ".2f"), f"{_num(r.get('HM'), '.2f')} ({r.get('HM_b')})",
                     _num(r.get("CA"), ".2f"), _num(r.get("SM-II"), ".3f"), _num(r.get("IM"), ".2f"),
                     f"{_num(r.get('HM3'), '.2f')} ({r.get('HM3_b')})", _num(r.get("alpha"), ".4f"),
                     _num(r.get("smii_lower_bound"), ".4f"), _num(r.get("smii_gap"), ".1e"),
                     " / ".join(_num(x, ".2f") for x in paper) if any(x is not None for x in paper) else "–"])
    return list_table(header, rows)


def figures23(data: dict) -> str:
    """Figures 2 and 3 side by side: GM, HM and CA at SM-II's privacy cost for each n."""
    a = {r["n"]: r for r in data["figure2"]["rows"]}
    b = {r["n"]: r for r in data["figure3"]["rows"]}
    header = ["n (cells)", "A: GM", "A: HM", "A: CA", "B: GM", "B: HM", "B: CA"]
    rows = []
    for n in sorted(set(a) | set(b)):
        ra, rb = a.get(n, {}), b.get(n, {})
        cells = ra.get("cells", rb.get("cells"))
        rows.append([f"{n} ({cells})"] + [_num(r.get(m), ".2f") for r in (ra, rb) for m in ("GM", "HM", "CA")])
    return list_table(header, rows)


def _status(r: dict) -> str:
    """A row's status, or its error (a cell the runner reported instead of computing)."""
    return r.get("status") or r.get("error") or ""


def _count(x) -> str:
    return "–" if x is None else f"{x:,}"


def bench_sdp(data: dict) -> str:
    """The SDP's formulations and solvers, cell by cell (skipped cells say why); the refinement's
    columns only for a refined run."""
    refined = bool(data.get("meta", {}).get("refine"))
    header = ["workload", "d", "formulation", "solver", "LMI order", "main (s)"] + \
        (["refine (s)", "levels"] if refined else []) + ["wall (s)", "α", "paper", "certified gap", "warm start", "status"]
    rows = []
    for r in data["rows"]:
        refine = [_num(r.get("refine_s"), ".2f"), _count(r.get("levels"))] if refined else []
        rows.append([r["workload"], str(r["d"]), r["formulation"], r.get("solver_used") or r.get("solver", ""),
                     str(r.get("order")), _num(r.get("main_s"), ".2f")] + refine +
                    [_num(r.get("wall_s"), ".2f"), _num(r.get("alpha"), ".6f"), _num(r.get("paper_IP"), ".2f"),
                     _num(r.get("gap"), ".1e"), str(r.get("warm_start") or "–"), _status(r)])
    warm = data.get("meta", {}).get("warm_start")
    intro = ("Problem 1 by each formulation, refined (≺R): ``main`` is the time to Problem 1's optimum, "
             "``refine`` that of the refinement's levels after it" if refined else
             "Problem 1 by each formulation, without the refinement: ``main`` is the time to its optimum") + \
        f"; warm start ``{warm}`` (the column names the start a cell used).\n\n"
    return intro + list_table(header, rows)


def bench_workloads(data: dict) -> str:
    """SM-II across workload classes, one row per class, size and seed."""
    header = ["workload", "d", "seed", "m", "k", "time (s)", "Newton steps", "Hessian products", "α",
              "certified gap", "restarts", "polish", "polish (s)", "status"]
    rows = [[r["workload"], str(r["d"]), str(r["seed"]), str(r.get("m")), str(r.get("k")), _num(r.get("time_s"), ".2f"),
             _count(r.get("nit")), _count(r.get("n_hvp")), _num(r.get("alpha"), ".6g"), _num(r.get("gap"), ".1e"),
             _count(r.get("restarts")), r.get("polish") or "–", _num(r.get("polish_s"), ".2f"), _status(r)]
            for r in data["rows"]]
    tol = data.get("meta", {}).get("tol")
    return (f"SM-II at ``tol = {tol}``, default options.\n\n" if tol else "") + list_table(header, rows)


def bench_authors(data: dict) -> str:
    """SM-II on the workloads of the authors' scripts."""
    header = ["workload", "seed", "m x d", "k", "time (s)", "Newton steps", "Hessian products", "α", "certified gap",
              "polish", "status"]
    rows = [[r["workload"], str(r["seed"]), f"{r.get('m')} x {r.get('d')}", str(r.get("k")),
             _num(r.get("time_s"), ".2f"), _count(r.get("nit")), _count(r.get("n_hvp")), _num(r.get("alpha"), ".6g"),
             _num(r.get("gap"), ".1e"), r.get("polish") or "–", _status(r)] for r in data["rows"]]
    stopped = sorted({r["refine_failed"] for r in data["rows"] if r.get("refine_failed")})
    tol = data.get("meta", {}).get("tol")
    intro = f"SM-II at ``tol = {tol}``, default options.\n\n" if tol else ""
    notes = "".join(f"\nA ``stopped`` polish: {why}.\n" for why in stopped)
    return intro + list_table(header, rows) + notes


def bench_backends(data: dict) -> str:
    """SM-II on each array backend that ran, against numpy."""
    header = ["workload", "d", "backend", "device", "time (s)", "speedup over numpy", "Newton steps",
              "Hessian products", "α", "α vs numpy", "certified gap", "status"]
    rows = [[r["workload"], str(r["d"]), r["backend"], r.get("device") or "–", _num(r.get("time_s"), ".2f"),
             _num(r.get("speedup"), ".2f"), _count(r.get("nit")), _count(r.get("n_hvp")), _num(r.get("alpha"), ".6g"),
             _num(r.get("alpha_vs_numpy"), ".1e"), _num(r.get("gap"), ".1e"), _status(r)] for r in data["rows"]]
    ran = list(dict.fromkeys(r["backend"] for r in data["rows"]))
    meta = data.get("meta", {})
    intro = (f"Backends that ran: {', '.join(f'``{b}``' for b in ran)}; SM-II at ``tol = {meta.get('tol')}``"
             + (", single-precision Hessian products" if meta.get("float32") else "") + ".\n\n")
    return intro + list_table(header, rows)


def _x(value) -> str:
    return "–" if value is None else f"{value:.2f}"


def bench_bank(data: dict) -> str:
    """The SM-II bank, each class and size: the default's median and worst time and Newton steps, and (with a
    baseline in the run) the baseline's, as ratios of today's code to it."""
    from . import bench_bank as bank

    rows = bank.summary(data["rows"])
    base = {(r["class"], r["d"]): r for r in rows if r["variant"] == bank.BASELINE}
    header = ["class", "d", "cells", "certified", "median (s)", "worst (s)", "median steps", "median products",
              "worst gap"] + (["median / baseline", "worst / baseline", "products / baseline"] if base else [])
    out = []
    for r in rows:
        if r["variant"] != bank.DEFAULT:
            continue
        b = base.get((r["class"], r["d"]))
        cols = [r["class"], str(r["d"]), str(r["cells"]), str(r["certified"]), _num(r["median_s"], ".3g"),
                _num(r["worst_s"], ".3g"), _num(r["median_nit"], "g"), _num(r["median_hvp"], "g"),
                _num(r["worst_gap"], ".1e")]
        if base:
            ratio = (lambda a, z: None if b is None or a is None or not b[z] else a / b[z])
            cols += [_x(ratio(r["median_s"], "median_s")), _x(ratio(r["worst_s"], "worst_s")),
                     _x(ratio(r["median_hvp"], "median_hvp"))]
        out.append(cols)
    sha = (data.get("meta") or {}).get("baseline")
    same = sum(r["same_work"] for r in base.values())
    intro = (f"Default options against the package at revision ``{sha[:12]}`` (``--baseline``), each problem "
             f"solved by both side by side; in {same} of {len(base)} classes and sizes every problem took the "
             "same Newton steps and Hessian products with both.\n\n") if sha else ""
    return intro + list_table(header, out)


def _kept(v: dict) -> str:
    """A verdict row's word: what the keep rule says."""
    return ("keep (trade-off)" if v["trade_off"] else "keep") if v["keep"] else "remove"


def _in_solver(variant: str, bank) -> str:
    """Whether SM-II still has the heuristic: its option, or "removed"."""
    switch = bank.ABLATIONS.get(variant)
    return "removed" if switch is None else ", ".join(f"``{k}={v!r}``" for k, v in switch[0].items())


def bench_bank_ablation(data: dict) -> str:
    """Each heuristic switched off, each class and size: time and Hessian-product ratios to the default, and
    the verdict of the keep rule (:func:`experiments.bench_bank.verdict`)."""
    from . import bench_bank as bank

    summary = bank.summary(data["rows"])
    header = ["switched off", "class", "d", "certified", "median ×", "worst ×", "products ×"]
    table = [[r["variant"], r["class"], str(r["d"]), f"{r['certified']}/{r['cells']}", _x(r["median_x"]),
              _x(r["worst_x"]), _x(r["hvp_x"])] for r in summary if r["variant"] != bank.DEFAULT]
    verdict = [[v["variant"], v["heuristic"], _kept(v), _in_solver(v["variant"], bank), _cell(v["justify"]),
                _cell(v["hurts"])] for v in bank.verdict_rows(summary)]
    return ("Verdict (kept where switching it off makes a class's median 1.10x or its worst 1.25x slower, "
            f"the worst counted where the default's takes {bank.WORST_FROM_S:g} s or more, each beyond the noise "
            "variant's ratio for that class (the default run again), or leaves a cell uncertified):\n\n"
            + list_table(["switched off", "heuristic", "rule", "in SM-II (off by)", "slower without it",
                          "faster without it"], verdict)
            + "\nEvery class and size (ratios to the default of the same run):\n\n" + list_table(header, table))


def bench_records(data: dict) -> str:
    """Records to counts to answers, step by step."""
    rows = data["rows"]
    meta = data.get("meta", {})
    first = rows[0]
    intro = (f"{_count(first.get('records'))} records drawn uniformly over the census-like domain "
             f"({_count(meta.get('domain_cells'))} cells; {_count(first.get('nonzero_cells'))} of them non-empty), "
             f"{_count(first.get('queries'))} queries in {len(meta.get('groups') or [])} groups.\n\n")
    header = ["step", "time (s)", "tracemalloc peak (MB)"]
    return intro + list_table(header, [[r["step"], _num(r.get("time_s"), ".3f"), _num(r.get("peak_mb"), ".1f")]
                                       for r in rows])


def bench_noise(data: dict) -> str:
    """OpenDP's exact sampler beside numpy's, per size, and the default release call."""
    rows = data["rows"]
    header = ["what", "draws", "OpenDP (s)", "numpy (s)", "ratio", "OpenDP µs per draw", "threads"]
    return list_table(header, [[r["kind"], _count(r["n"]), _num(r.get("opendp_s"), ".3f"),
                                _num(r.get("numpy_s"), ".4f"), _num(r.get("ratio"), ".0f"),
                                _num(r.get("opendp_us_per_draw"), ".1f"), str(r.get("threads"))] for r in rows])


def bench_columnar(data: dict) -> str:
    """Records per second by engine and size, peak memory, and the agency example step by step."""
    rows = data["rows"]
    engines = [r for r in rows if not r["engine"].startswith("agency")]
    agency = [r for r in rows if r["engine"].startswith("agency")]
    header = ["engine", "records", "seconds", "records per second", "peak memory (MB)", "same counts"]
    out = list_table(header, [[r["engine"], _count(r["records"]), _num(r.get("seconds"), ".2f"),
                               _num(r.get("records_per_s"), ".3g"), _num(r.get("peak_MB"), ".0f"),
                               "yes" if r.get("same_counts") else "NO"] for r in engines])
    if agency:
        out += ("\nThe agency example end to end (" + _count(agency[0]["records"]) + " records):\n\n"
                + list_table(["step", "seconds"], [[r["engine"].removeprefix("agency: "),
                                                   _num(r.get("seconds"), ".2f")] for r in agency]))
    return out


def _coverage(r: dict) -> str:
    if r.get("coverage") is None:
        return ""
    return f"{100 * r['coverage']:.1f} [{100 * r['coverage_low']:.1f}, {100 * r['coverage_high']:.1f}]"


def bench_consistent(data: dict) -> str:
    """Per data set and table: RMSE against the raw answers, bias and coverage (all values and by cell size),
    then the seconds of one estimate."""
    rows = data["rows"]
    header = ["data set", "table", "true size", "values", "RMSE raw", "RMSE published", "ratio",
              "largest absolute bias (sd)", "coverage % [95% CI]"]
    acc = [[r["case"], r["table"], r["size"], _count(r["values"]), _num(r.get("rmse_raw"), ".3g"),
            _num(r.get("rmse_published"), ".3g"), _num(r.get("ratio"), ".4f"), _num(r.get("bias_sd_max"), ".2f"),
            _coverage(r)] for r in rows if r["part"] == "accuracy"]
    out = list_table(header, acc)
    timing = [[r["case"], r["part"], _count(r["cells"]), _count(r["queries"]), _num(r.get("estimate_s"), ".2f"),
               _num(r.get("peak_MB"), ".0f")] for r in rows if r["part"] in ("time", "scale")]
    if timing:
        out += "\nSeconds of one estimate, intervals included:\n\n" + list_table(
            ["data set", "part", "cells", "queries", "seconds", "peak memory (MB)"], timing)
    return out


#: The mechanisms of ``results/census_tables.json`` in its generated table: ours, and the baselines it is
#: certified against (the HDMM-style strategy, the levels solved apart).
CENSUS_TABLES_MECHANISMS = ("ours", "ours: levels", "independent levels", "HDMM-style")


def census_tables(data: dict) -> str:
    """Per census case ours and its baselines: privacy cost, certified bound and gap, time, peak memory,
    the status's first clause."""
    header = ["case", "mechanism", "privacy cost", "lower bound", "gap", "time (s)", "peak (MB)", "status"]
    rows = [[r["case"], r["mechanism"], _num(r.get("privacy_cost"), ".4g"), _num(r.get("lower_bound"), ".4g"),
             _num(r.get("gap"), ".2e"), _num(r.get("time_s"), ".1f"), _num(r.get("peak_MB"), ".0f"),
             re.split(r"[:(]", r.get("status") or "", maxsplit=1)[0].strip()]
            for r in data["rows"] if r["mechanism"] in CENSUS_TABLES_MECHANISMS]
    return list_table(header, rows)


BUILDERS = {"table2": table2, "bench_bank": bench_bank, "bench_bank_ablation": bench_bank_ablation,
            "bench_bank_ablation_large": bench_bank_ablation, "bench_smii": bench_smii, "census": census,
            "bench_kron_scale": bench_kron_scale,
            "table3": table3, "figures23": figures23, **{name: ratios for name in RATIO_TABLES},
            "bench_sdp": bench_sdp, "bench_workloads": bench_workloads, "bench_authors": bench_authors,
            "bench_backends": bench_backends, "bench_records": bench_records, "bench_noise": bench_noise,
            "bench_columnar": bench_columnar, "bench_consistent": bench_consistent, "census_tables": census_tables}
#: Generated tables drawn from several results files: name -> those files.
COMBINED = {"figures23": ("figure2", "figure3")}


def generated() -> dict[Path, str]:
    """``docs/generated/<name>.rst`` -> its text, for every results file in :data:`SOURCES`."""
    out = {}
    for name in SOURCES:
        sources = COMBINED.get(name, (name,))
        data = {src: load(src) for src in sources}
        text = (".. Generated by python -m experiments.perf_tables from "
                + ", ".join(f"results/{src}.json" for src in sources) + "; do not edit.\n\n")
        table = BUILDERS[name](data if name in COMBINED else data[name])
        out[OUT / f"{name}.rst"] = text + table + "".join("\n" + provenance(data[src], src) for src in sources)
    return out


def readme_table() -> str:
    """The README's short performance table (Markdown), one line per headline number."""
    t2 = {r["d"]: r for r in load("table2")["rows"]}
    smii = {(r["workload"], r["d"]): r for r in load("bench_smii")["rows"]}
    kron = {r["case"]: r for r in load("bench_kron_scale")["rows"]}
    lines = ["| problem | method | result | time (s) | results file |", "|---|---|---|---|---|"]
    for d in (64, 128):
        if d in t2:
            r = t2[d]
            lines.append(f"| prefix d = {d} | `sdp` (exact, refined) | α = {r['IP']:.4f}, gap {r['IP_gap']:.0e} | "
                         f"{r['IP_time']:.2f} | `results/table2.json` |")
    for (w, d) in (("prefix", 1024), ("ranges", 1024)):
        if (w, d) in smii:
            r = smii[(w, d)]
            name = "prefix" if w == "prefix" else "random ranges"
            lines.append(f"| {name} d = {d:,} | `smii`, tol 1e-3 | α = {r['alpha']:.4f}, gap {r['gap']:.0e} | "
                         f"{r['time_s']:.1f} wall, {r['cpu_s']:.1f} CPU | `results/bench_smii.json` |")
    for case, what in (("census", "census-like union, 1.46 x 10⁶ cells"), ("big", "one product group, 10⁹ cells")):
        if case in kron:
            r = kron[case]
            lines.append(f"| {what} | `kron` | α = {r['privacy_cost']:.4g}, gap {r['gap']:.0e} | "
                         f"{r['time_s']:.2f} | `results/bench_kron_scale.json` |")
    return "\n".join(lines)


def readme_with_table(text: str, table: str) -> str:
    """``text`` (the README) with its performance table replaced by ``table``; ValueError when it has none."""
    lines = text.split("\n")
    try:
        start = lines.index(README_HEADER)
    except ValueError:
        raise ValueError(f"README.md has no performance table (a line {README_HEADER!r})") from None
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "\n".join(lines[:start] + table.split("\n") + lines[end:])


def targets() -> dict[Path, str]:
    """Every file this module generates -> its text: the documentation's tables and the README."""
    out = generated()
    readme = README.read_text(encoding="utf-8")
    out[README] = readme_with_table(readme, readme_table())
    return out


def same_text(old: str, new: str, rel_tol: float = CHECK_TOLERANCE) -> bool:
    """Whether two generated texts agree: the same text between their numbers, and numbers equal to ``rel_tol``."""
    if NUMBER.split(old) != NUMBER.split(new):
        return False
    a, b = NUMBER.findall(old), NUMBER.findall(new)
    return len(a) == len(b) and all(math.isclose(float(x), float(y), rel_tol=rel_tol) for x, y in zip(a, b))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.perf_tables", description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 when a generated table is out of date")
    p.add_argument("--readme", action="store_true", help="print the README's performance table")
    args = p.parse_args(argv)
    if args.readme:
        print(readme_table())
        return 0
    stale = []
    for path, text in targets().items():
        old = path.read_text(encoding="utf-8") if path.exists() else None
        if old is not None and same_text(old, text):
            continue
        if args.check:
            stale.append(path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(paths.REPO)}")
    if stale:
        print("out of date (run python -m experiments.perf_tables): "
              + ", ".join(str(s.relative_to(paths.REPO)) for s in stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
