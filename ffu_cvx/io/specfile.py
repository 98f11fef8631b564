"""The command line's SPEC format: a workload to solve, as a JSON object.

IO layer, its top: imports numpy, ``model`` (``accuracy``, ``problem``), ``workloads`` (the builders,
``domain``, ``products``) and ``io.clifiles``. Every error is an :class:`~ffu_cvx.io.clifiles.InputError` naming the file and the field.

SPEC (JSON object; relative paths are resolved against the spec's directory)
----------------------------------------------------------------------------
``workload``: a built-in builder of :mod:`ffu_cvx.workloads` (``prefix``, ``random_ranges``,
``random_pm1``, ``tree``, ``pl94``, ``age_pyramid``, ``marginals_a``, ``marginals_b``) with
``params``: its keyword arguments, e.g. ``{"workload": "prefix", "params": {"d": 16}}``;
or ``W``: the (m, d) matrix inline (list of rows) or a path to ``.npy``, ``.npz`` (array
``W`` or the only array) or ``.csv`` (comma separated, no header). ``c``: the (m,) variance
targets (a number, a list or a path; required with ``W``, replaces the builder's targets
with ``workload``), or accuracy in the publisher's words (:mod:`ffu_cvx.model.accuracy`):
``{"margin": 50, "level": 0.95}`` for every query, ``{"margin": 50, "level": 0.95, "joint":
true}`` for all of them at once, or a list mixing variances and per-query margins. Optional: ``basis`` (``"auto"``, ``"identity"``, ``"upper"``, ``"rows"``,
or a (k, d) matrix / path), ``labels`` (m strings), ``name``, ``method`` (the solver, when ``--method`` does not
say), ``options`` (keyword options of the solver), ``target`` (``{"epsilon": e, "delta": d}``:
solve Problem 2 instead, i.e. rescale Sigma to meet (e, d) exactly and report the uniform
scaling ``k`` of ``c``).

A *product* SPEC names a domain and groups of queries instead of ``W`` (see
:mod:`ffu_cvx.workloads.products`): ``domain`` ``{"age": 116, "sex": ["F", "M"], ...}`` (a size
or the value labels per attribute), optional ``ordered`` (the ordered attributes; default those
given by a size), optional ``levels`` (a geography's units: ``{"county": {"state": [unit of each
value] or {value: unit}}}``, see :class:`ffu_cvx.workloads.domain.Domain`), ``groups``: a list of
``{"blocks": {attribute: block}, "variance": v}`` (or ``"margin": M, "level": L`` and optionally
``"joint": true`` instead of ``variance``; optional ``name``; attributes not named get the total;
a block is ``"identity"``, ``"total"``, ``"prefix"``, ``"ranges"``, ``{"bands": w}``,
``{"ranges": [[lo, hi], ...]}``, ``{"level": name}`` or a matrix), and ``name``, ``method``,
``options``, ``target`` as above. Its RESULT is the dense one below when a dense method solved it
(its ``spec`` rebuilds the domain to count records); a structured solution (``method="kron"``) is
recorded as :data:`STRUCTURED`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import workloads
from ..model import accuracy
from ..model.problem import FitnessProblem
from ..workloads.domain import Domain
from ..workloads.products import ProductProblem, ProductWorkload, product
from .clifiles import InputError, load_array, read_json

__all__ = ["WORKLOADS", "SPEC_KEYS", "PRODUCT_SPEC_KEYS", "TARGET_KEYS", "GROUP_KEYS", "load_spec",
           "product_workload", "spec_inputs", "check_target", "check_options", "spec_goal", "is_number"]

#: Built-in workload builders a SPEC may name.
WORKLOADS = ("prefix", "random_ranges", "random_pm1", "tree", "pl94", "age_pyramid", "marginals_a", "marginals_b")
SPEC_KEYS = {"workload", "params", "W", "c", "basis", "labels", "name", "method", "options", "target"}
PRODUCT_SPEC_KEYS = {"domain", "ordered", "levels", "groups", "name", "method", "options", "target"}
#: A group's accuracy target: ``variance``, or ``margin`` and ``level`` (and ``joint``); see :mod:`ffu_cvx.model.accuracy`.
TARGET_KEYS = ("variance", "margin", "level", "joint")
GROUP_KEYS = {"blocks", "name", *TARGET_KEYS}
_ARRAY_SUFFIXES = (".npy", ".npz", ".csv")


def _builder_workload(spec: dict, path: Path):
    wname = spec["workload"]
    if not isinstance(wname, str) or wname not in WORKLOADS:
        raise InputError(f"spec {path}: unknown `workload` {wname!r}; available: {list(WORKLOADS)}")
    params = spec.get("params", {})
    if not isinstance(params, dict):
        raise InputError(f"spec {path}: `params` must be an object of keyword arguments, got {params!r}")
    try:
        return getattr(workloads, wname)(**params)
    except TypeError as exc:
        raise InputError(f"spec {path}: bad `params` for workload {wname!r}: {exc}") from None
    except ValueError as exc:
        raise InputError(f"spec {path}: `params` of workload {wname!r}: {exc}") from None


def product_workload(spec: dict, path: Path) -> ProductWorkload:
    """The product workload of a product SPEC (``domain``, ``groups``); ``InputError`` naming the field."""
    unknown = sorted(set(spec) - PRODUCT_SPEC_KEYS)
    if unknown:
        raise InputError(f"spec {path}: unknown key(s) {unknown} in a product spec; allowed keys are "
                         f"{sorted(PRODUCT_SPEC_KEYS)}")
    try:
        domain = Domain(spec["domain"], ordered=spec.get("ordered"), levels=spec.get("levels"))
    except ValueError as exc:
        raise InputError(f"spec {path}: `domain`: {exc}") from None
    groups = spec.get("groups")
    if not isinstance(groups, list) or not groups:
        raise InputError(f"spec {path}: `groups` must be a non-empty list of {{\"blocks\": ..., \"variance\": v}}")
    items = []
    for i, g in enumerate(groups):
        if not isinstance(g, dict) or not ("variance" in g or "margin" in g) or set(g) - GROUP_KEYS:
            raise InputError(f"spec {path}: `groups[{i}]` must be an object with `variance` (or `margin` and "
                             f"`level`, optionally `joint`) and optional `blocks` and `name` (keys "
                             f"{sorted(GROUP_KEYS)}), got {g!r:.80}")
        goal = g["variance"] if set(g).intersection(TARGET_KEYS) == {"variance"} else {k: g[k] for k in TARGET_KEYS if k in g}
        items.append((g.get("blocks", {}), goal, *([g["name"]] if "name" in g else [])))
    name = spec.get("name", path.stem)
    if not isinstance(name, str):
        raise InputError(f"spec {path}: `name` must be a string, got {name!r}")
    try:
        return product(domain, items, name=name)
    except ValueError as exc:
        raise InputError(f"spec {path}: `groups`: {exc}") from None


def load_spec(path) -> tuple[FitnessProblem | ProductProblem, dict]:
    """Read a SPEC file (see the module docstring) and build its ``FitnessProblem`` (a
    ``ProductProblem`` for a product spec).

    Returns ``(problem, spec)``; raises ``InputError`` (a ``ValueError``) on bad input.
    """
    path = Path(path)
    spec = read_json(path, "spec")
    if "domain" in spec or "groups" in spec:
        return product_workload(spec, path).to_problem(), spec
    unknown = sorted(set(spec) - SPEC_KEYS)
    if unknown:
        raise InputError(f"spec {path}: unknown key(s) {unknown}; allowed keys are {sorted(SPEC_KEYS)}")
    base = path.parent
    if ("workload" in spec) == ("W" in spec):
        raise InputError(f"spec {path} must give exactly one of `workload` (a built-in name) or `W` (a matrix)")
    labels, name = spec.get("labels"), spec.get("name")
    if name is not None and not isinstance(name, str):
        raise InputError(f"spec {path}: `name` must be a string, got {name!r}")
    if "workload" in spec:
        wl = _builder_workload(spec, path)
        W = wl.W
        c = load_array(spec["c"], "c", base) if "c" in spec else wl.c
        labels = wl.labels if labels is None else labels
        name = wl.name if name is None else name
    else:
        if "c" not in spec:
            raise InputError(f"spec {path}: `c` (variance targets) is required with `W`")
        if "params" in spec:
            raise InputError(f"spec {path}: `params` only goes with `workload`")
        W = load_array(spec["W"], "W", base)
        c = load_array(spec["c"], "c", base)
    if isinstance(c, np.ndarray) and c.ndim == 2 and 1 in c.shape:
        c = c.ravel()
    try:
        c, _ = accuracy.variances(c, np.shape(W)[0])
    except ValueError as exc:
        raise InputError(f"spec {path}: {exc}") from None
    basis = spec.get("basis", "auto")
    if not isinstance(basis, str) or Path(basis).suffix.lower() in _ARRAY_SUFFIXES:
        basis = load_array(basis, "basis", base)
        try:
            basis = np.asarray(basis, dtype=float)
        except (TypeError, ValueError):
            raise InputError(f"spec {path}: `basis` must be a name or a numeric (k, d) matrix") from None
    try:
        problem = FitnessProblem(W, c, basis=basis, labels=labels, name=name or path.stem)
    except InputError:
        raise
    except ValueError as exc:
        raise InputError(f"spec {path}: {exc}") from None
    return problem, spec


def spec_inputs(spec: dict, path) -> dict:
    """The files a spec reads: ``{"spec": path, "`W` file": ..., ...}`` (for the output checks)."""
    path = Path(path)
    found = {"spec": path}
    for field in ("W", "c", "basis"):
        value = spec.get(field)
        if isinstance(value, str) and Path(value).suffix.lower() in _ARRAY_SUFFIXES:
            found[f"`{field}` file"] = path.parent / value
    return found


def is_number(v) -> bool:
    """A JSON number (an int or a float, not a boolean)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_target(spec: dict) -> tuple[float, float] | None:
    """The spec's Problem 2 ``target`` as ``(epsilon, delta)``, or ``None``."""
    target = spec.get("target")
    if target is None:
        return None
    if not isinstance(target, dict) or set(target) != {"epsilon", "delta"}:
        raise InputError(f"`target` must be {{\"epsilon\": e, \"delta\": d}}, got {target!r}")
    eps, dlt = target["epsilon"], target["delta"]
    if not all(is_number(v) for v in (eps, dlt)):
        raise InputError(f"`target` epsilon and delta must be numbers, got {target!r}")
    if not (eps > 0 and 0 < dlt < 1):
        raise InputError(f"`target` needs epsilon > 0 and 0 < delta < 1, got {target!r}")
    return float(eps), float(dlt)


def check_options(spec: dict) -> dict:
    """The spec's solver ``options`` (an object), default none."""
    options = spec.get("options", {})
    if not isinstance(options, dict):
        raise InputError(f"`options` must be an object of solver options, got {options!r}")
    return options


def spec_goal(spec: dict, m: int) -> accuracy.Target | None:
    """The one accuracy target a dense spec's ``c`` states for all its ``m`` queries (a margin), or None."""
    c = spec.get("c") if isinstance(spec, dict) else None
    return accuracy.target(c, "c", queries=m) if isinstance(c, dict) else None
