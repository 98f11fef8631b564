"""``FourierMechanism``: a weighted Fourier factorization mechanism, its accounting and its release.

Solver layer: imports numpy, :mod:`ffu_cvx.model.privacy`, :mod:`ffu_cvx.model.status`,
:mod:`ffu_cvx.model.validation` and the Fourier modules ``workload`` and ``release``. The
release and covariance code sits one module below and takes the mechanism as an
argument, so the methods here are plain calls into it (no cycle); the optimisation
(:mod:`ffu_cvx.solvers.fourier.optimise`) builds the mechanism from above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...model import privacy, validation
from ...model.status import OPTIMAL
from . import release as _release
from .release import DENSE_MAX_CELLS
from .workload import MarginalWorkload

__all__ = ["FourierMechanism"]


@dataclass(frozen=True, eq=False)
class FourierMechanism(privacy.GaussianPrivacy):
    """A weighted Fourier factorization mechanism and its accounting.

    Attributes
    ----------
    workload : MarginalWorkload or CirculantWorkload
    components : tuple of attribute sets ``S`` (the downward closure)
    spectra : tuple, one entry per component: a float ``tau_S`` (marginal workloads: the
        same noise on every pure frequency) or an array of shape ``(n_i)_{i in S}`` holding
        ``eta_alpha`` per frequency (``inf`` where nothing is released).
    privacy_cost : float, ``alpha = Delta_M^2`` (``sum_S p_S / tau_S``).
    variances : (K,) per-cell / per-query variance of each set or family.
    objective : ``"max"`` or ``"sum"``; loss : the objective's value.
    lam : (K,) worst-case weights of the dual (max objective) or None.
    lower_bound : float, dual certificate: no factorization meets the targets at a lower
        privacy cost (max objective; nan otherwise).
    status, time : solver status and wall time in seconds.
    neighbours : :data:`ffu_cvx.model.privacy.ADD_REMOVE`: ``privacy_cost`` and every (eps, delta)
        and zCDP statement are for neighbours that add or remove one record
        (``||x - x'||_1 = 1``), the relation of the spec's privacy cost. Substitution is not
        computed here (it would be a maximum over pairs of cells, not a sum over
        components); by the triangle inequality its ``Delta_M`` is at most twice this one.
    """

    workload: object
    components: tuple
    spectra: tuple
    privacy_cost: float
    variances: np.ndarray
    objective: str
    loss: float
    lam: np.ndarray | None = None
    lower_bound: float = math.nan
    status: str = OPTIMAL
    time: float = 0.0

    @property
    def neighbours(self) -> str:
        """The neighbouring relation every privacy statement of this mechanism is for."""
        return privacy.ADD_REMOVE

    @property
    def taus(self) -> dict:
        """``{S: tau_S}`` for marginal workloads (per-component noise variance)."""
        if not isinstance(self.workload, MarginalWorkload):
            raise ValueError("`taus` exist for marginal workloads only; product mechanisms have "
                             "per-frequency noise in `spectra`")
        return dict(zip(self.components, self.spectra))

    @property
    def component_costs(self) -> dict:
        """``{S: privacy cost of component S}`` (``p_S / tau_S``, or ``sum 1/eta`` over its
        released frequencies); the values sum to ``privacy_cost``."""
        out = {}
        for S, spec in zip(self.components, self.spectra):
            if isinstance(spec, float):
                out[S] = math.prod(1.0 - 1.0 / self.workload.domain[i] for i in S) / spec
            else:
                out[S] = float(np.sum(1.0 / spec[np.isfinite(spec)]))
        return out

    @property
    def targets(self) -> np.ndarray:
        """(K,) variance targets ``1 / w_k``."""
        return np.array(self.workload.targets)

    @property
    def max_ratio(self) -> float:
        """``max_A Var_A / c_A`` (1 for the Problem 1 mechanism of :func:`max_optimal`)."""
        return float(np.max(self.variances / self.targets))

    @property
    def gap(self) -> float:
        """Relative gap between the normalised cost ``alpha * max_ratio`` and ``lower_bound``."""
        return (self.privacy_cost * self.max_ratio - self.lower_bound) / self.lower_bound

    def scaled(self, privacy_cost: float) -> "FourierMechanism":
        """The same mechanism with noise rescaled to ``privacy_cost`` (variances scale inversely)."""
        target = validation.positive(privacy_cost, "privacy_cost")
        s = self.privacy_cost / target
        spectra = tuple(x * s for x in self.spectra)
        return FourierMechanism(self.workload, self.components, spectra, target, self.variances * s,
                                self.objective, self.loss * s, self.lam, self.lower_bound, self.status, self.time)

    def covariance(self, i: int, j: int) -> np.ndarray:
        """Exact noise covariance (N_Ai, N_Aj) between answers of sets / families ``i`` and ``j``."""
        return _release.answer_covariance(self, i, j)

    def release(self, records=None, *, histogram=None, rng=None, chunk: int = 1 << 16, sampler=None):
        """Noisy, consistent, unbiased answers from ``records`` (n, d) ints or a ``histogram``.

        See :func:`ffu_cvx.solvers.fourier.release.release`; cost ``sum_S N_S log N_S`` plus one
        pass over the records per workload set, never ``prod(n_i)``.
        """
        return _release.release(self, records=records, histogram=histogram, rng=rng, chunk=chunk, sampler=sampler)

    def to_solution(self, *, max_cells: int = DENSE_MAX_CELLS, certify: bool = True):
        """The same mechanism as a :class:`ffu_cvx.Solution` on a row basis of the dense workload.

        Only for ``prod(n_i) <= max_cells``; see :func:`ffu_cvx.solvers.fourier.release.to_solution`.
        """
        return _release.to_solution(self, max_cells=max_cells, certify=certify)
