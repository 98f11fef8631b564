"""Fingerprints of problems: what a solution was solved for, so that it is released only for that.

Model layer: imports the standard library and numpy only (problems are read by their
attributes, so this module imports no problem type).

A fingerprint is ``"sha256:<hex>"`` over everything that decides what a mechanism's
noise protects and what its statement promises:

- a dense problem (``W`` (m, d), ``c`` (m,), ``B`` (k, d)): the three arrays, bit for bit;
- a product workload or problem (``domain``, ``groups``): the domain (names, sizes or
  value labels, ordered attributes) and, per group, every block matrix and the target.

Two problems with the same fingerprint ask the same queries of the same domain with the
same targets; anything else (another workload of the same size included) differs.
:func:`product_mismatch` says *where* two product workloads differ, for error messages.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

__all__ = ["of", "product_mismatch", "PREFIX"]

#: Every fingerprint starts with the name of its hash.
PREFIX = "sha256:"


def _array_digest(a) -> str:
    arr = np.ascontiguousarray(np.asarray(a, dtype=np.float64))
    h = hashlib.sha256(repr(arr.shape).encode())
    h.update(arr.tobytes())
    return h.hexdigest()


def _workload(obj):
    """The product workload inside ``obj`` (a ProductProblem holds one), or ``obj`` itself."""
    return getattr(obj, "workload", obj)


def _is_product(obj) -> bool:
    wl = _workload(obj)
    return hasattr(wl, "groups") and hasattr(wl, "domain")


def _group_parts(group) -> dict:
    return {"target": float(group.target).hex(),
            "blocks": [[b.attribute, b.kind, _array_digest(b.matrix)] for b in group.blocks]}


def _product_parts(wl) -> dict:
    return {"kind": "product", "domain": wl.domain.spec(), "ordered": list(wl.domain.ordered),
            "groups": [_group_parts(g) for g in wl.groups]}


def _dense_parts(problem) -> dict:
    return {"kind": "dense", "W": _array_digest(problem.W), "c": _array_digest(problem.c),
            "B": _array_digest(problem.B)}


def of(problem) -> str:
    """The fingerprint of a dense problem (``W``, ``c``, ``B``) or a product workload / problem."""
    if _is_product(problem):
        parts = _product_parts(_workload(problem))
    elif all(hasattr(problem, key) for key in ("W", "c", "B")):
        parts = _dense_parts(problem)
    else:
        raise ValueError(f"no fingerprint for a {type(problem).__name__}: expected a FitnessProblem, a "
                         "ProductWorkload or a ProductProblem")
    return PREFIX + hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def product_mismatch(solved, given) -> str | None:
    """Where the product workload ``given`` differs from ``solved`` (one phrase), or None if they agree."""
    a, b = _workload(solved), _workload(given)
    if a.domain.spec() != b.domain.spec() or a.domain.ordered != b.domain.ordered:
        return f"its domain is {b.domain!r}, the solution's {a.domain!r}"
    if len(a.groups) != len(b.groups):
        return f"it has {len(b.groups)} groups, the solution's workload {len(a.groups)}"
    for g, (ga, gb) in enumerate(zip(a.groups, b.groups)):
        pa, pb = _group_parts(ga), _group_parts(gb)
        for (attr, kind_a, da), (_, kind_b, db) in zip(pa["blocks"], pb["blocks"]):
            if (kind_a, da) != (kind_b, db):
                return (f"group {g} ({gb.name!r}) asks other queries on attribute {attr!r} ({kind_b} block; "
                        f"the solution's is a {kind_a} block)")
        if pa["target"] != pb["target"]:
            return f"group {g} ({gb.name!r}) has target {gb.target!r}, the solution was solved for {ga.target!r}"
    return None
