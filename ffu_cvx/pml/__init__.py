"""Context-aware pointwise maximal leakage (PML) of Laplace-released linear queries.

Zhao, Saeidian and Oechtering, "Context-aware Privacy Bounds for Linear Queries"
(arXiv:2601.02855), specified with derivations in ``specs/pml.md``.

Notation (used once here, then throughout)
------------------------------------------
- ``k`` classes (histogram cells); every record ``D_i`` falls in one class, and the
  histogram ``x`` (k,) counts them.
- ``W`` (m, k): m linear queries; column ``w_j = W e_j`` is what one record of class
  ``j`` adds to the answers. The release is ``y = W x + Z`` with ``Z_l`` i.i.d.
  Laplace of scale ``b``.
- ``alpha``: the context assumption ``P(D_i = j) >= alpha`` for every record and
  class, so ``0 < alpha <= 1/k``.
- ``Delta_1(W) = max_{j,j'} ||w_j - w_j'||_1``: the L1 sensitivity under substitution
  neighbours (:data:`~ffu_cvx.model.privacy.SUBSTITUTE`: one record changes class), so the
  mechanism is ``Delta_1/b``-DP. The PML model is a substitution model too (the record
  is present, its class is the secret), so every bound, ``min_noise_scale`` and
  ``b_DP = Delta_1 / epsilon`` use this ``Delta_1``, and :class:`SignBound` states it.
  Under add/remove neighbours (:data:`~ffu_cvx.model.privacy.ADD_REMOVE`, ``||x - x'||_1 = 1``)
  the sensitivity is ``max_j ||w_j||_1`` instead (1 for the histogram, 2 for
  ``differences(8)``, whose substitution value is 4); :func:`l1_sensitivity`,
  :func:`dp_leakage` and :func:`laplace_release` take ``neighbours=`` (default
  substitution), and the release states it.
- PML of a record: ``l(D_i -> y) = log max_j f_j(y) / sum_j P(D_i=j) f_j(y)`` with
  ``f_j(y) = p(y | D_i = j)``. A release is ``eps``-PML when ``l <= eps`` for every y.
- ``s`` in {-1, +1}^m: a sign pattern (the paper's index set ``I`` is where s = +1);
  ``c_j = s . w_j``; gaps ``g_j = c_j - min_j c_j``.
- ``D_jp = ||w_j - w_p||_1``: pairwise L1 distances of the columns.

Modules, from the bottom (none imports one above it): ``analysis`` (input checks,
structure detection, distances, sensitivities), ``formulas`` (``-log F``, Corollary 1,
the safe bound), ``signs`` (the sign bound's forced-sign enumeration and the chain and
tree programmes), ``bounds`` (the public bounds and DP values), ``calibration``
(:func:`min_noise_scale`), ``release`` (:func:`laplace_release`: a
:class:`ffu_cvx.release.release.Release` with Laplace noise, written and verified like every release)
and ``builders`` (the workload matrices). PML layer, above the
release and estimate layers: the package imports numpy, scipy, the model modules (``privacy``, ``status``,
``validation``), :mod:`ffu_cvx.release.release` and :mod:`ffu_cvx.workloads`.

The three bounds
----------------
``F(g) = alpha sum_j exp(-g_j/b) + (1 - k alpha) exp(-max_j g_j/b)`` is the
denominator under the worst admissible prior (spec §2, Lemma A).

- ``"sign"``: ``max_s -log F(g(s))`` (Theorem 2). Tight when the other records may be
  arbitrary (it is the leakage far out in the orthant of ``s``), but for small
  datasets whose other records are also alpha-bounded the exact leakage can exceed
  it (spec §2, caveat).
- ``"safe"``: ``max_p -log F(D_{.p})``, the exact worst case over the other records,
  attained at ``y = W x' + w_p``. Always a valid bound. Equal to ``"sign"`` when
  every row of W takes at most two values (histogram, prefix, ranges).
- ``"corollary"``: ``-log(alpha + (1 - alpha) exp(-Delta_1/b))`` (Corollary 1), a
  closed form above both; exact for the histogram.

``"sign" <= "safe" <= "corollary" < Delta_1/b``, all tend to ``Delta_1/b`` as
``alpha -> 0`` and to ``log(1/alpha)`` as ``b -> 0``, and all decrease strictly in b.

Algorithms for ``"sign"`` (spec §3)
------------------------------------
``structure="auto"`` recognises the workload (after dropping constant rows, which
change no bound, and up to a common scale, row order and row signs):

- ``"histogram"`` (auto only): rows ``+-a e_j``, one per class; all three bounds equal
  Corollary 1 with ``Delta_1 = 2a``, O(1) after recognition.
- ``"two_valued"``: every row takes two values; then ``"sign" == "safe"`` in closed
  form, O(m k^2) time and O(k^2) memory.
- ``"difference"``: consecutive differences ``x_l - x_{l+1}``; a Viterbi pass along the
  chain for all classes at once, O(k^2).
- ``"haar"``: the Haar detail rows of :func:`haar`; a tree programme over
  (subtree height, offset), O(log(k)^3).
- ``"general"``: the forced-sign reduction. For each class p, a row where ``W_lp`` is
  the row's minimum (maximum) takes s_l = +1 (-1), since that lowers every term of F
  at once; only the ``r_p`` rows where ``W_lp`` is strictly inside the row's range are
  enumerated, ``sum_p 2^{r_p}`` patterns in all (see :func:`sign_pattern_count`).
  Beyond ``max_patterns`` it raises :class:`TooManyPatternsError` instead of hanging.
"""

from ..model.privacy import ADD_REMOVE, SUBSTITUTE
from .analysis import STRUCTURES
from .bounds import BOUNDS, SignBound, dp_leakage, l1_sensitivity, leakage, sign_bound
from .builders import WORKLOADS, all_ranges, differences, haar, histogram, pml_workload, prefix
from .calibration import NoNoiseNeededWarning, min_noise_scale
from .release import laplace_release
from .signs import TooManyPatternsError, sign_pattern_count

__all__ = [
    "BOUNDS", "STRUCTURES", "WORKLOADS", "TooManyPatternsError", "NoNoiseNeededWarning",
    "SignBound",
    "l1_sensitivity", "dp_leakage", "leakage", "sign_bound", "sign_pattern_count",
    "min_noise_scale", "laplace_release",
    "histogram", "prefix", "all_ranges", "haar", "differences", "pml_workload",
    "ADD_REMOVE", "SUBSTITUTE",
]
