"""Unions of product groups, exactly: the reduction by exchangeable values and the block problem.

Solver layer (``ffu_cvx.solvers.kron``): imports numpy, scipy (``linalg``, ``optimize``, ``sparse``),
``model.basis``, ``model.status`` and the package's ``coupled``, ``exchange`` and ``terms``. The ascent's
step uses numpy's linear algebra only: numpy and scipy each ship their own BLAS, and alternating between
their thread pools made a step of the census hierarchy more than twice as slow at two threads.

**Invariance.** Per attribute ``i`` the exchangeable classes ``C_{i,1} .. C_{i,r_i}``
(:mod:`ffu_cvx.solvers.kron.exchange`) give a group ``G = prod_i prod_k Sym(C_{i,k})`` that maps
the workload to itself, targets included. Problem 1 is convex in ``X = B^T Sigma^{-1} B``
(profile linear, variances ``w^T X^+ w`` matrix-fractional), so averaging an optimum over
``G`` gives an optimum that commutes with ``G``.

**The decomposition.** Per attribute ``R^{n_i} = V_{i,0} (+) sum_k V_{i,k}``: the
class-average space ``V_{i,0}`` (orthonormal rows ``1_C / sqrt|C|``, dimension ``r_i``,
on which ``G`` acts trivially) and, per class of two or more values, its within-class
residual ``V_{i,k}`` (zero-sum vectors on ``C_{i,k}``, dimension ``|C_{i,k}| - 1``, an
irreducible representation, different for each class). A *pattern* ``s`` picks per
attribute ``s_i = -1`` (the class average) or a class ``k`` (its residual); the tensor
products over patterns are the isotypic components of ``G``, so by Schur's lemma a
commuting ``Sigma`` is ``sum_s Sigma_s (x) I`` with ``Sigma_s`` a general matrix over
``prod_{i: s_i = -1} V_{i,0}`` (the *free* attributes, ``r_i >= 2``, give its
coordinates: class tuples ``t_0``, ``D_s = prod r_i`` of them; attributes of one class
add a factor 1) and a scalar on every residual. An attribute whose blocks are all the
identity, the total or their stacks has one class and the decomposition is
ResidualPlanner's ``span(1) (+) 1^perp``: one class per attribute is the reduction by
symmetric attributes, an attribute of singleton classes (a prefix) has no residual and is
dense in every block.

**Attributes split class by class.** When no block row on a free attribute sums over two of
its classes (:func:`separable`: identities and partitions into class sums, the state and
county tables of a geography without the national ones), every block is block-diagonal
over that attribute's classes: ``P_s`` (the cells of one class tuple sit in one class) and
``Q_s`` (every row sits in one class) both are, so ``F`` and the optimal ``Sigma_s`` split
class by class. The attribute is then taken on one class's average at a time (a
:func:`pinned` side, a one-dimensional coordinate with the profile weight ``1/|C_k|``
and the rows' factor ``u_k^2``) instead of on all class averages at once: blocks of
(states x other class tuples) become one block per state.

**Profile and variances.** A cell ``x`` in class tuple ``t`` (over the free attributes)
has::

    profile(x) = sum_{s compatible with t} kappa_{s,t} (B_s^T Sigma_s^{-1} B_s)_{t_0 t_0},
    kappa_{s,t} = prod_{i: s_i >= 0} (1 - 1/|C_{i,s_i}|) * prod_{i: s_i = -1} 1/|C_{i,t_i}|,

``s`` compatible with ``t`` when ``t_i = s_i`` on the free residual attributes; it is
constant on class tuples, so the profile lives on the grid of ``T = prod r_i`` tuples. A
block row ``a`` of attribute ``i`` enters through its class sums
``u_k = a . 1_{C_k} / sqrt|C_k|`` and residual norms ``rho_k = ||P_k a||^2``
(:class:`ffu_cvx.solvers.kron.exchange.RowOrbits`: a row containing a whole class or none of it
has ``rho_k = 0``; an identity row on ``C_k`` has ``rho_k = 1 - 1/|C_k|``, and on the
residual every block acts as a multiple of the identity up to row permutation). A
query of group ``g``, a product of rows ``a_i``, has

    var = sum_s beta_{g,s} (l_{g,s}^T Sigma_s l_{g,s}),
    l_{g,s} = (x)_{free i, s_i = -1} u(a_i),
    beta_{g,s} = prod_{i: s_i >= 0} rho_{s_i}(a_i) * prod_{non-free i, s_i = -1} u(a_i)^2,

the same for every query of one orbit: a group's distinct variances live on its grid of
reduced rows (``prod_i`` orbits of its blocks).

**The dual bound.** For ``lam`` over the ``T`` class tuples (each the sum of the cell
multipliers over its cells, ``sum lam = 1``) and ``mu`` over the reduced rows (the sum
over each orbit), the Lagrangian of the whole problem separates over the isotypic
components (a residual of dimension ``m_s`` contributes ``m_s`` equal copies, which
``kappa`` absorbs), and

    alpha* >= (sum_s F(P_s, Q_s))^2 / sum_g c_g sum mu_g,
    P_s = B_s diag(kappa_s lam_s) B_s^T,  Q_s = sum_g L_{g,s}^T diag(w_{g,s}) L_{g,s},

with ``lam_s`` the multipliers of the tuples compatible with ``s``,
``w_{g,s}`` the ``mu_g beta_{g,s}`` summed over the reduced rows sharing ``l_{g,s}``,
and ``F(P, Q) = tr (P^{1/2} Q P^{1/2})^{1/2}``. This *block problem* has the optimum of
the whole problem; only the patterns some group reaches (every factor of ``beta`` and
``l`` non-zero for one of its rows) are formed, so marginals over many attributes stay
polynomial.

**Solver.** The multiplicative dual ascent of :mod:`ffu_cvx.model.certificate`, block by block:
at ``(lam, mu)`` each ``Sigma_s`` solves ``Sigma Q_s Sigma = P_s`` (attaining ``F``), the
profile ``p`` and variances ``v`` of those ``Sigma_s`` give the next
``lam <- lam p / F``, ``mu <- mu (v / c) / F``; every iterate is a primal point (scaled to
meet the targets) and a dual bound, so the gap is certified at every step. The step is
over-relaxed (the ratios raised to ``RELAX``), which keeps every iterate certified and
halves the steps. Near the optimum the step converges linearly and slowly (the primal
points lag the bound: their error is first order in the multipliers' distance to the
optimum, the bound's second order); Anderson acceleration of the step in the multipliers
(``ANDERSON_MEMORY``, from gap ``ANDERSON_FROM``) takes the gap from 1e-3 to 1e-4 in about
as many steps again as 1e-3 took (docs/design/kron.rst).
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import logging
import math
import time
from dataclasses import dataclass

import numpy as np
from scipy import linalg, optimize, sparse

from ...model import basis as _basis
from ...model.status import MAX_ITER, OPTIMAL, USER_STOPPED, IntermediateResult
from . import coupled
from .coupled import CoupledBlock, row_weights
from .exchange import SYMMETRIC_KINDS, Classes, attribute_classes, row_orbits
from .terms import Factor, IndexedRecon, ResidualFactor, Term

__all__ = ["SYMMETRIC_KINDS", "DENSE_D_MAX", "ReducedBlock", "GroupGrid", "Reduction", "classes_of", "group_grids",
           "reached_patterns", "coupling_of", "reduce", "coupled_reduction", "AscentResult", "ascent",
           "certified_bound", "mixture", "mixed_covariances"]

log = logging.getLogger(__name__)

#: Largest block (class tuples of the free attributes on their class averages) solved dense.
DENSE_D_MAX = 1024
#: Classes of at least this many values keep their residual factor implicit in the solution's
#: terms (:class:`ffu_cvx.solvers.kron.terms.ResidualFactor`); smaller ones are dense (what
#: ``ffu_cvx.estimate.gls`` reads).
IMPLICIT_RESIDUAL_MIN = 256
#: A block's reconstruction for a group with at least this many entries (queries x coordinates) is kept
#: as its distinct reduced rows and an index (:class:`ffu_cvx.solvers.kron.terms.IndexedRecon`),
#: not formed: the county tables of a geography repeat a few rows 3,143 times.
INDEXED_RECON_MIN = 1 << 22
#: Exponent of the over-relaxed multiplicative step of :func:`ascent` (1: the plain fixed point).
#: Where a cell and a query share one direction that the optimum leaves slack (both
#: multipliers near zero), the step maps their ratio ``r`` to ``C r^(1 - relax)``: it
#: converges for ``relax < 2`` and cycles between two points at 2, below the optimum (gaps
#: of 0.38 on 16 of 100 small unions of ranges and identities). 1.9 about halves the steps
#: against 1 and converges on all of them.
RELAX = 1.9
#: The ascent rescales the blocks (:func:`_rescaled`) every this many steps, with this many
#: steps of the scalar problem (a few milliseconds on the census tables).
RESCALE_EVERY, RESCALE_ITERS = 10, 100
#: Weights of uniform multipliers mixed in for the smoothed primal points (:func:`_smoothed_primal`).
SMOOTHING = (1e-1, 1e-2, 1e-3)
#: Weight of the uniform multipliers mixed in at every step: no multiplier underflows to a
#: zero it could never leave.
_MIX = 1e-12
#: Anderson acceleration of :func:`ascent`: steps remembered (0: the plain ascent) and the
#: certified gap from which it runs (plain steps before it: from the start it takes more
#: steps on the SF1 Persons tables, 179 against 80 to 1e-4).
ANDERSON_MEMORY, ANDERSON_FROM = 5, 1e-2
#: Relative ridge of the Anderson least-squares fit (on the unit-scaled differences).
_ANDERSON_RIDGE = 1e-10
#: Largest share of non-zeros of a formed block's reduced rows kept sparse (:func:`_formed`).
SPARSE_ROWS = 1 / 8
#: Ridge on a formed precision scaled to unit diagonal before it is inverted (:func:`_covariance`).
PRECISION_RIDGE = 1e-10
#: Relative ridge on a numerically singular ``P`` and floor on the eigenvalues of ``R Q R^T``.
_RIDGE = 1e-14


@dataclass(frozen=True, eq=False)
class ReducedBlock:
    """Pattern ``pattern`` (per attribute -1: class average, k: residual of class k).

    ``avg``: the free attributes on their class averages (the block's coordinates, class
    tuples row-major); ``B`` (k, D) its basis; ``idx`` (D,) the class tuples of the profile
    grid the coordinates sit on and ``kappa`` (D,) their weights; per group ``g`` reaching
    it ``L[g]`` (rows, k) over the reduced rows of the ``avg`` attributes, ``lshape[g]`` the
    shape placing those rows on the group's grid and ``beta[g]`` (broadcast over the
    group's grid) the weight of each reduced row.
    """

    pattern: tuple
    avg: tuple
    B: np.ndarray
    idx: np.ndarray
    kappa: np.ndarray
    L: dict
    lshape: dict
    beta: dict

    @property
    def part(self) -> tuple:
        """The attributes taken on a residual."""
        return tuple(i for i, s in enumerate(self.pattern) if s >= 0)

    @property
    def D(self) -> int:
        return self.B.shape[1]


@dataclass(frozen=True, eq=False)
class GroupGrid:
    """A group's reduced rows: ``orbits`` per attribute, ``axes`` (attributes with two or more
    reduced rows) and ``shape`` (their counts)."""

    orbits: tuple
    axes: tuple
    shape: tuple

    def placed(self, i: int, vec: np.ndarray):
        """``vec`` over attribute ``i``'s reduced rows placed on this grid (a scalar off-axis)."""
        if i not in self.axes:
            return float(vec[0])
        shape = [1] * len(self.axes)
        shape[self.axes.index(i)] = vec.size
        return vec.reshape(shape)


def classes_of(workload) -> tuple:
    """The exchangeable classes of every attribute of ``workload`` (one :class:`Classes` each)."""
    groups, sizes = workload.groups, workload.domain.sizes
    return tuple(attribute_classes([g.blocks[i] for g in groups], n) for i, n in enumerate(sizes))


def group_grids(groups, classes) -> tuple:
    cache, out = {}, []
    for g in groups:
        orbits = []
        for i, b in enumerate(g.blocks):
            key = (i,) + _block_key(b)
            if key not in cache:
                cache[key] = row_orbits(b.matrix, classes[i], b.kind)
            orbits.append(cache[key])
        axes = tuple(i for i, o in enumerate(orbits) if o.k >= 2)
        out.append(GroupGrid(tuple(orbits), axes, tuple(orbits[i].k for i in axes)))
    return tuple(out)


def pinned(k: int) -> int:
    """The side of an attribute taken on the average of its class ``k`` alone (a pattern entry)."""
    return -2 - k


def pinned_class(side: int) -> int:
    """The class of a :func:`pinned` side."""
    return -2 - side


def _sums_classes(grid: GroupGrid, i: int) -> bool:
    """Whether some row of the group's block on attribute ``i`` sums over two or more classes."""
    return bool(np.any(np.count_nonzero(grid.orbits[i].U, axis=1) > 1))


def separable(grids, classes) -> tuple:
    """Per attribute, whether it has two or more classes and no block row on it sums over two of
    them (every row's class sums ``U`` have at most one non-zero): its class-average space then
    splits class by class (see the module docstring)."""
    return tuple(c.r >= 2 and not any(_sums_classes(g, i) for g in grids) for i, c in enumerate(classes))


def coupling_of(grids, classes) -> tuple | None:
    """``(attribute, coupling groups)``: the attribute of most classes that is not :func:`separable`
    only because of groups whose block on it is one reduced row over several classes (the
    national total over counties in states); None when there is none. Taken class by class,
    those groups couple the classes again (:mod:`ffu_cvx.solvers.kron.coupled`)."""
    split = separable(grids, classes)
    for i in sorted(range(len(classes)), key=lambda i: -classes[i].r):
        if classes[i].r < 2 or split[i]:
            continue
        across = [g for g, grid in enumerate(grids) if _sums_classes(grid, i)]
        if all(grids[g].orbits[i].k == 1 for g in across) and len(across) < len(grids):
            return i, tuple(across)
    return None


def _options(orbit, classes: Classes, split: bool) -> list:
    """The sides of one attribute a block reaches: its class averages (-1; on a ``split``
    attribute, the :func:`pinned` average of each class some row sums over), the residual of
    class k if some row has a residual on it."""
    if split:
        out = [pinned(int(k)) for k in np.flatnonzero(np.any(orbit.U != 0, axis=0))]
    else:
        out = [-1] if np.any(orbit.U != 0) else []
    return out + [int(k) for k in np.flatnonzero(orbit.res.max(axis=0) > 0)]


def reached_patterns(grids, classes, split: tuple | None = None) -> dict:
    """``{pattern: [groups reaching it]}``, by the attributes on a residual (how many, which) then
    their classes.

    Group ``g`` reaches the products of its per-attribute options (:func:`_options`): per group
    ``prod_i`` (options of its block on ``i``) patterns, never all of them. A pattern no group
    reaches has ``Q_s = 0``: it is not released (no profile, no variance, ``F(P_s, 0) = 0``).
    A :func:`separable` attribute is taken class by class (:func:`pinned` sides), as is any
    attribute ``split`` names (per attribute, True to split).
    """
    reach = {}
    split = separable(grids, classes) if split is None else split
    for gi, grid in enumerate(grids):
        for pattern in itertools.product(*[_options(o, c, sp) for o, c, sp in zip(grid.orbits, classes, split)]):
            reach.setdefault(pattern, []).append(gi)
    def order(s):
        part = tuple(i for i, k in enumerate(s) if k >= 0)
        return len(part), part, s
    return {p: reach[p] for p in sorted(reach, key=order)}


def _kron_all(mats) -> np.ndarray:
    out = np.ones((1, 1))
    for M in mats:
        out = np.kron(out, M)
    return out


class Reduction:
    """The block problem of a :class:`ffu_cvx.workloads.products.ProductWorkload` (see the module docstring).

    ``classes`` per attribute; ``free``: the attributes of two or more classes; ``grid`` their
    class counts (the profile grid, ``T`` tuples); ``grids`` per group its reduced rows;
    ``blocks``: :class:`ReducedBlock`; ``targets`` (G,).
    """

    def __init__(self, workload, classes, grids, blocks):
        self.workload, self.classes, self.grids, self.blocks = workload, tuple(classes), tuple(grids), tuple(blocks)
        self.free = tuple(i for i, c in enumerate(self.classes) if c.r >= 2)
        self.grid = tuple(self.classes[i].r for i in self.free)
        self.T = math.prod(self.grid)
        self.targets = np.array([g.target for g in workload.groups])

    @property
    def D(self) -> int:
        """The largest block."""
        return max(b.D for b in self.blocks)

    def _side(self, i: int, side: int, implicit_min: int):
        """Attribute ``i`` on its class average (one class), on the average of one class (a
        :func:`pinned` side) or on the residual of class ``side``
        (a :class:`ResidualFactor` from ``implicit_min`` values on, else dense)."""
        c = self.classes[i]
        if side == -1:
            return Factor.build((i,), c.average_basis(), np.eye(1), profile=np.full(c.n, 1.0 / c.n))
        if side <= -2:
            k = pinned_class(side)
            return Factor.build((i,), c.average_basis()[k:k + 1], np.eye(1),
                                profile=np.where(c.of == k, 1.0 / c.sizes[k], 0.0))
        if c.sizes[side] >= implicit_min:
            return ResidualFactor((i,), c.members(side), c.n)
        prof = np.where(c.of == side, 1.0 - 1.0 / c.sizes[side], 0.0)
        B = c.residual_basis(side)
        return Factor.build((i,), B, np.eye(B.shape[0]), profile=prof)

    def terms(self, sigmas, implicit_min: int = IMPLICIT_RESIDUAL_MIN) -> tuple:
        """The structured mechanism of block covariances ``sigmas`` (one (k, k) per block).

        An attribute's side factor and its reconstruction depend only on the attribute, the
        side and the block, so they are built once and shared among the terms. The residual
        of a class of ``implicit_min`` values or more is implicit (:class:`ResidualFactor`:
        a scalar and the class; no dense basis, reconstruction or Cholesky factor), and a block's
        reconstruction of :data:`INDEXED_RECON_MIN` entries or more keeps its distinct rows
        (:class:`ffu_cvx.solvers.kron.terms.IndexedRecon`).
        """
        if any(isinstance(blk, CoupledBlock) for blk in self.blocks):
            raise ValueError("a coupled reduction's blocks are never formed: release through Reduction.formed() "
                             "with covariances formed on their coordinates (mixed_covariances)")
        groups = self.workload.groups
        sides, recon_of, content = {}, {}, {}
        out = []
        for blk, sigma in zip(self.blocks, sigmas):
            factors, recon = [], {g: [] for g in blk.L}
            for i, side in enumerate(blk.pattern):
                if i in blk.avg:
                    continue
                if (i, side) not in sides:
                    sides[i, side] = self._side(i, side, implicit_min)
                f = sides[i, side]
                factors.append(f)
                for g in blk.L:
                    block = groups[g].blocks[i]
                    if id(block) not in content:
                        content[id(block)] = _block_key(block)
                    key = (i, side) + content[id(block)]
                    if key not in recon_of:
                        recon_of[key] = f.reconstruction(block.matrix, block.kind)
                        if isinstance(recon_of[key], np.ndarray):
                            recon_of[key].setflags(write=False)
                    recon[g].append(recon_of[key])
            factors.append(Factor.build(blk.avg, blk.B, sigma, classes=[self.classes[i] for i in blk.avg]))
            for g, L in blk.L.items():
                index = self._joint_rows(g, blk.avg)
                recon[g].append(IndexedRecon(L, index) if index.size * L.shape[1] >= INDEXED_RECON_MIN
                                else _dense(L[index]))
            out.append(Term(tuple(factors), {g: tuple(r) for g, r in recon.items()}))
        return tuple(out)

    def formed(self) -> "Reduction":
        """This reduction with each coupled block replaced by the dense block it stands for
        (:func:`_formed`, on the coordinates of :func:`ffu_cvx.solvers.kron.coupled.precision`)."""
        blocks = [_formed(b, self.grids, self.classes, self.free) if isinstance(b, CoupledBlock) else b
                  for b in self.blocks]
        return Reduction(self.workload, self.classes, self.grids, blocks)

    def _joint_rows(self, g: int, avg: tuple) -> np.ndarray:
        """Per query row over the ``avg`` attributes (row-major), its reduced row (row-major)."""
        orbits = self.grids[g].orbits
        index = np.zeros(1, dtype=np.intp)
        for i in avg:
            index = (index[:, None] * orbits[i].k + orbits[i].index[None, :]).reshape(-1)
        return index


def _dense(M) -> np.ndarray:
    """``M`` as a numpy array (a sparse one formed)."""
    return M.toarray() if sparse.issparse(M) else M


def _block_key(block) -> tuple:
    """A key equal for blocks of equal matrices: the kind and shape for a symmetric kind (its matrix
    follows from them), else the shape and a digest of the entries (the county identity of a
    geography is 79 MB: its bytes as a key cost a copy and a comparison per lookup)."""
    if block.kind in SYMMETRIC_KINDS:
        return (block.kind, block.matrix.shape)
    return (block.kind, block.matrix.shape, hashlib.blake2b(block.matrix.tobytes(), digest_size=16).digest())


def _side_class(side: int) -> int:
    """The class a fixed side sits on: a residual's own, a :func:`pinned` average's."""
    return side if side >= 0 else pinned_class(side)


def _side_weight(c: Classes, side: int) -> float:
    """The profile weight of a side not among the block's coordinates: ``1 - 1/|C_k|`` on the
    residual of class k, ``1/|C_k|`` on class k's average alone, ``1/n`` on the average of an
    attribute of one class."""
    if side >= 0:
        return 1.0 - 1.0 / c.sizes[side]
    return 1.0 / (c.sizes[pinned_class(side)] if side <= -2 else c.n)


def _row_weights(orbit, side: int) -> np.ndarray:
    """Per reduced row of a block, its factor of ``beta`` on a side not among the coordinates."""
    if side >= 0:
        return orbit.res[:, side]
    return orbit.U[:, pinned_class(side) if side <= -2 else 0] ** 2


def _pattern_frame(pattern, used, grids, classes, free) -> tuple:
    """``(avg, idx, kappa, lshape, beta)`` of a pattern's block (:class:`ReducedBlock`), all but its basis."""
    avg = tuple(i for i in free if pattern[i] == -1)
    grid = tuple(classes[i].r for i in free)
    ranges = [np.arange(classes[i].r) if pattern[i] == -1 else np.array([_side_class(pattern[i])]) for i in free]
    idx = np.ravel_multi_index(np.meshgrid(*ranges, indexing="ij"), grid).reshape(-1) if free else np.zeros(1, int)
    scalar = math.prod(_side_weight(classes[i], s) for i, s in enumerate(pattern) if i not in avg)
    kappa = scalar * _kron_all([1.0 / classes[i].sizes[None, :] for i in avg]).reshape(-1)
    lshape, beta = {}, {}
    for g in used:
        grid_g = grids[g]
        lshape[g] = tuple(grid_g.shape[j] if i in avg else 1 for j, i in enumerate(grid_g.axes))
        b = np.ones([1] * len(grid_g.axes))
        for i, s in enumerate(pattern):
            if i not in avg:
                b = b * grid_g.placed(i, _row_weights(grid_g.orbits[i], s))
        beta[g] = b
    return avg, idx, kappa, lshape, beta


def _pattern_block(pattern, used, grids, classes, free) -> ReducedBlock:
    avg, idx, kappa, lshape, beta = _pattern_frame(pattern, used, grids, classes, free)
    raw = [_kron_all([grids[g].orbits[i].U for i in avg]) for g in used]
    B, L, _ = _basis.decompose(np.vstack(raw), "rows")
    splits = np.cumsum([R.shape[0] for R in raw])[:-1]
    return ReducedBlock(tuple(pattern), avg, B, idx, kappa, dict(zip(used, np.split(L, splits))), lshape, beta)


def _formed(cb: CoupledBlock, grids, classes, free) -> ReducedBlock:
    """The :class:`ReducedBlock` a coupled block stands for, on its coordinates (class by class, the
    shared basis in each: :func:`ffu_cvx.solvers.kron.coupled.precision`): basis
    ``B[(k, a), t] = B_cb[a, t']`` where the class tuple ``t`` has ``cb.ks[k]`` on the attribute and
    ``t'`` elsewhere, and a reduced row ``(o, rest)`` of a group reads ``U[o, ks[k]] L[rest]`` on class
    ``k`` (``kron(U, L)``, rows then ordered as the group's; sparse where at most :data:`SPARSE_ROWS` of
    it is non-zero: a group reading one state per row). Dense otherwise (``r k0`` coordinates): for
    releasing a formed covariance, never for the ascent."""
    i, r, (k0, _) = cb.attr, cb.r, cb.B.shape
    avg, idx, kappa, lshape, beta = _pattern_frame(cb.pattern, list(cb.L), grids, classes, free)
    pos = avg.index(i)
    rest = [classes[j].r for j in avg if j != i]
    B = np.zeros((r, k0) + tuple(classes[j].r for j in avg))
    L = {}
    for k, c in enumerate(cb.ks):
        B[(k, slice(None)) + (slice(None),) * pos + (c,)] = cb.B.reshape([k0] + rest)
    for g, Lg in cb.L.items():
        U = grids[g].orbits[i].U[:, cb.ks]                                        # (geo rows, r)
        shape = [grids[g].orbits[j].k for j in avg if j != i]
        order = np.moveaxis(np.arange(U.shape[0] * Lg.shape[0]).reshape([U.shape[0]] + shape), 0, pos).reshape(-1)
        full = sparse.kron(sparse.csr_array(U), sparse.csr_array(Lg), format="csr")[order]
        L[g] = full if full.nnz <= SPARSE_ROWS * math.prod(full.shape) else full.toarray()
    B = B.reshape(r * k0, -1)
    B.setflags(write=False)                     # kept as it is by the release's factor (no copy)
    return ReducedBlock(cb.pattern, avg, B, idx, kappa, L, lshape, beta)


def _blocks(grids, classes, split=None) -> list:
    free = tuple(i for i, c in enumerate(classes) if c.r >= 2)
    reach = reached_patterns(grids, classes, split)
    return [_pattern_block(p, used, grids, classes, free) for p, used in reach.items()]


def reduce(workload, classes=None) -> Reduction:
    """The :class:`Reduction` of ``workload`` (callers check the blocks' sizes first: they are dense)."""
    classes = classes_of(workload) if classes is None else tuple(classes)
    grids = group_grids(workload.groups, classes)
    return Reduction(workload, classes, grids, _blocks(grids, classes))


def _coupled_block(pinned: list, grids, i: int, across: tuple) -> CoupledBlock | None:
    """The :class:`CoupledBlock` of one pattern's blocks pinned on the classes of attribute ``i``;
    None when they do not share their basis and groups."""
    first = pinned[0]
    if any(b.L.keys() != first.L.keys() or not np.array_equal(b.B, first.B) for b in pinned):
        return None
    ks = np.array([pinned_class(b.pattern[i]) for b in pinned])
    coupling = {}
    for g in (g for g in across if g in first.L):
        u = grids[g].orbits[i].U[0, ks]
        coupling[g] = (u, first.beta[g] / u[0] ** 2)   # a pinned block weighs the coupling row by u_k^2
    beta = {g: np.stack(np.broadcast_arrays(*[b.beta[g] for b in pinned])) for g in first.L if g not in coupling}
    pattern = first.pattern[:i] + (-1,) + first.pattern[i + 1:]
    idx, kappa = np.concatenate([b.idx for b in pinned]), np.concatenate([b.kappa for b in pinned])
    return CoupledBlock(pattern, i, len(pinned), ks, first.B, first.L, first.lshape, idx, kappa, beta, coupling)


def coupled_reduction(workload, classes=None) -> Reduction | None:
    """The :class:`Reduction` of ``workload`` with the attribute of :func:`coupling_of` taken class by
    class and, per pattern, its pinned blocks that the coupling groups reach as one
    :class:`ffu_cvx.solvers.kron.coupled.CoupledBlock`; None when there is no such attribute or the
    pinned blocks of a pattern do not share their rows. It certifies (its bound is rigorous) and
    estimates the optimum; it keeps no covariance: a mechanism is released through :meth:`Reduction.formed`
    and :func:`mixed_covariances`."""
    classes = classes_of(workload) if classes is None else tuple(classes)
    grids = group_grids(workload.groups, classes)
    found = coupling_of(grids, classes)
    if found is None:
        return None
    i, across = found
    split = tuple(s or j == i for j, s in enumerate(separable(grids, classes)))
    blocks, pinned = [], {}
    for b in _blocks(grids, classes, split):
        if b.pattern[i] <= -2 and any(g in b.L for g in across):
            pinned.setdefault(b.pattern[:i] + b.pattern[i + 1:], []).append(b)
        else:
            blocks.append(b)
    for group in pinned.values():
        cb = _coupled_block(group, grids, i, across)
        if cb is None:
            return None
        blocks.append(cb)
    return Reduction(workload, classes, grids, blocks)


# ----------------------------------------------------------------------------- the dual ascent
def _weights(blk: ReducedBlock, g: int, mu_g: np.ndarray) -> np.ndarray:
    """``w_{g,s}`` (rows of ``L[g]``): ``mu_g beta_{g,s}`` summed over the rows sharing ``l``."""
    return row_weights(blk.lshape[g], mu_g * blk.beta[g])


def _cholesky_upper(P: np.ndarray) -> np.ndarray:
    """Upper Cholesky factor of ``P``, with a ridge of :data:`_RIDGE` of its mean eigenvalue when
    multipliers near zero leave it numerically singular."""
    try:
        return np.linalg.cholesky(P).T
    except np.linalg.LinAlgError:
        ridge = _RIDGE * max(float(np.trace(P)) / P.shape[0], np.finfo(float).tiny)
        return np.linalg.cholesky(P + ridge * np.eye(P.shape[0])).T


def _block_spectrum(blk: ReducedBlock, lam, mu) -> tuple:
    """``(R, V, sqrt(w))``: ``P = R^T R`` (upper, :func:`_cholesky_upper`) and ``R Q R^T = V diag(w) V^T``
    with ``w`` floored at :data:`_RIDGE` of the largest."""
    P = (blk.B * (blk.kappa * lam[blk.idx])) @ blk.B.T
    Q = sum((L.T * _weights(blk, g, mu[g])) @ L for g, L in blk.L.items())
    R = _cholesky_upper(P)
    w, V = np.linalg.eigh(R @ Q @ R.T)
    return R, V, np.sqrt(np.maximum(w, _RIDGE * max(float(w[-1]), np.finfo(float).tiny)))


def _block_precision(blk, lam, mu) -> np.ndarray:
    """The step's ``Sigma_s^{-1} = R^{-1} V diag(sqrt w) V^T R^{-T}`` of a block at ``(lam, mu)``, formed
    (a coupled one's by :func:`ffu_cvx.solvers.kron.coupled.precision`, on its coordinates)."""
    if isinstance(blk, CoupledBlock):
        return coupled.precision(blk, lam, mu, _cholesky_upper)
    R, V, sw = _block_spectrum(blk, lam, mu)
    W = np.linalg.solve(R, V)
    return (W * sw) @ W.T


def _block_step(blk: ReducedBlock, lam, mu):
    """``(F_s, Sigma_s, profile part (D,), {g: variance part on the group's grid})`` at ``(lam, mu)``.

    A (numerically) singular ``P`` gets a ridge and the eigenvalues of ``R Q R^T`` a floor of
    :data:`_RIDGE` of the largest: the step is then exact for nearby multipliers, its
    ``Sigma`` a primal point like any other (its cost is evaluated, not assumed), and the
    returned bound is recomputed exactly from the multipliers (:func:`certified_bound`).
    """
    R, V, sw = _block_spectrum(blk, lam, mu)
    RV = R.T @ V
    sigma = (RV / sw) @ RV.T
    G = np.linalg.solve(R, V).T @ blk.B          # V^T R^{-T} B; the solve of a triangular R pivots nothing
    p = blk.kappa * np.einsum("ij,ij->j", G, G * sw[:, None])
    v = {}
    for g, L in blk.L.items():
        H = V.T @ (R @ L.T)
        v[g] = np.einsum("ij,ij->j", H, H / sw[:, None]).reshape(blk.lshape[g]) * blk.beta[g]
    return float(sw.sum()), 0.5 * (sigma + sigma.T), p, v


def _nuclear(A: np.ndarray) -> float:
    return float(np.sum(linalg.svdvals(A, check_finite=False)))


def certified_bound(red: Reduction, lam, mu) -> float:
    """``(sum_s F(P_s, Q_s))^2 / (mu . c)`` for ``lam`` scaled to sum 1, by singular values
    (rounding cannot inflate it)."""
    lam = lam / lam.sum()
    F = 0.0
    for blk in red.blocks:
        if isinstance(blk, CoupledBlock):
            F += coupled.bound(blk, lam, mu)
            continue
        G = blk.B * np.sqrt(blk.kappa * lam[blk.idx])
        H = np.hstack([L.T * np.sqrt(_weights(blk, g, mu[g])) for g, L in blk.L.items()])
        F += _nuclear(H.T @ G)
    mc = sum(float(mu[g].sum()) * c for g, c in enumerate(red.targets))
    return F * F / mc


@dataclass(frozen=True)
class AscentResult:
    """Best primal ``sigmas`` (normalised cost ``cost``), best bound ``lower_bound``, ``nit``, ``status``,
    ``message``; ``steps``: per step its profile (T,), its variances on every group's grid, flat, and
    its multipliers ``(lam, mu)`` (the last ``ascent(keep_steps=...)`` steps, for :func:`mixture` and
    :func:`mixed_covariances`)."""

    sigmas: tuple
    cost: float
    lower_bound: float
    nit: int
    status: str
    history: tuple
    message: str = ""
    steps: tuple = ()


def _step_all(red: Reduction, lam, mu):
    """Every block's step, summed: ``(F, steps, profile (T,), variances per group)``."""
    steps = [coupled.step(b, lam, mu, _cholesky_upper) if isinstance(b, CoupledBlock) else _block_step(b, lam, mu)
             for b in red.blocks]
    p = np.zeros(red.T)
    v = [np.zeros(grid.shape) for grid in red.grids]
    for blk, s in zip(red.blocks, steps):
        p[blk.idx] += s[2]
        for g, part in s[3].items():
            v[g] = v[g] + part
    return sum(s[0] for s in steps), steps, p, v


def _times(sigma, s: float):
    """A block's covariance scaled by ``s`` (None for a coupled block, which forms none)."""
    return None if sigma is None else sigma * s


def _rescaled(red: Reduction, steps, lam, mu, iters: int, relax: float):
    """``(gamma (S,), cost)``: the best per-block scalings ``Sigma_s -> gamma_s Sigma_s`` of the
    step's covariances, by the same ascent on the scalar blocks.

    With the shapes fixed the problem has one scalar per block: profile
    ``sum_s a_{s,t} / gamma_s``, variances ``sum_s gamma_s b_{s,rho}``. Its blocks are 1 x 1
    (``F_s = sqrt(P_s Q_s)``, ``gamma_s = sqrt(P_s / Q_s)``). A block whose queries are all
    slack at the dual optimum has ``Q_s -> 0`` and a covariance the dual leaves free; this
    brings it back to its targets, where the plain iterate would keep it far off.
    """
    offsets = np.cumsum([0] + [int(np.prod(g.shape)) for g in red.grids])
    rows, cols, vals, brows, bcols, bvals = [], [], [], [], [], []
    for k, (blk, st) in enumerate(zip(red.blocks, steps)):
        rows.append(np.full(blk.idx.size, k))
        cols.append(blk.idx)
        vals.append(st[2])
        for g, part in st[3].items():
            flat = np.broadcast_to(part, red.grids[g].shape).reshape(-1) / red.targets[g]
            brows.append(np.full(flat.size, k))
            bcols.append(offsets[g] + np.arange(flat.size))
            bvals.append(flat)
    S = len(steps)
    A = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(S, red.T))
    Bv = sparse.csr_matrix((np.concatenate(bvals), (np.concatenate(brows), np.concatenate(bcols))),
                           shape=(S, int(offsets[-1])))
    x = lam.copy()
    y = np.concatenate([(m * c).reshape(-1) for m, c in zip(mu, red.targets)])
    best, best_gamma = math.inf, np.ones(S)
    for _ in range(iters):
        P, Q = A @ x, Bv @ y
        gamma = np.sqrt(np.maximum(P, 1e-300) / np.maximum(Q, 1e-300))
        F = float(np.sqrt(P * Q).sum())
        p, v = A.T @ (1.0 / gamma), Bv.T @ gamma
        cost = float(p.max()) * float(v.max())
        if cost < best:
            best, best_gamma = cost, gamma / float(v.max())   # every variance within its target
        x = x * (p / F) ** relax
        y = y * (v / F) ** relax
        x, y = x / x.sum() + _MIX / x.size, y / y.sum() + _MIX / y.size
    return best_gamma, best


def _smoothed_primal(red: Reduction, steps, lam, mu, iters: int, relax: float):
    """``(cost, sigmas)``: the best rescaled (:func:`_rescaled`) step at ``(lam, mu)`` and at the
    multipliers mixed with uniform ones by :data:`SMOOTHING` weights.

    Where the optimum leaves a class tuple or a query slack its multiplier tends to zero,
    and the step's covariance degenerates there (an infinite profile or variance); a
    little uniform weight keeps those directions finite at almost no cost elsewhere.
    """
    candidates = [steps]
    lam0, mu0 = _start(red)
    mass = sum(float(m.sum()) for m in mu) / sum(float(m.sum()) for m in mu0)
    for theta in SMOOTHING:
        lam_t = (1 - theta) * lam + theta * lam0
        mu_t = [(1 - theta) * m + theta * mass * m0 for m, m0 in zip(mu, mu0)]
        candidates.append(_step_all(red, lam_t, mu_t)[1])
    best, best_sigmas = math.inf, None
    for cand in candidates:
        gamma, cost = _rescaled(red, cand, lam, mu, iters, relax)
        if cost < best:
            best, best_sigmas = cost, tuple(_times(st[1], gk) for st, gk in zip(cand, gamma))
    return best, best_sigmas


def _start(red: Reduction):
    lam = np.full(red.T, 1.0 / red.T)
    counts = [np.ones(grid.shape) for grid in red.grids]
    for grid, cnt in zip(red.grids, counts):
        for i in grid.axes:
            cnt *= grid.placed(i, grid.orbits[i].count.astype(float))
    total = sum(float(cnt.sum()) * c for cnt, c in zip(counts, red.targets))
    return lam, [cnt / total for cnt in counts]


def _normalised(red: Reduction, lam, mu):
    """``lam`` scaled to ``sum lam = 1`` and ``mu`` to ``mu . c = 1``, each mixed with :data:`_MIX` of
    the uniform start."""
    lam0, mu0 = _start(red)
    lam = (1 - _MIX) * lam / lam.sum() + _MIX * lam0
    mc = sum(float(m.sum()) * c for m, c in zip(mu, red.targets))
    mu = [(1 - _MIX) * m / mc + _MIX * m0 for m, m0 in zip(mu, mu0)]
    return lam, mu


def _update(red: Reduction, lam, mu, p, v, F: float, relax: float):
    """The multiplicative step raised to ``relax`` (over-relaxed above 1), normalised (:func:`_normalised`)."""
    lam = lam * (p / F) ** relax
    mu = [m * (vg / (c * F)) ** relax for m, vg, c in zip(mu, v, red.targets)]
    return _normalised(red, lam, mu)


class _Anderson:
    """Anderson acceleration (type II) of the step ``x -> g(x)`` on the stacked multipliers ``x``:
    from the last ``memory`` points and their steps ``f_k = g(x_k) - x_k`` it proposes
    ``x + f - (dX + dF) gamma``, ``gamma`` the least-squares fit of ``f`` by the differences
    ``dF`` (columns scaled to unit norm, a relative ridge of :data:`_ANDERSON_RIDGE`).

    In the multipliers themselves, not their logarithms: a multiplier the optimum sets to
    zero decays geometrically and its step with it, where in log space it would keep a
    constant step that the fit cannot cancel (on the census tables the ascent then stalls).
    """

    def __init__(self, memory: int):
        self.memory = memory
        self.reset()

    def reset(self):
        self.x, self.f, self.dx, self.df = None, None, [], []

    def step(self, x: np.ndarray, gx: np.ndarray) -> np.ndarray:
        """The accelerated point after ``x`` (step to ``gx``); where it is not positive, ``gx``."""
        f = gx - x
        if self.x is not None:
            self.dx.append(x - self.x)
            self.df.append(f - self.f)
            del self.dx[:-self.memory], self.df[:-self.memory]
        self.x, self.f = x, f
        if not self.df:
            return gx
        dF, dX = np.array(self.df).T, np.array(self.dx).T
        scale = np.linalg.norm(dF, axis=0)
        scale[scale == 0] = 1.0
        A = dF / scale
        gamma = np.linalg.solve(A.T @ A + _ANDERSON_RIDGE * np.eye(A.shape[1]), A.T @ f) / scale
        out = gx - (dX + dF) @ gamma
        return np.where(out > 0, out, gx)


def _stacked(lam, mu) -> np.ndarray:
    return np.concatenate([lam] + [m.reshape(-1) for m in mu])


def _unstacked(red: Reduction, x: np.ndarray, mu_like):
    """The multipliers ``(lam, mu)`` of stacked ``x`` (``mu`` shaped like ``mu_like``), normalised."""
    lam, off, mu = x[:red.T], red.T, []
    for m in mu_like:
        mu.append(x[off:off + m.size].reshape(m.shape))
        off += m.size
    return _normalised(red, lam, mu)


def ascent(red: Reduction, *, tol: float, max_iter: int, callback=None, patience: int = 500,
           max_time: float | None = None, log_every: float = 5.0, relax: float = RELAX,
           rescale_every: int = RESCALE_EVERY, rescale_iters: int = RESCALE_ITERS,
           anderson: int = ANDERSON_MEMORY, anderson_from: float = ANDERSON_FROM,
           keep_steps: int = 0) -> AscentResult:
    """The block dual ascent from uniform multipliers until the certified gap is below ``tol``.

    Each step is ``lam <- lam (p / F)^relax``, ``mu <- mu (v / (c F))^relax``: ``relax = 1``
    is the fixed point of the module docstring, above 1 it over-relaxes (about half the
    steps at :data:`RELAX`; 2 and above can cycle, see there). Every ``rescale_every`` steps
    the blocks' covariances are also rescaled one scalar each by ``rescale_iters`` steps of
    the scalar problem (:func:`_rescaled`), a primal point that the plain iterate misses
    where the dual leaves a block free. Once the certified gap is at most ``anderson_from``
    the steps are Anderson-accelerated over the last ``anderson`` steps (:class:`_Anderson`;
    0: plain steps throughout); an accelerated point whose bound is below the bound of the
    point it came from is replaced by the plain step from that point, and the memory
    restarts. Every iterate is certified, whatever the step.

    Stops after ``max_iter`` steps or ``max_time`` seconds (status ``max_iter``, the best
    certified iterate), after ``patience`` steps without a better gap (status ``optimal``
    if the gap is below ``tol`` else ``max_iter``), or when ``callback`` raises
    ``StopIteration`` (``user_stopped``). Logs the gap every ``log_every`` seconds. The profiles and
    variances of the last ``keep_steps`` steps are kept (:attr:`AscentResult.steps`, for :func:`mixture`).
    """
    lam, mu = _start(red)
    accel, base = _Anderson(anderson) if anderson else None, None
    best_cost, best_sigmas, best_lb, best_dual = math.inf, None, 0.0, (lam, mu)
    status, message, history, last_gain, it = MAX_ITER, "", [], 0, 0
    kept = collections.deque(maxlen=keep_steps)
    t0 = time.perf_counter()
    next_log = t0 + log_every
    log.info("kron: block dual ascent over %d blocks (largest %d), %d class tuples, tol %.3g",
             len(red.blocks), red.D, red.T, tol)
    for it in range(1, max_iter + 1):
        F, steps, p, v = _step_all(red, lam, mu)
        if keep_steps:
            kept.append((p, _flat_variances(red, v), lam, mu))
        ratio = max(float(np.max(vg)) / c for vg, c in zip(v, red.targets))
        cost, lb = float(p.max()) * ratio, F * F
        improved = False
        if cost < best_cost:
            best_cost, best_sigmas, improved = cost, tuple(_times(s[1], 1.0 / ratio) for s in steps), True
        if lb > best_lb:
            best_lb, best_dual, improved = lb, (lam, mu), True
        if it % rescale_every == 0:
            cost, sigmas = _smoothed_primal(red, steps, lam, mu, rescale_iters, relax)
            if cost < best_cost:
                best_cost, best_sigmas, improved = cost, sigmas, True
        last_gain = it if improved else last_gain
        gap = best_cost / best_lb - 1.0
        now = time.perf_counter()
        history.append((it, best_cost, best_lb, gap, now - t0))
        if now >= next_log:
            log.info("kron: step %d, %.1f s: cost %.8g, bound %.8g, gap %.3g", it, now - t0, best_cost, best_lb, gap)
            next_log = now + log_every
        if callback is not None:
            try:
                callback(IntermediateResult(method="kron", nit=it, privacy_cost=best_cost, lower_bound=best_lb,
                                            gap=gap, sigma=None, structure="symmetric blocks"))
            except StopIteration:
                status = USER_STOPPED
                break
        if gap <= tol and best_cost / certified_bound(red, *best_dual) - 1.0 <= tol:
            status = OPTIMAL   # the bound recomputed by singular values (the one returned) agrees
            break
        if it - last_gain >= patience:
            message = f"no better gap in {patience} steps"
            break
        if max_time is not None and now - t0 >= max_time:
            message = f"reached max_time = {max_time} s"
            break
        if accel is None or gap > anderson_from:
            lam, mu = _update(red, lam, mu, p, v, F, relax)
        elif base is not None and lb < base[-1] ** 2:
            accel.reset()   # the accelerated point lowers the bound: the plain step from its base instead
            lam, mu, base = *_update(red, *base, relax), None
        else:
            base = (lam, mu, p, v, F)
            x = accel.step(_stacked(lam, mu), _stacked(*_update(red, lam, mu, p, v, F, relax)))
            lam, mu = _unstacked(red, x, mu)
    lb = certified_bound(red, *best_dual)
    log.info("kron: ascent ends after %d steps, %.1f s: %s, gap %.3g %s", it, time.perf_counter() - t0, status,
             best_cost / lb - 1.0 if lb > 0 else math.inf, message)
    return AscentResult(best_sigmas, best_cost, lb, it, status, tuple(history), message, tuple(kept))


def _flat_variances(red: Reduction, v) -> np.ndarray:
    """Variances on every group's grid (broadcast to it), concatenated."""
    return np.concatenate([np.broadcast_to(vg, grid.shape).reshape(-1) for vg, grid in zip(v, red.grids)])


def mixture(red: Reduction, steps) -> tuple[float, np.ndarray]:
    """``(cost, weights)``: the least privacy cost of a mixture ``sum_t c_t X_t`` of the steps' primal
    points (``X_t = Sigma_t^{-1}`` per block; ``steps`` as :attr:`AscentResult.steps`), every target met.

    The mixture's profile is ``sum_t c_t p_t`` (linear in ``X``) and a query's variance at most
    ``1 / sum_t (c_t / v_t)`` (the variance is convex and of degree -1 in ``X``: measuring each
    ``X_t`` apart and weighting the answers by their inverse variances attains it), so the least
    ``max sum_t c_t p_t`` with ``sum_t c_t / v_t >= 1 / c`` on every query is a linear program over
    the ``c_t``. Near the optimum one step's primal point lags the bound (the multipliers of slack
    queries and cells move slowly); a mixture of the steps along the way does not.
    """
    P = np.array([st[0] for st in steps]).T                              # (T, n)
    inv = 1.0 / np.maximum(np.array([st[1] for st in steps]).T, 1e-300)   # (queries on the grids, n)
    targets = np.concatenate([np.full(math.prod(grid.shape), c) for grid, c in zip(red.grids, red.targets)])
    n = P.shape[1]
    A = np.block([[P, -np.ones((P.shape[0], 1))], [-inv, np.zeros((inv.shape[0], 1))]])
    b = np.concatenate([np.zeros(P.shape[0]), -1.0 / targets])
    out = optimize.linprog(np.r_[np.zeros(n), 1.0], A_ub=A, b_ub=b, bounds=[(0, None)] * (n + 1), method="highs")
    if out.status != 0:
        return math.inf, np.zeros(n)
    return float(out.x[-1]), out.x[:n]


def mixed_covariances(red: Reduction, steps, weights) -> tuple:
    """Per block the covariance ``(sum_t c_t X_t)^{-1}`` of the mixture of :func:`mixture` (``steps`` as
    :attr:`AscentResult.steps`, with their multipliers; ``weights`` the ``c_t``), each step's ``X_t``
    formed again at its multipliers (:func:`_block_precision`): a coupled block's on its coordinates,
    for :meth:`Reduction.formed`. One mechanism measured once; its variances are at most the mixture's
    bound (``w^T (sum c_t X_t)^{-1} w <= 1 / sum c_t / v_t``), its profile ``sum_t c_t p_t``."""
    X = [None] * len(red.blocks)
    for st, c in zip(steps, weights):
        if c <= 0:
            continue
        for b, blk in enumerate(red.blocks):
            part = c * _block_precision(blk, *st[2:])
            X[b] = part if X[b] is None else X[b] + part
    return tuple(_covariance(x) for x in X)


def _covariance(X: np.ndarray) -> np.ndarray:
    """``X^{-1}`` of a precision ``X``, by Cholesky on its unit-diagonal scaling ``Y = D X D`` raised by
    :data:`PRECISION_RIDGE` (more precision: the variances only fall, each cell's profile rises by at most
    the ridge times ``(sum_i |b_i| sqrt(X_ii))^2``, and the release prices it exactly). The ridge bounds the
    condition of ``Y`` by about its inverse, so the covariance's own Cholesky factor exists in floating
    point where a mixture's precision spans 16 orders (a slack state's cells)."""
    d = 1.0 / np.sqrt(np.diag(X))
    Y = X * d[:, None] * d[None, :]
    Y[np.diag_indices_from(Y)] += PRECISION_RIDGE
    S = linalg.cho_solve(linalg.cho_factor(Y, lower=True, check_finite=False), np.diag(d), check_finite=False)
    S = S * d[:, None]
    S = 0.5 * (S + S.T)
    S.setflags(write=False)                     # kept as it is by the release's factor (no copy)
    return S
