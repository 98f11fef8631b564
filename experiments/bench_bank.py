"""The SM-II benchmark bank: the solver's speed over workload classes, sizes and seeds, with heuristics switched off.

``python -m experiments.bench_bank [--quick] [--sizes 64 256 1024 2048] [--classes ...] [--seeds S ...]
[--tol TOL] [--max-time 900] [--ablate NAME ...] [--baseline REV] [--jobs 2] [--no-cache]``

Interface layer (experiments): imports numpy, ``ffu_cvx``, :mod:`experiments.runner`,
:mod:`experiments.paths`, :mod:`experiments.formatting`, :mod:`experiments.bench_workloads` and
:mod:`experiments.bench_authors` (their problem builders), and runs git (``--baseline``) and Python
subprocesses.

Statements about SM-II's speed are made from this bank: medians and worst cases over seeds.

- Classes (:data:`CLASSES`, :data:`AUTHORS`): ``prefix`` (seedless: its seeds repeat the same
  problem, so a median still has one sample per seed), ``prefix-decades``, ``ranges``,
  ``ranges-decades``, ``tree4``, ``tree8``, ``pm1``, ``dense-ca``, ``marginals`` (every one- and
  two-way marginal of ``log2 d`` binary attributes, targets U(1, 10)), ``mixed`` and ``authors``
  (the six scripts of :mod:`experiments.bench_authors` at their own sizes, one row per script and
  seed, its ``d`` the problem's).
- Sizes (:func:`builds_at`): ``d = 2048`` only for :data:`LARGE_CLASSES`; ``marginals`` only where
  ``d`` is a power of two; ``authors`` only at the smallest size of the run.
- Tolerance: :func:`tol_for` (1e-3 from ``d = 1024`` on, 1e-4 below) unless ``--tol`` is given.
- Variants: ``default`` (the solver's default options); ``--ablate NAME`` adds the same cells
  with one heuristic switched off (:data:`ABLATIONS`: the options are passed through as they are;
  ``noise`` is the default again, the run's own noise, which :func:`verdict` reads as each class's band);
  ``--baseline REV`` adds cells solved by the package as it was at git revision REV, extracted
  once into ``out/results/cache/bench_bank/code-<sha>/``. Every cell solves with ``refine=False``:
  the ≺R polish is not part of what the bank measures.

Every cell solves in a fresh Python subprocess (:func:`solve_in_subprocess`: the problem pickled
on stdin, the result as JSON on stdout, one BLAS thread, ``PYTHONPATH`` the code folder alone),
so the working tree's code and a baseline's run under the same load; ``time_s`` is the solve
call's wall time inside the subprocess (the import is outside it), the least of up to :data:`REPEATS`
solves of one cell. The cells of one (class, d, seed) are adjacent, so ``--jobs 2`` solves the
variants of a problem side by side.

``results/bench_bank.{csv,json}`` (with ``--ablate``: ``bench_bank_ablation``, or
``bench_bank_ablation_large`` when every size is 1,024 or more) hold one row per cell (what later
comparisons read);
``results/bench_bank.md`` and the table printed hold :func:`summary` (one row per class, d and
variant, with ratios to the default) and :func:`verdict` (which heuristics pay for themselves).
"""

from __future__ import annotations

import io
import json
import math
import os
import pickle
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

import ffu_cvx as ffu
from ffu_cvx import workloads

from . import bench_authors, bench_workloads, paths, runner
from .formatting import markdown_table

NAME = "bench_bank"
#: The cells' version (``version`` of :func:`experiments.runner.run_grid`).
CELL_VERSION = 2
DEFAULT, BASELINE, NOISE = "default", "baseline", "noise"
AUTHORS = "authors"
SIZES = (64, 256, 1024, 2048)
#: The only classes solved at sizes above :data:`LARGE_FROM`.
LARGE_CLASSES = ("prefix", "ranges")
LARGE_FROM = 1024
#: ``tol_for(d)``: COARSE_TOL from ``d = COARSE_FROM`` on, FINE_TOL below.
COARSE_FROM, COARSE_TOL, FINE_TOL = 1024, 1e-3, 1e-4
SEEDS = (0, 1, 2, 3, 4)
MAX_TIME = 900.0
QUICK_CLASSES, QUICK_SIZES, QUICK_SEEDS = ("prefix", "ranges", "tree4"), (64,), (0, 1)
#: Keep rule of :func:`verdict`: a switched-off heuristic's median time ratio, worst time ratio,
#: and the median ratio under which switching it off counts as a gain elsewhere (a trade-off).
KEEP_MEDIAN, KEEP_WORST, TRADE_OFF = 1.10, 1.25, 0.95
#: A worst-case ratio counts only where the default's worst time is at least this (seconds): below it the
#: ``noise`` variant (the default again) swings by 1.5x between two identical runs.
WORST_FROM_S = 1.0
#: A solve is repeated (the same problem, the same steps) until its solves took REPEAT_BELOW_S seconds in all
#: or it ran REPEATS times; ``time_s`` is the fastest. Two identical runs of a 0.05 s solve differ by up to
#: 1.5x on a shared machine; the least of three is steadier.
REPEATS, REPEAT_BELOW_S = 3, 3.0
#: The ablations that change what a step costs, not which steps are taken: for the others a class
#: whose cells all take the default's steps and products shows no effect (its time differences are load).
COST_ONLY = ("skip-certificates", "cheap-certificate", "float32", "rescale")
#: One BLAS thread in every solving subprocess.
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")


def _marginals(d: int, seed: int) -> ffu.FitnessProblem:
    """Every one- and two-way marginal of ``log2 d`` binary attributes, targets U(1, 10)."""
    W = bench_authors.one_and_two_way((2,) * (d.bit_length() - 1))
    return ffu.FitnessProblem(W, np.random.default_rng(seed).uniform(1.0, 10.0, W.shape[0]))


def _from(builder, *args, **kwargs):
    return lambda d, seed: ffu.FitnessProblem.from_workload(builder(d, *args, seed=seed, **kwargs))


#: Class name -> builder(d, seed) -> FitnessProblem (``authors``, of fixed sizes, is :data:`AUTHORS`).
CLASSES = {
    "prefix": lambda d, seed: ffu.FitnessProblem.from_workload(workloads.prefix(d)),
    "prefix-decades": _from(workloads.prefix, targets="decades"),
    "ranges": _from(workloads.random_ranges, targets="random"),
    "ranges-decades": _from(workloads.random_ranges, targets="decades"),
    "tree4": _from(workloads.tree, 4, targets="random"),
    "tree8": _from(workloads.tree, 8, targets="random"),
    "pm1": _from(workloads.random_pm1, targets="random"),
    "dense-ca": bench_workloads.dense_ca,
    "marginals": _marginals,
    "mixed": lambda d, seed: bench_workloads.build("mixed", d, seed),
}
CLASS_NAMES = (*CLASSES, AUTHORS)

#: Heuristic name -> (SM-II options switching it off, what it is).
ABLATIONS = {
    "noise": ({}, "nothing: the default again, the run's noise"),
    "ascent-start": ({"start": "cheapest"}, "the dual-ascent start"),
    "kkt": ({"kkt": False}, "KKT-step finish"),
    "mixing": ({"mixing": False}, "mixing of iterates"),
    "restarts": ({"restarts": None}, "restarts from the cheapest iterate when the multiplier phase goes astray"),
    "settle": ({"settle": False}, "ending sub-problems after a full step that gains little (settle/drift rules)"),
    "fast-rise": ({"fast_rise": False}, "faster rises of growing log multipliers"),
    "shift-floor": ({"shift_floor": None}, "floor under the log multipliers"),
    "cheap-certificate": ({"cheap_certificate": False}, "certifying by the soft-max weights' bound alone (k > 256)"),
    "skip-certificates": ({"skip_certificates": False},
                          "skipping certificates while the gap is far or the bound stalls"),
    "shift-cap": ({"shift_cap": None}, "cap on a log multiplier's drop per update"),
    "cg-extension": ({"maxcg_cap": 5}, "CG past maxcg while it pays / doubling"),
    "precondition": ({"precondition": False}, "preconditioned CG"),
    "float32": ({"float32": False}, "single-precision Hessian products (k >= 256)"),
    "rescale": ({"rescale": False}, "rescaling instead of refactoring between sub-problems (k >= 1000)"),
    "shifted": ({"t_shift": None}, "shifted soft maxes (the multiplier method) altogether"),
}
#: Ablations in the committed results whose heuristic the solver no longer has (the verdict removed it):
#: name -> (its switch then, what it did), for the tables drawn from those results.
WITHOUT_OPTION = {
    "sub-maxit": ({"sub_maxit": None}, "cap on Newton steps per sub-problem"),
    "adaptive-growth": ({"adaptive_growth": False}, "t growing by less than mu near the goal"),
}

COLUMNS = ("class", "script", "d", "seed", "variant", "m", "k", "tol", "time_s", "nit", "n_hvp", "alpha", "gap",
           "certified", "status", "kkt_steps", "restarts", "solves", "code", "error")
SUMMARY_COLUMNS = ("class", "d", "variant", "cells", "certified", "median_s", "worst_s", "median_nit", "worst_nit",
                   "median_hvp", "worst_gap", "median_x", "worst_x", "hvp_x", "same_work")


def tol_for(d: int) -> float:
    """The certified gap a size is solved to: coarser for the large sizes, whose solves are long."""
    return COARSE_TOL if d >= COARSE_FROM else FINE_TOL


def builds_at(name: str, d: int, sizes) -> bool:
    """Whether class ``name`` has cells at size ``d`` of a run over ``sizes`` (see the module docstring)."""
    if name == AUTHORS:
        return d == min(sizes)
    if d > LARGE_FROM and name not in LARGE_CLASSES:
        return False
    return name != "marginals" or (d >= 4 and d & (d - 1) == 0)


def build(name: str, d: int, seed: int, script: str | None = None) -> ffu.FitnessProblem:
    """The problem of one cell: ``CLASSES[name](d, seed)``, or the authors' ``script`` (``d`` unused)."""
    return bench_authors.build(script, seed) if name == AUTHORS else CLASSES[name](d, seed)


# The solving subprocess: argv[1] the JSON arguments, the pickled problem on stdin, the result's JSON
# as the last line of stdout. It imports only what the code folder holds, so it runs old code too.
_CHILD = """\
import json, pickle, sys, time, warnings
import ffu_cvx as ffu
args = json.loads(sys.argv[1])
problem = pickle.loads(sys.stdin.buffer.read())
warnings.simplefilter("ignore", RuntimeWarning)
walls = []
while not walls or (sum(walls) < args["repeat_below"] and len(walls) < args["repeats"]):
    t0 = time.perf_counter()
    try:
        sol = ffu.solve(problem, method="smii", tol=args["tol"], max_time=args["max_time"], refine=False,
                        **args["options"])
    except ffu.SolverError as exc:
        print(json.dumps({"error": str(exc)}))
        sys.exit(0)
    walls.append(time.perf_counter() - t0)
info = sol.info or {}
print(json.dumps({"time_s": min(walls), "solves": len(walls), "nit": sol.nit, "n_hvp": sol.n_hvp, "alpha": sol.privacy_cost, "gap": sol.gap,
                  "status": sol.status, "kkt_steps": info.get("kkt_steps"), "restarts": info.get("restarts")}))
"""


def _child_env(code: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code)}
    env.update({name: "1" for name in THREAD_VARIABLES})
    return env


def solve_in_subprocess(problem: ffu.FitnessProblem, code: Path, tol: float, max_time: float,
                        options: dict) -> dict:
    """Solve ``problem`` with SM-II as the package in folder ``code`` has it (a fresh Python; the working
    folder ``code`` too, so nothing else named ``ffu_cvx`` is imported). Returns the cell's fields;
    a :class:`ffu_cvx.SolverError` there is raised here (its message kept), any other failure as RuntimeError."""
    args = json.dumps({"tol": tol, "max_time": max_time, "options": options, "repeats": REPEATS,
                       "repeat_below": REPEAT_BELOW_S})
    done = subprocess.run([sys.executable, "-c", _CHILD, args], input=pickle.dumps(problem), capture_output=True,
                          cwd=code, env=_child_env(code), check=False)
    lines = done.stdout.decode("utf-8", "replace").strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = done.stderr.decode("utf-8", "replace").strip()[-2000:]
        raise RuntimeError(f"the solving subprocess (code {code}) failed with status {done.returncode}:\n{tail}")
    value = json.loads(lines[-1])
    if "error" in value:
        raise ffu.SolverError(value["error"])
    return {**value, "tol": tol, "certified": value["gap"] is not None and value["gap"] <= tol}


def code_folder(sha: str | None) -> Path:
    """The folder whose ``ffu_cvx`` a cell imports: the repository's, or the extracted revision ``sha``'s."""
    return paths.REPO if sha is None else paths.cache_dir(NAME) / f"code-{sha}"


def _git(*args) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=paths.REPO, capture_output=True, check=True)


def extract(rev: str) -> str:
    """The full sha of git revision ``rev``, its ``ffu_cvx`` extracted into :func:`code_folder` if not there
    already (into a temporary folder first, renamed when complete, so no partial tree is ever left)."""
    try:
        sha = _git("rev-parse", "--verify", f"{rev}^{{commit}}").stdout.decode().strip()
        target = code_folder(sha)
        if not target.exists():
            archive = _git("archive", "--format=tar", sha, "ffu_cvx").stdout
            target.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
                with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                    tar.extractall(Path(tmp) / "code", filter="data")
                os.replace(Path(tmp) / "code", target)
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"{NAME}: --baseline {rev}: {exc.stderr.decode(errors='replace').strip()}") from None
    return sha


def run_cell(cls: str, d: int, seed: int, variant: str, options: dict, tol: float | None, max_time: float,
             code: str | None = None, script: str | None = None) -> dict:
    """One SM-II solve of :func:`build`'s problem in a subprocess on :func:`code_folder` ``(code)``;
    ``tol`` None: :func:`tol_for` the problem's ``d``."""
    problem = build(cls, d, seed, script)
    tol = tol_for(problem.d) if tol is None else tol
    value = solve_in_subprocess(problem, code_folder(code), tol, max_time, options)
    return {"d": problem.d, "m": problem.m, "k": problem.k, **value}


def variants(ablate, sha: str | None) -> list[tuple[str, dict, str | None]]:
    """``(variant, options, code)`` of every variant of a run: the default, each ablation, the baseline."""
    out = [(DEFAULT, {}, None)] + [(name, ABLATIONS[name][0], None) for name in ablate]
    return out + ([(BASELINE, {}, sha)] if sha else [])


def _problems(args) -> list[tuple[str, int, int, str | None]]:
    """``(class, d, seed, script)`` of every problem of a run, smallest size first."""
    out = []
    for d in sorted(args.sizes):
        for name in args.classes:
            if builds_at(name, d, args.sizes):
                scripts = bench_authors.WORKLOADS if name == AUTHORS else (None,)
                out += [(name, d, seed, script) for script in scripts for seed in args.seeds]
    return out


def cells(args, sha: str | None = None) -> list[runner.Cell]:
    """The grid: every problem of the run, its variants adjacent."""
    out = []
    for name, d, seed, script in _problems(args):
        for variant, options, code in variants(args.ablate, sha):
            key = {"cls": name, "d": d, "seed": seed, "variant": variant, "options": options, "tol": args.tol,
                   "max_time": args.max_time, "code": code, "script": script}
            row = {"class": name, "script": script, "d": d, "seed": seed, "variant": variant, "code": code}
            what = f"{name}/{script}" if script else f"{name}, d = {d}"
            out.append(runner.Cell(key, row=row, label=f"{what}, seed {seed}, {variant}"))
    return out


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _worst(values):
    values = [v for v in values if v is not None]
    return max(values, key=lambda v: math.inf if math.isnan(v) else v) if values else None


def _ratio(a, b):
    return a / b if a is not None and b else None


def _group(rows: list[dict]) -> dict:
    """Rows by (class label, d, variant), in order of appearance; authors' rows by script."""
    groups: dict = {}
    for r in rows:
        label = f"{r['class']}/{r['script']}" if r.get("script") else r["class"]
        groups.setdefault((label, r["d"], r["variant"]), []).append(r)
    return groups


def _stats(rows: list[dict]) -> dict:
    solved = [r for r in rows if not r.get("error")]
    col = {c: [r.get(c) for r in solved] for c in ("time_s", "nit", "n_hvp", "gap")}
    return {"cells": len(rows), "certified": sum(bool(r.get("certified")) for r in solved),
            "median_s": _median(col["time_s"]), "worst_s": _worst(col["time_s"]),
            "median_nit": _median(col["nit"]), "worst_nit": _worst(col["nit"]),
            "median_hvp": _median(col["n_hvp"]), "worst_gap": _worst(col["gap"])}


def _work(rows: list[dict]) -> dict:
    """Each solved cell's ``(Newton steps, Hessian products)`` by seed."""
    return {r["seed"]: (r.get("nit"), r.get("n_hvp")) for r in rows if not r.get("error")}


def summary(rows: list[dict]) -> list[dict]:
    """One row per (class, d, variant) of the per-cell ``rows`` (a results JSON's): cells, certified,
    median and worst time and Newton steps, median Hessian products, worst gap, and beside every
    variant but the default the ratios of its median time (``median_x``), worst time (``worst_x``)
    and median Hessian products (``hvp_x``) to the default's of the same class and d, and ``same_work``:
    whether every cell took the default's Newton steps and Hessian products."""
    groups = _group(rows)
    stats = {key: _stats(group) for key, group in groups.items()}
    out = []
    for (label, d, variant), s in stats.items():
        ref = stats.get((label, d, DEFAULT), {}) if variant != DEFAULT else {}
        ratios = {"median_x": _ratio(s["median_s"], ref.get("median_s")),
                  "worst_x": _ratio(s["worst_s"], ref.get("worst_s")),
                  "hvp_x": _ratio(s["median_hvp"], ref.get("median_hvp")),
                  "same_work": bool(ref) and _work(groups[label, d, variant]) == _work(groups[label, d, DEFAULT])}
        out.append({"class": label, "d": d, "variant": variant, **s, **ratios})
    return out


def _band(row: dict | None, key: str) -> float:
    """The noise band of a class and size: the ``noise`` variant's ratio ``key`` folded above 1 (1 without it)."""
    x = None if row is None else row.get(key)
    return max(x, 1.0 / x) if x else 1.0


def verdict(summary_rows: list[dict]) -> dict:
    """The keep rule, per ablated heuristic (every variant but the default, the baseline and ``noise``):
    ``keep`` when switching it off makes some class's median time ratio >= :data:`KEEP_MEDIAN` or its worst
    >= :data:`KEEP_WORST` (the worst where the default's takes :data:`WORST_FROM_S` or more), each beyond
    that class's noise band (the ``noise`` variant's ratio, the default run again, when the run has it), or
    leaves a cell uncertified (``justify``: those ``class@d``); ``hurts``: the ``class@d`` whose median
    ratio is below :data:`TRADE_OFF` and below the noise band (the heuristic costs them); ``trade_off``
    when both lists hold something. A class whose cells take the same Newton steps and Hessian
    products with and without a heuristic that changes the iteration (all but :data:`COST_ONLY`) shows
    no effect, whatever its times."""
    out: dict = {}
    default = {(r["class"], r["d"]): r for r in summary_rows if r["variant"] == DEFAULT}
    noise = {(r["class"], r["d"]): r for r in summary_rows if r["variant"] == NOISE}
    for r in summary_rows:
        if r["variant"] in (DEFAULT, BASELINE, NOISE) or r.get("median_x") is None:
            continue
        v = out.setdefault(r["variant"], {"keep": False, "justify": [], "hurts": [], "trade_off": False})
        if r["same_work"] and r["variant"] not in COST_ONLY:
            continue  # the same steps and products: any difference in time is the machine's
        key = (r["class"], r["d"])
        where = f"{r['class']}@{r['d']}"
        median_band, worst_band = _band(noise.get(key), "median_x"), _band(noise.get(key), "worst_x")
        worst_counts = (r.get("worst_s") or 0.0) / (r.get("worst_x") or math.inf) >= WORST_FROM_S
        lost = r["certified"] < default[key]["certified"]
        slower = r["median_x"] >= max(KEEP_MEDIAN, median_band)
        worse = worst_counts and (r.get("worst_x") or 0.0) >= max(KEEP_WORST, worst_band)
        if lost or slower or worse:
            v["justify"].append(where + (" (uncertified)" if lost else ""))
        if r["median_x"] < min(TRADE_OFF, 1.0 / median_band):
            v["hurts"].append(where)
    for v in out.values():
        v["keep"], v["trade_off"] = bool(v["justify"]), bool(v["justify"] and v["hurts"])
    return out


def verdict_rows(summary_rows: list[dict]) -> list[dict]:
    """:func:`verdict` as table rows, with what each heuristic is."""
    known = {**WITHOUT_OPTION, **ABLATIONS}
    return [{"variant": name, "heuristic": known.get(name, ((), ""))[1], "keep": v["keep"],
             "trade_off": v["trade_off"], "justify": " ".join(v["justify"]), "hurts": " ".join(v["hurts"])}
            for name, v in verdict(summary_rows).items()]


def markdown(data: dict) -> str:
    """``results/bench_bank.md`` from the results JSON ``data``: the summary, then the verdict."""
    rows = summary(data["rows"])
    title = data["title"] + (" (--quick: a small grid)" if data["meta"].get("quick") else "")
    md = f"# {title}\n\n{markdown_table(rows, SUMMARY_COLUMNS, '.4g')}\n"
    judged = verdict_rows(rows)
    if judged:
        md += f"\n## Verdict\n\n{markdown_table(judged, list(judged[0]), '.4g')}\n"
    return md + f"\n{NOTES.strip()}\n"


NOTES = f"""
Times in seconds (one solve, measured inside its subprocess), on a machine shared with other jobs.
``median_x``, ``worst_x``, ``hvp_x``: a variant's median time, worst time and median Hessian
products over the default's of the same class and d. Verdict: a heuristic is kept when
switching it off makes some class's median >= {KEEP_MEDIAN}x or its worst >= {KEEP_WORST}x (where the
default's worst takes {WORST_FROM_S:g} s or more: the ``noise`` variant, the default run again, shows the
noise); ``hurts``
lists the classes whose median is below {TRADE_OFF}x without it. Per-cell rows:
``results/bench_bank.json``.
"""


def result_name(ablate, sizes=SIZES) -> str:
    """The results' name: ``bench_bank`` (the default and a baseline); with ``--ablate``
    ``bench_bank_ablation``, or ``bench_bank_ablation_large`` when every size is at least :data:`LARGE_FROM`."""
    if not ablate:
        return NAME
    return f"{NAME}_ablation" + ("_large" if min(sizes) >= LARGE_FROM else "")


def write_markdown(quick: bool, name: str = NAME, committed: bool = False) -> None:
    """Rewrite ``results/<name>.md`` from the JSON on disk (the committed one with ``committed``), when its
    bytes change."""
    folder = paths.results_dir(quick, committed)
    source, target = folder / f"{name}.json", folder / f"{name}.md"
    if source.exists():
        text = markdown(json.loads(source.read_text(encoding="utf-8"))).encode()
        if not target.exists() or target.read_bytes() != text:
            runner.write_files({target: text})


def parse(argv=None):
    p = runner.parser("The SM-II benchmark bank")
    p.add_argument("--sizes", nargs="+", type=int, default=None, help=f"domain sizes (default {SIZES})")
    p.add_argument("--classes", nargs="+", default=None, choices=CLASS_NAMES)
    p.add_argument("--seeds", nargs="+", type=int, default=None, help=f"seeds (default {SEEDS})")
    p.add_argument("--tol", type=float, default=None, help="certified relative gap (default: tol_for(d))")
    p.add_argument("--max-time", type=float, default=MAX_TIME, help="per-solve time cap in seconds")
    p.add_argument("--ablate", nargs="+", default=[], choices=list(ABLATIONS), metavar="NAME",
                   help="add cells with these heuristics switched off: " + ", ".join(ABLATIONS))
    p.add_argument("--baseline", metavar="REV", help="add cells solved by the package at git revision REV")
    args = p.parse_args(argv)
    args.sizes = args.sizes or list(QUICK_SIZES if args.quick else SIZES)
    args.classes = args.classes or list(QUICK_CLASSES if args.quick else CLASS_NAMES)
    args.seeds = args.seeds or list(QUICK_SEEDS if args.quick else SEEDS)
    return args


def main(argv=None):
    args = parse(argv)
    sha = extract(args.baseline) if args.baseline else None
    table = runner.Table("SM-II benchmark bank", COLUMNS, floatfmt=".6g", display=summary,
                         footer="; wall-clock on this machine, shared with other jobs")
    name = result_name(args.ablate, args.sizes)
    rows = runner.run_grid(name, cells(args, sha), run_cell, args, version=CELL_VERSION, table=table,
                           errors=(ffu.SolverError,),
                           meta={"tol": args.tol, "max_time": args.max_time, "seeds": args.seeds,
                                 "sizes": args.sizes, "ablate": args.ablate, "baseline": sha})
    if rows and not getattr(args, "replot", False):
        write_markdown(args.quick, name, args.update_results)
    return rows


if __name__ == "__main__":
    runner.cli(main)
