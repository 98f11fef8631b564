"""The mechanism's generalised least squares in whitened form: implicit operators on histograms.

Estimate layer: imports numpy and scipy.linalg only; it reads a product workload's groups and
blocks (:mod:`ffu_cvx.workloads.products`) and a Solution's fields (``terms`` of a structured one,
``sigma`` and ``problem`` of a dense one) without importing their modules.

A release publishes the answers ``a = W x + e`` with ``e ~ N(0, C)``, ``C = L Sigma L^T``
and ``W = L B``. The generalised least squares (GLS) objective of a histogram ``x`` is
``(a - W x)^T C^+ (a - W x)``; ``C`` may be singular (more answers than basis
measurements), hence the pseudo-inverse: ``a - W x`` always lies in the range of ``L``,
where ``C^+`` is the inverse of ``C``. An operator here writes that objective as
``|| z - F x ||^2`` with ``z = V^T a`` (the whitened answers) and ``F = V^T W``, where
``V V^T = C^+`` on the range of ``L``:

- :class:`DenseGLS` (a dense Solution): ``V`` from the eigendecomposition of ``C``
  (eigenvalues below a relative cut are the null space);
- :class:`StructuredGLS` (a structured Solution): the answers determine the basis
  measurements ``y_t`` of every term (``L`` has full column rank), so
  ``y = L^- a`` for any left inverse and the objective is
  ``sum_t || Sigma_t^{-1/2} (y_t - B_t x) ||^2``: with ``Sigma_t^{1/2}`` the Kronecker
  product of the factors' Cholesky factors and ``L^-`` read from one group per term, the
  whitening is a Kronecker product of small matrices per term, applied by mode products
  on that group's answers. ``W`` and ``W^T`` are applied block by block (totals as sums
  and broadcasts, identities skipped), so nothing of size d x d or m x d is formed.

A structured term is read from group ``g`` when every reconstruction factor ``R_{g,t,f}``
has full column rank and each other term ``t'`` the group uses is orthogonal to it in
some factor (``R_{g,t,f}^+ R_{g,t',f} = 0``); then ``(R_{g,t}^+) a_g = y_t``. The
structures of the Kronecker solver (one product, independent products, the symmetry
reduction, marginal unions) all have such a group; a mechanism without one is refused.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import linalg

__all__ = ["DenseGLS", "StructuredGLS", "operator", "reading_group", "group_apply", "group_adjoint", "RANK_RTOL"]

#: Relative singular value (or eigenvalue of ``C``) below which a direction counts as absent.
RANK_RTOL = 1e-10


def _modes(T: np.ndarray, dims: list, mats) -> np.ndarray:
    """``(M_1 (x) ... (x) M_q) T`` for a flat tensor ``T`` of shape ``dims`` (row-major), by mode
    products, the most shrinking first (the modes commute; the tensor is smallest that way)."""
    dims = list(dims)
    for axis in sorted(range(len(mats)), key=lambda i: mats[i].shape[0] / mats[i].shape[1]):
        M = mats[axis]
        left, right = math.prod(dims[:axis]), math.prod(dims[axis + 1:])
        T = np.einsum("rk,lkm->lrm", M, T.reshape(left, dims[axis], right)).reshape(-1)
        dims[axis] = M.shape[0]
    return T


# ----------------------------------------------------------------------------- the workload, block by block
def _block_mode(T: np.ndarray, dims: list, axis: int, block, adjoint: bool) -> np.ndarray:
    """One block applied along ``axis`` (``A`` or ``A^T``; a total only forwards): identities skipped, totals
    summed."""
    left, n, right = math.prod(dims[:axis]), dims[axis], math.prod(dims[axis + 1:])
    A = block.matrix
    if block.kind == "identity":
        return T
    T = T.reshape(left, n, right)
    if block.kind == "total":
        out, dims[axis] = T.sum(axis=1), 1
    else:
        M = A.T if adjoint else A
        out, dims[axis] = np.einsum("rk,lkm->lrm", M, T), M.shape[0]
    return np.ascontiguousarray(out).reshape(-1)


def group_apply(x: np.ndarray, group) -> np.ndarray:
    """``W_g x`` (m_g,) for a dense histogram (d,), blocks that shrink first."""
    dims = [b.matrix.shape[1] for b in group.blocks]
    order = sorted(range(len(dims)), key=lambda i: group.blocks[i].matrix.shape[0] / dims[i])
    T = np.asarray(x, dtype=float).reshape(-1)
    for axis in order:
        T = _block_mode(T, dims, axis, group.blocks[axis], adjoint=False)
    return T


def group_adjoint(u: np.ndarray, group, out: np.ndarray | None = None) -> np.ndarray:
    """``W_g^T u`` (d,) for ``u`` (m_g,), blocks that grow last, added into ``out`` if given.

    Totals are broadcasts: the other blocks are applied first, on a tensor with one row
    on each total's axis, and the result is added into ``out`` by broadcasting, so no
    (d,) temporary is formed.
    """
    dims = [b.matrix.shape[0] for b in group.blocks]
    rest = [i for i, b in enumerate(group.blocks) if not b.is_total]
    order = sorted(rest, key=lambda i: group.blocks[i].matrix.shape[1] / dims[i])
    T = np.asarray(u, dtype=float).reshape(-1)
    for axis in order:
        T = _block_mode(T, dims, axis, group.blocks[axis], adjoint=True)
    full = [b.matrix.shape[1] for b in group.blocks]
    out = np.zeros(math.prod(full)) if out is None else out
    out.reshape(full)[...] += T.reshape(dims)
    return out


# ----------------------------------------------------------------------------- structured
def _layout(rows: tuple, factors) -> tuple[list, list]:
    """``(perm, dims)``: group answers (domain order, axes of one row dropped) transposed by ``perm``
    are the term's factor layout, of shape ``dims`` (rows per factor, its attributes jointly)."""
    keep = [i for i, r in enumerate(rows) if r > 1]
    order = [i for f in factors for i in f.attrs if rows[i] > 1]
    if sorted(order) != keep:
        raise ValueError("a term's factors do not partition the attributes its group answers over")
    return [keep.index(i) for i in order], [math.prod(rows[i] for i in f.attrs) for f in factors]


class _Pinv(dict):
    """Pseudo-inverses and column ranks of reconstruction matrices, once per matrix (terms share them)."""

    def pinv(self, R: np.ndarray) -> np.ndarray:
        key = id(R)
        if key not in self:
            self[key] = (R, np.linalg.pinv(R))
        return self[key][1]

    def full_column_rank(self, R: np.ndarray) -> bool:
        P = self.pinv(R)
        return np.allclose(P @ R, np.eye(R.shape[1]), atol=RANK_RTOL ** 0.5)


def _orthogonal(term, other, g: int, cache: _Pinv) -> bool:
    """Some factor of group ``g`` separates ``term`` from ``other``: ``R_{g,t,f}^+ R_{g,t',f} = 0`` (factors
    matched by their attributes, in any order; scalar factors over no attribute separate nothing)."""
    mine = {f.attrs: R for f, R in zip(term.factors, term.recon[g]) if f.attrs}
    theirs = {f.attrs: S for f, S in zip(other.factors, other.recon[g]) if f.attrs}
    if set(mine) != set(theirs):
        return False
    return any(np.abs(cache.pinv(R) @ theirs[a]).max() <= RANK_RTOL * max(1.0, np.abs(theirs[a]).max())
               for a, R in mine.items())


def reading_group(terms, t: int, cache: _Pinv | None = None) -> int | None:
    """The group from whose answers alone term ``t``'s basis measurements follow, or None."""
    cache = _Pinv() if cache is None else cache
    term = terms[t]
    for g in sorted(term.recon):
        if not all(cache.full_column_rank(R) for R in term.recon[g]):
            continue
        if all(_orthogonal(term, other, g, cache) for s, other in enumerate(terms) if s != t and g in other.recon):
            return g
    return None


class StructuredGLS:
    """The whitened GLS of a structured mechanism (``terms``, see :mod:`ffu_cvx.solvers.kron.terms`) for ``workload``.

    Per term ``t`` read from group ``g_t``: ``z_t = (M_{t,1} (x) ...) a_{g_t}`` with
    ``M_{t,f} = C_{t,f}^{-1} R_{g_t,t,f}^+`` (``C`` the Cholesky factor of ``Sigma_{t,f}``).
    """

    def __init__(self, terms, workload):
        self.workload, self.groups = workload, workload.groups
        self.d, self.m = workload.d, workload.m
        self._reads = []
        cache = _Pinv()
        for t, term in enumerate(terms):
            g = reading_group(terms, t, cache)
            if g is None:
                raise ValueError(f"term {t} of the structured solution cannot be read from any one group's answers "
                                 "(no group has a full-column-rank, separated reconstruction of it), so the GLS "
                                 "whitening is not available in factors; solve with structure='independent' or "
                                 "'symmetric', or use a dense solution on a small domain")
            rows = self.groups[g].shape
            perm, dims = _layout(rows, term.factors)
            mats = [linalg.solve_triangular(f.chol, cache.pinv(R), lower=True)
                    for f, R in zip(term.factors, term.recon[g])]
            self._reads.append((g, perm, dims, [r for i, r in enumerate(rows) if r > 1], mats))
        self.used = sorted({r[0] for r in self._reads})
        self.n = sum(math.prod(M.shape[0] for M in r[4]) for r in self._reads)

    def _group_slice(self, g: int) -> slice:
        off = self.workload.offsets
        return slice(off[g], off[g + 1])

    def _whiten_groups(self, parts: dict) -> np.ndarray:
        out = []
        for g, perm, dims, shape, mats in self._reads:
            A = parts[g].reshape(shape).transpose(perm).reshape(-1) if shape else parts[g]
            out.append(_modes(A, dims, mats))
        return np.concatenate(out)

    def whiten(self, answers) -> np.ndarray:
        """The whitened answers ``z`` (n,) from the released answers (m,)."""
        a = np.asarray(answers, dtype=float)
        return self._whiten_groups({g: a[self._group_slice(g)] for g in self.used})

    def whiten_adjoint(self, r: np.ndarray) -> dict:
        """``V r`` as ``{group: (m_g,)}`` for the groups the whitening reads."""
        out = {g: np.zeros(self.groups[g].m) for g in self.used}
        start = 0
        for g, perm, dims, shape, mats in self._reads:
            size = math.prod(M.shape[0] for M in mats)
            U = _modes(r[start:start + size], [M.shape[0] for M in mats], [M.T for M in mats])
            start += size
            if shape:
                U = U.reshape([shape[i] for i in perm]).transpose(np.argsort(perm)).reshape(-1)
            out[g] += U
        return out

    def forward(self, x: np.ndarray) -> np.ndarray:
        """``F x = V^T W x`` (n,) for a histogram (d,)."""
        return self._whiten_groups({g: group_apply(x, self.groups[g]) for g in self.used})

    def adjoint(self, r: np.ndarray) -> np.ndarray:
        """``F^T r = W^T V r`` (d,)."""
        out = np.zeros(self.d)
        for g, u in self.whiten_adjoint(r).items():
            group_adjoint(u, self.groups[g], out)
        return out

    def answers(self, x: np.ndarray) -> np.ndarray:
        """``W x`` (m,)."""
        return np.concatenate([group_apply(x, g) for g in self.groups])

    def answers_adjoint(self, u: np.ndarray) -> np.ndarray:
        """``W^T u`` (d,) for ``u`` (m,)."""
        out = np.zeros(self.d)
        for g, group in enumerate(self.groups):
            group_adjoint(u[self._group_slice(g)], group, out)
        return out

    @property
    def nonnegative(self) -> bool:
        """Every entry of ``W`` is >= 0 (true of the built-in blocks)."""
        return all(b.matrix.min() >= 0 for g in self.groups for b in g.blocks)



class DenseGLS:
    """The whitened GLS of a dense mechanism: ``W`` (m, d), ``L`` (m, k), ``sigma`` (k, k).

    ``V = U_r diag(s_r^{-1/2})`` over the eigenpairs of ``C = L Sigma L^T`` above
    :data:`RANK_RTOL` times the largest: ``V V^T = C^+``.
    """

    def __init__(self, W, L, sigma):
        self.W = np.asarray(W, dtype=float)
        self.m, self.d = self.W.shape
        C = L @ sigma @ L.T
        s, U = linalg.eigh(0.5 * (C + C.T))
        keep = s > RANK_RTOL * s.max()
        self.V = U[:, keep] / np.sqrt(s[keep])
        self.F = self.V.T @ self.W
        self.n = self.F.shape[0]

    def whiten(self, answers) -> np.ndarray:
        return self.V.T @ np.asarray(answers, dtype=float)

    def forward(self, x: np.ndarray) -> np.ndarray:
        return self.F @ x

    def adjoint(self, r: np.ndarray) -> np.ndarray:
        return self.F.T @ r

    def answers(self, x: np.ndarray) -> np.ndarray:
        return self.W @ x

    def answers_adjoint(self, u: np.ndarray) -> np.ndarray:
        return self.W.T @ u

    @property
    def nonnegative(self) -> bool:
        return bool(self.W.min() >= 0)


def operator(solution, workload):
    """The whitened GLS operator of ``solution`` (structured: ``terms``; dense: ``sigma``) for ``workload``."""
    terms = getattr(solution, "terms", None)
    if terms is not None:
        return StructuredGLS(terms, workload)
    problem = solution.problem
    return DenseGLS(problem.W, problem.L, np.asarray(solution.sigma, dtype=float))
