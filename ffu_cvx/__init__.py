"""ffu-cvx: fitness-for-use differential privacy for linear queries.

Correlated Gaussian noise that meets a variance target per query at the smallest
privacy cost (Xiao, Kifer et al., "Optimizing Fitness-For-Use of Differentially
Private Linear Queries"), with an exact reference solver, a scalable solver, a dual
optimality certificate, the classic baselines and the release itself.
"""

from . import basis, certificate, privacy, workloads
from .problem import FitnessProblem
from .result import Solution, SolverError, max_variance_ratio
from .solvers import METHODS, solve

__version__ = "0.1.0"

# Modules with heavier imports (or CVXPY) load on first use.
_LAZY = {
    "sdp": "ffu_cvx.sdp", "refine": "ffu_cvx.refine", "smii": "ffu_cvx.smii",
    "baselines": "ffu_cvx.baselines", "fourier": "ffu_cvx.fourier", "pml": "ffu_cvx.pml",
    "mechanism": "ffu_cvx.mechanism",
}


def __getattr__(name):
    import importlib

    if name in _LAZY:
        return importlib.import_module(_LAZY[name])
    if name == "GaussianMechanism":
        return importlib.import_module("ffu_cvx.mechanism").GaussianMechanism
    raise AttributeError(f"module 'ffu_cvx' has no attribute {name!r}")

__all__ = [
    "FitnessProblem", "Solution", "SolverError", "solve", "METHODS", "max_variance_ratio",
    "basis", "certificate", "privacy", "workloads", "GaussianMechanism",
    *_LAZY,
]
