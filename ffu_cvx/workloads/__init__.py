"""Workloads of the fitness-for-use paper, as ``Workload`` values (W, c, labels, domain).

Workloads layer: imports numpy, ``model.memory``, ``model.problem`` and ``products`` (the product-workload builder).

Notation: ``W`` (m, d) holds one linear query per row over a histogram of ``d`` cells,
``c`` (m,) the variance target of each query. A multi-attribute histogram of shape
``domain = (n_1, ..., n_a)`` is flattened row-major (C order, the last attribute varies
fastest), so cell ``(x_1, ..., x_a)`` is column ``numpy.ravel_multi_index(x, domain)``.
``labels`` names the query group of every row (the groups of the paper's tables).

Builders (paper section and table in brackets): :func:`prefix` (Tables 2, 3),
:func:`random_ranges` (§7.3, Tables 5, 6), :func:`tree` (hierarchical ranges, the
nodes of a ``b``-ary tree over the domain), :func:`random_pm1` (§7.4, Tables 7, 8),
:func:`pl94` (§7.2, Table 4), :func:`age_pyramid` (§7.5, Table 9), :func:`marginals_a`
and :func:`marginals_b` (§7.6, Figures 2, 3), :func:`from_matrix` for users' own
workloads, and :func:`marginal_queries` for any marginal of any domain. Randomised
builders take an integer ``seed`` and are deterministic given it; the seed is recorded
in ``Workload.params``. Targets (``targets=``, see :data:`TARGET_KINDS`): ``"uniform"``
(all 1), ``"random"`` (U(1, 10)) or ``"decades"`` (log-uniform over 1..1000, so the
targets, and with them the dual multipliers, spread over three decades).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from ..model.memory import check_dense
from ..model.problem import validate_labels, validate_workload
from .products import product

__all__ = [
    "Workload",
    "prefix",
    "random_ranges",
    "tree",
    "TARGET_KINDS",
    "random_pm1",
    "pl94",
    "PL94_RACES",
    "PL94_RACE_MASKS",
    "PL94_GROUPS",
    "age_pyramid",
    "AGE_GROUPS",
    "marginal_queries",
    "marginals_a",
    "marginals_b",
    "from_matrix",
    "product",
]


@dataclass(frozen=True, eq=False)
class Workload:
    """A workload: ``W`` (m, d) queries, ``c`` (m,) variance targets, ``labels`` (m,)
    group label per query, ``domain`` the histogram's shape (prod(domain) == d),
    ``name`` and ``params`` (the builder's arguments, seeds included)."""

    W: np.ndarray
    c: np.ndarray
    labels: tuple
    domain: tuple
    name: str
    params: dict

    def __post_init__(self):
        W, c = validate_workload(self.W, self.c)
        labels = validate_labels(self.labels, W.shape[0])
        if len(labels) != W.shape[0]:
            raise ValueError(f"`labels` needs one entry per query ({W.shape[0]}), got {len(labels)}")
        if int(np.prod(self.domain)) != W.shape[1]:
            raise ValueError(f"`domain` {self.domain} has {int(np.prod(self.domain))} cells but W has {W.shape[1]} columns")
        W.setflags(write=False)
        c.setflags(write=False)
        object.__setattr__(self, "W", W)
        object.__setattr__(self, "c", c)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "domain", tuple(int(n) for n in self.domain))

    @property
    def m(self) -> int:
        return self.W.shape[0]

    @property
    def d(self) -> int:
        return self.W.shape[1]


def _check_size(d, name="d", minimum=1) -> int:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}, got {d!r}")
    return int(d)


def _check_fits(m: int, d: int, builder: str, value: int) -> None:
    """Refuse a builder's dense (m, d) ``W`` that cannot fit in memory, naming `d`."""
    check_dense(m, d, f"{builder}(d={value})'s W", "d",
                "use a smaller `d` (every method here needs W dense; the SDP far more than W)")


def prefix(d: int, targets: str = "uniform", seed: int = 0) -> Workload:
    """Prefix (one-sided range) queries on an ordered domain of size ``d``: Tables 2 and 3.

    ``W`` is the (d, d) upper-triangular ones matrix ``U`` of the paper (``W[i, j] = 1``
    for ``i <= j``), targets 1 by default (``targets``: one of :data:`TARGET_KINDS`,
    drawn with ``numpy.random.default_rng(seed)``; the seed matters for the random
    kinds only). Row ``i`` counts cells ``i..d-1``: a prefix on the reversed domain,
    which is the same workload up to relabelling the cells.
    """
    d = _check_size(d)
    targets = _check_targets(targets)
    seed = _check_seed(seed)
    _check_fits(d, d, "prefix", d)
    c = draw_targets(np.random.default_rng(seed), targets, d)
    if targets == "uniform":
        name, params = f"prefix(d={d})", {"d": d}
    else:
        name, params = f"prefix(d={d}, targets={targets!r}, seed={seed})", {"d": d, "targets": targets, "seed": seed}
    return Workload(np.triu(np.ones((d, d))), c, ("prefix",) * d, (d,), name, params)


#: The target kinds of the randomised builders (``targets=``): all 1, U(1, 10), and
#: log-uniform over 1..DECADES_MAX (targets spread over decades).
TARGET_KINDS = ("uniform", "random", "decades")
#: ``"decades"`` targets are ``10 ** U(0, log10(DECADES_MAX))``: three decades.
DECADES_MAX = 1000.0

#: Largest number of entries of a dense W the marginal builders will allocate (1 GiB).
_MAX_ENTRIES = 2**27


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(
            f"`seed` must be a non-negative integer (it is recorded in Workload.params), got {seed!r}"
        )
    return int(seed)


def _check_targets(targets) -> str:
    if not isinstance(targets, str) or targets.lower() not in TARGET_KINDS:
        raise ValueError(f"`targets` must be one of {TARGET_KINDS}, got {targets!r}")
    return targets.lower()


def draw_targets(rng: np.random.Generator, targets: str, m: int) -> np.ndarray:
    """``m`` targets of kind ``targets`` (checked): ones, U(1, 10) or log-uniform over 1..DECADES_MAX."""
    if targets == "uniform":
        return np.ones(m)
    if targets == "random":
        return rng.uniform(1.0, 10.0, size=m)
    return 10.0 ** rng.uniform(0.0, np.log10(DECADES_MAX), size=m)


def _check_domain(domain) -> tuple[int, ...]:
    try:
        dims = tuple(domain)
    except TypeError:
        raise ValueError(f"`domain` must be a sequence of attribute sizes, got {domain!r}") from None
    if not dims:
        raise ValueError("`domain` must have at least one attribute, got ()")
    return tuple(_check_size(n, "domain entries") for n in dims)


def random_ranges(d: int, targets: str = "uniform", seed: int = 0) -> Workload:
    """``2 d`` random range queries on an ordered domain of size ``d`` (§7.3, Tables 5, 6).

    Each query draws two end points independently and uniformly from ``{0, ..., d-1}``,
    sorts them into ``lo <= hi`` and counts the cells ``lo..hi`` (both included). The two
    draws coincide with probability ``1/d``, so a range can be a single cell.

    Parameters
    ----------
    d : int
        Domain size (>= 1).
    targets : {"uniform", "random", "decades"}
        ``"uniform"``: every target is 1 (Table 5); ``"random"``: targets drawn
        independently from U(1, 10) (Table 6); ``"decades"``: log-uniform over 1..1000.
    seed : int
        Seed of the ``numpy.random.Generator`` drawing end points, then targets.

    Returns
    -------
    Workload
        ``W`` (2 d, d) with 0/1 entries, each row one contiguous run of ones; labels
        ``"range"``.

    Notes
    -----
    ``W`` is often rank deficient: a boundary between two neighbouring cells is used by
    no range with probability about ``e^-4`` (0.018), and then the two columns are
    equal (seed 0 at d = 64 has rank 63). ``basis="auto"`` then picks a row basis; the
    paper's ``B = U`` needs full column rank.

    The authors' public code uses the same end-point distribution, but a fixed target
    and one extra total query; this builder follows the paper's text.
    """
    d = _check_size(d)
    targets = _check_targets(targets)
    seed = _check_seed(seed)
    _check_fits(2 * d, d, "random_ranges", d)
    rng = np.random.default_rng(seed)
    m = 2 * d
    ends = rng.integers(0, d, size=(m, 2))
    lo, hi = ends.min(axis=1), ends.max(axis=1)
    cells = np.arange(d)
    W = ((cells >= lo[:, None]) & (cells <= hi[:, None])).astype(float)
    c = draw_targets(rng, targets, m)
    name = f"random_ranges(d={d}, targets={targets!r}, seed={seed})"
    return Workload(W, c, ("range",) * m, (d,), name, {"d": d, "targets": targets, "seed": seed})


def tree(d: int, branching: int = 4, targets: str = "uniform", seed: int = 0) -> Workload:
    """Hierarchical range queries: every node of a ``branching``-ary tree over ``d`` ordered cells.

    The root counts all cells; each node's range is split into ``branching`` contiguous
    blocks as equal as possible (sizes differ by at most one, larger ones first; fewer
    blocks when the range has fewer cells), down to single cells, the leaves. A node of
    one cell is a leaf and is not split again.

    Parameters
    ----------
    d : int
        Domain size (>= 1).
    branching : int
        Children per node (>= 2).
    targets : {"uniform", "random", "decades"}
        See :data:`TARGET_KINDS`; drawn independently per query from
        ``numpy.random.default_rng(seed)``.
    seed : int
        Seed of the targets.

    Returns
    -------
    Workload
        ``W`` (m, d) with 0/1 rows, one contiguous run of ones each, in breadth-first order
        (the root first); ``labels`` ``"level0"``, ``"level1"``, ... by depth. For ``d =
        branching**h`` there are ``(branching**(h+1) - 1) / (branching - 1)`` queries.
    """
    d = _check_size(d)
    branching = _check_size(branching, "branching", 2)
    targets = _check_targets(targets)
    seed = _check_seed(seed)
    nodes, level, depth = [], [(0, d)], 0
    while level:
        nodes += [(lo, hi, depth) for lo, hi in level]
        children = []
        for lo, hi in level:
            if hi - lo > 1:
                sizes = [len(part) for part in np.array_split(np.arange(lo, hi), min(branching, hi - lo))]
                edges = lo + np.concatenate([[0], np.cumsum(sizes)])
                children += list(zip(edges[:-1].tolist(), edges[1:].tolist()))
        level, depth = children, depth + 1
    m = len(nodes)
    _check_fits(m, d, "tree", d)
    cells = np.arange(d)
    lo, hi = np.array([n[0] for n in nodes]), np.array([n[1] for n in nodes])
    W = ((cells >= lo[:, None]) & (cells < hi[:, None])).astype(float)
    c = draw_targets(np.random.default_rng(seed), targets, m)
    labels = tuple(f"level{n[2]}" for n in nodes)
    name = f"tree(d={d}, branching={branching}, targets={targets!r}, seed={seed})"
    return Workload(W, c, labels, (d,), name, {"d": d, "branching": branching, "targets": targets, "seed": seed})


def random_pm1(d: int, targets: str = "uniform", seed: int = 0, p_plus: float = 0.2) -> Workload:
    """``2 d`` random queries with entries in {+1, -1} (§7.4, Tables 7, 8).

    Every entry is +1 with probability ``p_plus`` and -1 otherwise, independently.

    Parameters
    ----------
    d : int
        Domain size (>= 1).
    targets : {"uniform", "random", "decades"}
        ``"uniform"``: every target is 1 (Table 7). ``"random"`` (Table 8): the first
        ``m // 10`` queries (``m = 2 d``) are "important" with targets from U(1, 3), the
        others get targets from U(10, 15). Rows are independent and identically
        distributed, so taking the first tenth is the same as a random tenth.
        ``"decades"``: every target log-uniform over 1..1000.
    seed : int
        Seed of the ``numpy.random.Generator`` drawing entries, then targets.
    p_plus : float
        Probability of +1, in [0, 1]. The paper's text says 0.2 (the default). The
        authors' public code passes 0.2 where numpy expects ``replace``, so it draws a
        fair coin (``p_plus=0.5``); it also draws integer targets (1..3 and 10..15).

    Returns
    -------
    Workload
        ``W`` (2 d, d); labels ``"pm1"`` for uniform and decades targets, ``"important"`` /
        ``"regular"`` for random targets.
    """
    d = _check_size(d)
    targets = _check_targets(targets)
    seed = _check_seed(seed)
    real = isinstance(p_plus, (int, float, np.integer, np.floating)) and not isinstance(p_plus, bool)
    if not real or not 0.0 <= float(p_plus) <= 1.0:
        raise ValueError(f"`p_plus` must be a probability in [0, 1], got {p_plus!r}")
    p_plus = float(p_plus)
    _check_fits(2 * d, d, "random_pm1", d)
    rng = np.random.default_rng(seed)
    m = 2 * d
    W = np.where(rng.random((m, d)) < p_plus, 1.0, -1.0)
    if targets != "random":
        c, labels = draw_targets(rng, targets, m), ("pm1",) * m
    else:
        n_imp = m // 10
        c = np.concatenate([rng.uniform(1.0, 3.0, size=n_imp), rng.uniform(10.0, 15.0, size=m - n_imp)])
        labels = ("important",) * n_imp + ("regular",) * (m - n_imp)
    name = f"random_pm1(d={d}, targets={targets!r}, seed={seed}, p_plus={p_plus:g})"
    return Workload(W, c, labels, (d,), name, {"d": d, "targets": targets, "seed": seed, "p_plus": p_plus})


#: The six OMB race categories of the 2010 PL94-171 file, bit ``i`` of a race mask.
PL94_RACES = (
    "White",
    "Black or African American",
    "American Indian and Alaska Native",
    "Asian",
    "Native Hawaiian and Other Pacific Islander",
    "Some Other Race",
)

#: Race value ``r`` (0..62) of the PL94 histogram -> bitmask of the races selected, in
#: Census tabulation order: the 6 single races, then the 15 pairs, 20 triples, 15
#: quadruples, 6 quintuples and the one sextuple, each size in lexicographic order.
PL94_RACE_MASKS = tuple(
    sum(1 << i for i in combo) for size in range(1, 7) for combo in combinations(range(len(PL94_RACES)), size)
)

PL94_GROUPS = ("voting_age", "ethnicity", "one_race", "two_or_more_races", "identity")


def pl94(targets=(1.0, 1.0, 1.0, 2.0, 4.0)) -> Workload:
    """The PL94-171 redistricting workload on the (2, 2, 63) histogram (§7.2, Table 4).

    Attributes, flattened in C order (cell ``(v, e, r)`` is column ``126 v + 63 e + r``):
    voting age ``v`` (0 = 17 or under, 1 = 18 or over), ethnicity ``e`` (0 = not
    Hispanic, 1 = Hispanic) and race ``r`` (0..62): the non-empty set of OMB races
    with bitmask ``PL94_RACE_MASKS[r]`` (bit ``i`` = ``PL94_RACES[i]``), in Census order,
    so ``r = 0..5`` are the single races and ``r = 6..62`` the 57 combinations.

    The 319 queries, in this order, with labels from ``PL94_GROUPS``:

    a) ``"voting_age"``: the voting-age marginal (2 queries);
    b) ``"ethnicity"``: the ethnicity marginal (2);
    c) ``"one_race"``: for each of the 6 races, the people who selected that race alone,
       over all ages and ethnicities (6); this is how the Census tabulates race alone;
    d) ``"two_or_more_races"``: for each of the 57 combinations of two or more races, the
       people who selected exactly that combination, over all ages and ethnicities (57);
    e) ``"identity"``: every cell (252).

    c) and d) together are the race marginal, so ``W`` has full column rank (e is there).

    Parameters
    ----------
    targets : sequence of 5 floats
        Variance targets of groups a)-e). The paper's are (1, 1, 1, 2, 4); the authors'
        public code used 1 for every query, i.e. ``targets=(1, 1, 1, 1, 1)``.

    Returns
    -------
    Workload
        ``W`` (319, 252), domain (2, 2, 63).
    """
    try:
        t = np.array(targets, dtype=float)
    except (TypeError, ValueError):
        t = np.array([])
    if t.shape != (len(PL94_GROUPS),) or not np.all(np.isfinite(t)) or np.any(t <= 0):
        raise ValueError(
            f"`targets` must be 5 finite positive variance targets for groups {PL94_GROUPS}, got {targets!r}"
        )
    domain = (2, 2, len(PL94_RACE_MASKS))
    race = marginal_queries(domain, (2,))
    n_single = len(PL94_RACES)
    blocks = [
        marginal_queries(domain, (0,)),
        marginal_queries(domain, (1,)),
        race[:n_single],
        race[n_single:],
        np.eye(int(np.prod(domain))),
    ]
    labels = tuple(g for g, blk in zip(PL94_GROUPS, blocks) for _ in range(blk.shape[0]))
    c = np.concatenate([np.full(blk.shape[0], tg) for blk, tg in zip(blocks, t)])
    return Workload(np.vstack(blocks), c, labels, domain, "pl94", {"targets": tuple(t.tolist())})


AGE_GROUPS = ("male", "female", "both")


def age_pyramid() -> Workload:
    """Age-pyramid workload on the (2, 116) sex x age histogram (§7.5, Table 9).

    Cell ``(s, a)`` is column ``116 s + a`` (C order) with ``s`` 0 = male, 1 = female and
    age ``a`` in 0..115. For each of ``AGE_GROUPS`` (males, females, both sexes) there are
    117 queries, in this order: the prefix ranges age in ``[0, x]`` for ``x = 0..115``
    (the last, ``[0, 115]``, is the group's total), then age in ``[18, 115]``. Targets are
    1 for the voting-age split ``[0, 17]`` and ``[18, 115]``, 10 for every other query.

    Returns
    -------
    Workload
        ``W`` (351, 232) with full column rank, labels from ``AGE_GROUPS``.

    Notes
    -----
    The authors' public code builds a different variant (prefixes per sex and for both,
    plus the identity, targets 2 except two queries at 1); this follows the paper's text.
    """
    n_age, voting = 116, 18
    ages = np.arange(n_age)
    ranges = [(0, x) for x in range(n_age)] + [(voting, n_age - 1)]
    age_rows = np.array([(ages >= lo) & (ages <= hi) for lo, hi in ranges], dtype=float)
    age_c = np.array([1.0 if (lo, hi) in ((0, voting - 1), (voting, n_age - 1)) else 10.0 for lo, hi in ranges])
    sexes = {"male": [1.0, 0.0], "female": [0.0, 1.0], "both": [1.0, 1.0]}
    W = np.vstack([np.kron(np.array([sexes[g]]), age_rows) for g in AGE_GROUPS])
    labels = tuple(g for g in AGE_GROUPS for _ in ranges)
    return Workload(W, np.tile(age_c, len(AGE_GROUPS)), labels, (2, n_age), "age_pyramid", {})


def marginal_queries(domain, attrs) -> np.ndarray:
    """0/1 matrix of the marginal on attributes ``attrs`` of a histogram of shape ``domain``.

    Parameters
    ----------
    domain : sequence of int
        Attribute sizes ``(n_1, ..., n_a)``; cells are flattened in C order.
    attrs : sequence of int
        Distinct 0-based attribute indices; ``()`` gives the total query.

    Returns
    -------
    (prod_{i in attrs} n_i, prod_i n_i) ndarray
        Row ``r`` counts the cells whose values on ``attrs`` are the ``r``-th tuple in
        C order over ``attrs`` taken in the order given.
    """
    domain = _check_domain(domain)
    try:
        attrs = tuple(int(a) for a in attrs)
    except (TypeError, ValueError):
        raise ValueError(f"`attrs` must be a sequence of attribute indices, got {attrs!r}") from None
    if len(set(attrs)) != len(attrs) or any(not 0 <= a < len(domain) for a in attrs):
        raise ValueError(
            f"`attrs` must be distinct indices in 0..{len(domain) - 1} (0-based), got {attrs!r}"
        )
    n_cells = int(np.prod(domain))
    sub = tuple(domain[a] for a in attrs)
    if attrs:
        coords = np.indices(domain).reshape(len(domain), n_cells)
        rows = np.ravel_multi_index(tuple(coords[list(attrs)]), sub)
    else:
        rows = np.zeros(n_cells, dtype=int)
    W = np.zeros((int(np.prod(sub)), n_cells))
    W[rows, np.arange(n_cells)] = 1.0
    return W


def _marginal_workload(n_attrs, n_values, groups, name) -> Workload:
    domain = (n_values,) * n_attrs
    n_rows = sum(n_values ** len(g) for g, _ in groups)
    if n_rows * n_values**n_attrs > _MAX_ENTRIES:
        raise ValueError(
            f"`n_attrs`={n_attrs} gives a dense W with {n_rows} x {n_values ** n_attrs} entries; "
            "use ffu_cvx.solvers.fourier for marginals on large domains"
        )
    blocks, c, labels = [], [], []
    for attrs, target in groups:
        blk = marginal_queries(domain, tuple(a - 1 for a in attrs))
        blocks.append(blk)
        c.append(np.full(blk.shape[0], float(target)))
        labels += [f"marginal({','.join(map(str, attrs))})"] * blk.shape[0]
    params = {"n_attrs": n_attrs, "n_values": n_values}
    return Workload(np.vstack(blocks), np.concatenate(c), labels, domain,
                    f"{name}(n_attrs={n_attrs}, n_values={n_values})", params)


def marginals_a(n_attrs: int, n_values: int = 2) -> Workload:
    """Workload A of §7.6 (Figure 2): all one-way marginals with increasing targets.

    Attributes are numbered 1..``n_attrs`` as in the paper (attribute ``i`` is axis
    ``i - 1`` of ``domain = (n_values,) * n_attrs``, flattened in C order). Every cell of
    the marginal on attribute ``i`` has target ``i``; labels are ``"marginal(i)"``.

    Returns
    -------
    Workload
        ``W`` (n_attrs * n_values, n_values ** n_attrs) of rank
        ``n_attrs * (n_values - 1) + 1`` (rank deficient: use a row basis).
    """
    n_attrs = _check_size(n_attrs, "n_attrs", 1)
    n_values = _check_size(n_values, "n_values", 2)
    return _marginal_workload(n_attrs, n_values, [((i,), i) for i in range(1, n_attrs + 1)], "marginals_a")


def marginals_b(n_attrs: int, n_values: int = 2) -> Workload:
    """Workload B of §7.6 (Figure 3): two-way marginals on attribute pairs (1, j).

    For ``j = 2..n_attrs`` (1-based as in the paper) the marginal on attributes
    ``(1, j)`` has target ``j - 1`` on every cell; labels are ``"marginal(1,j)"``.
    Domain ``(n_values,) * n_attrs`` flattened in C order. (The authors' public code
    uses all pairs ``(i, j)``; this follows the paper's text.)

    Returns
    -------
    Workload
        ``W`` ((n_attrs - 1) * n_values**2, n_values ** n_attrs) of rank
        ``(n_values - 1) * (1 + (n_attrs - 1) * n_values) + 1`` (``2 n_attrs`` for binary
        attributes).
    """
    n_attrs = _check_size(n_attrs, "n_attrs", 2)
    n_values = _check_size(n_values, "n_values", 2)
    return _marginal_workload(n_attrs, n_values, [((1, j), j - 1) for j in range(2, n_attrs + 1)], "marginals_b")


def from_matrix(W, c, labels=None, domain=None, name="custom") -> Workload:
    """A user's workload ``W`` (m, d) with targets ``c`` (m,) (a scalar is broadcast)."""
    W, c = validate_workload(W, c)
    labels = validate_labels(labels, W.shape[0]) if labels is not None else ("query",) * W.shape[0]
    domain = tuple(domain) if domain is not None else (W.shape[1],)
    return Workload(W, c, labels, domain, name, {})
