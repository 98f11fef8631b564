"""The one entry point: ``solve(problem, method=..., callback=None, **options)``.

Each method lives in its own module and is imported lazily (only ``sdp`` needs CVXPY).
"""

from __future__ import annotations

import importlib

from .problem import FitnessProblem
from .result import Solution

__all__ = ["METHODS", "solve"]

#: method name -> (module, function). Every function takes (problem, *, callback, **options).
METHODS = {
    "sdp": ("ffu_cvx.sdp", "solve_sdp"),
    "smii": ("ffu_cvx.smii", "solve_smii"),
    "gd": ("ffu_cvx.smii", "solve_gd"),
}


def solve(problem: FitnessProblem, method: str = "sdp", callback=None, **options) -> Solution:
    """Solve Problem 1 for ``problem`` with ``method`` in :data:`METHODS`.

    ``options`` are passed to the method; an unknown option raises ``TypeError``.
    ``callback(state)`` is called once per iteration by iterative methods; raising
    ``StopIteration`` in it stops the solve with status ``"user_stopped"``.
    """
    if not isinstance(problem, FitnessProblem):
        raise ValueError(f"`problem` must be a FitnessProblem, got {type(problem).__name__}; "
                         "build one with FitnessProblem(W, c) or FitnessProblem.from_workload(wl)")
    name = str(method).lower()
    if name not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid methods are {sorted(METHODS)}")
    module, func = METHODS[name]
    fn = getattr(importlib.import_module(module), func)
    return fn(problem, callback=callback, **options)
