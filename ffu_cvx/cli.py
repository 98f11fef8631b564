"""The ``ffu-cvx`` command line: solve a user's workload, release answers, report.

Commands
--------
``ffu-cvx solve SPEC.json --method sdp|smii|gd --out RESULT.json [--delta 1e-6] [--quiet]``
    Solve Problem 1 (or Problem 2 when the spec has a ``target``) and write RESULT.
``ffu-cvx release RESULT.json --data HIST.csv --out ANSWERS.csv [--seed N] [--level 0.95]``
    Run the mechanism on a histogram and write the noisy answers. Without ``--seed`` the
    noise comes from the operating system's entropy; a seed is for testing only (whoever
    knows it can remove the noise).
``ffu-cvx report RESULT.json [--plot FIG.png] [--delta D]``
    Print the privacy statement and accuracy summary; optionally plot achieved against
    target variance per query and the privacy profile.

Exit status: 0 on success, 2 on bad input (a one-line message on stderr, no output file
written), 1 when the solver fails. Outputs are written to a temporary file in the same
directory and renamed into place, so a failed or interrupted command leaves none behind.

SPEC (JSON object; relative paths are resolved against the spec's directory)
----------------------------------------------------------------------------
``workload``: a built-in builder of :mod:`ffu_cvx.workloads` (``prefix``, ``random_ranges``,
``random_pm1``, ``pl94``, ``age_pyramid``, ``marginals_a``, ``marginals_b``) with
``params``: its keyword arguments, e.g. ``{"workload": "prefix", "params": {"d": 16}}``;
or ``W``: the (m, d) matrix inline (list of rows) or a path to ``.npy``, ``.npz`` (array
``W`` or the only array) or ``.csv`` (comma separated, no header). ``c``: the (m,) variance
targets (a number, a list or a path; required with ``W``, replaces the builder's targets
with ``workload``). Optional: ``basis`` (``"auto"``, ``"identity"``, ``"upper"``, ``"rows"``,
or a (k, d) matrix / path), ``labels`` (m strings), ``name``, ``options`` (keyword options
of the solver), ``target`` (``{"epsilon": e, "delta": d}``: solve Problem 2 instead, i.e.
rescale Sigma to meet (e, d) exactly and report the uniform scaling ``k`` of ``c``).

RESULT (JSON, ``schema_version`` 1; non-finite numbers are written as null)
-------------------------------------------------------------------------------
- ``schema_version`` (1), ``tool`` {name, version}, ``created_utc``, ``spec_path``, ``spec``.
- ``problem``: ``name``, ``m``, ``d``, ``k``, ``basis`` (name of the basis used), ``labels``
  (m,), ``W`` (m, d), ``c`` (m,), ``B`` (k, d). ``L`` is not stored: it is the unique
  solution of ``L B = W`` (``FitnessProblem(W, c, basis=B)`` rebuilds it).
- ``method``, ``status``, ``success``, ``message``, ``nit``.
- ``sigma`` (k, k): the noise covariance on ``B x``.
- ``privacy_cost`` (alpha = Delta_M^2), ``delta_m``, ``rho`` (zCDP), ``delta`` and
  ``epsilon`` (the smallest epsilon at that delta, exact Gaussian mechanism).
- ``profile`` (d,), ``variances`` (m,), ``max_ratio`` (max variance / c).
- ``certificate``: ``lower_bound`` (certified lower bound on the optimal alpha of
  Problem 1) and ``gap`` (relative).
- ``target``: null, or ``epsilon``, ``delta``, ``k`` and ``k_lower_bound`` of Problem 2.
- ``timings``: ``load_s``, ``solve_s``, ``total_s`` (wall-clock seconds).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from . import workloads
from .version import __version__
from .files import atomic_write_bytes
from .mechanism import GaussianMechanism, check_histogram, problem2
from .problem import FitnessProblem
from .result import Solution, SolverError
from .solvers import METHODS, solve

__all__ = ["main", "SCHEMA_VERSION", "WORKLOADS", "load_spec", "load_result"]

SCHEMA_VERSION = 1
#: Built-in workload builders a SPEC may name.
WORKLOADS = ("prefix", "random_ranges", "random_pm1", "pl94", "age_pyramid", "marginals_a", "marginals_b")
_SPEC_KEYS = {"workload", "params", "W", "c", "basis", "labels", "name", "options", "target"}
#: Relative agreement required between a RESULT's recorded privacy cost and its sigma.
_RESULT_RTOL = 1e-8


class InputError(ValueError):
    """Bad input from the command line: reported in one line with exit status 2."""


# ---------------------------------------------------------------------------- files
def _check_output(path: str, flag: str) -> Path:
    """Fail early (before any work) if ``path`` cannot be written."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{flag} {p} is a directory; give a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"cannot write {flag} {p}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise InputError(f"cannot write {flag} {p}: directory {parent} is not writable")
    return p


def _read_text(path: Path, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"cannot read {what} {path}: not a UTF-8 text file") from None


def _read_json(path: Path, what: str) -> dict:
    text = _read_text(path, what)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON in {what} {path}: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if not isinstance(obj, dict):
        raise InputError(f"{what} {path} must hold a JSON object, got {type(obj).__name__}")
    return obj


def _load_array(value, field: str, base: Path):
    """An inline value, or the array stored at a path (.npy, .npz, .csv) relative to ``base``."""
    if not isinstance(value, str):
        return value
    path = base / value
    if not path.is_file():
        raise InputError(f"`{field}`: file {path} not found")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            return np.load(path, allow_pickle=False)
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                if field in z.files:
                    return z[field]
                if len(z.files) == 1:
                    return z[z.files[0]]
                raise InputError(f"`{field}`: {path} holds arrays {z.files}; name one `{field}`")
        if suffix == ".csv":
            return np.loadtxt(path, delimiter=",", ndmin=2 if field in ("W", "basis") else 1)
    except (OSError, ValueError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"`{field}`: cannot read {path}: {exc}") from None
    raise InputError(f"`{field}`: {path} must be .npy, .npz or .csv (or give the values inline)")


def _json_value(obj):
    """Numpy -> plain JSON values, non-finite floats -> None."""
    if isinstance(obj, dict):
        return {str(k): _json_value(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_value(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _json_value(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def _nan(value) -> float:
    return math.nan if value is None else float(value)


# ---------------------------------------------------------------------------- progress
class _Progress:
    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.t0 = time.perf_counter()

    def say(self, msg: str) -> None:
        if not self.quiet:
            print(f"ffu-cvx [{time.perf_counter() - self.t0:7.1f}s] {msg}", file=sys.stderr, flush=True)

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


# ---------------------------------------------------------------------------- spec and result
def load_spec(path) -> tuple[FitnessProblem, dict]:
    """Read a SPEC file (see the module docstring) and build its ``FitnessProblem``.

    Returns ``(problem, spec)``; raises ``InputError`` (a ``ValueError``) on bad input.
    """
    path = Path(path)
    spec = _read_json(path, "spec")
    unknown = sorted(set(spec) - _SPEC_KEYS)
    if unknown:
        raise InputError(f"spec {path}: unknown key(s) {unknown}; allowed keys are {sorted(_SPEC_KEYS)}")
    base = path.parent
    if ("workload" in spec) == ("W" in spec):
        raise InputError(f"spec {path} must give exactly one of `workload` (a built-in name) or `W` (a matrix)")
    labels, name = spec.get("labels"), spec.get("name")
    if "workload" in spec:
        wname = spec["workload"]
        if wname not in WORKLOADS or not hasattr(workloads, wname):
            avail = [w for w in WORKLOADS if hasattr(workloads, w)]
            raise InputError(f"spec {path}: unknown workload {wname!r}; available: {avail}")
        params = spec.get("params", {})
        if not isinstance(params, dict):
            raise InputError(f"spec {path}: `params` must be an object of keyword arguments, got {params!r}")
        try:
            wl = getattr(workloads, wname)(**params)
        except TypeError as exc:
            raise InputError(f"spec {path}: bad `params` for workload {wname!r}: {exc}") from None
        W = wl.W
        c = _load_array(spec["c"], "c", base) if "c" in spec else wl.c
        labels = wl.labels if labels is None else labels
        name = wl.name if name is None else name
    else:
        if "c" not in spec:
            raise InputError(f"spec {path}: `c` (variance targets) is required with `W`")
        if "params" in spec:
            raise InputError(f"spec {path}: `params` only goes with `workload`")
        W = _load_array(spec["W"], "W", base)
        c = _load_array(spec["c"], "c", base)
    if isinstance(c, np.ndarray) and c.ndim == 2 and 1 in c.shape:
        c = c.ravel()
    basis = spec.get("basis", "auto")
    if not isinstance(basis, str) or Path(basis).suffix.lower() in (".npy", ".npz", ".csv"):
        basis = np.asarray(_load_array(basis, "basis", base), dtype=float)
    problem = FitnessProblem(W, c, basis=basis, labels=labels, name=name or path.stem)
    return problem, spec


def _check_target(spec: dict) -> tuple[float, float] | None:
    target = spec.get("target")
    if target is None:
        return None
    if not isinstance(target, dict) or set(target) != {"epsilon", "delta"}:
        raise InputError(f"`target` must be {{\"epsilon\": e, \"delta\": d}}, got {target!r}")
    eps, dlt = target["epsilon"], target["delta"]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (eps, dlt)):
        raise InputError(f"`target` epsilon and delta must be numbers, got {target!r}")
    if not (eps > 0 and 0 < dlt < 1):
        raise InputError(f"`target` needs epsilon > 0 and 0 < delta < 1, got {target!r}")
    return float(eps), float(dlt)


def _result_dict(sol: Solution, spec: dict, spec_path: Path, delta: float, target, timings: dict) -> dict:
    problem: FitnessProblem = sol["problem"]
    return _json_value({
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "ffu-cvx", "version": __version__},
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "spec_path": str(spec_path),
        "spec": spec,
        "problem": {"name": problem.name, "m": problem.m, "d": problem.d, "k": problem.k,
                    "basis": problem.basis, "labels": list(problem.labels), "W": problem.W,
                    "c": problem.c, "B": problem.B},
        "method": sol["method"], "status": sol["status"], "success": sol["success"],
        "message": sol["message"], "nit": sol.get("nit"),
        "sigma": sol["sigma"],
        "privacy_cost": sol["privacy_cost"], "delta_m": sol.delta_m, "rho": sol.rho,
        "delta": delta, "epsilon": sol.epsilon(delta),
        "profile": sol["profile"], "variances": sol["variances"], "max_ratio": sol["max_ratio"],
        "certificate": {"lower_bound": sol["lower_bound"], "gap": sol["gap"]},
        "target": target,
        "timings": timings,
    })


def _dump_result(res: dict) -> str:
    """Strict JSON with one top-level key per line and compact arrays (large matrices stay small)."""
    items = (f"{json.dumps(k)}: {json.dumps(v, allow_nan=False, separators=(',', ':'))}" for k, v in res.items())
    return "{\n" + ",\n".join(items) + "\n}\n"


def load_result(path) -> tuple[Solution, dict]:
    """Read a RESULT file and rebuild its Solution (without re-certifying).

    Checks the schema version and that ``sigma`` reproduces the recorded privacy cost,
    so an edited or corrupt file is refused rather than released.
    """
    path = Path(path)
    res = _read_json(path, "result")
    if res.get("schema_version") != SCHEMA_VERSION:
        raise InputError(f"result {path}: schema_version {res.get('schema_version')!r} is not "
                         f"{SCHEMA_VERSION}; re-run `ffu-cvx solve` with this version")
    try:
        pr = res["problem"]
        problem = FitnessProblem(pr["W"], pr["c"], basis=np.asarray(pr["B"], dtype=float),
                                 labels=pr["labels"] or None, name=pr["name"])
        sigma = np.asarray(res["sigma"], dtype=float)
        recorded = float(res["privacy_cost"])
        method, status = res["method"], res["status"]
    except (KeyError, TypeError) as exc:
        raise InputError(f"result {path} is missing or has a malformed field ({exc!s})") from None
    try:
        sol = Solution.from_sigma(problem, sigma, method=method, status=status, certify=False)
    except SolverError as exc:
        raise InputError(f"result {path}: {exc}") from None
    if not abs(sol["privacy_cost"] - recorded) <= _RESULT_RTOL * recorded:
        raise InputError(f"result {path}: sigma gives privacy cost {sol['privacy_cost']:.12g} but the file "
                         f"records {recorded:.12g}; the file was edited or is corrupt")
    return sol, res


def _read_histogram(path: Path, d: int) -> np.ndarray:
    """Counts from a CSV: one cell per row (last column; an optional header), or one row of d values."""
    text = _read_text(path, "data")
    rows = [r for r in csv.reader(io.StringIO(text)) if any(f.strip() for f in r)]
    if not rows:
        raise InputError(f"data {path} is empty; it needs {d} counts")

    def num(s: str, where: str) -> float:
        try:
            return float(s.strip())
        except ValueError:
            raise InputError(f"data {path}, {where}: {s.strip()!r} is not a number") from None

    try:
        float(rows[0][-1])
    except ValueError:
        rows = rows[1:]  # a header
    if len(rows) == 1 and len(rows[0]) == d and d > 1:
        values = [num(s, f"column {j + 1}") for j, s in enumerate(rows[0])]
    else:
        values = [num(r[-1], f"row {i + 1}") for i, r in enumerate(rows)]
    return check_histogram(np.array(values), d, name=f"data {path}")


# ---------------------------------------------------------------------------- commands
def _cmd_solve(args) -> int:
    t0 = time.perf_counter()
    progress = _Progress(args.quiet)
    out = _check_output(args.out, "--out")
    if not 0 < args.delta < 1:
        raise InputError(f"--delta must be in (0, 1), got {args.delta!r}")
    spec_path = Path(args.spec)
    problem, spec = load_spec(spec_path)
    target = _check_target(spec)
    options = spec.get("options", {})
    if not isinstance(options, dict):
        raise InputError(f"`options` must be an object of solver options, got {options!r}")
    t_load = time.perf_counter() - t0
    progress.say(f"problem {problem.name!r}: m={problem.m} queries, d={problem.d} cells, "
                 f"k={problem.k} (basis {problem.basis})")
    progress.say(f"solving with method={args.method} ...")
    t1 = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sol = solve(problem, method=args.method, callback=progress.callback(), **options)
    except TypeError as exc:
        raise InputError(f"bad solver `options` {sorted(options)} for method {args.method!r}: {exc}") from None
    t_solve = time.perf_counter() - t1
    for msg in dict.fromkeys(" ".join(str(w.message).split()) for w in caught):
        progress.say(f"solver warning: {msg}")
    progress.say(f"solved: status {sol['status']}, alpha = {sol['privacy_cost']:.10g}, "
                 f"max variance/target = {sol['max_ratio']:.6g}, certified gap = {sol['gap']:.2e}")
    target_info = None
    if target is not None:
        p2 = problem2(sol, *target)
        sol = p2.solution
        target_info = {"epsilon": p2.epsilon, "delta": p2.delta, "k": p2.k, "k_lower_bound": p2.k_lower_bound}
        progress.say(f"Problem 2: ({p2.epsilon:g}, {p2.delta:g})-DP at alpha = {p2.privacy_cost:.10g}; "
                     f"every variance <= k c with k = {p2.k:.6g}")
    timings = {"load_s": t_load, "solve_s": t_solve, "total_s": time.perf_counter() - t0}
    res = _result_dict(sol, spec, spec_path, args.delta, target_info, timings)
    atomic_write_bytes(out, _dump_result(res).encode())
    progress.say(f"epsilon = {res['epsilon']:.6g} at delta = {args.delta:g}; rho-zCDP = {res['rho']:.6g}")
    progress.say(f"wrote {out}")
    return 0


def _cmd_release(args) -> int:
    progress = _Progress(args.quiet)
    out = _check_output(args.out, "--out")
    sol, res = load_result(args.result)
    x = _read_histogram(Path(args.data), sol["problem"].d)
    if not sol["success"]:
        progress.say(f"warning: the solution's status is {sol['status']!r}; variance targets may not be met")
    mech = GaussianMechanism(sol)
    rel = mech.release(x, rng=args.seed, level=args.level)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["query", "label", "answer", "variance", "std", "lower", "upper"])
    labels = rel.labels or ("",) * len(rel.answers)
    for j in range(len(rel.answers)):
        w.writerow([j, labels[j], repr(float(rel.answers[j])), repr(float(rel.variances[j])),
                    repr(float(rel.std[j])), repr(float(rel.lower[j])), repr(float(rel.upper[j]))])
    atomic_write_bytes(out, buf.getvalue().encode())
    progress.say(mech.statement(res.get("delta") or 1e-6))
    progress.say(f"wrote {len(rel.answers)} answers with {100 * rel.level:g}% intervals to {out}")
    return 0


def _plot(sol: Solution, path: Path, k: float = 1.0) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    problem = sol["problem"]
    fig = Figure(figsize=(11, 4), layout="constrained")
    FigureCanvasAgg(fig)
    ax1, ax2 = fig.subplots(1, 2)
    q = np.arange(problem.m)
    ax1.bar(q, k * problem.c, width=1.0, color="0.85", label="target $c_j$" if k == 1 else f"$k c_j$, k = {k:.4g}")
    ax1.plot(q, sol["variances"], "o", ms=3, color="C0", label="achieved variance")
    ax1.set(xlabel="query $j$", ylabel="variance", title=f"{problem.name}: accuracy ({sol['method']})")
    if problem.c.max() > 20 * problem.c.min():
        ax1.set_yscale("log")
    else:
        ax1.set_ylim(0, 1.15 * max(k * problem.c.max(), sol["variances"].max()))
    ax1.legend(loc="lower right")
    cells = np.arange(problem.d)
    ax2.bar(cells, sol["profile"], width=1.0, color="C1", label="profile $b_i^T\\Sigma^{-1}b_i$")
    ax2.axhline(sol["privacy_cost"], color="k", lw=1, ls="--", label=f"privacy cost $\\alpha$ = {sol['privacy_cost']:.4g}")
    ax2.set(xlabel="cell $i$", ylabel="privacy profile", title="privacy profile",
            ylim=(0, 1.15 * sol["privacy_cost"]))
    ax2.legend(loc="lower right")
    buf = io.BytesIO()
    fig.savefig(buf, format=path.suffix.lstrip(".").lower() or "png", dpi=120)
    atomic_write_bytes(path, buf.getvalue())


def _cmd_report(args) -> int:
    plot = _check_output(args.plot, "--plot") if args.plot else None
    if plot is not None and plot.suffix.lower() not in (".png", ".pdf", ".svg"):
        raise InputError(f"--plot {plot} must end in .png, .pdf or .svg")
    sol, res = load_result(args.result)
    delta = args.delta if args.delta is not None else (res.get("delta") or 1e-6)
    if not 0 < delta < 1:
        raise InputError(f"--delta must be in (0, 1), got {delta!r}")
    problem = sol["problem"]
    mech = GaussianMechanism(sol)
    # Under a Problem 2 target the promise is variance <= k c, not <= c.
    k = _nan(res["target"]["k"]) if res.get("target") else 1.0
    ratio = sol["variances"] / (k * problem.c)
    cert = res.get("certificate") or {}
    lines = [
        f"workload      {problem.name}: m={problem.m}, d={problem.d}, k={problem.k}, basis {res['problem']['basis']}",
        f"method        {sol['method']} (status {sol['status']})",
        f"privacy cost  alpha = {mech.privacy_cost:.10g}, Delta_M = {mech.delta_m:.10g}",
        f"privacy       ({mech.epsilon(delta):.6g}, {delta:g})-DP, {mech.rho:.6g}-zCDP",
        f"accuracy      max variance/{'(k target)' if res.get('target') else 'target'} = {ratio.max():.6g}; "
        f"{int(np.sum(ratio <= 1 + 1e-6))}/{problem.m} queries within it",
        f"certificate   lower bound {_nan(cert.get('lower_bound')):.10g}, gap {_nan(cert.get('gap')):.2e}",
    ]
    if res.get("target"):
        t = res["target"]
        lines.append(f"Problem 2     target ({t['epsilon']:g}, {t['delta']:g}): k = {_nan(t['k']):.6g} "
                     f"(certified k >= {_nan(t['k_lower_bound']):.6g})")
    print("\n".join(lines))
    if plot is not None:
        _plot(sol, plot, k)
        print(f"plot          {plot}")
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ffu-cvx", description="Fitness-for-use differential privacy for linear queries.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("solve", help="optimise the noise covariance for a workload spec")
    s.add_argument("spec", help="workload spec (JSON)")
    s.add_argument("--method", default="sdp", choices=sorted(METHODS), help="solver (default sdp)")
    s.add_argument("--out", required=True, help="result file to write (JSON)")
    s.add_argument("--delta", type=float, default=1e-6, help="delta at which to report epsilon (default 1e-6)")
    s.add_argument("--quiet", action="store_true", help="no progress on stderr")
    s.set_defaults(func=_cmd_solve)
    r = sub.add_parser("release", help="release noisy answers for a histogram")
    r.add_argument("result", help="result file from `ffu-cvx solve`")
    r.add_argument("--data", required=True, help="histogram CSV: one count per row (last column)")
    r.add_argument("--out", required=True, help="answers file to write (CSV)")
    r.add_argument("--seed", type=int, default=None, help="seed for reproducible noise (testing only)")
    r.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals")
    r.add_argument("--quiet", action="store_true", help="no messages on stderr")
    r.set_defaults(func=_cmd_release)
    t = sub.add_parser("report", help="summarise a result; optionally plot it")
    t.add_argument("result", help="result file from `ffu-cvx solve`")
    t.add_argument("--plot", default=None, help="figure to write (.png, .pdf or .svg)")
    t.add_argument("--delta", type=float, default=None, help="delta for epsilon (default: the result's)")
    t.set_defaults(func=_cmd_report)
    return p


def main(argv=None) -> int:
    """Run ``ffu-cvx`` with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed its usage message
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return args.func(args)
    except SolverError as exc:
        print(f"ffu-cvx: solver failed (status {exc.status}, iterations {exc.nit}, residual {exc.residual}): "
              f"{' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as exc:
        print(f"ffu-cvx: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
