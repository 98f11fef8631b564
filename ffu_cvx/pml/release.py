"""The Laplace release calibrated to a PML target: ``y = W x + Lap(b)^m``, as a :class:`ffu_cvx.release.release.Release`.

PML layer: imports numpy, :mod:`ffu_cvx.model.privacy` (the neighbouring relations),
:mod:`ffu_cvx.model.validation`, :mod:`ffu_cvx.release.release` (the Release every mechanism returns and
its :class:`~ffu_cvx.release.release.LaplaceAccount`) and the PML modules ``analysis``, ``bounds``,
``calibration`` and ``signs``.
"""

from __future__ import annotations

import math

import numpy as np

from ..model import validation
from ..model.privacy import SUBSTITUTE
from ..release.release import LaplaceAccount, Release, check_level
from .analysis import Analysis, analyse, check_alpha, check_choice, check_matrix, check_neighbours
from .bounds import BOUNDS, bound_value
from .calibration import DEFAULT_RTOL, calibrate
from .signs import DEFAULT_MAX_PATTERNS

__all__ = ["laplace_release"]


def laplace_release(x, epsilon, alpha, *, rng, W=None, bound: str = "safe", structure: str = "auto",
                    max_patterns: int = DEFAULT_MAX_PATTERNS, neighbours: str = SUBSTITUTE, level: float = 0.95,
                    name: str = "workload", labels=()) -> Release:
    """Release ``W x`` with Laplace noise at the smallest scale meeting ``epsilon``-PML.

    Parameters
    ----------
    x : array_like, (k,)
        Histogram of non-negative integer counts.
    epsilon : float
        Target leakage in nats, > 0.
    alpha : float
        Prior lower bound on every class probability, in (0, 1/k].
    rng : numpy.random.Generator or int
        Source of the noise (an int seeds a new Generator; use a fresh
        ``numpy.random.default_rng()`` for a real release).
    W : array_like, (m, k), optional
        Queries; the identity (the histogram itself) by default.
    bound : {"safe", "sign", "corollary"}
        The bound used for calibration; the default always holds.
    structure, max_patterns
        As in :func:`sign_bound`.
    neighbours : :data:`~ffu_cvx.model.privacy.SUBSTITUTE` (default) or :data:`~ffu_cvx.model.privacy.ADD_REMOVE`
        The relation of the release's DP epsilon (``Delta_1/b`` with ``Delta_1 = max_{j,j'}
        ||w_j - w_j'||_1`` under substitution, ``max_j ||w_j||_1`` under add/remove);
        calibration is to the PML target, whatever the relation (the leakage is about one
        present record's class, i.e. substitution).
    level : float in (0, 1)
        Confidence level of the intervals ``answers -/+ b ln(1/(1 - level))``.
    name, labels
        The workload's name and its (m,) query labels (may be empty), for the statement and the CSV.

    Returns
    -------
    Release
        ``answers`` (m,) ``W x + Z``; ``variances`` ``2 b^2``; the intervals; ``noise`` a
        :class:`~ffu_cvx.release.release.LaplaceAccount` (``scale`` b, 0.0 when no noise is needed,
        see :func:`min_noise_scale`; ``leakage``, the bound at b, ``log(1/alpha)`` when b = 0;
        the target, alpha and bound); ``epsilon()`` the pure DP epsilon ``Delta_1/b`` under
        ``neighbours`` (inf when b = 0); ``statement()``, ``to_csv``, ``to_frame`` and
        :func:`ffu_cvx.release.release.verify` as for every release.
    """
    try:
        counts = np.array(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"`x` must be a 1-D array of counts, got {type(x).__name__}") from None
    if counts.ndim != 1 or counts.size < 2:
        raise ValueError(f"`x` must be a 1-D histogram with k >= 2 cells, got shape {counts.shape}")
    if not np.all(np.isfinite(counts)) or np.any(counts < 0) or np.any(counts != np.round(counts)):
        raise ValueError("`x` must hold finite non-negative integer counts (a histogram)")
    neighbours = check_neighbours(neighbours)
    if W is None:  # the histogram itself, without materialising I_k
        an = Analysis(None, counts.size, "histogram", 1.0, 1.0)
        exact = counts
    else:
        an = analyse(W, structure)
        if an.k != counts.size:
            raise ValueError(f"`x` has {counts.size} cells but `W` has {an.k} columns")
        exact = check_matrix(W) @ counts
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        rng = np.random.default_rng(int(rng))
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"`rng` must be a numpy.random.Generator or an int seed, got {rng!r}")
    eps, alpha = validation.positive(epsilon, "epsilon"), check_alpha(alpha, an.k)
    bound = check_choice(bound, "bound", BOUNDS)
    max_patterns = validation.positive_int(max_patterns, "max_patterns")
    level = check_level(level)
    b = calibrate(an, eps, alpha, bound, max_patterns, DEFAULT_RTOL)
    if b == 0.0:  # calibrate has warned why: the answers need no noise (no leakage when they ignore the data)
        answers, leakage = exact, (-math.log(alpha) if an.delta > 0 else 0.0)
    else:
        answers, leakage = exact + rng.laplace(0.0, b, size=exact.size), bound_value(an, b, alpha, bound, max_patterns)
    account = LaplaceAccount(b, an.sensitivity(neighbours), eps, alpha, bound, leakage, an.delta)
    return Release.build(answers, np.full(exact.size, account.variance), level, labels=labels,
                         privacy_cost=account.epsilon() ** 2, neighbours=neighbours,
                         mechanism=f"Laplace mechanism calibrated to {eps:.6g}-PML", name=name, noise=account)

