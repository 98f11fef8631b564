"""ffu-cvx: fitness-for-use differential privacy for linear queries.

Correlated Gaussian noise that meets a variance target per query at the smallest
privacy cost (Xiao, Kifer et al., "Optimizing Fitness-For-Use of Differentially
Private Linear Queries"), with an exact reference solver, a scalable solver, a dual
optimality certificate, the classic baselines and the release itself.

Every submodule is a plain import (CVXPY itself loads only when a conic model is
solved, inside :mod:`ffu_cvx.cvx`).
"""

from . import (basis, baselines, batch, certificate, cvx, domain, fourier, mechanism, pml, privacy, products, refine, sdp,
               smii, status, validation, workloads)
from .domain import Domain
from .mechanism import GaussianMechanism
from .problem import FitnessProblem
from .result import Solution, SolverError, max_variance_ratio
from .solvers import METHODS, solve
from .batch import solve_many
from .version import __version__

__all__ = [
    "Domain", "FitnessProblem", "Solution", "SolverError", "solve", "solve_many", "METHODS", "max_variance_ratio", "GaussianMechanism",
    "basis", "baselines", "batch", "certificate", "cvx", "domain", "products", "fourier", "mechanism", "pml", "privacy", "refine", "sdp",
    "smii", "status", "validation", "workloads", "__version__",
]
