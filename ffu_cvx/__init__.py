"""ffu-cvx: fitness-for-use differential privacy for linear queries.

Correlated Gaussian noise that meets a variance target per query at the smallest
privacy cost (Xiao, Kifer et al., "Optimizing Fitness-For-Use of Differentially
Private Linear Queries"), with an exact reference solver, a scalable solver, a dual
optimality certificate, the classic baselines and the release itself.

Every submodule is a plain import except :mod:`ffu_cvx.consistent`, which loads on first
use (``ffu.consistent``; it brings scipy.stats, most of an import's time). CVXPY itself loads
only when a conic model is solved, inside :mod:`ffu_cvx.cvx`.
"""

# First: OpenBLAS reads its idle-spin setting when numpy and scipy load it (see ffu_cvx.openblas).
from . import openblas  # noqa: F401  (isort: skip)
from . import (accuracy, basis, baselines, batch, budget, certificate, counts, cvx, domain, fingerprint, fourier,
               ledger, mechanism, noise, pml, privacy, product_release, products, refine, release, sdp, smii, status,
               validation, workloads)
from .counts import Counts
from .domain import Domain
from .kron import KronOptions
from .mechanism import GaussianMechanism
from .problem import FitnessProblem
from .product_release import release_product
from .result import Solution, SolverError, max_variance_ratio
from .sdp import SDPOptions
from .batch import solve_many
from .solvers import METHODS, solve
from .version import __version__

__all__ = [
    "Counts", "Domain", "FitnessProblem", "Solution", "SolverError", "solve", "solve_many", "METHODS",
    "max_variance_ratio", "GaussianMechanism", "release_product", "SDPOptions", "KronOptions",
    "accuracy", "basis", "baselines", "batch", "budget", "certificate", "counts", "cvx", "domain", "fingerprint",
    "fourier", "ledger", "mechanism", "noise", "pml", "privacy", "product_release", "products", "refine", "release", "sdp", "smii", "status", "validation",
    "workloads", "__version__",
]


def __getattr__(name: str):
    """``ffu.consistent`` (consistent tables from a release), imported on first use."""
    if name == "consistent":
        import importlib

        return importlib.import_module(".consistent", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
