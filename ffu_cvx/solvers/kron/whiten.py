"""The whitened strategy answers of a structured mechanism, from sparse counts.

Solver layer (``ffu_cvx.solvers.kron``): imports numpy, scipy.linalg and the package's ``terms`` (factors read by
their fields). Nothing over the domain is formed.

Term ``t`` of a structured mechanism adds ``(C_{t,1} (x) ... (x) C_{t,q}) xi_t`` to its
strategy answers ``(B_{t,1} (x) ...) x``; with ``M_f = C_f^{-1} B_f`` (over the cells;
``(P_C / sqrt(scale))`` on the class for a residual factor, whose noise is ``|C|`` centred
draws) the release is ``noise(w_t + xi_t)`` with the *whitened* answers
``w_t = (M_{t,1} (x) ...) x`` of ``prod_f draws_f`` entries, read row-major over the
factors as :func:`ffu_cvx.solvers.kron.terms.group_noise` reads its draws. The squared norm of
a cell's column of all terms' ``M`` together is its privacy profile, so the whitened
answers have L2 sensitivity ``sqrt(privacy_cost)``.

:func:`whitened` forms them from :class:`ffu_cvx.workloads.counts.Counts` exactly up to the mode
products: the counts are summed per reduced index (class tuple, value) in integers, a
factor with one row that is constant on the counts is a scalar, and the rest is a dense
tensor over the reduced indices (refused above ``max_cells``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import linalg

from . import terms as _terms

__all__ = ["whitened", "split", "MAX_CELLS"]

#: Largest dense tensor (entries over the reduced indices of one term) :func:`whitened` forms.
MAX_CELLS = 1 << 26


def _factor_map(f, codes: np.ndarray, sizes) -> tuple[np.ndarray, np.ndarray]:
    """``(index (n_u,), M (draws, r))`` of a factor: a counts row's column of the whitened factor is
    ``M[:, index]`` (class weights and a residual's zero column for non-members folded into ``M``)."""
    cols = codes[:, list(f.attrs)]
    if isinstance(f, _terms.ResidualFactor):
        c = f.members.size
        pos = np.full(f.n, c, dtype=np.int64)
        pos[f.members] = np.arange(c)
        M = np.hstack([np.eye(c) - 1.0 / c, np.zeros((c, 1))]) / math.sqrt(f.scale)
        return pos[cols[:, 0]], M
    M = linalg.solve_triangular(f.chol, np.asarray(f.B, dtype=float), lower=True)  # C^{-1} B, C lower
    if f.classes is None:
        shape = tuple(sizes[i] for i in f.attrs)
        return np.ravel_multi_index(tuple(cols.T), shape).astype(np.int64), M
    size = np.ones(1)
    for c in f.classes:
        size = np.multiply.outer(size, c.sizes.astype(float)).reshape(-1)
    idx = np.ravel_multi_index(tuple(c.of[cols[:, a]] for a, c in enumerate(f.classes)), tuple(c.r for c in f.classes))
    return idx.astype(np.int64), M / np.sqrt(size)


def _term(term, counts, sizes, max_cells: int, dtype) -> tuple[np.ndarray, np.ndarray, int]:
    """``(w (prod draws,), |M| |x| (prod draws,), depth)`` of one term."""
    maps = [(np.broadcast_to(idx, (len(counts),)), M)
            for idx, M in (_factor_map(f, counts.codes, sizes) for f in term.factors)]
    keep, scalar = [], 1.0
    for axis, (idx, M) in enumerate(maps):
        row = M[0, idx] if M.shape[0] == 1 else None
        if row is not None and np.all(row == (row[0] if row.size else 0.0)):
            scalar *= float(row[0]) if row.size else 0.0  # one row, constant on the counts: a scalar
        else:
            keep.append(axis)
    shape = tuple(maps[a][1].shape[1] for a in keep)
    cells = math.prod(shape)
    if cells > max_cells:
        raise ValueError(f"the whitened answers of a term need a tensor of {cells:,} entries, more than "
                         f"{max_cells:,}: release with sampler='numpy' (floating-point noise) or coarser groups")
    flat = np.ravel_multi_index(tuple(maps[a][0] for a in keep), shape) if keep else np.zeros(len(counts), np.int64)
    T = np.bincount(flat, weights=counts.counts.astype(float), minlength=cells)  # whole counts: exact
    A, T, dims, depth = abs(scalar) * T, T.astype(dtype) * dtype(scalar), list(shape), 1
    for pos, a in enumerate(keep):
        M = maps[a][1]
        T, A = _terms.mode_product(T, dims[:], pos, M.astype(dtype)), _terms.mode_product(A, dims, pos, np.abs(M))
        depth += M.shape[1]
    return T, A, depth


def whitened(solution, counts, dtype=np.float64, max_cells: int = MAX_CELLS) -> tuple[np.ndarray, np.ndarray, int]:
    """The whitened answers of every term of a KronSolution on ``counts``, concatenated, in ``dtype``.

    Returns ``(w (n,), |M| |x| (n,), depth)``: the values, the absolute products that bound
    their float error (times ``(depth + 2)`` unit roundoffs) and that depth.
    """
    sizes = tuple(counts.domain.sizes)
    parts = [_term(t, counts, sizes, max_cells, dtype) for t in solution.terms]
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
            max(p[2] for p in parts))


def split(solution, values: np.ndarray) -> list:
    """``values`` (n,), laid out as :func:`whitened`'s, cut into one flat vector per term."""
    sizes = [math.prod(f.draws for f in t.factors) for t in solution.terms]
    return np.split(np.asarray(values, dtype=float), np.cumsum(sizes)[:-1])
