"""Structured mechanisms kept in factors: Kronecker *terms*, their profile, variances and noise.

Solver layer (``ffu_cvx.solvers.kron``), bottom of the package: imports numpy, scipy.sparse and
:mod:`ffu_cvx.model.privacy` (a factor over exchangeable classes reads the ``Classes`` of
:mod:`ffu_cvx.solvers.kron.exchange` by their fields). Nothing here forms a d x d (or m x d) matrix.

A structured mechanism is a tuple of independent **terms**. Term ``t`` releases

    y_t = (B_{t,1} (x) ... (x) B_{t,q}) x + N(0, Sigma_{t,1} (x) ... (x) Sigma_{t,q}),

one :class:`Factor` per tuple of attributes (the tuples partition the domain's
attributes; usually one attribute each, several when a factor is dense over them
jointly), rows of a joint factor in row-major order of its attributes. Group ``g``
answers ``sum_t (R_{g,t,1} (x) ... (x) R_{g,t,q}) y_t`` over the terms it uses, with
``R_{g,t,f} B_{t,f}`` the part of ``A_{g,f}`` (the Kronecker product of the group's blocks
over the factor's attributes) that term ``t`` carries. Independent Gaussian mechanisms
compose exactly, so:

- profile (cell) = ``sum_t prod_f diag(B_{t,f}^T Sigma_{t,f}^{-1} B_{t,f})`` (a sum of
  Kronecker products of nonnegative vectors; for one term its max is the product of
  the per-factor maxes);
- variances of group ``g`` = ``sum_t prod_f diag(R_{g,t,f} Sigma_{t,f} R_{g,t,f}^T)``;
- noise: ``z_t = (C_{t,1} (x) ... ) xi_t`` with ``C`` the Cholesky factors, by mode
  products on a tensor of ``prod_f k_f`` entries, then the ``R`` by mode products.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy import sparse

from ...model import privacy

__all__ = ["Factor", "ResidualFactor", "ResidualRecon", "IndexedRecon", "residual_basis", "Term", "GRID_MAX", "profile_max", "profile_vector", "group_variances", "group_noise", "mode_product",
           "max_ratio"]

#: Largest grid (cells over the attributes whose profile varies) on which the exact max of a
#: sum of several terms' profiles is evaluated; above it the max is bounded by the sum of the
#: terms' maxes (a valid, conservative privacy cost; the Solution says so).
GRID_MAX = 1 << 24
#: Fewest coordinates of a factor from which a mostly-zero reconstruction is read by a sparse product,
#: and the most entries of that product formed at a time (128 MB).
SPARSE_K_MIN, SPARSE_CHUNK = 512, 1 << 24
#: Relative spread below which a factor's profile or variance vector counts as constant.
CONSTANT_RTOL = 1e-12


@dataclass(frozen=True, eq=False)
class Factor:
    """One factor of a term: ``attrs`` (increasing attribute indices), basis ``B`` (k, prod n),
    covariance ``sigma`` (k, k) and its lower Cholesky factor ``chol``.

    With ``classes`` (one :class:`ffu_cvx.solvers.kron.exchange.Classes` per attribute) ``B`` is over
    class tuples (k, prod r): the basis over cells is ``B E`` with ``E`` the orthonormal
    class averages, so a cell's column is ``B[:, t(x)] / sqrt(prod |t_i|)`` and its profile
    that of its class tuple over ``prod |t_i|``; nothing over the cells is formed but the
    profile vector. ``known_profile`` (over the cells) skips the profile's computation where
    the caller has it in closed form.
    """

    attrs: tuple
    B: np.ndarray
    sigma: np.ndarray
    chol: np.ndarray
    classes: tuple | None = None
    known_profile: np.ndarray | None = None

    @classmethod
    def build(cls, attrs, B, sigma, classes=None, profile=None) -> "Factor":
        """The factor of basis ``B`` and covariance ``sigma`` (symmetrised), both kept read-only: a
        read-only float array is kept as it is, anything else copied."""
        B, sigma = _read_only(B), _read_only(sigma)
        if not np.array_equal(sigma, sigma.T):
            sigma = _read_only(0.5 * (sigma + sigma.T))
        chol = privacy.cholesky(sigma, "factor sigma")
        chol.setflags(write=False)
        return cls(tuple(int(i) for i in attrs), B, sigma, chol, None if classes is None else tuple(classes),
                   None if profile is None else _read_only(profile))

    @property
    def k(self) -> int:
        return self.sigma.shape[0]

    @property
    def draws(self) -> int:
        """Standard normal draws per noise vector of this factor (``k``)."""
        return self.k

    def reconstruction(self, A: np.ndarray, kind: str = "") -> np.ndarray:
        """``R = A B^T`` (rows, k): the part of a block ``A`` over the factor's cells it answers
        (``B`` over cells, orthonormal rows)."""
        return A @ self.B.T

    def noise_mode(self, Z: np.ndarray, dims: list, axis: int, R) -> np.ndarray:
        """The mode product of ``R C`` (``C`` the Cholesky factor) along ``axis`` of the flat noise ``Z``
        (an :class:`IndexedRecon` on its distinct rows, then placed)."""
        if not isinstance(R, IndexedRecon):
            return mode_product(Z, dims, axis, R @ self.chol)
        out = mode_product(Z, dims, axis, R.rows @ self.chol)
        left, right = math.prod(dims[:axis]), math.prod(dims[axis + 1:])
        out = out.reshape(left, dims[axis], right)[:, R.index, :].reshape(-1)
        dims[axis] = R.index.size
        return out

    def profile(self) -> np.ndarray:
        """``diag(B^T Sigma^{-1} B)`` over the factor's cells (prod n,), read-only, computed once:
        the symmetry reduction shares one factor among many terms."""
        return self._profile

    @cached_property
    def _profile(self) -> np.ndarray:
        if self.known_profile is not None:
            return self.known_profile
        p = privacy.profile(self.sigma, self.B, chol=self.chol)
        if self.classes is not None:
            p = _class_expand(p, self.classes)
        p.setflags(write=False)
        return p

    def cell_basis(self) -> np.ndarray:
        """The basis over the cells (k, prod n), formed: for checks on small domains."""
        if self.classes is None:
            return self.B
        out = self.B.reshape((self.k,) + tuple(c.r for c in self.classes))
        for axis, c in enumerate(self.classes):
            shape = [1] * (len(self.classes) + 1)
            shape[axis + 1] = c.n
            out = np.take(out, c.of, axis=axis + 1) / np.sqrt(c.sizes[c.of]).reshape(shape)
        return out.reshape(self.k, -1)

    def variances(self, R) -> np.ndarray:
        """``diag(R Sigma R^T)`` (rows,), remembered per reconstruction matrix ``R`` (terms share them;
        an :class:`IndexedRecon` on its distinct rows)."""
        hit = self._variances.get(id(R))
        if hit is None or hit[0] is not R:
            v = _diag_quadratic(R.rows, self.sigma)[R.index] if isinstance(R, IndexedRecon) else \
                _diag_quadratic(R, self.sigma)
            hit = (R, v)
            hit[1].setflags(write=False)
            self._variances[id(R)] = hit
        return hit[1]

    @cached_property
    def _variances(self) -> dict:
        return {}

    def scaled(self, s: float) -> "Factor":
        """The factor with its covariance times ``s``: the profile and the variances already computed are
        carried over, divided and multiplied by ``s``."""
        known = self.__dict__.get("_profile", self.known_profile)
        sigma = self.sigma * s
        sigma.setflags(write=False)
        out = Factor.build(self.attrs, self.B, sigma, self.classes, None if known is None else known / s)
        for key, (R, v) in self._variances.items():
            scaled = v * s
            scaled.setflags(write=False)
            out._variances[key] = (R, scaled)
        return out


def _read_only(a) -> np.ndarray:
    """``a`` as a read-only float array: ``a`` itself when it is one already (a formed block's basis and
    covariance, 0.4 and 0.2 GB on the census hierarchy, are not copied), else a copy."""
    if isinstance(a, np.ndarray) and a.dtype == np.float64 and not a.flags.writeable:
        return a
    out = np.array(a, dtype=float)
    out.setflags(write=False)
    return out


def _diag_quadratic(R: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """``diag(R Sigma R^T)`` (rows,): by a sparse product where ``R`` is sparse, or has at least
    :data:`SPARSE_K_MIN` columns and at most an eighth of its entries non-zero (a block formed over the
    classes of a geography reads one class per row: 95 of 4,845 coordinates on the census hierarchy)."""
    if sparse.issparse(R) or (R.shape[1] >= SPARSE_K_MIN and 8 * np.count_nonzero(R) <= R.size):
        Rs = sparse.csr_array(R)
        step = max(1, SPARSE_CHUNK // R.shape[1])
        return np.concatenate([np.asarray(Rs[i:i + step].multiply(Rs[i:i + step] @ sigma).sum(axis=1)).reshape(-1)
                               for i in range(0, R.shape[0], step)])
    return privacy.variances(R, sigma)


def residual_basis(members: np.ndarray, n: int) -> np.ndarray:
    """(|C| - 1, n): orthonormal rows spanning the zero-sum vectors supported on the values
    ``members`` of an attribute of ``n`` values (Helmert contrasts)."""
    size = members.size
    out = np.zeros((size - 1, n))
    for j in range(1, size):
        out[j - 1, members[:j]] = 1.0
        out[j - 1, members[j]] = -j
        out[j - 1] /= math.sqrt(j * (j + 1))
    return out


@dataclass(frozen=True, eq=False)
class IndexedRecon:
    """A reconstruction matrix ``rows[index]`` (index.size, k) kept as its distinct rows ``rows`` (a numpy
    or, for a formed block's rows, a scipy sparse array) and the ``index`` of each query's: the county
    tables of a geography read one reduced row per county, 3,143 copies of a few. :class:`Factor` computes variances and noise on the distinct rows;
    ``numpy.asarray`` forms the whole (the GLS pseudo-inverses)."""

    rows: np.ndarray
    index: np.ndarray

    @property
    def shape(self) -> tuple:
        return (self.index.size, self.rows.shape[1])

    def __array__(self, dtype=None, copy=None):
        out = self.rows[self.index]
        out = out.toarray() if sparse.issparse(out) else out
        return out if dtype is None else out.astype(dtype)


@dataclass(frozen=True, eq=False)
class ResidualRecon:
    """A block ``A`` (rows, n) of ``kind`` seen through a residual factor: ``A P_C`` with ``P_C``
    the projector on the zero-sum vectors supported on the class ``members``, never formed.

    ``rho`` (rows,) are the rows' residual norms ``||P_C a||^2``; :meth:`apply` maps
    standard normals on the class to ``A (xi - mean xi)`` (an identity block places them,
    a total gives zero); ``numpy.asarray`` forms ``A B^T`` with ``B`` the Helmert basis
    (checks on small domains).
    """

    A: np.ndarray
    members: np.ndarray
    kind: str = ""

    @property
    def shape(self) -> tuple:
        return (self.A.shape[0], self.members.size - 1)

    @cached_property
    def rho(self) -> np.ndarray:
        if self.kind == "identity":
            out = np.zeros(self.A.shape[0])
            out[self.members] = 1.0 - 1.0 / self.members.size
        else:
            part = self.A[:, self.members]
            out = np.einsum("ij,ij->i", part, part) - part.sum(axis=1) ** 2 / self.members.size
            out[out <= 1e-12 * np.maximum(np.einsum("ij,ij->i", part, part), 1e-300)] = 0.0
        out.setflags(write=False)
        return out

    def apply(self, Z: np.ndarray) -> np.ndarray:
        """``Z`` (left, |C|, right) standard normals to (left, rows, right): ``A`` times them centred."""
        Z = Z - Z.mean(axis=1, keepdims=True)
        if self.kind == "identity":
            out = np.zeros((Z.shape[0], self.A.shape[0], Z.shape[2]))
            out[:, self.members, :] = Z
            return out
        if self.kind == "total":
            return np.zeros((Z.shape[0], self.A.shape[0], Z.shape[2]))
        return np.einsum("rc,lcm->lrm", self.A[:, self.members], Z)

    def __array__(self, dtype=None, copy=None):
        out = self.A @ residual_basis(self.members, self.A.shape[1]).T
        return out if dtype is None else out.astype(dtype)


@dataclass(frozen=True, eq=False)
class ResidualFactor:
    """An attribute on the residual of one class, implicit: ``Sigma = scale I`` on the zero-sum
    vectors supported on the class ``members`` of its ``n`` values.

    Same interface as :class:`Factor` where the terms use it: profile ``(1 - 1/|C|) / scale``
    on the class, variances ``scale rho`` (:class:`ResidualRecon`), noise from ``|C|``
    standard normals centred (covariance ``P_C``, the residual's projector). Nothing of
    size ``|C|^2`` is formed; ``B``, ``sigma`` and ``chol`` are formed only when asked
    (checks on small domains).
    """

    attrs: tuple
    members: np.ndarray
    n: int
    scale: float = 1.0
    classes = None

    @property
    def k(self) -> int:
        return self.members.size - 1

    @property
    def draws(self) -> int:
        return self.members.size

    def profile(self) -> np.ndarray:
        return self._profile

    @cached_property
    def _profile(self) -> np.ndarray:
        p = np.zeros(self.n)
        p[self.members] = (1.0 - 1.0 / self.members.size) / self.scale
        p.setflags(write=False)
        return p

    @cached_property
    def B(self) -> np.ndarray:
        return residual_basis(self.members, self.n)

    @property
    def sigma(self) -> np.ndarray:
        return self.scale * np.eye(self.k)

    @property
    def chol(self) -> np.ndarray:
        return math.sqrt(self.scale) * np.eye(self.k)

    def cell_basis(self) -> np.ndarray:
        return self.B

    def reconstruction(self, A: np.ndarray, kind: str = "") -> ResidualRecon:
        return ResidualRecon(A, self.members, kind)

    def variances(self, R: ResidualRecon) -> np.ndarray:
        return self.scale * R.rho

    def noise_mode(self, Z: np.ndarray, dims: list, axis: int, R: ResidualRecon) -> np.ndarray:
        left, right = math.prod(dims[:axis]), math.prod(dims[axis + 1:])
        out = math.sqrt(self.scale) * R.apply(Z.reshape(left, dims[axis], right))
        dims[axis] = out.shape[1]
        return out.reshape(-1)

    def scaled(self, s: float) -> "ResidualFactor":
        return ResidualFactor(self.attrs, self.members, self.n, self.scale * s)


def _class_expand(p: np.ndarray, classes) -> np.ndarray:
    """A profile over class tuples (prod r,) as the profile over cells (prod n,):
    ``p[t(x)] / prod |t_i|``."""
    out = p.reshape([c.r for c in classes]) if classes else p.reshape(())
    for axis, c in enumerate(classes):
        out = np.take(out, c.of, axis=axis)
        shape = [1] * len(classes)
        shape[axis] = c.n
        out = out / c.sizes[c.of].reshape(shape)
    return np.ascontiguousarray(out).reshape(-1)


@dataclass(frozen=True, eq=False)
class Term:
    """A Kronecker sub-mechanism: ``factors`` (tuple of :class:`Factor`) and ``recon``
    {group index: tuple of ``R`` (rows_f, k_f), one per factor} for the groups it answers."""

    factors: tuple
    recon: dict

    def scaled(self, s: float) -> "Term":
        """The term with its covariance times ``s`` (put on the first factor)."""
        return Term((self.factors[0].scaled(s),) + tuple(self.factors[1:]), self.recon)


def _place(vec: np.ndarray, attrs: tuple, axes: tuple, shape_of) -> np.ndarray:
    """``vec`` (over ``attrs`` jointly, row-major) as an array broadcastable over ``axes``
    (attributes of size 1 need no axis)."""
    shape = [1] * len(axes)
    for i in attrs:
        if shape_of(i) > 1:
            shape[axes.index(i)] = shape_of(i)
    return vec.reshape(shape)


def _flat_sum(items, sizes) -> np.ndarray:
    """:func:`_kron_sum` over every axis, flattened row-major; only the axes of size above 1
    are formed (numpy arrays have at most 64 axes, domains may have many more attributes)."""
    axes = tuple(i for i, n in enumerate(sizes) if n > 1)
    shape = [sizes[i] for i in axes]
    return np.broadcast_to(_kron_sum(items, axes, lambda i: sizes[i]), shape).reshape(-1)


def _kron_sum(items, axes: tuple, shape_of) -> np.ndarray:
    """``sum_t scalar_t prod (vec placed on its attrs)`` as an array over ``axes``.

    ``items``: list of ``(scalar, [(attrs, vec), ...])``; attributes in ``axes`` that an
    item does not mention are constant for it (broadcast).
    """
    out = np.zeros([shape_of(i) for i in axes])
    for scalar, vecs in items:
        part = np.asarray(scalar, dtype=float)
        for attrs, vec in vecs:
            part = part * _place(vec, attrs, axes, shape_of)
        out = out + part
    return out


def _split_constant(vec: np.ndarray):
    """``(scalar, None)`` for a (numerically) constant vector, else ``(1.0, vec)``."""
    top = float(np.max(vec))
    if float(np.min(vec)) >= top * (1.0 - CONSTANT_RTOL):
        return top, None
    return 1.0, vec


def _profile_items(terms):
    items = []
    for t in terms:
        scalar, vecs = 1.0, []
        for f in t.factors:
            s, vec = _split_constant(f.profile())
            scalar *= s
            if vec is not None:
                vecs.append((f.attrs, vec))
        items.append((scalar, vecs))
    return items


def _representatives(items, sizes) -> dict:
    """Per attribute some profile varies on, the first value of each class of its values that no
    factor's profile tells apart (equal slices along that attribute in every profile vector): a
    cell's profile is that of the cell with each value replaced by its class's representative."""
    labels = {}
    for _, vecs in items:
        for attrs, vec in vecs:
            arr = vec.reshape([sizes[i] for i in attrs])
            for ax, i in enumerate(attrs):
                if sizes[i] > 1:
                    labels.setdefault(i, []).append(_row_labels(np.moveaxis(arr, ax, 0).reshape(sizes[i], -1)))
    return {i: np.sort(np.unique(np.stack(v, axis=1), axis=0, return_index=True)[1]) for i, v in labels.items()}


def _row_labels(rows: np.ndarray) -> np.ndarray:
    """Labels (n,) of the rows of ``rows`` (n, w), equal where the rows are equal: by one random
    projection of each row, checked (every row equal to the first row of its label; else by sorting the
    rows themselves, 20 times slower on the census hierarchy's profiles)."""
    keys = rows @ np.random.default_rng(0).standard_normal(rows.shape[1])
    _, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    if np.array_equal(rows, rows[first[inv]]):
        return inv.reshape(-1)
    return np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1)


def _on_representatives(items, reps: dict, sizes) -> list:
    """``items`` with every profile vector taken on the representatives ``reps`` only."""
    out = []
    for scalar, vecs in items:
        taken = []
        for attrs, vec in vecs:
            arr = vec.reshape([sizes[i] for i in attrs])
            for ax, i in enumerate(attrs):
                if i in reps:
                    arr = np.take(arr, reps[i], axis=ax)
            taken.append((attrs, arr.reshape(-1)))
        out.append((scalar, taken))
    return out


def profile_max(terms, sizes) -> tuple[float, bool]:
    """``(max over cells of the profile, exact)`` for ``terms`` over a domain of ``sizes``.

    One term: the product of its factors' maxes (exact). Several: the exact max on the
    grid of the attributes whose profile varies when that grid has at most
    :data:`GRID_MAX` cells; above it, on the grid of their values' classes that no profile
    tells apart (:func:`_representatives`: the class tuples of a reduction by exchangeable
    values, 10,200 on the census hierarchy's 92.5 million cells) when that one has at most
    :data:`GRID_MAX`; else the sum of the terms' maxes (``exact`` False: an upper bound, so
    the privacy statements stay valid).
    """
    items = _profile_items(terms)
    if len(items) == 1:
        scalar, vecs = items[0]
        return float(scalar * math.prod(float(v.max()) for _, v in vecs)), True
    axes = tuple(sorted({i for _, vecs in items for attrs, _ in vecs for i in attrs}))
    if math.prod(sizes[i] for i in axes) <= GRID_MAX:
        return float(np.max(_kron_sum(items, axes, lambda i: sizes[i]))), True
    reps = _representatives(items, sizes)
    if math.prod(reps[i].size if i in reps else 1 for i in axes) <= GRID_MAX:
        grid = _kron_sum(_on_representatives(items, reps, sizes), axes, lambda i: reps[i].size if i in reps else 1)
        return float(np.max(grid)), True
    return float(sum(s * math.prod(float(v.max()) for _, v in vecs) for s, vecs in items)), False


def profile_vector(terms, sizes) -> np.ndarray:
    """The profile over every cell (d,), row-major (callers check that d is small)."""
    return _flat_sum(_profile_items(terms), sizes)


def group_variances(terms, g: int, rows: tuple) -> np.ndarray:
    """Variances of group ``g``'s queries (m_g,), rows ``rows`` (r_i,) per attribute, row-major."""
    items = []
    for t in terms:
        if g not in t.recon:
            continue
        vecs = [(f.attrs, f.variances(R)) for f, R in zip(t.factors, t.recon[g])]
        items.append((1.0, vecs))
    return _flat_sum(items, rows)


def max_ratio(terms, groups, targets) -> float:
    """``max_g max_j var_j / c_g`` without forming the variances when one term answers a group."""
    worst = 0.0
    for g, (rows, c) in enumerate(zip(groups, targets)):
        used = [t for t in terms if g in t.recon]
        if len(used) == 1:
            t = used[0]
            top = math.prod(float(f.variances(R).max()) for f, R in zip(t.factors, t.recon[g]))
        else:
            top = float(group_variances(terms, g, rows).max())
        worst = max(worst, top / c)
    return worst


def mode_product(Z: np.ndarray, dims: list, axis: int, M: np.ndarray) -> np.ndarray:
    """Mode product on a flat tensor: ``M`` (r, k) applied along ``axis`` of ``Z`` (prod dims,)
    of shape ``dims`` (row-major); ``dims[axis]`` becomes r. Flat, so a term may have more
    factors than numpy has axes."""
    left, right = math.prod(dims[:axis]), math.prod(dims[axis + 1:])
    out = np.einsum("rk,lkm->lrm", M, Z.reshape(left, dims[axis], right)).reshape(-1)
    dims[axis] = M.shape[0]
    return out


def group_noise(terms, xis, g: int, rows: tuple) -> np.ndarray:
    """Noise on group ``g``'s answers (m_g,) from the standard normal draws ``xis`` (one per term,
    ``prod_f draws_f`` entries, any shape: read row-major over the term's factors).

    ``z_t = (C_{t,1} (x) ...) xi_t`` and the group's share ``(R_{g,t,1} (x) ...) z_t``, by
    mode products; the terms' noises are shared by every group that uses them, which
    gives the answers their joint covariance ``W Sigma W^T``.
    """
    out = np.zeros(math.prod(rows))
    for t, xi in zip(terms, xis):
        if g not in t.recon:
            continue
        Z, dims = np.asarray(xi, dtype=float).reshape(-1), [f.draws for f in t.factors]
        for axis, (f, R) in enumerate(zip(t.factors, t.recon[g])):
            Z = f.noise_mode(Z, dims, axis, R)
        # each factor axis holds its attributes' rows jointly: split them (axes of one row
        # dropped), then domain order
        order = [i for f in t.factors for i in f.attrs if rows[i] > 1]
        Z = Z.reshape([rows[i] for i in order])
        out = out + np.transpose(Z, np.argsort(order)).reshape(-1)
    return out
