"""ffu-cvx: fitness-for-use differential privacy for linear queries.

Correlated Gaussian noise that meets a variance target per query at the smallest
privacy cost (Xiao, Kifer et al., "Optimizing Fitness-For-Use of Differentially
Private Linear Queries"), with an exact reference solver, a scalable solver, a dual
optimality certificate, the classic baselines and the release itself.

The package is its architecture: one subpackage per layer, each importing only the layers
below it (``tests/test_layers.py`` checks every import), from the bottom:

- :mod:`ffu_cvx.model`: Problem 1, bases, privacy accounting, accuracy targets, the
  certificate and the :class:`Solution` (numpy and scipy only);
- :mod:`ffu_cvx.io`, its bottom: atomic writes, locks and the JSON encoding;
- :mod:`ffu_cvx.workloads`: the paper's workloads, domains, product workloads, records and counts;
- :mod:`ffu_cvx.release`, its bottom: the :class:`~ffu_cvx.release.release.Release`, its noise
  and the ledger (the solvers build Releases);
- :mod:`ffu_cvx.solvers`: :func:`solve` and every method (SDP, SM-II, Kronecker, Fourier,
  baselines, batches);
- :mod:`ffu_cvx.release`, its top: the mechanisms, Problem 2 and budgets (they solve);
- :mod:`ffu_cvx.estimate`: consistent tables from a release;
- :mod:`ffu_cvx.pml`: pointwise maximal leakage of Laplace releases;
- :mod:`ffu_cvx.io`, its top: the command line's file formats;
- :mod:`ffu_cvx.cli`: the ``ffu-cvx`` command line.

Package layer, the top: imports ``openblas`` first, then the public names of every layer.
Every subpackage is a plain import except :mod:`ffu_cvx.estimate.consistent`, which loads on
first use as ``ffu.consistent`` (it brings scipy.stats, most of an import's time). CVXPY itself
loads only when a conic model is solved, inside :mod:`ffu_cvx.solvers.sdp.cvx`.
"""

# First: OpenBLAS reads its idle-spin setting when numpy and scipy load it (see ffu_cvx.openblas).
from . import openblas  # noqa: F401  (isort: skip)
from . import estimate, model, pml, release, solvers, workloads
from .model.problem import FitnessProblem
from .model.result import Solution, SolverError, max_variance_ratio
from .release import budget, ledger
from .release.mechanism import GaussianMechanism
from .release.product_release import release_product
from .solvers import METHODS, fourier, solve
from .solvers.batch import solve_many
from .solvers.kron import KronOptions
from .solvers.sdp import SDPOptions
from .version import __version__
from .workloads.counts import Counts
from .workloads.domain import Domain

__all__ = [
    "solve", "METHODS", "solve_many", "FitnessProblem", "Solution", "SolverError", "max_variance_ratio",
    "SDPOptions", "KronOptions", "Domain", "Counts", "workloads", "GaussianMechanism", "release_product",
    "budget", "ledger", "consistent", "fourier", "pml", "model", "solvers", "release", "estimate", "__version__",
]


def __getattr__(name: str):
    """``ffu.consistent`` (:mod:`ffu_cvx.estimate.consistent`: consistent tables from a release), imported on
    first use."""
    if name == "consistent":
        import importlib

        return importlib.import_module(".estimate.consistent", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
