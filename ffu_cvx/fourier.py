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
  L2 sensitivity ``Delta_M^2`` of the toolkit, for add/remove neighbours; (eps, delta)
  and rho-zCDP follow from :mod:`ffu_cvx.privacy`.
- per-cell variance of marginal ``A``: ``Var_A = sum_{S ⊆ A} tau_S p_S / N_{A \\ S}^2``.
- a workload entry ``A`` has a weight ``w_A``: the *sum* objective is
  ``sum_A w_A N_A Var_A``, the *max* objective ``max_A w_A Var_A``. In fitness-for-use
  terms ``w_A = 1 / c_A`` with ``c_A`` the per-cell variance target, and the optimum of
  the max objective at privacy cost 1 is Problem 1's optimal ``alpha``.

Everything is solved in a common "frequency group" form: groups ``g`` of ``n_g``
frequencies sharing one noise level ``eta_g``; variances ``V = M eta`` and privacy cost
``sum_g n_g / eta_g``. For marginals a group is a component.
"""

from __future__ import annotations

import itertools
import math
import time
import warnings
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from . import privacy as _privacy
from . import cvx
from .status import INACCURATE, OPTIMAL, SolverError

__all__ = [
    "MarginalWorkload", "ProductFamily", "ProductWorkload", "FourierMechanism",
    "components", "privacy_cost", "cell_variances", "cell_covariance",
    "sum_optimal", "max_optimal", "dual_bound", "min_privacy_cost", "marginal_workload_optimum",
    "threshold_vector", "threshold_shift", "extended_marginals", "embedding_max_variance",
    "DENSE_MAX_CELLS",
]

#: Largest full domain (``prod(n_i)``) for which dense matrices are built (``to_solution``).
DENSE_MAX_CELLS = 4096


# ----------------------------------------------------------------------------- validation
def _check_domain(domain) -> tuple[int, ...]:
    try:
        dom = tuple(domain)
    except TypeError:
        raise ValueError(f"`domain` must be a sequence of attribute sizes, got {domain!r}") from None
    if not dom:
        raise ValueError("`domain` is empty: give at least one attribute size, e.g. domain=(2, 3)")
    out = []
    for i, n in enumerate(dom):
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 2:
            raise ValueError(f"`domain` sizes must be integers >= 2, but domain[{i}] = {n!r}; "
                             "an attribute with a single value carries no information: drop it")
        out.append(int(n))
    return tuple(out)


def _check_attrs(attrs, n_attrs: int | None, name: str) -> tuple[int, ...]:
    if isinstance(attrs, (int, np.integer)) and not isinstance(attrs, (bool, np.bool_)):
        attrs = (attrs,)
    try:
        attrs = tuple(attrs)
    except TypeError:
        raise ValueError(f"{name} must be a tuple of attribute indices, got {attrs!r}") from None
    for a in attrs:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise ValueError(f"{name} = {attrs!r} holds {a!r}, which is not an attribute index (an int)")
        if n_attrs is None and a < 0:
            raise ValueError(f"{name} = {attrs!r}: attribute indices are 0-based and >= 0, got {a}")
        if n_attrs is not None and not 0 <= a < n_attrs:
            raise ValueError(f"{name} = {attrs!r}: attribute index {a} is out of range; "
                             f"the domain has {n_attrs} attributes, indices 0..{n_attrs - 1}")
    if len(set(attrs)) != len(attrs):
        dup = sorted({a for a in attrs if attrs.count(a) > 1})
        raise ValueError(f"{name} = {attrs!r} lists attribute(s) {dup} more than once; "
                         "give each attribute once per set")
    return tuple(int(a) for a in attrs)


def _check_positive(value, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {value!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def _size(domain: tuple[int, ...], attrs) -> int:
    return int(math.prod(domain[i] for i in attrs))


def _closure(sets) -> tuple[tuple[int, ...], ...]:
    """Downward closure of ``sets`` (sorted tuples), ordered by size then lexicographically."""
    out = set()
    for A in sets:
        for r in range(len(A) + 1):
            out.update(itertools.combinations(A, r))
    return tuple(sorted(out, key=lambda S: (len(S), S)))


# ----------------------------------------------------------------------------- workloads
@dataclass(frozen=True)
class MarginalWorkload:
    """Weighted marginals over the domain ``Z_{n_1} x ... x Z_{n_d}``.

    Parameters
    ----------
    domain : tuple of int, each >= 2
        Attribute sizes ``(n_1, ..., n_d)``.
    sets : tuple of tuple of int
        Attribute sets ``A`` (0-based indices, stored sorted); the marginal on ``A`` has
        ``N_A`` cells. The empty set is the total count.
    weights : tuple of float, each > 0
        ``w_A`` (sum objective ``sum w_A N_A Var_A``; max objective ``max w_A Var_A``).
        Build from variance targets with :meth:`from_targets` (``w_A = 1 / c_A``).

    >>> wl = MarginalWorkload.from_targets((2, 2), {(0,): 1.0, (1,): 2.0})
    >>> wl.targets
    (1.0, 2.0)
    """

    domain: tuple
    sets: tuple
    weights: tuple

    def __post_init__(self):
        domain = _check_domain(self.domain)
        sets = tuple(self.sets)
        weights = tuple(self.weights)
        if not sets:
            raise ValueError("`sets` is empty: a marginal workload needs at least one attribute set")
        if len(weights) != len(sets):
            raise ValueError(f"`weights` needs one entry per set ({len(sets)}), got {len(weights)}")
        clean = []
        for j, A in enumerate(sets):
            clean.append(tuple(sorted(_check_attrs(A, len(domain), f"`sets[{j}]`"))))
        seen = {}
        for j, A in enumerate(clean):
            if A in seen:
                raise ValueError(f"`sets` lists the marginal {A} twice (entries {seen[A]} and {j}); "
                                 "give each marginal once with its tightest target")
            seen[A] = j
        w = tuple(_check_positive(x, f"`weights[{j}]`") for j, x in enumerate(weights))
        object.__setattr__(self, "domain", domain)
        object.__setattr__(self, "sets", tuple(clean))
        object.__setattr__(self, "weights", w)

    @classmethod
    def from_targets(cls, domain, targets: Mapping) -> "MarginalWorkload":
        """Workload from per-cell variance targets ``{attrs: c_A}`` (``w_A = 1 / c_A``)."""
        items = _items(targets, "targets")
        c = [_check_positive(v, f"`targets[{k!r}]`") for k, v in items]
        return cls(domain, tuple(k if not isinstance(k, (int, np.integer)) else (k,) for k, _ in items),
                   tuple(1.0 / x for x in c))

    @classmethod
    def from_weights(cls, domain, weights: Mapping) -> "MarginalWorkload":
        """Workload from weights ``{attrs: w_A}`` (for the sum objective)."""
        items = _items(weights, "weights")
        w = [_check_positive(v, f"`weights[{k!r}]`") for k, v in items]
        return cls(domain, tuple(k if not isinstance(k, (int, np.integer)) else (k,) for k, _ in items), tuple(w))

    @property
    def targets(self) -> tuple:
        """Per-cell variance targets ``c_A = 1 / w_A``."""
        return tuple(1.0 / w for w in self.weights)

    @property
    def n_cells(self) -> int:
        """Size of the full domain ``prod(n_i)`` (never materialised)."""
        return _size(self.domain, range(len(self.domain)))

    def labels(self) -> tuple:
        """One label per set, e.g. ``"A=(0, 1)"``."""
        return tuple(f"A={A}" for A in self.sets)


def _items(mapping, name):
    if not isinstance(mapping, Mapping):
        raise ValueError(f"`{name}` must be a dict {{attrs: value}}, got {type(mapping).__name__}")
    if not mapping:
        raise ValueError(f"`{name}` is empty: give at least one attribute set")
    return list(mapping.items())


@dataclass(frozen=True)
class ProductFamily:
    """A circular product family: queries ``q_t(x) = prod_{i in attrs} g_i((x_i - t_i) mod n_i)``
    for every shift ``t`` (``N_attrs`` queries).

    attrs : tuple of int; vectors : tuple of (n_i,) arrays, one per attribute (stored in
    sorted attribute order); weight : float > 0 (``1 / target``). A marginal is the family
    with every ``g_i = e_0``.
    """

    attrs: tuple
    vectors: tuple
    weight: float = 1.0

    def __post_init__(self):
        attrs = _check_attrs(self.attrs, None, "`attrs`")  # the range is checked by ProductWorkload
        vecs = tuple(self.vectors)
        if len(vecs) != len(attrs):
            raise ValueError(f"`vectors` needs one vector per attribute of {attrs}, got {len(vecs)}")
        clean = []
        for a, g in zip(attrs, vecs):
            try:
                g = np.array(g, dtype=float)
            except (TypeError, ValueError):
                raise ValueError(f"`vectors` entry for attribute {a} is not numeric") from None
            if g.ndim != 1 or not np.all(np.isfinite(g)) or not np.any(g):
                raise ValueError(f"`vectors` entry for attribute {a} must be a finite, non-zero 1-D array, got {g!r}")
            g.setflags(write=False)
            clean.append(g)
        order = np.argsort(np.array(attrs, dtype=np.int64), kind="stable")
        object.__setattr__(self, "attrs", tuple(attrs[i] for i in order))
        object.__setattr__(self, "vectors", tuple(clean[i] for i in order))
        object.__setattr__(self, "weight", _check_positive(self.weight, "`weight`"))


@dataclass(frozen=True)
class ProductWorkload:
    """Product families over ``Z_{n_1} x ... x Z_{n_d}``: domain, families (tuple of
    :class:`ProductFamily`). Sum objective ``sum_k w_k sum_t Var(q_t)``; max objective
    ``max_k w_k Var_k`` (every shift of a family has the same variance)."""

    domain: tuple
    families: tuple

    def __post_init__(self):
        domain = _check_domain(self.domain)
        fams = tuple(self.families)
        if not fams:
            raise ValueError("`families` is empty: give at least one ProductFamily")
        for j, f in enumerate(fams):
            if not isinstance(f, ProductFamily):
                raise ValueError(f"`families[{j}]` must be a ProductFamily, got {type(f).__name__}")
            _check_attrs(f.attrs, len(domain), f"`families[{j}].attrs`")
            for a, g in zip(f.attrs, f.vectors):
                if g.shape != (domain[a],):
                    raise ValueError(f"`families[{j}]` vector for attribute {a} has length {g.size}, "
                                     f"but the attribute has {domain[a]} values")
        object.__setattr__(self, "domain", domain)
        object.__setattr__(self, "families", fams)

    @property
    def sets(self) -> tuple:
        return tuple(f.attrs for f in self.families)

    @property
    def weights(self) -> tuple:
        return tuple(f.weight for f in self.families)

    @property
    def targets(self) -> tuple:
        return tuple(1.0 / f.weight for f in self.families)

    @property
    def n_cells(self) -> int:
        return _size(self.domain, range(len(self.domain)))

    def labels(self) -> tuple:
        return tuple(f"family{j}:{f.attrs}" for j, f in enumerate(self.families))

    @classmethod
    def from_marginals(cls, workload: MarginalWorkload) -> "ProductWorkload":
        """The marginal workload as product families (``g_i = e_0``)."""
        fams = []
        for A, w in zip(workload.sets, workload.weights):
            vecs = [np.eye(workload.domain[i])[0] for i in A]
            fams.append(ProductFamily(A, vecs, w))
        return cls(workload.domain, fams)


def _as_workload(workload):
    if not isinstance(workload, (MarginalWorkload, ProductWorkload)):
        raise ValueError(f"`workload` must be a MarginalWorkload or ProductWorkload, got {type(workload).__name__}")
    return workload


# ----------------------------------------------------------------------------- marginal formulas
def components(workload) -> tuple:
    """The components ``S`` (downward closure of the workload's attribute sets)."""
    return _closure(_as_workload(workload).sets)


def _marginal_tables(wl: MarginalWorkload, comps):
    """Per-component ``N_S``, ``d_S`` and the (K, |D|) matrix ``M[A, S] = d_S / N_A^2`` (S ⊆ A)."""
    dom = wl.domain
    N = np.array([_size(dom, S) for S in comps], dtype=float)
    dS = np.array([math.prod(dom[i] - 1 for i in S) for S in comps], dtype=float)
    index = {S: j for j, S in enumerate(comps)}
    M = np.zeros((len(wl.sets), len(comps)))
    for k, A in enumerate(wl.sets):
        NA = float(_size(dom, A))
        for r in range(len(A) + 1):
            for S in itertools.combinations(A, r):
                j = index[S]
                M[k, j] = dS[j] / NA ** 2
    return N, dS, M


def _taus_array(wl: MarginalWorkload, comps, taus) -> np.ndarray:
    if isinstance(taus, Mapping):
        missing = [S for S in comps if S not in taus]
        if missing:
            raise ValueError(f"`taus` misses components {missing[:4]}; give a tau for every S in components(workload)")
        taus = [taus[S] for S in comps]
    t = np.array(taus, dtype=float)
    if t.shape != (len(comps),):
        raise ValueError(f"`taus` must have one entry per component ({len(comps)}), got shape {t.shape}")
    if not np.all(np.isfinite(t)) or np.any(t <= 0):
        raise ValueError("`taus` must be finite and > 0 (noise variances)")
    return t


def privacy_cost(workload: MarginalWorkload, taus) -> float:
    """Privacy cost ``sum_S p_S / tau_S`` of per-component noise ``taus`` ((|D|,) or {S: tau})."""
    comps = components(workload)
    t = _taus_array(workload, comps, taus)
    N, dS, _ = _marginal_tables(workload, comps)
    return float(np.sum(dS / N / t))


def cell_variances(workload: MarginalWorkload, taus) -> np.ndarray:
    """Per-cell variance ``Var_A`` (K,) of every workload marginal under ``taus``."""
    comps = components(workload)
    t = _taus_array(workload, comps, taus)
    N, _, M = _marginal_tables(workload, comps)
    return M @ (N * t)


def cell_covariance(workload: MarginalWorkload, taus, i: int, j: int) -> np.ndarray:
    """Exact covariance (N_Ai, N_Aj) between the cells of marginals ``sets[i]`` and ``sets[j]``.

    ``Cov(m_A[s], m_B[t]) = sum_{S ⊆ A∩B} tau_S prod_{l in S}(1[s_l = t_l] - 1/n_l) / (N_{A\\S} N_{B\\S})``;
    cells are in C order of the sorted attribute set.
    """
    comps = components(workload)
    t = _taus_array(workload, comps, taus)
    from ._fourier_release import marginal_covariance
    spectra = {S: float(tau) for S, tau in zip(comps, t)}
    return marginal_covariance(workload.domain, spectra, workload.sets[i], workload.sets[j])


# ----------------------------------------------------------------------------- product formulas
def _clean(power: np.ndarray, scale: float) -> np.ndarray:
    """Set to exactly 0 the entries of a power spectrum that are FFT round-off (< 1e-12 scale)."""
    return np.where(power > 1e-12 * scale, power, 0.0)


def _product_groups(wl: ProductWorkload):
    """Frequency groups of a product workload.

    Returns ``comps``, ``labels`` (per component: int array over its grid, -1 where no
    group), ``n`` (G,), ``M`` (K, G). Frequencies whose coefficient vectors over the
    families agree share one noise level (by strict convexity they are equal at the
    optimum); frequencies no family needs are not released.
    """
    dom = wl.domain
    comps = _closure(wl.sets)
    spectra = [[_clean(np.abs(np.fft.fft(g)) ** 2, float(np.abs(g).sum()) ** 2) for g in f.vectors]
               for f in wl.families]
    totals = [[float(_clean(np.array(g.sum()) ** 2, float(np.abs(g).sum()) ** 2)) for g in f.vectors]
              for f in wl.families]
    NA = [float(_size(dom, f.attrs)) for f in wl.families]
    labels, n_list, cols = [], [], []
    G = 0
    for S in comps:
        shape = tuple(dom[i] for i in S)
        pure = np.ones(shape, dtype=bool)
        for ax, i in enumerate(S):
            idx = [slice(None)] * len(S)
            idx[ax] = 0
            pure[tuple(idx)] = False
        fams = [k for k, f in enumerate(wl.families) if set(S) <= set(f.attrs)]
        coef = np.zeros((len(wl.families),) + shape)
        for k in fams:
            f = wl.families[k]
            c = np.ones(shape) / NA[k] ** 2
            for pos, a in enumerate(f.attrs):
                if a in S:
                    ax = S.index(a)
                    c = c * spectra[k][pos].reshape([-1 if q == ax else 1 for q in range(len(S))])
                else:
                    c = c * totals[k][pos]
            coef[k] = c
        flat = coef.reshape(len(wl.families), -1).T  # (N_S, K)
        lab = np.full(flat.shape[0], -1, dtype=np.int64)
        keep = pure.ravel() & (flat.max(axis=1) > 0)
        if np.any(keep):
            with np.errstate(divide="ignore"):
                key = np.round(np.log(flat[keep]), 9)  # equal to 1e-9 relative (zeros: -inf)
            uniq, inv = np.unique(key, axis=0, return_inverse=True)
            inv = inv.ravel()
            counts = np.bincount(inv, minlength=uniq.shape[0]).astype(float)
            sums = np.zeros((uniq.shape[0], flat.shape[1]))
            np.add.at(sums, inv, flat[keep])
            lab[keep] = inv + G
            G += uniq.shape[0]
            n_list.append(counts)
            cols.append(sums.T)  # (K, groups): n_g * mean coefficient
        labels.append(lab.reshape(shape))
    n = np.concatenate(n_list)
    M = np.concatenate(cols, axis=1)
    return comps, labels, n, M


# ----------------------------------------------------------------------------- the common engine
def _sum_closed_form(n, M, w, Nq, P):
    """min ``sum_k w_k Nq_k V_k`` s.t. ``sum_g n_g / eta_g <= P``: Cauchy-Schwarz (spec § 3a)."""
    a = (w * Nq) @ M
    T = float(np.sum(np.sqrt(n * a)))
    eta = np.sqrt(n / a) * T / P
    return eta, T * T / P


def _dual_value(n, M, c, lam) -> float:
    """``(sum_g sqrt(n_g sum_k (lam_k / c_k) M_kg))^2``: a lower bound on the max-program optimum."""
    return float(np.sum(np.sqrt(n * ((lam / c) @ M)))) ** 2


def _max_program(n, M, c, *, solver="CLARABEL", **solver_options):
    """c* = min ``sum_g n_g / eta_g`` s.t. ``M eta <= c`` (one variable per group), by
    :func:`ffu_cvx.cvx.reciprocal_program`.

    Returns ``(eta, lam, status)`` with ``eta`` exactly feasible (rescaled so the tightest
    constraint is met with equality) and ``lam`` (K,) the worst-case marginal weights
    from the constraint duals (simplex).
    """
    # Warm scale: the sum-optimal eta for weights 1/c, scaled to feasibility, makes the
    # unknown t = eta / eta0 of order one whatever the domain sizes.
    eta0, _ = _sum_closed_form(n, M, 1.0 / c, np.ones_like(c), 1.0)
    eta0 = eta0 / np.max((M @ eta0) / c)
    obj_scale = float(np.sum(n / eta0))
    tv, nu, status = cvx.reciprocal_program(n / eta0 / obj_scale, (M * eta0) / c[:, None], solver=solver,
                                            **solver_options)
    if status in INACCURATE:
        warnings.warn(f"fourier max program: {solver} reports an inaccurate solution", RuntimeWarning, stacklevel=3)
    eta = eta0 * tv
    eta = eta * np.max((M @ eta) / c) ** -1.0
    lam = nu if nu.sum() > 0 else np.ones_like(c)
    return eta, lam / lam.sum(), status


# ----------------------------------------------------------------------------- mechanism
@dataclass(frozen=True, eq=False)
class FourierMechanism(_privacy.GaussianPrivacy):
    """A weighted Fourier factorization mechanism and its accounting.

    Attributes
    ----------
    workload : MarginalWorkload or ProductWorkload
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
        target = _check_positive(privacy_cost, "`privacy_cost`")
        s = self.privacy_cost / target
        spectra = tuple(x * s for x in self.spectra)
        return FourierMechanism(self.workload, self.components, spectra, target, self.variances * s,
                                self.objective, self.loss * s, self.lam, self.lower_bound, self.status, self.time)

    def covariance(self, i: int, j: int) -> np.ndarray:
        """Exact noise covariance (N_Ai, N_Aj) between answers of sets / families ``i`` and ``j``."""
        from ._fourier_release import answer_covariance
        return answer_covariance(self, i, j)

    def release(self, records=None, *, histogram=None, rng=None, chunk: int = 1 << 16):
        """Noisy, consistent, unbiased answers from ``records`` (n, d) ints or a ``histogram``.

        See :func:`ffu_cvx._fourier_release.release`; cost ``sum_S N_S log N_S`` plus one
        pass over the records per workload set, never ``prod(n_i)``.
        """
        from ._fourier_release import release
        return release(self, records=records, histogram=histogram, rng=rng, chunk=chunk)

    def to_solution(self, *, max_cells: int = DENSE_MAX_CELLS, certify: bool = True):
        """The same mechanism as a :class:`ffu_cvx.Solution` on a row basis of the dense workload.

        Only for ``prod(n_i) <= max_cells``; see :func:`ffu_cvx._fourier_release.to_solution`.
        """
        from ._fourier_release import to_solution
        return to_solution(self, max_cells=max_cells, certify=certify)


def _marginal_mechanism(wl, comps, N, dS, M, eta, objective, loss, lam, lb, status, t0):
    tau = eta / N
    return FourierMechanism(wl, comps, tuple(float(x) for x in tau), float(np.sum(dS / eta)),
                            M @ eta, objective, float(loss), lam, float(lb), status, time.perf_counter() - t0)


def _product_mechanism(wl, comps, labels, n, M, eta, objective, loss, lam, lb, status, t0):
    spectra = []
    for lab in labels:
        s = np.full(lab.shape, np.inf)
        s[lab >= 0] = eta[lab[lab >= 0]]
        s.setflags(write=False)
        spectra.append(s)
    return FourierMechanism(wl, comps, tuple(spectra), float(np.sum(n / eta)), M @ eta, objective,
                            float(loss), lam, float(lb), status, time.perf_counter() - t0)


def _setup(workload):
    wl = _as_workload(workload)
    if isinstance(wl, MarginalWorkload):
        comps = _closure(wl.sets)
        N, dS, M = _marginal_tables(wl, comps)
        return wl, (comps, N, dS, M), dS, M, np.array([_size(wl.domain, A) for A in wl.sets], float)
    comps, labels, n, M = _product_groups(wl)
    Nq = np.array([_size(wl.domain, f.attrs) for f in wl.families], float)
    return wl, (comps, labels, n, M), n, M, Nq


def _build(wl, parts, eta, *args):
    if isinstance(wl, MarginalWorkload):
        return _marginal_mechanism(wl, *parts, eta, *args)
    return _product_mechanism(wl, *parts, eta, *args)


def sum_optimal(workload, privacy_cost: float = 1.0) -> FourierMechanism:
    """Optimal mechanism for the weighted sum ``sum_k w_k N_k Var_k`` at ``privacy_cost`` P.

    Closed form (spec § 3a, § 4): ``eta_g ∝ sqrt(n_g / a_g)``; the optimal loss is
    ``(sum_g sqrt(n_g a_g))^2 / P``. Optimal among all factorization mechanisms.
    """
    t0 = time.perf_counter()
    P = _check_positive(privacy_cost, "`privacy_cost`")
    wl, parts, n, M, Nq = _setup(workload)
    eta, loss = _sum_closed_form(n, M, np.array(wl.weights), Nq, P)
    return _build(wl, parts, eta, "sum", loss, None, math.nan, OPTIMAL, t0)


def max_optimal(workload, privacy_cost: float | None = None, *, solver: str = "CLARABEL",
                **solver_options) -> FourierMechanism:
    """Optimal mechanism for ``max_k w_k Var_k`` (fitness for use with targets ``c_k = 1/w_k``).

    With ``privacy_cost=None`` returns Problem 1's solution: every target met (the
    tightest with equality) at the smallest privacy cost ``c*``. With a privacy cost P
    returns the same mechanism rescaled to P, whose max weighted variance is ``c* / P``.
    Solves the convex program of spec § 3b with CVXPY (``solver``, default Clarabel), one
    variable per component (marginals) or frequency group (product families), and
    attaches the dual lower bound of the worst-case weights ``lam``.
    """
    t0 = time.perf_counter()
    wl, parts, n, M, _ = _setup(workload)
    c = np.array(wl.targets)
    eta, lam, status = _max_program(n, M, c, solver=solver, **solver_options)
    lb = _dual_value(n, M, c, lam)
    mech = _build(wl, parts, eta, "max", float(np.max((M @ eta) / c)), lam, lb, status, t0)
    return mech if privacy_cost is None else mech.scaled(privacy_cost)


def dual_bound(workload, lam) -> float:
    """Dual form of the max program: for weights ``lam`` (K,) in the simplex,
    ``(sum_S d_S sqrt(sum_{A ⊇ S} lam_A w_A / N_A^2))^2`` (marginals; the product analogue
    otherwise) is a lower bound on Problem 1's optimal privacy cost, attained at the
    worst-case ``lam``."""
    wl, _, n, M, _ = _setup(workload)
    lam = np.asarray(lam, dtype=float)
    if lam.shape != (len(wl.sets),) or np.any(lam < 0) or not lam.sum() > 0:
        raise ValueError(f"`lam` must be a non-negative ({len(wl.sets)},) array, not all zero")
    return _dual_value(n, M, np.array(wl.targets), lam / lam.sum())


def min_privacy_cost(domain, targets: Mapping, *, solver: str = "CLARABEL") -> FourierMechanism:
    """Problem 1 for marginals: the least privacy cost meeting per-cell variance ``targets``.

    Parameters
    ----------
    domain : tuple of int
        Attribute sizes, each >= 2.
    targets : dict {attrs: c_A}
        Attribute sets (0-based tuples, or an int for one attribute) and their per-cell
        variance targets, all > 0.

    Returns
    -------
    FourierMechanism with ``privacy_cost`` (= the SDP's alpha on the dense workload),
    ``taus`` {S: tau_S}, ``variances`` (K,) and ``epsilon(delta)`` / ``delta(eps)`` / ``rho``.

    >>> mech = min_privacy_cost((2, 2), {(0,): 1.0, (1,): 1.0})
    >>> round(mech.privacy_cost, 6)  # (1 + sqrt 2)^2 / 4
    1.457107
    """
    return max_optimal(MarginalWorkload.from_targets(domain, targets), solver=solver)


def marginal_workload_optimum(n_attrs: int, kind: str = "A") -> FourierMechanism:
    """The fitness-for-use paper's marginal workloads on ``n_attrs`` binary attributes.

    ``kind="A"``: 1-way marginals, attribute i (0-based) has target ``i + 1``.
    ``kind="B"``: 2-way marginals (0, j), j = 1..n-1, target ``j``. Returns
    :func:`min_privacy_cost` of the workload (its ``privacy_cost`` is alpha*).
    """
    if isinstance(n_attrs, bool) or not isinstance(n_attrs, (int, np.integer)) or n_attrs < (1 if kind == "A" else 2):
        raise ValueError(f"`n_attrs` must be an integer >= {1 if kind == 'A' else 2}, got {n_attrs!r}")
    if kind == "A":
        targets = {(i,): float(i + 1) for i in range(n_attrs)}
    elif kind == "B":
        targets = {(0, j): float(j) for j in range(1, n_attrs)}
    else:
        raise ValueError(f"`kind` must be 'A' or 'B', got {kind!r}")
    return min_privacy_cost((2,) * int(n_attrs), targets)


# ----------------------------------------------------------------------------- thresholds (§ 5)
def threshold_vector(m: int) -> np.ndarray:
    """Indicator of ``[0, m)`` on ``Z_{2m}`` (2m,): the embedded threshold family's ``g``."""
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"`m` must be an integer >= 1 (values of the numeric attribute), got {m!r}")
    h = np.zeros(2 * m)
    h[:m] = 1.0
    return h


def threshold_shift(t, m: int):
    """Shift ``s`` with ``h((x - s) mod 2m) = 1[x <= t]`` for x in [0, m): ``s = t - m + 1 mod 2m``."""
    return (np.asarray(t) - m + 1) % (2 * m)


def embedding_max_variance(m: int, privacy_cost: float = 1.0) -> float:
    """Closed-form optimum of the 1-D embedded threshold family (spec § 5):
    ``(1/2 + (1/2m) sum_{b odd} 1/sin(pi b / 2m))^2 / P``."""
    threshold_vector(m)
    P = _check_positive(privacy_cost, "`privacy_cost`")
    b = np.arange(1, 2 * m, 2)
    return float((0.5 + np.sum(1.0 / np.sin(np.pi * b / (2 * m))) / (2 * m)) ** 2 / P)


def extended_marginals(domain, numeric: Sequence[int], targets: Mapping) -> ProductWorkload:
    """Extended marginals: threshold predicates on ``numeric`` attributes, points elsewhere.

    Each numeric attribute i with ``m = domain[i]`` values is embedded in ``Z_{2m}``
    (records keep their values in ``[0, m)``); the family for a set A is the product of
    ``threshold_vector(m)`` on numeric attributes and ``e_0`` (a marginal) on the others.
    Query ``1[x_i <= t]`` is the family's answer at shift :func:`threshold_shift` (t, m);
    the other shifts are the complements. Returns the :class:`ProductWorkload` on the
    embedded domain (targets per family from ``targets`` {attrs: c}).
    """
    domain = _check_domain(domain)
    numeric = set(_check_attrs(tuple(numeric), len(domain), "`numeric`"))
    emb = tuple(2 * n if i in numeric else n for i, n in enumerate(domain))
    fams = []
    for k, c in _items(targets, "targets"):
        A = tuple(sorted(_check_attrs(k, len(domain), f"`targets` key {k!r}")))
        vecs = [threshold_vector(domain[i]) if i in numeric else np.eye(domain[i])[0] for i in A]
        fams.append(ProductFamily(A, vecs, 1.0 / _check_positive(c, f"`targets[{k!r}]`")))
    return ProductWorkload(emb, fams)
