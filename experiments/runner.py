"""The experiments' runner: cells -> cache -> progress -> atomic results -> figures -> paths printed.

Interfaces layer (experiments): imports ``ffu_cvx.solvers.batch``, ``ffu_cvx.io.files``,
``ffu_cvx.io.jsonio``, ``ffu_cvx.version``, :mod:`experiments.paths` and
:mod:`experiments.formatting`; matplotlib only when a figure is drawn. An experiment module keeps its grid (a list of
:class:`Cell`), its cell function, the paper's numbers and its layout (:class:`Table`,
:class:`Figure`), and calls :func:`run_grid`, which

1. runs every cell through the cache (``results/cache/<name>/`` of the output folder,
   :mod:`experiments.paths`; one JSON file per cell, keyed by the cell's arguments and the
   experiment's cell version). Failures are never cached; a cache file that cannot be read
   (truncated, empty, another cell's, no ``value``) is a miss: a :class:`CacheWarning` names
   the file and that cell alone is recomputed. The missing cells are computed here, one after the other, or with
   ``--jobs N`` on N worker processes, or with ``--scheduler ADDRESS`` on a Dask
   cluster (:func:`ffu_cvx.solvers.batch.completed`: one BLAS thread per process computing
   cells, here too, so the numbers are the serial run's; ``--blas-threads N`` gives
   each N instead); each is cached as it finishes;
2. prints a progress line to stderr as each cell finishes, then the table (ours beside
   the paper's) to stdout;
3. writes ``results/<name>.{csv,json,md}`` (:mod:`ffu_cvx.io.jsonio`: non-finite numbers
   are ``null``; the JSON records the command, the commit, the versions, the machine, its
   load and the BLAS thread settings; a run whose numbers equal the file's to 1e-6, timings and
   environment aside, keeps the file: :func:`same_numbers`, ``--rewrite``), draws every figure
   FROM that JSON (as read back) and writes
   ``figures/<fig>.{png,pdf}``, in the output folder ``out/`` (ignored by git) or, with
   ``--update-results``, in the committed ``results/`` and ``figures/``; all atomically and
   with Ctrl-C held off until the last file is in place, so the outputs are all old or all new;
4. prints every path it wrote.

Ctrl-C while cells run stops the command: the finished cells stay in the cache, no
result or figure is written, one line says so and the exit status is 130
(:data:`EXIT_INTERRUPTED`); the same command then resumes from the cache. Cells must
not catch ``KeyboardInterrupt``: :func:`run_grid` reports the exception types given as
``errors`` (a :class:`ffu_cvx.SolverError`, say) as an error row, never cached, and lets
every other exception through. With ``--jobs`` or ``--scheduler`` the cell function
and keys travel to the workers (cloudpickle: a function of the running script goes by
value), so a cell must depend on its key alone, not on state set up in ``main``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import importlib.metadata
import io
import json
import math
import os
import platform
import re
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ffu_cvx.io import jsonio
from ffu_cvx.solvers import batch
from ffu_cvx.io.files import atomic_write_bytes, held_signals, signals_unwind
from ffu_cvx.version import __version__

from . import paths
from .formatting import format_table, markdown_table

__all__ = ["EXIT_INTERRUPTED", "Cell", "Table", "Figure", "CacheWarning", "Cache", "Grid", "Planned", "parser",
           "environment", "result_files", "same_values", "same_numbers", "write_files", "planning", "computed",
           "run_grid", "cli"]

#: Exit status of a command stopped by Ctrl-C (128 + SIGINT, the shell's convention).
EXIT_INTERRUPTED = 130
#: Distributions whose versions every results file records.
RECORDED_VERSIONS = ("numpy", "scipy", "cvxpy", "clarabel", "scs", "matplotlib")
#: Figure formats written for every figure; PNG at this resolution (dots per inch).
FIGURE_FORMATS, FIGURE_DPI = ("png", "pdf"), 150
#: Figure metadata left out so that the same results draw the same bytes.
FIGURE_METADATA = {"png": {"Software": None}, "pdf": {"CreationDate": None, "Producer": None, "Creator": None}}


@dataclass(frozen=True)
class Cell:
    """One cell of a grid.

    ``key``: the cell function's keyword arguments, JSON-able; with the experiment's
    cell version it is the cell's identity in the cache, so it must hold everything the
    value depends on (seeds and options included). ``row``: columns put beside the
    computed value in the results (the paper's numbers, labels). ``label``: how
    progress and messages name the cell (default: the key).
    """

    key: dict
    row: dict = field(default_factory=dict)
    label: str = ""

    @property
    def name(self) -> str:
        return self.label or ", ".join(f"{k}={v}" for k, v in self.key.items())


@dataclass(frozen=True)
class Table:
    """How the results are laid out: title, columns (CSV, JSON, markdown), notes under
    the markdown table, float format; ``display`` turns the rows into the terminal's
    rows (default: the rows by ``columns``); ``footer`` is printed under it."""

    title: str
    columns: Sequence[str]
    notes: str = ""
    floatfmt: str = ".4g"
    display: Callable[[list], list] | None = None
    footer: str = ""


@dataclass(frozen=True)
class Figure:
    """A figure ``figures/<name>.{png,pdf}``; ``draw(data)`` gets the results JSON as read
    back from disk (non-finite numbers as ``None``: read them with ``jsonio.number``) and
    returns a matplotlib figure."""

    name: str
    draw: Callable[[dict], Any]


class CacheWarning(UserWarning):
    """A cache file could not be used; its cell is recomputed."""


class Cache:
    """Finished cells of one experiment: one JSON file per cell in ``folder``.

    A file holds ``{"version", "key", "value", "seconds"}``; its name is a hash of version
    and key. ``read=False`` ignores what is there (``--force``); ``write=False`` stores
    nothing (``--no-cache``).
    """

    def __init__(self, folder: Path, *, read: bool = True, write: bool = True):
        self.folder, self.read, self.write = Path(folder), read, write

    @staticmethod
    def _identity(version: int, key: dict) -> dict:
        return json.loads(jsonio.dumps({"version": version, "key": key}))

    def path(self, version: int, key: dict) -> Path:
        blob = json.dumps(self._identity(version, key), sort_keys=True)
        return self.folder / (hashlib.sha256(blob.encode()).hexdigest()[:20] + ".json")

    def get(self, version: int, key: dict):
        """The cached value, or None (a miss) when absent, not read, or unreadable (with a warning)."""
        path = self.path(version, key)
        if not self.read or not path.exists():
            return None
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return self._unreadable(path, f"{type(exc).__name__}: {exc}")
        if not isinstance(stored, dict) or not isinstance(stored.get("value"), (dict, list)):
            return self._unreadable(path, "no 'value' object")
        if {"version": stored.get("version"), "key": stored.get("key")} != self._identity(version, key):
            return self._unreadable(path, "written for another cell or cell version")
        return stored["value"]

    @staticmethod
    def _unreadable(path: Path, why: str) -> None:
        warnings.warn(f"cache file {path} cannot be used ({why}); recomputing that cell", CacheWarning, stacklevel=3)
        return None

    def put(self, version: int, key: dict, value, seconds: float | None = None) -> None:
        """Store a cell's value (and the seconds it took, which :meth:`seconds` reads back)."""
        if self.write:
            self.folder.mkdir(parents=True, exist_ok=True)
            stored = {"version": version, "key": key, "value": value, "seconds": seconds}
            atomic_write_bytes(self.path(version, key), (jsonio.dumps(stored, indent=1) + "\n").encode("utf-8"))

    def seconds(self, version: int, key: dict) -> float | None:
        """How long the cell took when last cached (also under ``--force``; None if unknown or
        ``--no-cache``): the workers start the longest cells first."""
        path = self.path(version, key)
        try:
            took = json.loads(path.read_text(encoding="utf-8")).get("seconds") if self.write else None
        except (OSError, ValueError, AttributeError):
            return None
        return float(took) if isinstance(took, (int, float)) else None


def _count(text: str, allowed_negative: bool, what: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1 and not (allowed_negative and n == -1):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return n


def positive_count(what: str):
    """An argparse ``type`` for a whole number >= 1; ``what`` names it in the error (``"a number of draws >= 1"``)."""
    def count(text: str) -> int:
        return _count(text, False, what)
    return count


def _jobs(text: str) -> int:
    """``--jobs``: a worker count >= 1, or -1 for one per CPU."""
    return _count(text, True, "a number of workers >= 1 (or -1: one per CPU)")


def parser(description: str, *, figures: bool = False) -> argparse.ArgumentParser:
    """Argument parser with the flags every experiment shares (``--replot`` with ``figures``)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true",
                   help="small version that finishes in seconds, written to out/results/quick/ and out/figures/quick/")
    p.add_argument("--update-results", action="store_true",
                   help="write the committed results/ and figures/ instead of out/ (the default output folder, "
                        "ignored by git); --quick runs stay in out/")
    p.add_argument("--force", action="store_true", help="recompute cached cells")
    p.add_argument("--rewrite", action="store_true",
                   help="write the results files even when only timings, the environment and rounding changed")
    p.add_argument("--collect", action="store_true", help="only report cells already cached; compute nothing")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cell cache")
    p.add_argument("--quiet", action="store_true", help="no progress and no table (the paths written are printed)")
    p.add_argument("--jobs", type=_jobs, default=1, metavar="N",
                   help="compute the cells on N worker processes (-1: one per CPU; one BLAS thread each; "
                        "needs ffu-cvx[parallel]); the results are those of the serial run")
    p.add_argument("--blas-threads", type=positive_count("a number of BLAS threads >= 1"), default=1, metavar="N",
                   help="BLAS threads of each process computing cells (default 1: every --jobs setting then "
                        "gives the same numbers bit for bit; OPENBLAS_NUM_THREADS does not override it)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="compute the cells on the Dask cluster at ADDRESS (tcp://host:8786; needs ffu-cvx[dask]); "
                        "its workers set the parallelism")
    if figures:
        p.add_argument("--replot", action="store_true",
                       help="compute nothing: draw the figures again from the existing results JSON")
    return p


def _cpu_model() -> str | None:
    """The processor: Linux's ``/proc/cpuinfo`` model name with its family, model and stepping (a
    virtual machine often shows only a generic name); elsewhere ``platform.processor()``, or None."""
    fields = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "cpu family", "model", "stepping") and key not in fields:
                    fields[key] = value.strip()
                if not line.strip() and fields:  # the first processor's block is enough
                    break
    except OSError:
        pass
    if "model name" not in fields:
        return platform.processor() or None
    ids = ", ".join(f"{k} {fields[k]}" for k in ("cpu family", "model", "stepping") if k in fields)
    return f"{fields['model name']} ({ids})" if ids else fields["model name"]


def _blas() -> dict:
    """The BLAS that numpy and scipy were built against (name and version; pip's wheels each bundle an OpenBLAS)."""
    import numpy
    import scipy

    out = {}
    for lib in (numpy, scipy):
        try:
            blas = lib.show_config(mode="dicts")["Build Dependencies"]["blas"]
            out[lib.__name__] = f"{blas.get('name')} {blas.get('version')}"
        except (KeyError, TypeError, ValueError):
            out[lib.__name__] = None
    return out


def environment() -> dict:
    """Versions of Python, the numerical stack (and the BLAS under numpy and scipy) and ffu_cvx, the platform,
    the processor and the time of the run: SM-II's trajectories (Newton steps, restarts) move with the
    processor's rounding and its speed with the machine, so runs on different machines are told apart."""
    out = {"python": platform.python_version(), "platform": platform.platform(), "ffu_cvx": __version__}
    for dist in RECORDED_VERSIONS:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    out["time_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out["cpu_count"] = os.cpu_count()
    out["cpu"] = _cpu_model()
    out["blas"] = _blas()
    out["blas_threads_env"] = {k: os.environ.get(k) for k in BLAS_THREAD_VARIABLES}
    out["load_average"] = _load_average()
    out["command"] = " ".join(["python", "-m", _module_name()] + sys.argv[1:]) if sys.argv else None
    out["commit"] = _commit()
    return out


#: The environment variables that set the BLAS's thread count; a results file records them as set.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _load_average() -> list[float] | None:
    """The machine's 1, 5 and 15 minute load averages when the results are written (None where unknown)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def _module_name() -> str:
    """The module that ``python -m`` ran (``__main__``'s spec), or the script's name."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec.name if spec is not None and spec.name else (sys.argv[0] or "python")


def _commit() -> str | None:
    """The git commit of the clone the package runs from, with ``+dirty`` when tracked files differ from it;
    None outside a git checkout or without git."""
    import subprocess

    def run(*args):
        return subprocess.run(["git", *args], cwd=paths.REPO, capture_output=True, text=True, timeout=10)

    try:
        head = run("rev-parse", "HEAD")
        if head.returncode != 0:
            return None
        dirty = run("status", "--porcelain", "--untracked-files=no")
        return head.stdout.strip() + ("+dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def result_files(name: str, rows: Sequence[dict], table: Table, meta: dict, quick: bool,
                 committed: bool = False) -> dict[Path, bytes]:
    """The bytes of ``results/<name>.{csv,json,md}`` (rows, meta and environment in the JSON); the
    committed ``results/`` with ``committed`` (:func:`experiments.paths.results_dir`)."""
    columns = list(table.columns)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows({c: r.get(c) for c in columns} for r in rows)
    payload = {"name": name, "title": table.title, "meta": {"quick": quick, **meta}, "environment": environment(),
               "columns": columns, "rows": rows}
    title = table.title + (" (--quick: a small grid, not the paper's)" if quick else "")
    md = f"# {title}\n\n{markdown_table(rows, columns, table.floatfmt)}\n"
    if table.notes:
        md += f"\n{table.notes.strip()}\n"
    folder = paths.results_dir(quick, committed)
    return {folder / f"{name}.csv": buf.getvalue().encode(),
            folder / f"{name}.json": (jsonio.dumps(payload, indent=2) + "\n").encode(),
            folder / f"{name}.md": md.encode()}


def figure_files(figures: Sequence[Figure], data: dict, quick: bool, committed: bool = False) -> dict[Path, bytes]:
    """The bytes of every figure drawn from ``data`` (a results JSON as read back); the committed
    ``figures/`` with ``committed``."""
    if not figures:
        return {}
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = {}
    for spec in figures:
        fig = spec.draw(data)
        try:
            for ext in FIGURE_FORMATS:
                buf = io.BytesIO()
                fig.savefig(buf, format=ext, dpi=FIGURE_DPI, metadata=FIGURE_METADATA[ext])
                out[paths.figures_dir(quick, committed) / f"{spec.name}.{ext}"] = buf.getvalue()
        finally:
            plt.close(fig)
    return out


#: Keys of a results file's rows and meta that hold timings (``*time``, ``*_s``: solve_s, wall_s, cpu_s ...),
#: their ratios (``speedup``) or memory peaks (``*_mb``). A run whose results differ
#: from the file on disk only in these, in its environment (date, load, commit) and by the processor's rounding
#: leaves the file as it is (:func:`same_numbers`), so a tracked results file changes only when its numbers do.
VOLATILE_KEY = re.compile(r"(time|_s|_mb|speedup)$", re.IGNORECASE)


def _numbers(data: dict) -> dict:
    """A results payload without its environment and its timings (:data:`VOLATILE_KEY`)."""
    def keep(d: dict) -> dict:
        return {k: v for k, v in d.items() if not VOLATILE_KEY.search(k)}

    return {"name": data.get("name"), "title": data.get("title"), "meta": keep(data.get("meta") or {}),
            "columns": data.get("columns"), "rows": [keep(r) for r in data.get("rows") or []]}


#: Numbers closer than this, relatively or absolutely, are the same in a results file (:func:`same_values`):
#: no solver here certifies finer, and another processor's rounding moves them by less.
SAME_TOLERANCE = 1e-6


def same_values(a, b, tol: float = SAME_TOLERANCE) -> bool:
    """Whether ``a`` and ``b`` (parsed JSON) agree: numbers within ``tol`` of each other (relatively or
    absolutely), strings, booleans, nulls and the shape of lists and objects exactly."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=tol, abs_tol=tol)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_values(a[k], b[k], tol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_values(x, y, tol) for x, y in zip(a, b))
    return a == b


def same_numbers(path: Path, data: dict, tol: float = SAME_TOLERANCE) -> dict | None:
    """The results file at ``path`` as read, when its numbers are ``data``'s to ``tol`` (timings and environment
    aside, :func:`same_values`); else None (also when it is absent or unreadable)."""
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return old if isinstance(old, dict) and same_values(_numbers(old), _numbers(data), tol) else None


def write_files(files: dict[Path, bytes]) -> list[Path]:
    """Write every file atomically, Ctrl-C held off until the last is in place; print each path."""
    with held_signals():
        for path, data in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, data)
    for path in files:
        print(f"wrote {paths.shown(path)}", flush=True)
    return list(files)


def _workers(args: argparse.Namespace) -> dict:
    """The batch engine's settings from ``--jobs``, ``--scheduler`` and ``--blas-threads`` (older namespaces: serial, one thread)."""
    return {"n_jobs": getattr(args, "jobs", 1), "scheduler": getattr(args, "scheduler", None),
            "blas_threads": getattr(args, "blas_threads", 1)}


@dataclass(frozen=True)
class Grid:
    """One experiment's cells as :func:`run_grid` received them (what :func:`planning` records)."""

    name: str
    cells: Sequence[Cell]
    cell_fn: Callable[..., Any]
    version: int
    errors: tuple
    cache: Cache
    args: argparse.Namespace

    def computed_above(self, cell: Cell) -> bool:
        return self.cache.path(self.version, cell.key) in _COMPUTED

    def known(self, cell: Cell):
        """The cell's value when computed earlier in this run (:func:`computed`) or cached; else None."""
        path = self.cache.path(self.version, cell.key)
        return _COMPUTED[path] if path in _COMPUTED else self.cache.get(self.version, cell.key)


class Planned(BaseException):
    """Raised by :func:`run_grid` inside :func:`planning`: the grid is recorded, the experiment
    stops there (a BaseException, so that no ``except Exception`` takes it for a failure)."""


#: The grids recorded inside :func:`planning` (None outside it).
_PLAN: list | None = None
#: Cell values computed by :func:`computed`, by cache path, for the run_grid calls inside it.
_COMPUTED: dict = {}


@contextlib.contextmanager
def planning():
    """Inside, :func:`run_grid` computes nothing: it appends its :class:`Grid` to the list
    yielded and raises :class:`Planned` (``--replot`` runs record nothing)."""
    global _PLAN
    outer, _PLAN = _PLAN, []
    try:
        yield _PLAN
    finally:
        _PLAN = outer


@contextlib.contextmanager
def computed(grids: Sequence[Grid], args: argparse.Namespace):
    """Compute the missing cells of every grid on one set of workers (``args.jobs``,
    ``args.scheduler``), cache each as it finishes, and keep the values (error rows too)
    for the :func:`run_grid` calls inside the block, which then compute nothing, also
    under ``--force`` or ``--no-cache``. Ctrl-C: as in :func:`run_grid`."""
    todo = [(g, i) for g in grids if not g.args.collect for i, cell in enumerate(g.cells) if g.known(cell) is None]
    write = any(g.cache.write for g in grids)
    values = _compute(todo, args, "cells", paths.cache_dir("all").parent, write, kept=0)  # out/results/cache/
    ours = {g.cache.path(g.version, g.cells[i].key): v for (g, i), v in zip(todo, values)}
    _COMPUTED.update(ours)
    try:
        yield
    finally:
        for path in ours:
            _COMPUTED.pop(path, None)


def _run_cell(cell_fn: Callable[..., Any], key: dict, errors: tuple):
    """One cell, wherever it is scheduled: ``(value, None)``, or ``(None, "Type: message")``
    for the exception types reported in the table."""
    try:
        return jsonio.jsonable(cell_fn(**key)), None
    except errors as exc:
        return None, f"{type(exc).__name__}: {exc}"


def _longest_first(todo: Sequence[tuple[Grid, int]]) -> list[int]:
    """The order in which workers take the cells: those never timed first (in grid order),
    then the others by decreasing time last cached, so a long cell does not start last."""
    took = [g.cache.seconds(g.version, g.cells[i].key) for g, i in todo]
    return sorted(range(len(todo)), key=lambda j: (took[j] is not None, -(took[j] or 0.0)))


def _compute(todo: Sequence[tuple[Grid, int]], args: argparse.Namespace, name: str, folder: Path, write: bool,
             kept: int) -> list:
    """The values of the cells ``(grid, index)`` in ``todo`` (error rows for the reported
    errors), computed here or on the workers and cached as each finishes; Ctrl-C -> exit 130."""
    values: list = [None] * len(todo)
    if not todo:  # nothing to compute: no workers started
        return values
    workers = _workers(args)
    serial = workers["n_jobs"] == 1 and workers["scheduler"] is None
    order = list(range(len(todo))) if serial else _longest_first(todo)
    grids, cells = [g for g, _ in todo], [g.cells[i] for g, i in todo]
    tasks = [{"cell_fn": grids[j].cell_fn, "key": cells[j].key, "errors": grids[j].errors} for j in order]
    t0 = time.perf_counter()
    try:
        for done in batch.completed(_run_cell, tasks, catch=(), **workers):
            j = order[done.index]
            grid, cell = grids[j], cells[j]
            value, error = done.result
            line = f"{grid.name} [{done.done}/{done.total}] {cell.name}: "
            if error is not None:  # reported in the table, never cached
                values[j] = {"error": error}
                print(line + error, file=sys.stderr, flush=True)
                continue
            values[j] = value
            grid.cache.put(grid.version, cell.key, value, seconds=done.seconds)
            kept += 1
            if not args.quiet:
                # A solver cell's status in the line too: a run killed before its table still tells.
                status = f", {value['status']}" if isinstance(value, dict) and "status" in value else ""
                print(line + f"{done.seconds:.1f} s{status} ({time.perf_counter() - t0:.1f} s elapsed)",
                      file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        where = (f"{kept} finished cell(s) kept in {paths.shown(folder)}; run the same command to resume"
                 if write else "nothing kept (--no-cache)")
        print(f"{name}: interrupted; {where}; no results or figures written", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_INTERRUPTED) from None
    return values


def _grid_rows(grid: Grid) -> list[dict]:
    """Every cell's row(s), from this run, the cache or computed now."""
    t0 = time.perf_counter()
    values = [grid.known(cell) for cell in grid.cells]
    above = sum(map(grid.computed_above, grid.cells))
    hits = sum(v is not None for v in values) - above
    todo = [] if grid.args.collect else [i for i, v in enumerate(values) if v is None]
    found = _compute([(grid, i) for i in todo], grid.args, grid.name, grid.cache.folder, grid.cache.write, hits)
    for i, value in zip(todo, found):
        values[i] = value
    if not grid.args.quiet:
        print(f"{grid.name}: {len(grid.cells)} cell(s), {hits} of them from {paths.shown(grid.cache.folder)}"
              + (f", {above} computed with the other experiments' cells" if above else "")
              + f", {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return [jsonio.jsonable({**cell.row, **v}) for cell, value in zip(grid.cells, values) if value is not None
            for v in (value if isinstance(value, list) else [value])]


def _replot(name: str, figures: Sequence[Figure], quick: bool, committed: bool) -> list[dict]:
    source = paths.results_dir(quick, committed) / f"{name}.json"
    if not source.exists():
        raise SystemExit(f"{name}: no {paths.shown(source)} to draw from; run without --replot first")
    data = json.loads(source.read_text(encoding="utf-8"))
    write_files(figure_files(figures, data, quick, committed))
    return data["rows"]


def run_grid(name: str, cells: Sequence[Cell], cell_fn: Callable[..., Any], args: argparse.Namespace, *,
             version: int, table: Table, figures: Sequence[Figure] = (), meta: dict | None = None,
             errors: tuple = (), combine: Callable[[list], list] | None = None) -> list[dict]:
    """Run experiment ``name`` over ``cells`` (see the module docstring); returns the result rows.

    ``cell_fn(**cell.key)`` returns a JSON-able dict (one row) or list of dicts (one row
    each); ``version`` is bumped whenever a cell's computation changes, so stale cache
    files are not reused; ``args`` come from :func:`parser`; ``meta`` is recorded in the
    JSON; exceptions of the types in ``errors`` become an ``error`` row; ``combine`` turns
    the cells' rows into the table's (columns derived from several values, one row from
    several cells), after the cache and before anything is written.
    """
    replot = getattr(args, "replot", False)
    committed = getattr(args, "update_results", False)
    cache = Cache(paths.cache_dir(name), read=not (args.force or args.no_cache), write=not args.no_cache)
    if _PLAN is not None:
        if not replot:
            _PLAN.append(Grid(name, tuple(cells), cell_fn, version, tuple(errors), cache, args))
        raise Planned(name)
    if replot:
        return _replot(name, figures, args.quick, committed)
    t0 = time.perf_counter()
    rows = _grid_rows(Grid(name, tuple(cells), cell_fn, version, tuple(errors), cache, args))
    rows = jsonio.jsonable(combine(rows)) if combine else rows
    total = time.perf_counter() - t0
    if not rows:
        print(f"{name}: no finished cells in {paths.shown(cache.folder)} (run without --collect); nothing written")
        return rows
    if not args.quiet:
        shown = table.display(rows) if table.display else [{c: r.get(c) for c in table.columns} for r in rows]
        print(f"\n{table.title}\n\n{format_table(shown, floatfmt=table.floatfmt)}\n\n({total:.1f} s{table.footer})\n")
    files = result_files(name, rows, table, {**(meta or {}), "cell_version": version, "total_time_s": total},
                         args.quick, committed)
    json_path = paths.results_dir(args.quick, committed) / f"{name}.json"
    data = json.loads(files[json_path])
    old = None if getattr(args, "rewrite", False) else same_numbers(json_path, data)
    if old is not None:  # the same numbers: keep the files (and draw the figures from them, to the same bytes)
        print(f"{paths.shown(json_path)}: the same numbers (to {SAME_TOLERANCE:g}; timings and environment aside), "
              "kept; --rewrite writes it anyway", flush=True)
        files, data = {}, old
    write_files({**files, **figure_files(figures, data, args.quick, committed)})
    return rows


def cli(main: Callable[[], Any]) -> None:
    """Run ``main()`` as a command: Ctrl-C anywhere ends it with one line and status 130.

    A Ctrl-C whose exception a library swallowed (CVXPY's import of a solver) is raised again
    at the next write, at the latest the next finished cell's cache entry; SIGTERM unwinds
    the same way with status 143 (:func:`ffu_cvx.io.files.signals_unwind`).
    """
    try:
        with signals_unwind():
            main()
    except KeyboardInterrupt:
        print("interrupted; the finished cells are cached, so the same command resumes", file=sys.stderr)
        raise SystemExit(EXIT_INTERRUPTED) from None
