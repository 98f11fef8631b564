"""The command line's RESULT format (a solved mechanism); its SPEC format (a workload to solve) is in
:mod:`ffu_cvx.io.specfile`.

IO layer, its top: imports numpy, ``model`` (``accuracy``, ``fingerprint``, ``privacy``, ``problem``,
``result``, ``status``), ``release`` (``budget`` (the tables' accuracy), ``noise``, ``release``
(``TARGET_RTOL``)), ``version`` and the io modules ``jsonio``, ``specfile`` and ``clifiles``. Every error is an :class:`~ffu_cvx.io.clifiles.InputError` naming the file and the field.

The SPEC format is :mod:`ffu_cvx.io.specfile`'s.

RESULT (JSON, ``schema_version`` 3; non-finite numbers are written as null)
-------------------------------------------------------------------------------
- ``schema_version`` (3), ``tool`` {name, version}, ``created_utc``, ``spec_path``, ``spec``.
- ``fingerprint``: :func:`ffu_cvx.model.fingerprint.of` the problem solved (W, c, B; for a
  structured RESULT the spec's workload): a release is refused for anything else.
- ``problem``: ``name``, ``m``, ``d``, ``k``, ``basis`` (name of the basis used), ``labels``
  (m,), ``W`` (m, d), ``c`` (m,), ``B`` (k, d). ``c`` holds the targets of the problem the
  mechanism solves: the spec's, times ``target.k`` under a Problem 2 target. ``L`` is not
  stored: it is the unique solution of ``L B = W``.
- ``method``, ``status``, ``success``, ``message``, ``nit``.
- ``sigma`` (k, k): the noise covariance on ``B x``.
- ``privacy_cost`` (alpha = Delta_M^2), ``delta_m``, ``rho`` (zCDP), ``delta`` and
  ``epsilon`` (the smallest epsilon at that delta, exact Gaussian mechanism),
  ``neighbours`` (the neighbouring relation all of these hold for).
- ``profile`` (d,), ``variances`` (m,), ``max_ratio`` (max variance / c).
- ``certificate``: ``lower_bound`` (certified lower bound on the optimal alpha at the
  targets ``c``) and ``gap`` (relative).
- ``accuracy``: per table, the spec's target in its own words (``stated``), what the mechanism
  delivers in those words (``achieved``) and whether it is ``met`` (:func:`accuracy_record`).
- ``target``: null, or ``epsilon``, ``delta``, ``k``, ``k_lower_bound`` and ``met`` (``k <= 1``:
  whether the spec's targets are met at that privacy target) of Problem 2.
- ``timings``: ``load_s``, ``solve_s``, ``total_s`` (wall-clock seconds).

:func:`load_result` checks all of it at once (types, shapes, ``W = L B``, ``sigma``
positive definite and reproducing every recorded number) before anything is used. A
:data:`STRUCTURED` RESULT (spec, method, fingerprint and the recorded numbers, no
matrices) is solved again by :func:`load_structured`, and every recorded number is
checked against the new solution in the same way.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ..model import accuracy, fingerprint, privacy
from ..model.problem import FitnessProblem
from ..model.result import Solution
from ..model.status import STATUSES, SUCCESS, SolverError
from ..release import budget
from ..release.noise import SAMPLERS, release_max_delta_m
from ..release.release import TARGET_RTOL
from ..version import __version__
from . import jsonio
from .clifiles import InputError, read_json
from .specfile import check_options, check_target, is_number, product_workload, spec_goal

__all__ = ["SCHEMA_VERSION", "STRUCTURED", "structured_result_dict", "load_structured", "accuracy_record",
           "result_dict", "dump_result", "load_result", "at_spec_targets"]

SCHEMA_VERSION = 3
#: ``kind`` of a RESULT holding a structured solution: the spec, the method and its options and
#: the recorded numbers (privacy cost, epsilon, variances); ``release`` re-solves (deterministic)
#: and checks that the numbers agree before any noise is drawn.
STRUCTURED = "structured"
#: Relative agreement required between a number a RESULT records and the same number
#: recomputed from its ``sigma`` (they agree to rounding when the file is as written).
RESULT_RTOL = 1e-8
#: How far a recorded lower bound may sit above the normalised cost it bounds (solvers
#: certify to about 1e-9; more means the bound or the cost was edited).
CERTIFICATE_SLACK = 1e-6


# ---------------------------------------------------------------------------- RESULT: writing
def result_dict(sol: Solution, spec: dict, spec_path: Path, delta: float, target, timings: dict) -> dict:
    """The RESULT of ``sol`` (see the module docstring) as plain JSON values."""
    problem: FitnessProblem = sol.problem
    return jsonio.jsonable({
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "ffu-cvx", "version": __version__},
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "spec_path": str(spec_path),
        "spec": spec,
        "fingerprint": sol.fingerprint,
        "problem": {"name": problem.name, "m": problem.m, "d": problem.d, "k": problem.k,
                    "basis": problem.basis, "labels": list(problem.labels), "W": problem.W,
                    "c": problem.c, "B": problem.B},
        "method": sol.method, "status": sol.status, "success": sol.success,
        "message": sol.message, "nit": sol.nit,
        "sigma": sol.sigma,
        "privacy_cost": sol.privacy_cost, "delta_m": sol.delta_m, "rho": sol.rho,
        "delta": delta, "epsilon": sol.epsilon(delta), "neighbours": sol.neighbours,
        "profile": sol.profile, "variances": sol.variances, "max_ratio": sol.max_ratio,
        "certificate": {"lower_bound": sol.lower_bound, "gap": sol.gap},
        "target": target,
        "accuracy": accuracy_record(sol, spec),
        "timings": timings,
    })


def _get(sol, key: str):
    """A field of a Solution or of a structured solution object (None where it has none)."""
    return getattr(sol, key, None)


def structured_result_dict(sol, spec: dict, spec_path: Path, method: str, delta: float, target, timings: dict) -> dict:
    """The RESULT of a structured solution (:data:`STRUCTURED`): spec, method and the recorded numbers."""
    alpha = float(_get(sol, "privacy_cost"))
    delta_m = float(np.sqrt(alpha))
    variances = _get(sol, "variances")  # None above KronSolution.VARIANCES_MAX queries
    return jsonio.jsonable({
        "schema_version": SCHEMA_VERSION, "kind": STRUCTURED,
        "tool": {"name": "ffu-cvx", "version": __version__},
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "spec_path": str(spec_path), "spec": spec, "fingerprint": fingerprint.of(sol.problem), "method": method,
        "status": _get(sol, "status"),
        "privacy_cost": alpha, "delta_m": delta_m, "rho": privacy.zcdp_rho(delta_m), "delta": delta,
        "epsilon": privacy.gaussian_epsilon(delta, delta_m),
        "neighbours": getattr(sol, "neighbours", privacy.ADD_REMOVE),
        "variances": None if variances is None else np.asarray(variances, dtype=float),
        "max_ratio": _get(sol, "max_ratio"),
        "certificate": {"lower_bound": _get(sol, "lower_bound"), "gap": _get(sol, "gap")},
        "target": target, "accuracy": accuracy_record(sol, spec), "timings": timings,
    })


def accuracy_record(sol, spec: dict) -> list:
    """Per table, the spec's target in its own words and what ``sol`` delivers in them (what a RESULT records).

    A product problem's tables are its groups; a dense spec is one table, recorded when its
    ``c`` states a margin (under a Problem 2 target the dense RESULT's ``c`` is ``k`` times the
    spec's, and its variances are compared with the spec's own).
    """
    problem = sol.problem
    if not hasattr(problem, "groups") and isinstance(spec, dict) and "groups" in spec:
        problem = product_workload(spec, Path("spec.json")).to_problem()  # a dense solution of a product spec
    if hasattr(problem, "groups"):
        return [{"table": t.name, "stated": t.target.short(), "achieved": t.target.achieved(t.worst_variance),
                 "met": t.met} for t in budget.tables(sol, problem)]
    goal = spec_goal(spec, problem.m)
    if goal is None:
        return []
    worst = float(np.max(sol.variances))
    return [{"table": problem.name, "stated": goal.short(), "achieved": goal.achieved(worst),
             "met": bool(worst <= goal.variance * (1 + TARGET_RTOL))}]


def _check_accuracy(ck: "_Checker", res: dict, sol, spec: dict) -> None:
    recorded = ck.get(res, "accuracy", "accuracy")
    try:
        actual = jsonio.jsonable(accuracy_record(sol, spec))
    except (InputError, ValueError) as exc:
        ck.fail("spec", f"no longer describes the solved problem ({' '.join(str(exc).split())})")
    if actual != recorded:
        ck.fail("accuracy", "is not what the solution delivers against the spec's targets: the spec's queries or "
                            "targets are not those of the solved problem, or the field was edited")


def load_structured(path, res: dict, resolve) -> tuple:
    """The structured solution of a :data:`STRUCTURED` RESULT ``res`` read from ``path``, re-solved.

    ``resolve(problem, method, options, target) -> (solution, target_info)`` solves the
    recorded spec again (the structured solver is deterministic); every recorded number
    (schema version, fingerprint, status, privacy cost, Delta_M, rho, epsilon, neighbours,
    variances, max ratio, certificate, Problem 2's target) must agree with the new
    solution. Returns ``(solution, workload, res)``.
    """
    path = Path(path)
    ck = _Checker(path)
    _check_version(ck, res)
    spec = ck.object(res, "spec", "spec")
    method = ck.string(res, "method", "method")
    wl = product_workload(spec, Path(ck.string(res, "spec_path", "spec_path")))
    recorded = ck.string(res, "fingerprint", "fingerprint")
    if recorded != fingerprint.of(wl):
        ck.fail("fingerprint", "is not the fingerprint of the recorded spec's workload")
    sol, target_info = resolve(wl.to_problem(), method, check_options(spec), check_target(spec))
    status = ck.string(res, "status", "status")
    if status != _get(sol, "status"):
        ck.fail("status", f"is {status!r}, but solving the spec again gives {_get(sol, 'status')!r}")
    _check_privacy(ck, res, sol)
    new = _get(sol, "variances")
    if new is None:  # above KronSolution.VARIANCES_MAX queries: the worst ratio stands for them
        if res.get("variances") is not None:
            ck.fail("variances", f"must be null for {wl.m} queries (too many to record)")
    else:
        var = ck.array(res, "variances", "variances", (wl.m,))
        new = np.asarray(new, dtype=float)
        worst = int(np.argmax(np.abs(var - new)))
        ck.agrees(float(var[worst]), float(new[worst]), f"variances[{worst}]", scale=float(np.max(new)))
    ck.agrees(ck.number(res, "max_ratio", "max_ratio"), float(_get(sol, "max_ratio")), "max_ratio")
    cert = ck.object(res, "certificate", "certificate")
    for key in ("lower_bound", "gap"):
        ck.agrees(ck.number(cert, key, f"certificate.{key}", null=True), float(_get(sol, key)), f"certificate.{key}",
                  scale=max(abs(float(_get(sol, key))), 1e-12))
    _check_target_info(ck, res, target_info)
    _check_accuracy(ck, res, sol, spec)
    return sol, wl, res


def _check_target_info(ck: "_Checker", res: dict, target_info) -> None:
    """The recorded ``target`` equals what solving Problem 2 again gives."""
    target = ck.object(res, "target", "target", null=True)
    if (target is None) != (target_info is None):
        ck.fail("target", "does not match the spec's `target`")
    for key, value in (target_info or {}).items():
        if isinstance(value, str) or value is None:
            if ck.get(target, key, f"target.{key}") != value:
                ck.fail(f"target.{key}", f"must be {value!r}")
        elif isinstance(value, bool):
            if ck.get(target, key, f"target.{key}") is not value:
                ck.fail(f"target.{key}", f"must be {value!r}")
        else:
            recorded, value = ck.number(target, key, f"target.{key}", null=True), float(value)
            if not (math.isnan(recorded) and math.isnan(value)):  # no bound is recorded as null
                ck.agrees(recorded, value, f"target.{key}", scale=abs(value))


def dump_result(res: dict) -> str:
    """Strict JSON with one top-level key per line and compact arrays (large matrices stay small)."""
    items = (f"{json.dumps(k)}: {jsonio.dumps(v, separators=(',', ':'))}" for k, v in res.items())
    return "{\n" + ",\n".join(items) + "\n}\n"


# ---------------------------------------------------------------------------- RESULT: reading
def _check_version(ck: "_Checker", res: dict) -> None:
    version = res.get("schema_version")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise InputError(f"result {ck.path}: schema_version {version!r} is not {SCHEMA_VERSION}; "
                         "re-run `ffu-cvx solve` with this version")


class _Checker:
    """Typed access to a RESULT's fields; every failure names the file and the field."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, field: str, msg: str):
        raise InputError(f"result {self.path}: `{field}` {msg}; the file was edited or is corrupt "
                         "(re-run `ffu-cvx solve` to get a valid one)")

    def get(self, obj: dict, key: str, field: str):
        if not isinstance(obj, dict) or key not in obj:
            self.fail(field, "is missing")
        return obj[key]

    def object(self, obj: dict, key: str, field: str, null: bool = False) -> dict | None:
        v = self.get(obj, key, field)
        if v is None and null:
            return None
        if not isinstance(v, dict):
            self.fail(field, f"must be an object{' or null' if null else ''}, got {type(v).__name__}")
        return v

    def string(self, obj: dict, key: str, field: str) -> str:
        v = self.get(obj, key, field)
        if not isinstance(v, str):
            self.fail(field, f"must be a string, got {type(v).__name__}")
        return v

    def integer(self, obj: dict, key: str, field: str, null: bool = False) -> int | None:
        v = self.get(obj, key, field)
        if v is None and null:
            return None
        if not isinstance(v, int) or isinstance(v, bool):
            self.fail(field, f"must be an integer, got {v!r:.40}")
        return v

    def number(self, obj: dict, key: str, field: str, null: bool = False) -> float:
        v = self.get(obj, key, field)
        if v is None and null:
            return float("nan")
        if not is_number(v):
            self.fail(field, f"must be a number{' or null' if null else ''}, got {v!r:.40}")
        return float(v)

    def array(self, obj: dict, key: str, field: str, shape: tuple) -> np.ndarray:
        v = self.get(obj, key, field)
        try:
            arr = np.asarray(v)
        except ValueError:
            self.fail(field, f"must be a numeric array of shape {shape}, got a ragged list")
        if arr.dtype.kind not in "iuf" or arr.shape != shape:
            self.fail(field, f"must be a numeric array of shape {shape}, got "
                             f"{'shape ' + str(arr.shape) if arr.dtype.kind in 'iuf' else type(v).__name__ + ' of ' + str(arr.dtype)}")
        arr = arr.astype(float)
        if not np.all(np.isfinite(arr)):
            self.fail(field, "contains a non-finite number (null)")
        return arr

    def agrees(self, recorded: float, actual: float, field: str, scale: float | None = None) -> None:
        scale = abs(actual) if scale is None else scale
        if not abs(recorded - actual) <= RESULT_RTOL * scale:
            self.fail(field, f"records {recorded:.12g} but sigma and the problem give {actual:.12g}")


def _result_problem(ck: _Checker, res: dict) -> FitnessProblem:
    pr = ck.object(res, "problem", "problem")
    m, d, k = (ck.integer(pr, key, f"problem.{key}") for key in ("m", "d", "k"))
    if min(m, d, k) < 1 or k > min(m, d):
        ck.fail("problem", f"has impossible sizes m={m}, d={d}, k={k}")
    W = ck.array(pr, "W", "problem.W", (m, d))
    c = ck.array(pr, "c", "problem.c", (m,))
    if np.any(c <= 0):
        ck.fail("problem.c", "must hold positive variance targets")
    B = ck.array(pr, "B", "problem.B", (k, d))
    labels = ck.get(pr, "labels", "problem.labels")
    if not isinstance(labels, list) or not all(isinstance(s, str) for s in labels) or len(labels) not in (0, m):
        ck.fail("problem.labels", f"must be a list of {m} strings")
    name = ck.string(pr, "name", "problem.name")
    ck.string(pr, "basis", "problem.basis")
    try:
        return FitnessProblem(W, c, basis=B, labels=labels or None, name=name)
    except ValueError as exc:
        ck.fail("problem.B", f"does not decompose problem.W as W = L B ({' '.join(str(exc).split())})")


def _result_solution(ck: _Checker, res: dict, problem: FitnessProblem) -> Solution:
    sigma = ck.array(res, "sigma", "sigma", (problem.k, problem.k))
    status = ck.string(res, "status", "status")
    if status not in STATUSES:
        ck.fail("status", f"{status!r} is not one of {list(STATUSES)}")
    success = ck.get(res, "success", "success")
    if success is not (status in SUCCESS):
        ck.fail("success", f"is {success!r} but status {status!r} means {status in SUCCESS}")
    cert = ck.object(res, "certificate", "certificate")
    lb = ck.number(cert, "lower_bound", "certificate.lower_bound", null=True)
    try:
        sol = Solution.from_sigma(problem, sigma, method=ck.string(res, "method", "method"), status=status,
                                  message=ck.string(res, "message", "message"),
                                  nit=ck.integer(res, "nit", "nit", null=True),
                                  lower_bound=lb if np.isfinite(lb) else None, certify=False)
    except SolverError as exc:
        ck.fail("sigma", f"is not a noise covariance: {' '.join(str(exc).split())}")
    return sol


def _check_certificate(ck: _Checker, res: dict, sol: Solution) -> None:
    lb = ck.number(res["certificate"], "lower_bound", "certificate.lower_bound", null=True)
    if not np.isfinite(lb):
        return
    cost = sol.privacy_cost * sol.max_ratio
    if lb <= 0 or lb > cost * (1 + CERTIFICATE_SLACK):
        ck.fail("certificate.lower_bound", f"{lb:.12g} is not a lower bound below the normalised cost {cost:.12g}")
    ck.agrees(ck.number(res["certificate"], "gap", "certificate.gap", null=True), sol.gap, "certificate.gap",
              scale=1.0)


def _check_privacy(ck: _Checker, res: dict, sol) -> float:
    """The recorded privacy cost, Delta_M, rho, delta, epsilon and neighbours against ``sol``; returns delta."""
    ck.agrees(ck.number(res, "privacy_cost", "privacy_cost"), sol.privacy_cost, "privacy_cost")
    ck.agrees(ck.number(res, "delta_m", "delta_m"), sol.delta_m, "delta_m")
    ck.agrees(ck.number(res, "rho", "rho"), sol.rho, "rho")
    delta = ck.number(res, "delta", "delta")
    if not 0 < delta < 1:
        ck.fail("delta", f"must be in (0, 1), got {delta!r}")
    ck.agrees(ck.number(res, "epsilon", "epsilon"), sol.epsilon(delta), "epsilon", scale=max(sol.epsilon(delta), 1.0))
    neighbours = ck.string(res, "neighbours", "neighbours")
    if neighbours != sol.neighbours:
        ck.fail("neighbours", f"is {neighbours!r}, but this mechanism's statements hold for {sol.neighbours!r}")
    return delta


def _check_recorded(ck: _Checker, res: dict, sol: Solution) -> float:
    """Every recorded privacy and accuracy number against ``sol``; returns the recorded delta."""
    delta = _check_privacy(ck, res, sol)
    problem = sol.problem
    for key, n in (("profile", problem.d), ("variances", problem.m)):
        arr = ck.array(res, key, key, (n,))
        worst = int(np.argmax(np.abs(arr - sol[key])))
        ck.agrees(float(arr[worst]), float(sol[key][worst]), f"{key}[{worst}] (or problem.W)",
                  scale=float(np.max(sol[key])))
    ck.agrees(ck.number(res, "max_ratio", "max_ratio"), sol.max_ratio, "max_ratio (or problem.c)")
    return delta


def _check_target(ck: _Checker, res: dict, sol: Solution) -> None:
    target = ck.object(res, "target", "target", null=True)
    if target is None:
        return
    eps, delta = ck.number(target, "epsilon", "target.epsilon"), ck.number(target, "delta", "target.delta")
    if not (eps > 0 and 0 < delta < 1):
        ck.fail("target", f"needs epsilon > 0 and 0 < delta < 1, got ({eps!r}, {delta!r})")
    k = ck.number(target, "k", "target.k")
    if not k > 0:
        ck.fail("target.k", f"must be > 0, got {k!r}")
    ck.number(target, "k_lower_bound", "target.k_lower_bound", null=True)
    if ck.get(target, "met", "target.met") is not bool(k <= 1 + TARGET_RTOL):
        ck.fail("target.met", f"must be {bool(k <= 1 + TARGET_RTOL)} for k = {k!r}")
    sampler = ck.get(target, "sampler", "target.sampler") if "sampler" in target else None
    if sampler not in SAMPLERS + (None,):
        ck.fail("target.sampler", f"must be one of {SAMPLERS} or null, got {sampler!r}")
    ck.agrees(sol.privacy_cost, release_max_delta_m(eps, delta, sampler) ** 2, "privacy_cost (or target)")
    spec_c = _spec_targets(res["spec"], res["spec_path"], sol.problem.m)
    if spec_c is not None and spec_c.shape == sol.problem.c.shape:
        worst = int(np.argmax(np.abs(sol.problem.c - k * spec_c) / sol.problem.c))
        ck.agrees(float(sol.problem.c[worst]), float(k * spec_c[worst]), f"target.k (or problem.c[{worst}])")


def _spec_targets(spec: dict, spec_path: str, m: int):
    """The spec's own targets (m,) where the RESULT holds them (a product spec, or ``c`` inline: variances or
    margins), else None."""
    try:
        if "groups" in spec:
            return product_workload(spec, Path(spec_path)).c
        c = spec.get("c")
        if isinstance(c, (int, float, list, dict)) and not isinstance(c, bool):
            return np.broadcast_to(np.asarray(accuracy.variances(c, m)[0], dtype=float), (m,))
    except (InputError, TypeError, ValueError):
        pass
    return None


def load_result(path) -> tuple[Solution, dict]:
    """Read a RESULT file, check it whole, and rebuild its Solution (without re-certifying).

    Checked once, before anything is used: the schema version; every field's presence,
    type and shape; ``W = L B`` for the stored ``B``; ``sigma`` symmetric positive
    definite; and every recorded number (privacy cost, Delta_M, rho, epsilon at the
    recorded delta, profile, variances, max ratio, the certificate's gap, Problem 2's
    target) equal to what ``sigma`` gives. Any failure is an ``InputError`` naming the
    file and the field.
    """
    path = Path(path)
    res = read_json(path, "result")
    ck = _Checker(path)
    if res.get("kind") == STRUCTURED:
        raise InputError(f"result {path} holds a structured (factored) solution of a product spec: release it "
                         "with `ffu-cvx release RESULT --records RECORDS.csv`")
    _check_version(ck, res)
    for key in ("spec", "tool", "timings"):
        ck.object(res, key, key)
    ck.string(res, "spec_path", "spec_path")
    ck.string(res, "created_utc", "created_utc")
    problem = _result_problem(ck, res)
    sol = _result_solution(ck, res, problem)
    _check_recorded(ck, res, sol)
    _check_certificate(ck, res, sol)
    _check_target(ck, res, sol)
    if ck.string(res, "fingerprint", "fingerprint") != fingerprint.of(problem):
        ck.fail("fingerprint", "is not the fingerprint of the recorded problem (W, c, B)")
    _check_accuracy(ck, res, at_spec_targets(sol, res), res["spec"])
    return sol, res


def at_spec_targets(sol: Solution, res: dict) -> Solution:
    """The dense RESULT's Solution on the spec's own targets (the same sigma).

    Under a Problem 2 ``target`` the recorded ``problem.c`` is ``k`` times the spec's
    targets; a release states accuracy against the targets the publisher asked for, so
    its answers' variances are compared with ``c / k`` (worst ratio ``k``).
    """
    target = res.get("target")
    if not target:
        return sol
    problem = sol.problem
    return Solution.from_sigma(problem.with_targets(problem.c / float(target["k"])), sol.sigma,
                               method=sol.method, status=sol.status, message=sol.message, certify=False)
