"""The three PML bounds and the DP values of a Laplace release of ``W x``.

PML layer: imports numpy, :mod:`ffu_cvx.model.privacy` (the neighbouring relations),
:mod:`ffu_cvx.model.validation` and the PML modules ``analysis``, ``formulas`` and ``signs``.
Every PML bound is about one record's class among k with the record known to be
present, i.e. for substitution neighbours; the DP values (:func:`l1_sensitivity`,
:func:`dp_leakage`) take the relation as ``neighbours=`` because both make sense there.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import validation
from ..model.privacy import SUBSTITUTE
from .analysis import Analysis, analyse, check_alpha, check_choice, check_neighbours
from .formulas import corollary, from_distances
from .signs import DEFAULT_MAX_PATTERNS, sign_difference, sign_general, sign_haar

__all__ = ["BOUNDS", "SignBound", "bound_value", "l1_sensitivity", "dp_leakage", "sign_bound", "leakage"]

#: The bounds, from the tightest: Theorem 2, the exact worst case, Corollary 1.
BOUNDS = ("sign", "safe", "corollary")


@dataclass(frozen=True)
class SignBound:
    """The Theorem 2 (``"sign"``) bound with how it was computed.

    Attributes
    ----------
    value : float
        ``max_s -log F(g(s))`` in nats.
    structure : str
        ``"histogram"``, ``"two_valued"``, ``"difference"``, ``"haar"`` or ``"general"``.
    n_patterns : int
        Sign patterns evaluated one by one: ``sum_p 2^{r_p}`` for ``"general"``, ``k``
        (one forced pattern per class) for ``"two_valued"``, 0 for the closed form of
        ``"histogram"`` and the dynamic programmes.
    neighbours : :data:`ffu_cvx.model.privacy.SUBSTITUTE`
        The relation the bound is for (a property): the record is present and its class
        is the secret, so a neighbour changes that class.
    """

    value: float
    structure: str
    n_patterns: int

    @property
    def neighbours(self) -> str:
        """PML protects one record's class: the substitution relation."""
        return SUBSTITUTE


def _sign(an: Analysis, b: float, alpha: float, max_patterns: int) -> SignBound:
    if an.kind == "histogram":  # D_jp = 2a for all j != p: every bound is Corollary 1
        return SignBound(corollary(an.delta, b, alpha), an.kind, 0)
    if an.Wr.shape[0] == 0:
        return SignBound(0.0, an.kind, 0)
    if an.kind == "two_valued":
        return SignBound(from_distances(an.distances(), b, alpha), an.kind, an.k)
    if an.kind == "difference":
        return SignBound(sign_difference(an.k, b / an.scale, alpha), an.kind, 0)
    if an.kind == "haar":
        return SignBound(sign_haar(an.k, b / an.scale, alpha), an.kind, 0)
    value, n = sign_general(an.Wr, an.k, b, alpha, max_patterns)
    return SignBound(value, an.kind, n)


def bound_value(an: Analysis, b: float, alpha: float, bound: str, max_patterns: int) -> float:
    """The bound named ``bound`` (one of :data:`BOUNDS`) of the analysed workload (arguments already checked)."""
    if bound == "sign":
        return _sign(an, b, alpha, max_patterns).value
    if bound == "safe" and an.kind != "histogram":
        return from_distances(an.distances(), b, alpha)
    return corollary(an.delta, b, alpha)


# --------------------------------------------------------------------------- public API
def l1_sensitivity(W, *, neighbours: str = SUBSTITUTE) -> float:
    """The L1 sensitivity of ``W`` under ``neighbours``.

    Parameters
    ----------
    W : array_like, (m, k)
    neighbours : :data:`~ffu_cvx.model.privacy.SUBSTITUTE` (default) or :data:`~ffu_cvx.model.privacy.ADD_REMOVE`
        Substitution (one record changes class, the PML model and the spec's DP
        baseline): ``Delta_1(W) = max_{j,j'} ||w_j - w_j'||_1``. Add/remove (one record
        added or removed, ``||x - x'||_1 = 1``): ``max_j ||w_j||_1``.

    Returns
    -------
    float
        The histogram has 2 under substitution (one record moves between two cells) and
        1 under add/remove; ``differences(8)`` has 4 and 2.
    """
    an = analyse(W)
    return an.sensitivity(check_neighbours(neighbours))


def dp_leakage(W, b, *, neighbours: str = SUBSTITUTE) -> float:
    """The pure-DP level of the Laplace release under ``neighbours``, ``Delta_1 / b``.

    Parameters
    ----------
    W : array_like, (m, k)
    b : float
        Laplace scale, > 0.
    neighbours : :data:`~ffu_cvx.model.privacy.SUBSTITUTE` (default) or :data:`~ffu_cvx.model.privacy.ADD_REMOVE`
        The relation of the DP statement; see :func:`l1_sensitivity`.
    """
    an = analyse(W)
    return an.sensitivity(check_neighbours(neighbours)) / validation.positive(b, "b")


def sign_bound(W, b, alpha, *, structure: str = "auto", max_patterns: int = DEFAULT_MAX_PATTERNS) -> SignBound:
    """Theorem 2's bound with the algorithm used and the patterns it enumerated.

    Parameters
    ----------
    W : array_like, (m, k)
    b : float
        Laplace scale, > 0.
    alpha : float
        Prior lower bound on every class probability, in (0, 1/k].
    structure : {"auto", "two_valued", "difference", "haar", "general"}
        Algorithm; ``"auto"`` recognises the workload (module docstring).
    max_patterns : int
        Largest number of sign patterns ``"general"`` may enumerate; beyond it
        :class:`TooManyPatternsError` is raised before any work.

    Returns
    -------
    SignBound
    """
    an = analyse(W, structure)
    return _sign(an, validation.positive(b, "b"), check_alpha(alpha, an.k), validation.positive_int(max_patterns, "max_patterns"))


def leakage(W, b, alpha, bound: str = "safe", *, structure: str = "auto",
            max_patterns: int = DEFAULT_MAX_PATTERNS) -> float:
    """Worst-case PML (nats) of releasing ``W x + Lap(b)^m`` when every class has prior >= alpha.

    Parameters
    ----------
    W : array_like, (m, k)
        Query matrix (or a ``Workload``); column j is one record of class j.
    b : float
        Laplace scale, > 0.
    alpha : float
        Prior lower bound on every class probability, in (0, 1/k].
    bound : {"safe", "sign", "corollary"}
        ``"safe"`` (default) is the exact worst case over the other records and always
        holds; ``"sign"`` is Theorem 2 (equal to ``"safe"`` for 0/1 workloads, possibly
        optimistic for small datasets otherwise); ``"corollary"`` is the closed form of
        Corollary 1. See the module docstring.
    structure, max_patterns
        Only used by ``bound="sign"``; see :func:`sign_bound`.

    Returns
    -------
    float
        The leakage bound, in ``[0, min(log(1/alpha), Delta_1/b))``, about one record's
        class (the record is known to be present: substitution, ``Delta_1`` its
        sensitivity).
    """
    an = analyse(W, structure)
    b = validation.positive(b, "b")
    alpha = check_alpha(alpha, an.k)
    bound = check_choice(bound, "bound", BOUNDS)
    return bound_value(an, b, alpha, bound, validation.positive_int(max_patterns, "max_patterns"))

