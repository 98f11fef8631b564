"""Release, exact covariances and the dense equivalent of a Fourier mechanism.

Solver layer: imports numpy, scipy, :mod:`ffu_cvx.model.privacy` (the neighbouring relation), :mod:`ffu_cvx.release.noise`,
:mod:`ffu_cvx.model.accuracy`, :mod:`ffu_cvx.model.problem`, :mod:`ffu_cvx.model.result`, :mod:`ffu_cvx.model.validation`,
:mod:`ffu_cvx.release.release` (the Release every mechanism returns; the release layer's bottom, below the solvers) and the
Fourier modules ``workload`` and ``groups``, never ``mechanism``: every function here
takes the mechanism as an argument and reads only its ``workload``, ``components``,
``spectra``, ``variances``, ``privacy_cost``, ``lam``, ``status``, ``objective`` and
``time``, so :class:`~ffu_cvx.solvers.fourier.FourierMechanism` (one module up) can call them
as methods without an import cycle.

Release (spec §§ 2, 4): for every component ``S`` the ``S``-marginal ``m_S`` (read off a
workload marginal ``A ⊇ S``, itself counted from the records) is projected on the pure
frequencies of ``S`` and perturbed there, ``r_S = c(m_S) + zeta_S``; the workload
marginals are rebuilt as ``m_A = sum_{S ⊆ A} expand_A(r_S) / N_{A \\ S}``, and product
families are circular cross-correlations of ``m_A`` with their vectors (by FFT). Nothing
of size ``prod(n_i)`` is ever allocated unless the caller passes a histogram. The result is
a :class:`ffu_cvx.release.release.Release`: one group per set or family, its answers flattened in C
order (``tables`` gives them back as arrays), its statement, CSV and verification those of
every release.

Noise (:mod:`ffu_cvx.release.noise`): every component's whitened answers (``c(m_S) / sqrt(tau_S)``,
or for a spectrum the pure frequencies divided by their noise amplitude) are perturbed
together by the sampler, OpenDP's by default, and mapped back.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
from scipy import linalg

from ...model import privacy, validation
from ...model.accuracy import Target
from ...model.problem import FitnessProblem
from ...model.result import Solution
from ...release import noise
from ...release.release import DEFAULT_DELTA, Release, check_level
from .groups import taus_array
from .workload import MarginalWorkload, CirculantWorkload, as_workload, components, set_size

__all__ = ["DENSE_MAX_CELLS", "CellLabels", "release", "marginal_covariance", "answer_covariance",
           "cell_covariance", "dense_workload", "to_solution"]

#: Largest full domain (``prod(n_i)``) for which dense matrices are built (``to_solution``).
DENSE_MAX_CELLS = 4096


# ----------------------------------------------------------------------------- covariances
def _kernel(domain, S, spectrum) -> np.ndarray:
    """Noise covariance of component ``S`` as a function of the cell difference (shape of S).

    ``K_S[s, t] = kernel[(s - t) mod n]``: for a float ``tau`` it is
    ``tau prod_i (1[u_i = 0] - 1/n_i)``; for a per-frequency ``eta`` array it is
    ``ifftn(eta) / N_S`` over the released frequencies.
    """
    shape = tuple(domain[i] for i in S)
    if isinstance(spectrum, float):
        k = np.array(float(spectrum))
        for ax, n in enumerate(shape):
            v = -np.full(n, 1.0 / n)
            v[0] += 1.0
            k = k * v.reshape([-1 if q == ax else 1 for q in range(len(shape))])
        return k
    eta = np.where(np.isfinite(spectrum), spectrum, 0.0)
    return np.fft.ifftn(eta).real / eta.size


def _cells(domain, A) -> np.ndarray:
    """Coordinates (|A|, N_A) of the cells of marginal A in C order."""
    shape = tuple(domain[i] for i in A)
    return np.indices(shape).reshape(len(A), -1) if A else np.zeros((0, 1), dtype=np.int64)


def marginal_covariance(domain, spectra: dict, A, B) -> np.ndarray:
    """Exact covariance (N_A, N_B) of the reconstructed marginals ``m_A`` and ``m_B``.

    ``spectra`` maps each component S to its float ``tau_S`` or its ``eta`` array.
    ``Cov(m_A[s], m_B[t]) = sum_{S ⊆ A∩B} K_S[s_S - t_S] / (N_{A\\S} N_{B\\S})``.
    """
    ca, cb = _cells(domain, A), _cells(domain, B)
    common = sorted(set(A) & set(B))
    out = np.zeros((ca.shape[1], cb.shape[1]))
    for r in range(len(common) + 1):
        for S in itertools.combinations(common, r):
            if S not in spectra:
                continue
            ker = _kernel(domain, S, spectra[S])
            scale = set_size(domain, set(A) - set(S)) * set_size(domain, set(B) - set(S))
            if not S:
                out += float(ker) / scale
                continue
            n = np.array([domain[i] for i in S])[:, None, None]
            diff = (ca[[A.index(i) for i in S]][:, :, None] - cb[[B.index(i) for i in S]][:, None, :]) % n
            out += ker[tuple(diff)] / scale
    return out


def cell_covariance(workload: MarginalWorkload, taus, i: int, j: int) -> np.ndarray:
    """Exact covariance (N_Ai, N_Aj) between the cells of marginals ``sets[i]`` and ``sets[j]``.

    ``Cov(m_A[s], m_B[t]) = sum_{S ⊆ A∩B} tau_S prod_{l in S}(1[s_l = t_l] - 1/n_l) / (N_{A\\S} N_{B\\S})``;
    cells are in C order of the sorted attribute set.
    """
    comps = components(workload)
    t = taus_array(workload, comps, taus)
    spectra = {S: float(tau) for S, tau in zip(comps, t)}
    return marginal_covariance(workload.domain, spectra, workload.sets[i], workload.sets[j])


def _family_matrix(domain, family) -> np.ndarray:
    """(N_A, N_A) map from marginal ``m_A`` to the family's answers ``q_t``, t in C order."""
    cells = _cells(domain, family.attrs)
    G = np.ones((cells.shape[1], cells.shape[1]))
    for pos, g in enumerate(family.vectors):
        n = g.size
        G *= g[(cells[pos][None, :] - cells[pos][:, None]) % n]
    return G


def _spectra(mech) -> dict:
    return dict(zip(mech.components, mech.spectra))


def answer_covariance(mech, i: int, j: int) -> np.ndarray:
    """Exact noise covariance (N_i, N_j) between the answers of sets / families i and j."""
    wl = mech.workload
    A, B = wl.sets[i], wl.sets[j]
    C = marginal_covariance(wl.domain, _spectra(mech), A, B)
    if isinstance(wl, CirculantWorkload):
        C = _family_matrix(wl.domain, wl.families[i]) @ C @ _family_matrix(wl.domain, wl.families[j]).T
    return C


# ----------------------------------------------------------------------------- dense equivalent
def dense_workload(workload, *, max_cells: int = DENSE_MAX_CELLS):
    """Dense ``(W (m, N), c (m,), labels)`` of a marginal or product workload, cells in C order.

    Rows of set / family k are its ``N_A`` cells (or shifts) in C order. Refuses domains
    with more than ``max_cells`` cells.
    """
    wl = as_workload(workload)
    if wl.n_cells > max_cells:
        raise ValueError(f"the full domain has {wl.n_cells} cells > max_cells={max_cells}; dense matrices "
                         "are for small domains only (raise `max_cells` if you really want them)")
    pw = CirculantWorkload.from_marginals(wl) if isinstance(wl, MarginalWorkload) else wl
    full = np.indices(wl.domain).reshape(len(wl.domain), -1)
    rows, c, labels = [], [], []
    for label, f, target in zip(wl.labels(), pw.families, wl.targets):
        shifts = _cells(wl.domain, f.attrs)
        Wk = np.ones((shifts.shape[1], full.shape[1]))
        for pos, (a, g) in enumerate(zip(f.attrs, f.vectors)):
            Wk *= g[(full[a][None, :] - shifts[pos][:, None]) % g.size]
        rows.append(Wk)
        c += [target] * Wk.shape[0]
        labels += [label] * Wk.shape[0]
    return np.vstack(rows), np.array(c), tuple(labels)


def to_solution(mech, *, max_cells: int = DENSE_MAX_CELLS, certify: bool = True):
    """The mechanism as a :class:`ffu_cvx.Solution` of ``FitnessProblem(W, c, basis="rows")``.

    ``W`` (m, N) is :func:`dense_workload`; ``Sigma`` (k, k) is the unique covariance on the
    row basis with ``L Sigma L^T`` equal to the exact answer covariance (it lies in the
    column space of ``L``, so ``Sigma = L^+ C L^{+T}`` reproduces it exactly). The dual
    multipliers of the max program (uniform over cells, ``lam_A / (c_A N_A)`` per query)
    seed the certificate. Cost: dense ``m x m`` covariance and a ``k x k`` eigensolve.
    """
    wl = mech.workload
    W, c, labels = dense_workload(wl, max_cells=max_cells)
    problem = FitnessProblem(W, c, basis="rows", labels=labels, name=_name(wl))
    K = len(wl.sets)
    blocks = [[answer_covariance(mech, i, j) if j >= i else None for j in range(K)] for i in range(K)]
    C = np.block([[blocks[i][j] if j >= i else blocks[j][i].T for j in range(K)] for i in range(K)])
    X = linalg.lstsq(problem.L, C, check_finite=False)[0]
    sigma = linalg.lstsq(problem.L, X.T, check_finite=False)[0]
    sigma = 0.5 * (sigma + sigma.T)
    lam = mu = None
    if mech.lam is not None:
        sizes = np.array([set_size(wl.domain, A) for A in wl.sets])
        mu = np.repeat(mech.lam / np.array(wl.targets) / sizes, sizes)
        lam = np.full(W.shape[1], 1.0 / W.shape[1])
    return Solution.from_sigma(problem, sigma, method="fourier", status=mech.status,
                               message=f"weighted Fourier factorization ({mech.objective} objective)",
                               lam=lam, mu=mu, certify=certify, time=mech.time, nit=None)


# ----------------------------------------------------------------------------- release
def _name(workload) -> str:
    """The workload's name in a dense problem and a release statement, e.g. ``"fourier:MarginalWorkload"``."""
    return f"fourier:{type(workload).__name__}"


class CellLabels(Sequence):
    """The labels of a Fourier release's answers, made one at a time: each answer's cell (or shift) in its
    set or family, e.g. ``"(2, 0)"``; ``shapes`` holds each set's or family's array shape."""

    def __init__(self, shapes):
        self.shapes = tuple(shapes)
        self.offsets = np.cumsum([0] + [math.prod(s) for s in self.shapes])

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def __getitem__(self, j):
        if isinstance(j, slice):
            return [self[i] for i in range(*j.indices(len(self)))]
        j = j + len(self) if j < 0 else j
        if not 0 <= j < len(self):
            raise IndexError(f"answer {j} is not in 0..{len(self) - 1}")
        k = int(np.searchsorted(self.offsets, j, side="right")) - 1
        return str(tuple(int(i) for i in np.unravel_index(j - self.offsets[k], self.shapes[k])))

    def __iter__(self):
        for shape in self.shapes:
            yield from map(str, np.ndindex(shape))


def _check_records(records, domain) -> np.ndarray:
    rec = np.asarray(records)
    if rec.ndim != 2 or rec.shape[1] != len(domain):
        raise ValueError(f"`records` must be an (n_records, {len(domain)}) integer array, got shape {rec.shape}")
    if rec.dtype.kind not in "iub":
        raise ValueError(f"`records` must hold integer attribute values, got dtype {rec.dtype}; "
                         "encode each attribute as 0..n_i-1")
    if rec.shape[0]:
        lo, hi = rec.min(axis=0), rec.max(axis=0)
        bad = np.flatnonzero((lo < 0) | (hi >= np.array(domain)))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"`records` column {i} has values in [{lo[i]}, {hi[i]}], outside 0..{domain[i] - 1}")
    return rec


def _count(records, domain, sets, chunk) -> dict:
    """Marginal counts ``{A: (n_i)_{i in A} float}`` over record chunks of ``chunk`` rows.

    Each chunk is transposed once to contiguous int64 columns; each set then costs one
    index computation and one ``bincount`` (about three passes over the chunk).
    Temporary memory is ``O(chunk x d)`` (the chunk shrinks so the int64 columns stay
    near 16 MiB), independent of ``prod(n_i)``.
    """
    out = {A: np.zeros(set_size(domain, A), dtype=np.int64) for A in sets}
    used = sorted({i for A in sets for i in A})
    chunk = min(chunk, max(4096, (1 << 21) // max(len(used), 1)))
    for start in range(0, records.shape[0], chunk):
        block = records[start:start + chunk]
        cols = dict(zip(used, block[:, used].T.astype(np.int64)))  # C-contiguous rows of the transpose
        for A in sets:
            if not A:
                out[A][0] += block.shape[0]
                continue
            if len(A) == 1:
                idx = cols[A[0]]
            else:
                idx = cols[A[0]] * domain[A[1]]
                idx += cols[A[1]]
                for i in A[2:]:
                    idx *= domain[i]
                    idx += cols[i]
            out[A] += np.bincount(idx, minlength=out[A].size)
    return {A: v.reshape([domain[i] for i in A]).astype(float) for A, v in out.items()}


def _from_histogram(histogram, domain, sets) -> dict:
    h = np.asarray(histogram, dtype=float)
    N = set_size(domain, range(len(domain)))
    if h.size != N or (h.ndim != 1 and h.shape != tuple(domain)):
        raise ValueError(f"`histogram` must have shape {tuple(domain)} or ({N},), got {h.shape}")
    if not np.all(np.isfinite(h)):
        raise ValueError("`histogram` contains NaN or inf")
    h = h.reshape(domain)
    return {A: h.sum(axis=tuple(i for i in range(len(domain)) if i not in A)) for A in sets}


def _centre(x: np.ndarray) -> np.ndarray:
    for ax in range(x.ndim):
        x = x - x.mean(axis=ax, keepdims=True)
    return x


def release(mech, records=None, *, histogram=None, rng=None, chunk: int = 1 << 16, sampler=None, level: float = 0.95,
            delta: float = DEFAULT_DELTA) -> Release:
    """Sample the mechanism's release on ``records`` (n, d) ints in ``0..n_i-1`` or a ``histogram``.

    Parameters
    ----------
    mech : FourierMechanism
    records : (n_records, d) int array, optional
        One row per person; counted in chunks of ``chunk`` rows (memory independent of
        ``prod(n_i)`` and of ``n_records`` beyond the input itself).
    histogram : array of shape ``domain`` or (N,), optional
        Full-domain counts in C order (small domains).
    rng : None, int or numpy.random.Generator
        Source of the noise. ``None`` draws fresh OS entropy through OpenDP's sampler
        (what a real release wants); a seed makes the noise reproducible with numpy's
        sampler, for testing only: whoever knows the seed can remove the noise.
    sampler : None, ``"opendp"``, ``"numpy"`` or a sampler (:func:`ffu_cvx.release.noise.sampler_for`).
    level : confidence level of the intervals; delta : the delta of the statement's epsilon.

    Returns
    -------
    Release
        One group per set / family k (``group_names`` its label, ``shapes[k]`` the shape
        ``(n_i)_{i in A_k}``): ``tables[k]`` the marginal itself or, for a product family, the
        answer at every shift ``t``; ``answers`` (m,) those flattened in C order, with their
        ``variances`` (m,), intervals and variance targets; ``marginals`` ``{A: array}`` the
        reconstructed marginals (consistent: summing ``marginals[A]`` over ``A \\ B`` gives
        ``marginals[B]``; for product workloads only the frequencies some family uses are
        released, so these are unbiased on those frequencies only, the family answers are);
        ``privacy_cost`` alpha, ``neighbours`` add/remove, ``noise`` the sampler's account.
    """
    wl = mech.workload
    dom = wl.domain
    if (records is None) == (histogram is None):
        raise ValueError("give exactly one of `records` (n, d) or `histogram`")
    chunk = validation.positive_int(chunk, "chunk")
    level = check_level(level)
    draw = noise.sampler_for(sampler, rng)
    sets = tuple(dict.fromkeys(wl.sets))
    if records is not None:
        base = _count(_check_records(records, dom), dom, sets, chunk)
    else:
        base = _from_histogram(histogram, dom, sets)
    source = {}  # component -> the smallest workload set containing it
    for A in sorted(sets, key=lambda A: set_size(dom, A)):
        for q in range(len(A) + 1):
            for S in itertools.combinations(A, q):
                source.setdefault(S, A)
    marg = [base[source[S]].sum(axis=tuple(p for p, i in enumerate(source[S]) if i not in S)) for S in mech.components]
    white = noise.whiten(lambda dtype: _whitened(marg, mech.spectra, dtype), math.sqrt(mech.privacy_cost))
    noisy, account = draw.draw(white, None if rng is None else np.random.default_rng(rng))
    cuts = np.split(noisy, np.cumsum([m.size for m in marg])[:-1]) if marg else []
    r = {S: _from_whitened(v.reshape(m.shape), spec) for S, m, spec, v in zip(mech.components, marg, mech.spectra, cuts)}
    marginals = {}
    for A in sets:
        acc = np.zeros([dom[i] for i in A])
        for q in range(len(A) + 1):
            for S in itertools.combinations(A, q):
                shape = [dom[i] if i in S else 1 for i in A]
                acc = acc + r[S].reshape(shape) / set_size(dom, set(A) - set(S))
        marginals[A] = acc
    if isinstance(wl, MarginalWorkload):
        answers = tuple(marginals[A] for A in wl.sets)
    else:
        answers = []
        for f in wl.families:
            ghat = np.ones([dom[i] for i in f.attrs], dtype=complex)
            for pos, g in enumerate(f.vectors):
                ghat = ghat * np.fft.fft(g).reshape([-1 if q == pos else 1 for q in range(len(f.attrs))])
            answers.append(np.fft.ifftn(np.fft.fftn(marginals[f.attrs]) * np.conj(ghat)).real)
    shapes = tuple(a.shape for a in answers)
    sizes = [a.size for a in answers]
    return Release.build(np.concatenate([a.ravel() for a in answers]), np.repeat(mech.variances, sizes), level,
                         labels=CellLabels(shapes), privacy_cost=mech.privacy_cost, neighbours=privacy.ADD_REMOVE,
                         mechanism=f"weighted Fourier factorization ({mech.objective} objective)", name=_name(wl),
                         statement_delta=delta, groups=np.repeat(np.arange(len(answers)), sizes),
                         group_names=wl.labels(), info={"domain": list(dom)},
                         targets=np.repeat(np.asarray(wl.targets, dtype=float), sizes),
                         group_targets=tuple(Target("variance", float(c)) for c in wl.targets), noise=account,
                         shapes=shapes, marginals=marginals)


def _whitened(marginals: list, spectra: list, dtype) -> tuple[np.ndarray, np.ndarray, int]:
    """Every component's whitened answers in ``dtype``, concatenated, as :func:`ffu_cvx.release.noise.whiten` asks:
    ``c(m_S) / sqrt(tau_S)`` for a variance, the pure frequencies over their amplitude for a spectrum."""
    values, products, depth = [], [], 1
    for m_S, spec in zip(marginals, spectra):
        size = max(m_S.size, 1)
        if isinstance(spec, float):
            values.append(_centre(m_S.astype(dtype)) / dtype(math.sqrt(spec)))
            # each centring pass subtracts a mean of n_i entries: within 2^ndim max|m_S|
            products.append(np.full(m_S.shape, np.abs(m_S).max(initial=0.0) * 2.0 ** m_S.ndim / math.sqrt(spec)))
            depth = max(depth, sum(m_S.shape) + 2 * m_S.ndim)
        else:
            mask, amp = _spectrum(spec, size)
            inv = np.where(mask, 1.0 / np.where(mask, amp, 1.0), 0.0)
            values.append(np.fft.ifftn(inv.astype(dtype) * np.fft.fftn(m_S.astype(dtype))).real)
            # norm-wise: two FFTs, each within 4 log2(N) eps/2 relative, and the scaling by inv
            products.append(np.full(m_S.shape, np.linalg.norm(m_S) * inv.max() / math.sqrt(size)))
            depth = max(depth, int(8 * math.log2(max(size, 2))) + 2)
    flat = [v.reshape(-1) for v in values]
    return (np.concatenate(flat) if flat else np.zeros(0, dtype)), np.concatenate([p.reshape(-1) for p in products]
                                                                                  or [np.zeros(0)]), depth


def _spectrum(spec: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``(mask, amp)`` of a spectrum: the released frequencies and the noise amplitude on each."""
    mask = np.isfinite(spec)
    return mask, np.sqrt(np.where(mask, spec, 0.0) / size)


def _from_whitened(noisy: np.ndarray, spec) -> np.ndarray:
    """``r_S`` from a component's perturbed whitened answers ``noisy`` (the marginal's shape)."""
    if isinstance(spec, float):
        return _centre(math.sqrt(spec) * noisy)
    mask, amp = _spectrum(spec, max(noisy.size, 1))
    return np.fft.ifftn(np.where(mask, amp * np.fft.fftn(noisy), 0.0)).real
