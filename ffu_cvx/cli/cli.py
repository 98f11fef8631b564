"""The ``ffu-cvx`` command line: solve a user's workload, release answers, report.

CLI layer, the top below the package: imports ``model`` (``memory``, ``problem``, ``status``),
``workloads.products``, ``solvers``, ``release`` (``budget``, ``ledger``, ``mechanism``, ``noise``,
``product_release``, ``release``), ``estimate.consistent``, ``io`` (``files``; the command line's own
formats ``clifiles`` (inputs, outputs, histograms), ``resultfile`` and ``specfile`` (the RESULT and SPEC
formats, documented there)), ``version`` and ``cliplot`` (the report figure).

Commands
--------
``ffu-cvx --version``
    Print the package version. ``python -m ffu_cvx`` runs the same command line.
``ffu-cvx solve SPEC.json [--method M] --out RESULT.json [--delta 1e-6] [--max-time S] [--quiet]``
    Solve Problem 1 (or Problem 2 when the spec has a ``target``) and write RESULT, with
    progress on stderr (the solvers' log: attempts, refinement levels, a line every 30 s
    of a long conic solve); ``--max-time`` bounds the whole command, from reading the spec
    to writing RESULT: the solver gets what is left once the spec is read, less the time
    writing RESULT takes (:func:`solve_budget`), and keeps its best certified result (status
    ``max_iter`` when its budget ran out; RESULT's ``timings`` record both budgets). The
    method is ``--method``, else the spec's ``method``, else ``auto``. A product spec
    (``domain`` and ``groups``) is solved densely by the dense methods when its domain is
    small enough, or with Sigma in factors by ``kron`` (``auto`` picks the method).
``ffu-cvx release RESULT.json (--data HIST.csv | --records RECORDS.csv) --out ANSWERS.csv``
    ``[--seed N] [--level 0.95] [--nonnegative] [--round] [--consistent] [--overwrite]``
    Run the mechanism on a histogram (``--data``) or on microdata (``--records``: a CSV
    with a header naming the product spec's attributes) and write the noisy answers and,
    beside them, their privacy statement (``ANSWERS.privacy.json``, recording the answers'
    digest), as one unit: both or neither, whatever interrupts them or writes beside them
    (:meth:`ffu_cvx.release.release.Release.to_csv`). Existing files are replaced only with
    ``--overwrite``. ``--nonnegative`` and ``--round`` add a post-processed column (marked
    as post-processing); ``--consistent`` (with ``--records``) adds instead the consistent,
    non-negative, integer tables of :mod:`ffu_cvx.estimate.consistent` (top down) with their exact
    intervals, and a progress bar while they are made. Without ``--seed`` the noise comes from the operating system's entropy; a
    seed is for testing only (whoever knows it can remove the noise). What is
    computed from the data without noise (the number of records, of non-empty cells) is
    printed on the terminal, marked confidential, and written to no file.
``ffu-cvx budget SPEC.json [--epsilon E] [--delta 1e-6] [--method M] [--quiet]``
    The smallest privacy loss at which every target of the spec is met (epsilon at
    delta, rho-zCDP, and the certified least epsilon), table by table in the spec's own
    words (margins at their confidence levels, or variances); with ``--epsilon``, the
    reverse: what each table gets at (epsilon, delta), and which targets that misses.
``ffu-cvx report RESULT.json [--plot FIG.png] [--delta D]``
    Print the privacy statement and accuracy summary; optionally plot achieved against
    target variance per query and the privacy profile.

Exit statuses and files
-----------------------
0 success; 1 the solver failed, ran out of memory or overflowed (one line: the status,
the cause, a remedy); 2 bad input (one line naming the file, field or argument and the
fix); 130 interrupted by Ctrl-C (SIGINT); 143 terminated (SIGTERM). Whatever the
status, nothing is written unless every check passed and the work finished: an output
is written to a temporary file in its folder and renamed into place, so it is either
complete or untouched (an existing file stays as it was), and no temporary file is
left. An output that is also an input (the same file, also through a link) or that is
read-only is refused before any work.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import json
import logging
import signal
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ..estimate import consistent
from ..io.clifiles import InputError, check_output, read_histogram, read_json
from ..io.files import Terminated, atomic_write_bytes, atomic_write_group, raise_if_signalled, signals_unwind
from ..model.memory import dense_bytes, human_bytes
from ..model.problem import FitnessProblem
from ..release.budget import accuracy_at, smallest_budget, tables
from ..release.ledger import Ledger
from ..release.mechanism import GaussianMechanism, problem2
from ..release.noise import release_epsilon
from ..release.product_release import noise_source, release_product
from ..release.release import TARGET_RTOL, Release
from ..workloads.products import ProductProblem
from .cliplot import plot_result
from ..io.resultfile import (SCHEMA_VERSION, STRUCTURED, at_spec_targets, dump_result, load_result, load_structured,
                         result_dict, structured_result_dict)
from ..io.specfile import WORKLOADS, check_options, check_target, load_spec, product_workload, spec_goal, spec_inputs
from ..model.status import SolverError
from ..solvers import METHODS, STRUCTURED_METHODS, auto_method, solve
from ..version import __version__

__all__ = ["main", "solve_budget", "SCHEMA_VERSION", "WORKLOADS", "load_spec", "load_result", "InputError",
           "EXIT_OK", "EXIT_FAILED", "EXIT_BAD_INPUT", "EXIT_INTERRUPTED", "EXIT_TERMINATED"]

EXIT_OK = 0
#: The solver failed, ran out of memory or overflowed.
EXIT_FAILED = 1
#: Bad input: a file, field or argument (argparse uses 2 as well).
EXIT_BAD_INPUT = 2
#: Ctrl-C (128 + SIGINT).
EXIT_INTERRUPTED = 128 + signal.SIGINT
#: SIGTERM (128 + SIGTERM).
EXIT_TERMINATED = 128 + signal.SIGTERM
#: The method when neither --method nor the spec names one.
DEFAULT_METHOD = "auto"
#: The structured solver a large product spec needs.
#: The methods the command line accepts: the dense ones, the structured ones and "auto".
CLI_METHODS = (*sorted(METHODS), *sorted(STRUCTURED_METHODS), "auto")


#: The share of ``--max-time`` left after reading the spec that the solver gets at most: the rest covers
#: what runs after its own check of the clock (its certificate, Problem 2's scaling).
SOLVE_SHARE = 0.9
#: Seconds to write one number of a dense RESULT (``W``, ``Sigma``), times two for a busy machine:
#: 1.3 s per million numbers measured on one core (d = 1024: 2 x 10^6 numbers, 2.6 s).
WRITE_SECONDS_PER_NUMBER = 2 * 1.3e-6


def solve_budget(max_time: float, elapsed: float, problem) -> float:
    """The seconds the solver gets of a command's ``max_time`` once ``elapsed`` are spent: at most
    :data:`SOLVE_SHARE` of what is left, less the time writing the result of ``problem`` takes
    (a dense one's ``W`` and ``Sigma``); at least 1 ms (the solver then returns its first result, cut)."""
    left = max_time - elapsed
    numbers = problem.m * problem.d + problem.k * problem.k if isinstance(problem, FitnessProblem) else 0
    return max(min(SOLVE_SHARE * left, left - WRITE_SECONDS_PER_NUMBER * numbers), 1e-3)


class _Run:
    """One command's progress messages and what it has done so far (for the exit message)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.t0 = time.perf_counter()
        self.written: list[Path] = []
        self.problem = None
        self.method = None

    def say(self, msg: str) -> None:
        if not self.quiet:
            print(f"ffu-cvx [{time.perf_counter() - self.t0:7.1f}s] {msg}", file=sys.stderr, flush=True)

    def write(self, path: Path, data: bytes) -> None:
        atomic_write_bytes(path, data)
        self.written.append(path)

    def callback(self, every: float = 2.0):
        """A solver callback printing the iteration count at most every ``every`` seconds."""
        state = {"n": 0, "last": time.perf_counter()}

        def cb(_intermediate):
            state["n"] += 1
            now = time.perf_counter()
            if now - state["last"] >= every:
                state["last"] = now
                self.say(f"  iteration {state['n']}")

        return cb

    def progress_bar(self, what: str, every: float = 2.0, width: int = 30):
        """A ``progress(done, seconds_left, step)`` callback drawing a bar at most every ``every`` seconds and
        at the end."""
        state = {"last": time.perf_counter()}

        def bar(done: float, seconds_left: float, _step: str) -> None:
            now = time.perf_counter()
            if done < 1.0 and now - state["last"] < every:
                return
            state["last"] = now
            filled = int(round(width * done))
            self.say(f"{what} [{'#' * filled}{'.' * (width - filled)}] {done:4.0%}, about {seconds_left:.0f} s left")

        return bar

    @contextmanager
    def solver_log(self):
        """The solvers' log lines (logger ``ffu_cvx``, INFO: attempts, levels, "still solving") as progress."""
        if self.quiet:
            yield
            return
        handler = _SayHandler(self)
        logger = logging.getLogger("ffu_cvx")
        level = logger.level
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        try:
            yield
        finally:
            logger.removeHandler(handler)
            logger.setLevel(level)


class _SayHandler(logging.Handler):
    """A logging handler that prints through :meth:`_Run.say`."""

    def __init__(self, run: _Run):
        super().__init__(logging.INFO)
        self.run = run

    def emit(self, record: logging.LogRecord) -> None:
        self.run.say(f"  {record.getMessage()}")


def _check_delta(delta: float, flag: str = "--delta") -> float:
    if not 0 < delta < 1:
        raise InputError(f"{flag} must be in (0, 1), got {delta!r}")
    return delta


# ---------------------------------------------------------------------------- commands
def _solve(problem, method: str, options: dict, run: _Run):
    note = getattr(problem, "scaling_advice", "")
    if note:
        run.say(f"warning: {note}")
    try:
        with warnings.catch_warnings(record=True) as caught, run.solver_log():
            warnings.simplefilter("always")
            sol = solve(problem, method=method, callback=run.callback(), **options)
    except TypeError as exc:
        raise InputError(f"bad solver `options` {sorted(options)} for method {method!r}: {exc}") from None
    except SolverError as exc:
        if not note:
            raise
        raise SolverError(f"{exc}; {note}", status=exc.status, nit=exc.nit, residual=exc.residual) from None
    for msg in dict.fromkeys(" ".join(str(w.message).split()) for w in caught):
        run.say(f"solver warning: {msg}")
    return sol


def _method(args, spec: dict) -> str:
    method = args.method or spec.get("method") or DEFAULT_METHOD
    if not isinstance(method, str) or method.lower() not in CLI_METHODS:
        raise InputError(f"method {method!r} (from {'--method' if args.method else 'the spec'}) is not one of "
                         f"{list(CLI_METHODS)}")
    return method.lower()


def _problem_for(problem, method: str, spec_path: Path):
    """The problem ``method`` solves: a product spec's dense problem for a dense method."""
    if not isinstance(problem, ProductProblem):
        return problem
    if method not in METHODS:
        return problem  # "kron" and "auto" take the structured problem
    try:
        return problem.for_method(method)
    except ValueError as exc:
        raise InputError(f"spec {spec_path}: {exc}") from None


def _solve_spec(problem, method: str, options: dict, target, run: _Run):
    """Solve Problem 1 (then Problem 2 under a ``target``): ``(solution, target_info)``.

    Under a target a dense solution is returned at the scaled targets ``k c`` (a dense
    RESULT records those), a structured one at the spec's own targets (``max_ratio`` k).
    """
    t1 = time.perf_counter()
    sol = _solve(problem, method, options, run)
    run.say(f"solved in {time.perf_counter() - t1:.1f} s: status {sol['status']}, alpha = "
            f"{sol['privacy_cost']:.10g}, max variance/target = {sol['max_ratio']:.6g}, certified gap = "
            f"{sol['gap']:.2e}")
    if target is None:
        return sol, None
    p2 = problem2(sol, *target)
    sol = p2.scaled_targets_solution or p2.solution
    run.say(f"Problem 2: ({p2.epsilon:g}, {p2.delta:g})-DP at alpha = {p2.privacy_cost:.10g}; "
            f"every variance <= k c with k = {p2.k:.6g} (certified k >= {p2.k_lower_bound:.6g})")
    run.say(("" if p2.met else "warning: ") + p2.summary)
    return sol, {"epsilon": p2.epsilon, "delta": p2.delta, "k": p2.k, "k_lower_bound": p2.k_lower_bound,
                 "met": p2.met, "sampler": p2.sampler}


def _cmd_solve(args, run: _Run) -> int:
    out = check_output(args.out, "--out")
    _check_delta(args.delta)
    spec_path = Path(args.spec)
    problem, spec = load_spec(spec_path)
    check_output(out, "--out", spec_inputs(spec, spec_path))
    method = _method(args, spec)
    problem = _problem_for(problem, method, spec_path)
    run.problem, run.method = problem, method
    target = check_target(spec)
    options = check_options(spec)
    if args.max_time is not None and not args.max_time > 0:
        raise InputError(f"--max-time must be a positive number of seconds, got {args.max_time!r}")
    t_load = time.perf_counter() - run.t0
    budgets = {}
    if args.max_time is not None:
        budgets = {"max_time_s": args.max_time, "solve_budget_s": solve_budget(args.max_time, t_load, problem)}
        options = {**options, "max_time": budgets["solve_budget_s"]}
        run.say(f"time budget {args.max_time:g} s in all: {budgets['solve_budget_s']:.3g} s for the solver, the rest "
                "for reading the spec and writing the result")
    if isinstance(problem, FitnessProblem):
        run.say(f"problem {problem.name!r}: m={problem.m} queries, d={problem.d} cells, "
                f"k={problem.k} (basis {problem.basis})")
    else:
        run.say(f"product problem {problem.name!r}: {len(problem.groups)} groups, m={problem.m} queries, "
                f"d={problem.d} cells over {list(problem.domain.names)}")
    run.say(f"solving with method={method} ...")
    t1 = time.perf_counter()
    sol, target_info = _solve_spec(problem, method, options, target, run)
    timings = {"load_s": t_load, "solve_s": time.perf_counter() - t1, "total_s": time.perf_counter() - run.t0,
               **budgets}
    if isinstance(problem, FitnessProblem):
        res = result_dict(sol, spec, spec_path, args.delta, target_info, timings)
    else:
        res = structured_result_dict(sol, spec, spec_path, method, args.delta, target_info, timings)
    run.write(out, dump_result(res).encode())
    run.say(f"epsilon = {res['epsilon']:.6g} at delta = {args.delta:g} as an ideal Gaussian, "
            f"{release_epsilon(res['delta_m'], args.delta):.6g} as released through OpenDP's sampler; "
            f"rho-zCDP = {res['rho']:.6g}; "
            f"neighbours: {res['neighbours']}")
    run.say(f"wrote {out}")
    return EXIT_OK


def _cmd_ledger(args, run: _Run) -> int:
    try:
        if args.create:
            if args.epsilon is None:
                raise InputError("--create needs the budget: --epsilon E (and --delta, default 1e-6)")
            book = Ledger.create(args.ledger, args.epsilon, _check_delta(args.delta), args.dataset)
        else:
            book = Ledger.open(args.ledger)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    print(book.summary())
    rows = book.table()
    if rows:
        print(f"{'entry':>5}  {'created (UTC)':<25}  {'rho':>10}  {'eps alone':>10}  {'eps spent':>10}  what (answers file)")
        for r in rows:
            print(f"{r['entry']:>5}  {r['created_utc']:<25}  {r['rho']:>10.6g}  {r['epsilon']:>10.6g}  "
                  f"{r['spent_epsilon']:>10.6g}  {r['what']} ({r['answers_file']})")
    return EXIT_OK


def _cmd_budget(args, run: _Run) -> int:
    _check_delta(args.delta)
    if args.epsilon is not None and not args.epsilon > 0:
        raise InputError(f"--epsilon must be > 0, got {args.epsilon!r}")
    spec_path = Path(args.spec)
    problem, spec = load_spec(spec_path)
    method = _method(args, spec)
    run.problem, run.method = problem, method
    options = check_options(spec)
    with run.solver_log():
        if args.epsilon is None:
            found = smallest_budget(problem, args.delta, method=method, **options)
            print(f"smallest budget meeting every target: {found.text()}")
        else:
            found = accuracy_at(problem, args.epsilon, args.delta, method=method, **options)
            print(f"at {found.text()}")
    return EXIT_OK


def _postprocess(rel, args):
    if args.nonnegative or args.round:
        return rel.postprocess(nonnegative=args.nonnegative, round=args.round)
    return rel


def _write_release(rel, args, run: _Run, out: Path, book: Ledger | None) -> None:
    rel = _postprocess(rel, args)
    raise_if_signalled()
    try:
        paths = rel.to_csv(out, overwrite=args.overwrite, ledger=book, written=run.written)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    run.say(" ".join(json.loads(paths[1].read_text(encoding="utf-8"))["text"].split()))
    run.say(f"wrote {rel.m} answers with {100 * rel.level:g}% intervals to {out}, the privacy statement to "
            f"{paths[1]}")


def _open_ledger(args) -> Ledger | None:
    """``--ledger``, read and its chain checked before any work."""
    if args.ledger is None:
        return None
    try:
        return Ledger.open(args.ledger)
    except ValueError as exc:
        raise InputError(f"--ledger: {exc}") from None


def _sampler(args, run: _Run):
    """``--sampler``: OpenDP's unless chosen, or implied by ``--seed`` (said on stderr)."""
    if args.sampler == "opendp" and args.seed is not None:
        raise InputError("--seed makes the noise reproducible, which OpenDP's sampler refuses: leave out --seed, or "
                         "choose --sampler numpy (testing only)")
    if args.seed is not None or args.sampler == "numpy":
        run.say("note: noise from numpy's floating-point sampler" + (", seeded: whoever knows the seed can remove it "
                                                                      "(testing only)" if args.seed is not None
                                                                      else " (not hardened; for research)"))
    return args.sampler


def _warn_targets(sol, m: int, c, run: _Run) -> None:
    if not sol.success:
        run.say(f"warning: the solution's status is {sol['status']!r}; variance targets may not be met")
    over = int(np.sum(np.asarray(sol.variances) > c * (1 + TARGET_RTOL)))
    if over:
        run.say(f"warning: {over} of {m} queries exceed their variance target "
                f"(max variance/target = {sol['max_ratio']:.6g})")


def _cmd_release(args, run: _Run) -> int:
    if (args.data is None) == (args.records is None):
        raise InputError("give exactly one of --data (a histogram CSV) or --records (microdata: CSV with a header, "
                         "Parquet or Arrow IPC)")
    if args.scheduler is not None and args.records is None:
        raise InputError("--scheduler counts --records on a Dask cluster; give --records")
    if args.consistent and (args.nonnegative or args.round or args.data is not None):
        raise InputError("--consistent goes with --records alone: its tables are already non-negative integers "
                         "(leave out --nonnegative and --round)")
    inputs = {"result": Path(args.result), "--data": args.data and Path(args.data),
              "--records": args.records and Path(args.records), "--ledger": args.ledger and Path(args.ledger)}
    out = _release_outputs(args, inputs)
    book, sampler = _open_ledger(args), _sampler(args, run)
    if args.records is not None:
        return _release_records(args, run, out, inputs, book, sampler)
    sol, res = load_result(args.result)
    x = read_histogram(Path(args.data), sol.problem.d)
    sol = at_spec_targets(sol, res)
    _warn_targets(sol, sol.problem.m, sol.problem.c, run)
    try:
        rel = GaussianMechanism(sol).release(x, rng=args.seed, level=args.level, delta=res["delta"], sampler=sampler)
    except ValueError as exc:
        raise InputError(f"--data {args.data}: {exc}") from None
    goal = spec_goal(res["spec"], sol.problem.m)
    if goal is not None:  # the spec's target in its own words, and what the release delivers in them
        rel = dataclasses.replace(rel, group_targets=(goal,),
                                  info={"target": {**goal.as_dict(), "stated": goal.text("each answer"),
                                                   "achieved": goal.achieved(float(rel.variances.max()))}})
    _write_release(dataclasses.replace(rel, inputs=inputs), args, run, out, book)
    return EXIT_OK


def _release_outputs(args, inputs: dict) -> Path:
    """``--out`` and its privacy statement, checked before any work (inputs, read-only, existing)."""
    out = check_output(args.out, "--out", inputs)
    try:
        Release.check_paths(out, inputs, args.overwrite)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return out


def _release_records(args, run: _Run, out: Path, inputs: dict, book: Ledger | None, sampler) -> int:
    path = Path(args.result)
    sol, res = _load_any(path, run)
    if sol.sigma is None:
        wl = sol.problem.workload
    else:
        if not isinstance(res["spec"], dict) or "domain" not in res["spec"]:
            raise InputError(f"result {path} was not solved from a product spec (`domain`, `groups`): release it "
                             "with --data HIST.csv")
        wl = product_workload(res["spec"], Path(res["spec_path"]))
        sol = at_spec_targets(sol, res)
        _warn_targets(sol, wl.m, sol.problem.c, run)
    try:
        source = noise_source(sol, wl)
    except ValueError as exc:
        raise InputError(f"result {path}: {exc}") from None
    counts = wl.domain.counts(Path(args.records), scheduler=args.scheduler)
    if args.show_confidential:
        run.say(f"confidential, not written to any file: {counts.n_records} records in {len(counts)} of {wl.d} cells")
    try:
        rel = release_product(source, wl, counts, rng=args.seed, level=args.level, delta=res["delta"],
                              sampler=sampler)
    except ValueError as exc:
        raise InputError(f"--records {args.records}: {exc}") from None
    if args.consistent:
        run.say("consistent tables: non-negative integer tables, top down, with exact intervals ...")
        rel = consistent.estimate(rel, source, wl, progress=run.progress_bar("consistent tables")).to_release(rel)
    _write_release(dataclasses.replace(rel, inputs=inputs), args, run, out, book)
    return EXIT_OK


def _report_lines(sol, res: dict, delta: float) -> list[str]:
    """The report of a dense or structured solution ``sol`` of the RESULT ``res``: accuracy at the spec's targets."""
    problem = sol.problem
    target = res["target"]
    structured = sol.sigma is None
    variances, c = _variances_and_targets(sol, res)
    ratio = variances / c
    cert = res["certificate"]
    lower = np.nan if cert["lower_bound"] is None else cert["lower_bound"]
    gap = np.nan if cert["gap"] is None else cert["gap"]
    shape = (f"{len(problem.groups)} groups over {list(problem.domain.names)}, structure "
             f"{sol['info'].get('structure', sol['method'])}" if structured
             else f"k={problem.k}, basis {res['problem']['basis']}")
    lines = [
        f"workload      {problem.name}: m={problem.m}, d={problem.d}, {shape}",
        f"method        {sol['method']} (status {sol['status']})",
        f"privacy cost  alpha = {sol['privacy_cost']:.10g}, Delta_M = {sol.delta_m:.10g}",
        f"privacy       ({sol.epsilon(delta):.6g}, {delta:g})-DP, {sol.rho:.6g}-zCDP as an ideal Gaussian; "
        f"({release_epsilon(sol.delta_m, delta):.6g}, {delta:g})-DP as released through OpenDP's sampler",
        f"neighbours    {sol.neighbours} (histograms differing by one in one cell)",
        f"accuracy      max variance/target = {ratio.max():.6g}; "
        f"{int(np.sum(ratio <= 1 + TARGET_RTOL))}/{problem.m} queries within their targets",
        f"certificate   lower bound {lower:.10g} on alpha at these targets, gap {gap:.2e}",
    ]
    goal = None if structured else spec_goal(res["spec"], problem.m)
    if structured:
        lines += [f"table         {t.text()}" for t in tables(sol, problem)]
    elif goal is not None:
        lines.append(f"target        {goal.text('each answer')}; gets {goal.achieved(float(variances.max()))}")
    if target:
        klb = np.nan if target["k_lower_bound"] is None else target["k_lower_bound"]
        verdict = "every target met" if target["met"] else f"targets MISSED by up to a factor {target['k']:.6g}"
        lines.append(f"Problem 2     target ({target['epsilon']:g}, {target['delta']:g}): {verdict} (best uniform "
                     f"scaling k = {target['k']:.6g}, certified k >= {klb:.6g})")
    return lines


def _variances_and_targets(sol, res: dict) -> tuple[np.ndarray, np.ndarray]:
    """(m,) variances and the spec's own targets (a dense RESULT under Problem 2 records ``k c``)."""
    problem = sol.problem
    if sol.sigma is None:
        variances = sol.variances
        if variances is None:
            variances = np.concatenate([sol.group_variances(g) for g in range(len(problem.groups))])
        return np.asarray(variances, dtype=float), problem.workload.c
    k = res["target"]["k"] if res["target"] else 1.0
    return sol.variances, problem.c / k


def _load_any(path: Path, run: _Run) -> tuple:
    """``(solution, res)`` of a dense RESULT, or of a structured one solved again (deterministic)."""
    res = read_json(path, "result")
    if res.get("kind") != STRUCTURED:
        return load_result(path)
    run.say("solving the recorded structured mechanism again (deterministic) ...")
    sol, _, res = load_structured(path, res, lambda pr, method, options, target:
                                  _solve_spec(pr, method, options, target, run))
    return sol, res


def _cmd_report(args, run: _Run) -> int:
    plot = check_output(args.plot, "--plot") if args.plot else None
    if plot is not None and plot.suffix.lower() not in (".png", ".pdf", ".svg"):
        raise InputError(f"--plot {plot} must end in .png, .pdf or .svg")
    if args.delta is not None:
        _check_delta(args.delta)
    sol, res = _load_any(Path(args.result), run)
    if plot is not None:
        if sol.sigma is None:
            raise InputError(f"--plot draws a dense solution's profile; result {args.result} is structured: "
                             "report it without --plot")
        check_output(plot, "--plot", {"result": Path(args.result)})
    delta = args.delta if args.delta is not None else res["delta"]
    print("\n".join(_report_lines(sol, res, delta)))
    if plot is not None:
        k = res["target"]["k"] if res["target"] else 1.0
        plot_result(sol, plot, epsilon=sol.epsilon(delta), delta=delta, k=k)
        run.written.append(plot)
        print(f"plot          {plot}")
    return EXIT_OK


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ffu-cvx", description="Fitness-for-use differential privacy for linear queries.",
                                epilog="exit status: 0 ok, 1 solver failure, 2 bad input, 130 interrupted, "
                                       "143 terminated; outputs are atomic and never overwrite an input")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("solve", help="optimise the noise covariance for a workload spec")
    s.add_argument("spec", help="workload spec (JSON)")
    s.add_argument("--method", default=None, choices=CLI_METHODS,
                   help="solver (default: the spec's `method`, else auto)")
    s.add_argument("--out", required=True, help="result file to write (JSON)")
    s.add_argument("--delta", type=float, default=1e-6, help="delta at which to report epsilon (default 1e-6)")
    s.add_argument("--max-time", type=float, default=None,
                   help="time budget in seconds for the whole command (methods sdp, smii, gd, kron): the best "
                        "certified result found by then")
    s.add_argument("--quiet", action="store_true", help="no progress on stderr")
    s.set_defaults(func=_cmd_solve)
    r = sub.add_parser("release", help="release noisy answers for a histogram")
    r.add_argument("result", help="result file from `ffu-cvx solve`")
    r.add_argument("--data", default=None, help="histogram CSV: `cell,count` rows, or one count per row")
    r.add_argument("--records", default=None,
                   help="microdata naming the product spec's attributes, one record per row: a CSV file with a "
                        "header, a Parquet file or a folder of Parquet parts, or an Arrow IPC (Feather) file")
    r.add_argument("--scheduler", default=None,
                   help="Dask scheduler address: count --records on that cluster (pip install 'ffu-cvx[dask]')")
    r.add_argument("--out", required=True, help="answers file to write (CSV)")
    r.add_argument("--seed", type=int, default=None,
                   help="seed for reproducible noise (testing only: numpy's sampler, whoever knows the seed can "
                        "remove the noise)")
    r.add_argument("--sampler", default=None, choices=("opendp", "numpy"),
                   help="noise sampler (default opendp: exact discrete Gaussian; numpy: floating point, for research)")
    r.add_argument("--ledger", default=None,
                   help="privacy ledger (made by `ffu-cvx ledger L --create`) to charge; a release that does not fit "
                        "its budget is refused before anything is written")
    r.add_argument("--show-confidential", action="store_true",
                   help="print the exact record and cell counts on stderr (never written to a file)")
    r.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals")
    r.add_argument("--overwrite", action="store_true",
                   help="replace an existing answers file and its privacy statement (never an input)")
    r.add_argument("--nonnegative", action="store_true", help="post-processing: add answers clipped at 0")
    r.add_argument("--round", action="store_true", help="post-processing: add answers rounded to integers")
    r.add_argument("--consistent", action="store_true",
                   help="post-processing (--records): consistent non-negative integer tables, top down from the "
                        "unbiased (GLS) values, with exact intervals that hold at the truth")
    r.add_argument("--quiet", action="store_true", help="no messages on stderr")
    r.set_defaults(func=_cmd_release)
    b = sub.add_parser("budget", help="the smallest privacy loss meeting every target, or the accuracy at a budget")
    b.add_argument("spec", help="workload spec (JSON) with variance or margin targets")
    b.add_argument("--epsilon", type=float, default=None,
                   help="the reverse question: what each table gets at this epsilon (and --delta)")
    b.add_argument("--delta", type=float, default=1e-6, help="delta of (epsilon, delta)-DP (default 1e-6)")
    b.add_argument("--method", default=None, choices=CLI_METHODS, help="solver (default: the spec's, else auto)")
    b.add_argument("--quiet", action="store_true", help="no progress on stderr")
    b.set_defaults(func=_cmd_budget)
    g = sub.add_parser("ledger", help="show a privacy ledger (what is spent, what remains), or create one")
    g.add_argument("ledger", help="ledger file (JSON Lines)")
    g.add_argument("--create", action="store_true", help="create the ledger with the budget --epsilon, --delta")
    g.add_argument("--epsilon", type=float, default=None, help="total budget epsilon (with --create)")
    g.add_argument("--delta", type=float, default=1e-6, help="delta of the budget (with --create, default 1e-6)")
    g.add_argument("--dataset", default="", help="name of the data set (with --create; default the file's stem)")
    g.set_defaults(func=_cmd_ledger, quiet=True)
    t = sub.add_parser("report", help="summarise a result; optionally plot it")
    t.add_argument("result", help="result file from `ffu-cvx solve`")
    t.add_argument("--plot", default=None, help="figure to write (.png, .pdf or .svg)")
    t.add_argument("--delta", type=float, default=None, help="delta for epsilon (default: the result's)")
    t.set_defaults(func=_cmd_report, quiet=True)
    return p


# ---------------------------------------------------------------------------- exit
def _memory_message(run: _Run) -> str:
    """What the command ran out of memory on, what it would need and what to use instead."""
    pr = run.problem
    if pr is None:
        return "ffu-cvx: out of memory while reading the input; use a smaller problem"
    if not isinstance(pr, FitnessProblem):
        return (f"ffu-cvx: out of memory solving the product problem (m={pr.m}, d={pr.d}) with method {run.method}; "
                "use fewer or coarser groups")
    m, d, k = pr.m, pr.d, pr.k
    method = auto_method(pr)[0] if run.method == "auto" else run.method
    dense = dense_bytes(m, d) + dense_bytes(m, k) + dense_bytes(k, d)
    # Clarabel factors a dense block of order n(n+1)/2 for an LMI of order n = 2k.
    sdp = dense_bytes(k * (2 * k + 1), k * (2 * k + 1))
    smii = dense_bytes(4 * m + 2 * d + 6 * k, k)
    fix = ("use --method smii (about " + human_bytes(dense + smii) + ") or a smaller problem"
           if method == "sdp" else "use a smaller problem (smaller d or fewer queries)")
    return (f"ffu-cvx: out of memory solving m={m}, d={d}, k={k} with method {method}: W, L and B take "
            f"{human_bytes(dense)}, the SDP's dense factor about {human_bytes(sdp)}; {fix}")


def _interrupted(what: str, run: _Run) -> str:
    done = f"already wrote {', '.join(map(str, run.written))}" if run.written else "no output written"
    return f"ffu-cvx: {what}; {done}"


def forget_unhandled_interrupt() -> None:
    """Tell CPython that the Ctrl-C it saw was handled, so the process exits with our status.

    CPython 3.11 sets its flag ``_Py_UnhandledKeyboardInterrupt`` when a
    ``KeyboardInterrupt`` ends code evaluated through ``PyRun_*`` (somewhere in the SDP
    solve's calls here), even when an outer ``except`` handles it, and a ``python -m``
    run whose flag is set ends by killing itself with SIGINT: on a loaded machine 3 of 20
    and 1 of 20 Ctrl-Cs during ``ffu-cvx solve --method sdp`` exited -2 instead of 130,
    after printing the one line (0 of 20 with the flag cleared). A no-op where the
    interpreter has no such symbol (CPython 3.12 keeps it in ``_PyRuntime``; PyPy).
    """
    try:
        ctypes.c_int.in_dll(ctypes.pythonapi, "_Py_UnhandledKeyboardInterrupt").value = 0
    except (AttributeError, ValueError, OSError):
        pass


def _run_command(args) -> int:
    run = _Run(args.quiet)
    try:
        try:
            code = args.func(args, run)
        except Exception:
            raise_if_signalled()  # an error raised where a library turned a signal's exception into it
            raise
        raise_if_signalled()  # a signal whose exception a library swallowed still stops the command
        return code
    except KeyboardInterrupt:
        forget_unhandled_interrupt()
        print(_interrupted("interrupted (Ctrl-C)", run), file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:
        print(_interrupted("terminated (SIGTERM)", run), file=sys.stderr)
        return EXIT_TERMINATED
    except SolverError as exc:
        print(f"ffu-cvx: solver failed (status {exc.status}, iterations {exc.nit}, residual {exc.residual}): "
              f"{' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_FAILED
    except MemoryError:
        print(_memory_message(run), file=sys.stderr)
        return EXIT_FAILED
    except (OverflowError, FloatingPointError, ZeroDivisionError) as exc:
        note = getattr(run.problem, "scaling_advice", "")
        print(f"ffu-cvx: numerical failure ({type(exc).__name__}: {exc}); "
              f"{note or 'the problem may be badly scaled: rescale W and c'}", file=sys.stderr)
        return EXIT_FAILED
    except (ValueError, OSError, ImportError) as exc:  # ImportError: an optional extra the input needs
        print(f"ffu-cvx: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_BAD_INPUT


def main(argv=None) -> int:
    """Run ``ffu-cvx`` with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    For the command's duration (in the main thread) SIGTERM is turned into
    :class:`ffu_cvx.io.files.Terminated`, so that it unwinds like Ctrl-C: one line, status 143,
    no temporary file, an existing output untouched; and both signals are remembered, so
    that one whose exception a library swallowed still stops the command before it writes.
    """
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed its usage message
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    with signals_unwind():
        return _run_command(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
