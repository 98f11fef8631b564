"""The frequency-group form of a Fourier workload: what the optimisation works on.

Solver layer: imports numpy and :mod:`ffu_cvx.solvers.fourier.workload`. A group ``g`` is
``n_g`` Fourier frequencies sharing one noise level ``eta_g``; the workload's variances
are ``V = M eta`` (K,) and the privacy cost is ``sum_g n_g / eta_g``. For a marginal
workload a group is a component ``S`` (``n_g = d_S``, :func:`marginal_tables`); for
product families, frequencies with equal coefficients over the families share a group
(:func:`product_groups`). :func:`privacy_cost` and :func:`cell_variances` evaluate the
marginal formulas for given per-component noise ``tau_S``.
"""

from __future__ import annotations

import itertools
import math
from typing import Mapping

import numpy as np

from .workload import MarginalWorkload, CirculantWorkload, closure, components, set_size

__all__ = ["marginal_tables", "taus_array", "privacy_cost", "cell_variances", "product_groups"]


# ----------------------------------------------------------------------------- marginal formulas
def marginal_tables(wl: MarginalWorkload, comps):
    """Per-component ``N_S``, ``d_S`` and the (K, |D|) matrix ``M[A, S] = d_S / N_A^2`` (S ⊆ A)."""
    dom = wl.domain
    N = np.array([set_size(dom, S) for S in comps], dtype=float)
    dS = np.array([math.prod(dom[i] - 1 for i in S) for S in comps], dtype=float)
    index = {S: j for j, S in enumerate(comps)}
    M = np.zeros((len(wl.sets), len(comps)))
    for k, A in enumerate(wl.sets):
        NA = float(set_size(dom, A))
        for r in range(len(A) + 1):
            for S in itertools.combinations(A, r):
                j = index[S]
                M[k, j] = dS[j] / NA ** 2
    return N, dS, M


def taus_array(wl: MarginalWorkload, comps, taus) -> np.ndarray:
    """Per-component noise ``taus`` ((|D|,) array or {S: tau}) as a checked (|D|,) array in ``comps`` order."""
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
    t = taus_array(workload, comps, taus)
    N, dS, _ = marginal_tables(workload, comps)
    return float(np.sum(dS / N / t))


def cell_variances(workload: MarginalWorkload, taus) -> np.ndarray:
    """Per-cell variance ``Var_A`` (K,) of every workload marginal under ``taus``."""
    comps = components(workload)
    t = taus_array(workload, comps, taus)
    N, _, M = marginal_tables(workload, comps)
    return M @ (N * t)


# ----------------------------------------------------------------------------- product formulas
def _clean(power: np.ndarray, scale: float) -> np.ndarray:
    """Set to exactly 0 the entries of a power spectrum that are FFT round-off (< 1e-12 scale)."""
    return np.where(power > 1e-12 * scale, power, 0.0)


def product_groups(wl: CirculantWorkload):
    """Frequency groups of a product workload.

    Returns ``comps``, ``labels`` (per component: int array over its grid, -1 where no
    group), ``n`` (G,), ``M`` (K, G). Frequencies whose coefficient vectors over the
    families agree share one noise level (by strict convexity they are equal at the
    optimum); frequencies no family needs are not released.
    """
    dom = wl.domain
    comps = closure(wl.sets)
    spectra = [[_clean(np.abs(np.fft.fft(g)) ** 2, float(np.abs(g).sum()) ** 2) for g in f.vectors]
               for f in wl.families]
    totals = [[float(_clean(np.array(g.sum()) ** 2, float(np.abs(g).sum()) ** 2)) for g in f.vectors]
              for f in wl.families]
    NA = [float(set_size(dom, f.attrs)) for f in wl.families]
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
