"""Weighted Fourier factorizations: optimal Gaussian noise for marginal and product workloads.

Follows ``shared/specs/fourier.md`` (Lebeda, Nikolov and Tang, "Weighted Fourier
Factorizations", arXiv 2512.21499). The records live on ``Z_{n_1} x ... x Z_{n_d}``;
nothing here builds that domain, so the cost is polynomial in the number of
marginals, not in ``prod(n_i)``.

Notation (spec § 1-4):

- attribute set ``S``: ``N_S = prod_{i in S} n_i`` cells, ``d_S = prod (n_i - 1)``
  "pure" Fourier frequencies (non-zero on every attribute of ``S``),
  ``p_S = d_S / N_S``; all three are 1 for the empty set.
- components: the downward closure ``D`` of the workload's attribute sets. Component
  ``S`` carries the part of every marginal ``A ⊇ S`` that lives on the pure frequencies
  of ``S``; the noise of different components is independent.
- ``tau_S``: noise variance of component ``S`` (the mechanism releases the centred
  ``S``-marginal plus centred white noise of variance ``tau_S``); ``eta = N_S tau_S`` is
  the same noise expressed per Fourier coefficient. For product families each pure
  frequency ``alpha`` has its own ``eta_alpha``.
- privacy cost ``alpha = sum_S p_S / tau_S`` (= ``sum_alpha 1 / eta_alpha``): the squared
  L2 sensitivity ``Delta_M^2`` of the toolkit for **add/remove** neighbours
  (:data:`ffu_cvx.model.privacy.ADD_REMOVE`, ``||x - x'||_1 = 1``: one record added or
  removed, so the total count changes too); (eps, delta) and rho-zCDP follow from
  :mod:`ffu_cvx.model.privacy`. Every mechanism and release states it as ``neighbours``.
- per-cell variance of marginal ``A``: ``Var_A = sum_{S ⊆ A} tau_S p_S / N_{A \\ S}^2``.
- a workload entry ``A`` has a weight ``w_A``: the *sum* objective is
  ``sum_A w_A N_A Var_A``, the *max* objective ``max_A w_A Var_A``. In fitness-for-use
  terms ``w_A = 1 / c_A`` with ``c_A`` the per-cell variance target, and the optimum of
  the max objective at privacy cost 1 is Problem 1's optimal ``alpha``.

Solver layer: the package imports numpy, scipy, the model modules (``accuracy``, ``privacy``,
``problem``, ``result``, ``status``, ``validation``), :mod:`ffu_cvx.solvers.sdp.cvx` (the max
program) and the bottom of the release layer, below the solvers (:mod:`ffu_cvx.release.release`, the
Release every mechanism returns, and :mod:`ffu_cvx.release.noise`). Its modules, from the bottom (none imports one above it):

- ``workload``: the workload types, attribute-set sizes, the downward closure;
- ``groups``: the frequency-group form, the marginal formulas (privacy cost, variances);
- ``release``: sampling the release (a :class:`ffu_cvx.release.release.Release`, written and verified
  like every release), exact covariances, the dense equivalent;
- ``mechanism``: :class:`FourierMechanism` (its methods call ``release``);
- ``optimise``: the sum closed form, the max program, the dual bound, Problem 1;
- ``thresholds``: threshold queries by circular embedding (spec § 5).

Everything is solved in a common "frequency group" form: groups ``g`` of ``n_g``
frequencies sharing one noise level ``eta_g``; variances ``V = M eta`` and privacy cost
``sum_g n_g / eta_g``. For marginals a group is a component.
"""

from .groups import cell_variances, privacy_cost
from .mechanism import FourierMechanism
from .optimise import dual_bound, marginal_workload_optimum, max_optimal, min_privacy_cost, sum_optimal
from .release import DENSE_MAX_CELLS, cell_covariance, dense_workload
from .thresholds import embedding_max_variance, extended_marginals, threshold_shift, threshold_vector
from .workload import MarginalWorkload, ProductFamily, CirculantWorkload, components

__all__ = [
    "MarginalWorkload", "ProductFamily", "CirculantWorkload", "FourierMechanism",
    "components", "privacy_cost", "cell_variances", "cell_covariance",
    "sum_optimal", "max_optimal", "dual_bound", "min_privacy_cost", "marginal_workload_optimum",
    "threshold_vector", "threshold_shift", "extended_marginals", "embedding_max_variance",
    "DENSE_MAX_CELLS", "dense_workload",
]
