"""``KronSolution``: the Solution of a structured (product-workload) solve, Sigma kept in factors.

Solver layer (``ffu_cvx.solvers.kron``): imports the standard library, numpy, ``model`` (``result``, ``status``, ``validation``) and the
package's ``terms`` and ``whiten``. Same fields, immutability and privacy statements as
:class:`ffu_cvx.model.result.Solution` (``epsilon``, ``delta``, ``rho``, ``neighbours`` from
``privacy_cost``), but ``sigma`` is None: the mechanism is ``terms`` (see
:mod:`ffu_cvx.solvers.kron.terms`), and no d x d or m x d matrix is ever formed.
``variances`` (m,) and ``profile`` (d,) are formed only below :data:`VARIANCES_MAX` and
:data:`PROFILE_MAX` entries (else None; ``privacy_cost`` and ``max_ratio`` are computed
from the factors whatever the size, and :meth:`KronSolution.group_variances` gives one
group's variances).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ...model import validation
from ...model.result import Solution
from ...model.status import OPTIMAL, STATUSES, SUCCESS
from . import terms as _terms, whiten as _whiten

__all__ = ["KronSolution", "PROFILE_MAX", "VARIANCES_MAX"]

#: Largest domain (cells) whose profile vector a KronSolution forms.
PROFILE_MAX = 1 << 20
#: Largest number of queries whose variance vector a KronSolution forms.
VARIANCES_MAX = 1 << 24


def _rows(group) -> tuple:
    return tuple(b.matrix.shape[0] for b in group.blocks)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class KronSolution(Solution):
    """Result of ``solve(product_problem, method="kron")``: a :class:`ffu_cvx.model.result.Solution`
    whose Sigma is the structured mechanism ``terms``.

    Extra fields: ``terms`` (tuple of :class:`ffu_cvx.solvers.kron.terms.Term`), ``profile_exact``
    (False when the privacy cost is the conservative sum of the terms' maxes). ``info``
    holds ``structure`` and the per-factor results.
    """

    terms: tuple = ()
    profile_exact: bool = True

    @classmethod
    def from_terms(cls, problem, terms, *, method: str = "kron", status: str = OPTIMAL, message: str = "",
                   lower_bound: float = math.nan, **info) -> "KronSolution":
        """Build and check the Solution of ``terms`` on the ProductProblem ``problem``."""
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}; expected one of {STATUSES}")
        groups, sizes = problem.groups, problem.domain.sizes
        targets = [g.target for g in groups]
        alpha, exact = _terms.profile_max(terms, sizes)
        ratio = _terms.max_ratio(terms, [_rows(g) for g in groups], targets)
        var = None
        if problem.m <= VARIANCES_MAX:
            var = np.concatenate([_terms.group_variances(terms, g, _rows(grp)) for g, grp in enumerate(groups)])
        prof = _terms.profile_vector(terms, sizes) if problem.d <= PROFILE_MAX else None
        lb = float(lower_bound)
        gap = alpha * ratio / lb - 1.0 if lb > 0 else math.inf
        counts = {key: info.pop(key, None) for key in ("nit", "n_hvp", "time", "history")}
        return cls(method=method, status=status, success=status in SUCCESS, message=message, problem=problem,
                   sigma=None, terms=tuple(terms), profile=prof, variances=var, privacy_cost=float(alpha),
                   profile_exact=exact, max_ratio=float(ratio), lower_bound=lb, gap=float(gap), info=info, **counts)

    def scaled(self, privacy_cost: float) -> "KronSolution":
        """The same mechanism rescaled to ``privacy_cost`` (every variance times ``alpha / privacy_cost``)."""
        target = validation.positive(privacy_cost, "privacy_cost")
        s = self.privacy_cost / target
        return KronSolution.from_terms(self.problem, [t.scaled(s) for t in self.terms], method=self.method,
                                       status=self.status, message=self.message, lower_bound=self.lower_bound,
                                       nit=self.nit, time=self.time, history=self.history, **self.info)

    def group_variances(self, g: int) -> np.ndarray:
        """Variances (m_g,) of group ``g``'s queries, row-major over its blocks' rows."""
        groups = self.problem.groups
        if not 0 <= int(g) < len(groups):
            raise ValueError(f"`g` must be a group index in 0..{len(groups) - 1}, got {g!r}")
        return _terms.group_variances(self.terms, int(g), _rows(groups[int(g)]))

    def sample_answer_noise(self, rng=None) -> np.ndarray:
        """One draw (m,) of the noise on every answer, covariance exactly ``W Sigma W^T``.

        ``rng``: a numpy Generator or a seed. Per term a flat standard normal draw of
        ``prod_f draws_f`` entries (any number of factors: no array of one axis per factor), the per-factor Cholesky factors and reconstruction
        matrices applied by mode products; groups sharing a term get correlated noise.
        """
        rng = np.random.default_rng(rng)
        xis = [rng.standard_normal(math.prod(f.draws for f in t.factors)) for t in self.terms]
        return np.concatenate([_terms.group_noise(self.terms, xis, g, _rows(grp))
                               for g, grp in enumerate(self.problem.groups)])

    def whitened(self, counts, dtype=np.float64) -> tuple[np.ndarray, np.ndarray, int]:
        """The whitened strategy answers of every term on sparse ``counts``, computed in ``dtype`` (see
        :mod:`ffu_cvx.solvers.kron.whiten`): ``(w (n,), |M| |x| (n,), depth)``; their L2 sensitivity is
        ``sqrt(privacy_cost)``."""
        return _whiten.whitened(self, counts, dtype)

    def from_whitened(self, values) -> np.ndarray:
        """The answers (m,) released from perturbed whitened answers ``values`` (n,): the terms'
        reconstruction applied to them (exactly ``W x + noise`` when ``values = w + xi``)."""
        xis = _whiten.split(self, values)
        return np.concatenate([_terms.group_noise(self.terms, xis, g, _rows(grp))
                               for g, grp in enumerate(self.problem.groups)])
