"""A person-level census table set, certified: ours against today's simple structures, an HDMM-style
Kronecker strategy and the identity.

``python -m experiments.census_tables [--quick] [--force] [--cases national states counties ordered sf1 ...]``

``python -m experiments.census_tables --compare-ascent [--quick]`` compares the plain and the
accelerated block ascent on a bank (:func:`compare_ascent`, docs/design/kron.rst).

Interfaces layer (experiments): imports numpy, ``ffu_cvx`` (``kron``, ``workloads``),
:mod:`experiments.runner` and :mod:`experiments.bench_kron` (its bank).

The domain is sex 2 x Hispanic origin 2 x race 64 (the 63 combinations of six races,
plus none) x relationship 17 x age 115 (0 to 114) = 500,480 cells, ``states``
crosses it with 51 states (25.5 million cells) and ``counties`` with 3,143 counties (1.57
billion cells). The tables follow the published
person tables of a decennial census (:data:`TABLES`): race (six races alone and two or
more), the number of races, the 63 combinations, Hispanic origin by race, White alone,
sex by the 23 published age bands, sex by single year of age (0-99, 100-104, 105-109,
110+), relationship, the population 18 and over; totals tight, detail loose. ``ordered``
is age 0-115 with prefix sums crossed with race aggregations and sex. ``sf1`` (run only when
named) is HDMM's SF1 Persons workload on the national domain, 33 groups and 4,151 queries of
target 1 (:func:`sf1_tables`), ``sf1_targets`` the same with per-table targets
(:data:`SF1_TABLE_TARGETS`); ``sf1_states`` and ``sf1_counties`` add its 33 groups by state and by
county (target 1). ``hierarchy`` is the person tables (relationship left out) at nation, state and
county level over 3,143 counties grouped into their 51 states (:func:`hierarchy_tables`), beside
``independent levels``: each level solved alone, the privacy costs added (zCDP composes by adding);
``hierarchy_race`` is the same without age, solved jointly and exactly beside its levels.

Every mechanism is compared at the same privacy cost: the column ``worst`` is its
largest variance over target when scaled to the privacy cost of ours (1 for ours,
which meets every target exactly at its cost):

- ``ours``: ``method="kron"`` (the reduction by exchangeable values, certified);
- ``best simple``: the better of one Kronecker Sigma by block-coordinate descent and
  independent per-group products (what the solver falls back to when the reduction does
  not apply);
- ``HDMM-style``: one Kronecker strategy ``A_1 (x) ... (x) A_a`` optimised for the total
  squared error of the queries weighted by one over their target (HDMM's OPT_x: per
  attribute ``min tr(G_i X_i^+)`` with ``diag X_i <= 1``, by the fixed point
  ``X Lam X = G``, alternating over the attributes; each attribute's step on its exchangeable
  classes, the same iterates as dense), answers by least squares;
- ``identity``: unit noise on every cell.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import os
import signal
import threading
import time
import warnings

import numpy as np
from scipy import linalg

import ffu_cvx as ffu
from ffu_cvx.solvers.kron import Factor, KronSolution, Term, solve_kron
from ffu_cvx.solvers.kron.exchange import row_orbits
from ffu_cvx.solvers.kron.reduce import classes_of

from . import runner

NAME = "census_tables"
CELL_VERSION = 2
RACES = ("White", "Black", "AIAN", "Asian", "NHPI", "Other")
#: The 23 age bands of the published sex-by-age tables.
AGE_BANDS = ((0, 4), (5, 9), (10, 14), (15, 17), (18, 19), (20, 20), (21, 21), (22, 24), (25, 29), (30, 34),
             (35, 39), (40, 44), (45, 49), (50, 54), (55, 59), (60, 61), (62, 64), (65, 66), (67, 69), (70, 74),
             (75, 79), (80, 84), (85, 114))
SINGLE_YEARS = tuple((a, a) for a in range(100)) + ((100, 104), (105, 109), (110, 114))
ADULTS = ((18, 114),)
RELATIONSHIPS = 17
#: Geographic attributes a table set may be crossed with, and their numbers of values.
GEOGRAPHY = {"state": 51, "county": 3143}
COLUMNS = ("case", "mechanism", "cells", "queries", "privacy_cost", "worst", "vs_simple", "lower_bound", "gap",
           "time_s", "peak_MB", "load", "status")
HDMM_SWEEPS, HDMM_STEPS = 6, 300
#: Seconds between two samples of the resident memory while a mechanism is computed.
RSS_EVERY = 0.02
#: Seconds the solve of ours may take (the result is then the best certified iterate).
MAX_TIME = 600.0


def race_labels() -> list:
    """Value ``v`` is the set of races of the bits of ``v`` (0: none)."""
    return ["none"] + ["+".join(r for k, r in enumerate(RACES) if v >> k & 1) for v in range(1, 64)]


def race_blocks() -> dict:
    """Race aggregations over the 64 values: six races alone and two or more, the number of races,
    the 63 combinations, White alone."""
    count = np.array([bin(v).count("1") for v in range(64)])
    alone = np.zeros((7, 64))
    for k in range(6):
        alone[k, 1 << k] = 1.0
    alone[6] = count >= 2
    races = np.array([count == c for c in range(1, 7)], dtype=float)
    combos = np.eye(64)[1:]
    white = np.eye(64)[[1]]
    return {"alone": alone, "count": races, "combinations": combos, "white": white}


def sex_with_total() -> np.ndarray:
    return np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])


def tables(geography: str | None = None) -> list:
    """The table set as ``(blocks, variance target, name)``; with a ``geography`` (a key of
    :data:`GEOGRAPHY`) five tables also by it."""
    race = race_blocks()
    bands, single, adults = ({"ranges": [list(p) for p in r]} for r in (AGE_BANDS, SINGLE_YEARS, ADULTS))
    out = [
        ({}, 1.0, "P1 total"),
        ({"race": race["alone"]}, 4.0, "P3 race"),
        ({"hispanic": "identity", "race": race["alone"]}, 10.0, "P5 Hispanic origin by race"),
        ({"race": race["count"]}, 10.0, "P6 number of races"),
        ({"race": race["combinations"]}, 50.0, "P8 race combinations"),
        ({"hispanic": "identity", "race": race["combinations"]}, 100.0, "P9 Hispanic origin by race combinations"),
        ({"race": race["alone"], "age": adults}, 10.0, "P10 race, 18 and over"),
        ({"sex": sex_with_total(), "age": bands}, 20.0, "P12 sex by age"),
        ({"race": race["white"], "sex": sex_with_total(), "age": bands}, 40.0, "P12A sex by age, White alone"),
        ({"race": race["alone"], "sex": "identity", "age": bands}, 100.0, "P12A-G sex by age by race"),
        ({"sex": sex_with_total(), "age": single}, 100.0, "PCT12 sex by single year of age"),
        ({"relationship": "identity"}, 20.0, "P29 relationship"),
        ({"relationship": "identity", "sex": "identity", "age": adults}, 50.0, "relationship by sex, 18 and over"),
    ]
    if geography is not None:
        out += [({**blocks, geography: "identity"}, 4.0 * target, f"{name} by {geography}")
                for blocks, target, name in out if name.split()[0] in ("P1", "P3", "P5", "P12", "P29")]
    return out


#: HDMM's age bands of table P12 (bounds, the last open at 114) and its ages of PCT12: single years
#: 0-99, then 100-104, 105-109 and 110-114.
SF1_AGE_BANDS = tuple(zip((0, 5, 10, 15, 18, 20, 21, 22, 25, 30, 35, 40, 45, 50, 55, 60, 62, 65, 67, 70, 75, 80, 85),
                          (4, 9, 14, 17, 19, 20, 21, 24, 29, 34, 39, 44, 49, 54, 59, 61, 64, 66, 69, 74, 79, 84, 114)))


#: Per-table variance targets of SF1 Persons for ``sf1_targets``: totals tight, detail loose.
SF1_TABLE_TARGETS = {"P1": 1.0, "P3": 4.0, "P4": 4.0, "P5": 10.0, "P8": 50.0, "P9": 50.0, "P10": 50.0, "P11": 50.0,
                     "P12": 20.0, "P12A-I": 40.0, "PCT12": 100.0, "PCT12A-O": 100.0}


def sf1_tables(geography: str | None = None, targets: dict | None = None) -> list:
    """HDMM's SF1 Persons workload (its census example, age identity left out): 33 product groups,
    4,151 queries over :func:`domain`, target 1 for every query or ``targets[table]`` (a table's
    groups share its target); with a ``geography`` (a key of :data:`GEOGRAPHY`) the 33 groups also
    by it, their targets the same.

    Race blocks as HDMM defines them: ``race1`` the six races alone and one row for the rest
    (none included), ``race2`` the 63 combinations, the numbers of races 1-6 and two or more.
    Hispanic value 1 is Hispanic. Groups a table shares with another (the total, Hispanic
    origin, sex by Hispanic origin...) appear once per table, as in HDMM.
    """
    count = np.array([bin(v).count("1") for v in range(64)])
    alone = race_blocks()["alone"][:6]
    race1 = np.vstack([alone, 1.0 - alone.sum(axis=0)])
    by_count = np.array([count == c for c in range(1, 7)], dtype=float)
    race2 = np.vstack([np.eye(64)[1:], by_count, by_count[1:].sum(axis=0)])
    white = np.eye(64)[[1]]
    hisp, not_hisp = np.array([[0.0, 1.0]]), np.array([[1.0, 0.0]])
    adult = {"ranges": [[18, 114]]}
    bands = {"ranges": [list(b) for b in SF1_AGE_BANDS]}
    single = {"ranges": [list(b) for b in SINGLE_YEARS]}
    sex_total = sex_with_total()
    total, hispanic, sex_totals = {}, {"hispanic": "identity"}, {"sex": sex_total}
    spec = {
        "P1": [total],
        "P3": [{"race": race1}, total],
        "P4": [hispanic, total],
        "P5": [{"hispanic": "identity", "race": race1}, {"hispanic": sex_total}],
        "P8": [{"race": race2}, total],
        "P9": [hispanic, {"hispanic": not_hisp, "race": race2}, total],
        "P10": [{"race": race2, "age": adult}, {"age": adult}],
        "P11": [{"hispanic": "identity", "age": adult}, {"hispanic": not_hisp, "race": race2, "age": adult},
                {"age": adult}],
        "P12": [{"sex": "identity", "age": bands}, sex_totals],
    }
    for table, ages in (("P12A-I", bands), ("PCT12A-O", single)):
        last_race = white if table == "P12A-I" else race1
        spec[table] = [{"sex": "identity", "race": race1, "age": ages}, {"sex": sex_total, "race": race1},
                       {"sex": "identity", "hispanic": hisp, "age": ages}, {"sex": sex_total, "hispanic": hisp},
                       {"sex": "identity", "hispanic": not_hisp, "race": last_race, "age": ages},
                       {"sex": sex_total, "hispanic": not_hisp, "race": last_race}]
        if table == "P12A-I":
            spec["PCT12"] = [{"sex": "identity", "age": single}, sex_totals]
    order = ("P1", "P3", "P4", "P5", "P8", "P9", "P10", "P11", "P12", "P12A-I", "PCT12", "PCT12A-O")
    out = [(blocks, 1.0 if targets is None else targets[table], f"{table} {k}")
           for table in order for k, blocks in enumerate(spec[table])]
    if geography is not None:
        out += [({**blocks, geography: "identity"}, target, f"{name} by {geography}") for blocks, target, name in out]
    return out


#: Counties per state, the 50 states and DC in the order of their FIPS codes (3,143 in all).
#: Source: US Census Bureau county counts, 2020 (county equivalents: Alaska's boroughs and census
#: areas, Louisiana's parishes, the independent cities of Virginia, Maryland, Missouri and Nevada).
STATE_COUNTIES = (("AL", 67), ("AK", 30), ("AZ", 15), ("AR", 75), ("CA", 58), ("CO", 64), ("CT", 8), ("DE", 3),
                  ("DC", 1), ("FL", 67), ("GA", 159), ("HI", 5), ("ID", 44), ("IL", 102), ("IN", 92), ("IA", 99),
                  ("KS", 105), ("KY", 120), ("LA", 64), ("ME", 16), ("MD", 24), ("MA", 14), ("MI", 83),
                  ("MN", 87), ("MS", 82), ("MO", 115), ("MT", 56), ("NE", 93), ("NV", 17), ("NH", 10), ("NJ", 21),
                  ("NM", 33), ("NY", 62), ("NC", 100), ("ND", 53), ("OH", 88), ("OK", 77), ("OR", 36), ("PA", 67),
                  ("RI", 5), ("SC", 46), ("SD", 66), ("TN", 95), ("TX", 254), ("UT", 29), ("VT", 14), ("VA", 133),
                  ("WA", 39), ("WV", 55), ("WI", 72), ("WY", 23))
#: Variance targets of the geography hierarchy per level: totals tight, detail loose.
LEVEL_TARGETS = {"nation": 1.0, "state": 4.0, "county": 16.0}
#: The hierarchies, by the attribute left out of their tables: ``hierarchy_race`` (no age) is small
#: enough to solve jointly and exactly, beside its levels.
HIERARCHIES = {"hierarchy": None, "hierarchy_race": "age"}


def state_of_county() -> list:
    """The state of each of the 3,143 counties, counties numbered state by state (the level ``state``)."""
    return [state for state, n in STATE_COUNTIES for _ in range(n)]


def hierarchy_tables(without: str | None = None) -> tuple:
    """The person tables of :func:`tables` without relationship, at nation, state and county level
    (targets :data:`LEVEL_TARGETS`), over sex x Hispanic origin x race x age x 3,143 counties, a
    geography with the level ``state`` (:func:`state_of_county`): ``(domain, groups)``; a group's name
    ends with its level. ``without="age"``: the attribute and the tables that read it left out."""
    attrs = {"sex": ["F", "M"], "hispanic": ["not Hispanic", "Hispanic"], "race": race_labels(), "age": 115,
             "county": GEOGRAPHY["county"]}
    attrs.pop(without, None)
    person = [(blocks, name) for blocks, _, name in tables() if "relationship" not in blocks and without not in blocks]
    geo = {"nation": {}, "state": {"county": {"level": "state"}}, "county": {"county": "identity"}}
    groups = [({**blocks, **geo[level]}, target, f"{name}, {level}")
              for level, target in LEVEL_TARGETS.items() for blocks, name in person]
    return ffu.Domain(attrs, levels={"county": {"state": state_of_county()}}), groups


def domain(geography: str | None = None) -> ffu.Domain:
    attrs = {"sex": ["F", "M"], "hispanic": ["not Hispanic", "Hispanic"], "race": race_labels(),
             "relationship": RELATIONSHIPS, "age": 115}
    if geography is not None:
        attrs[geography] = GEOGRAPHY[geography]
    return ffu.Domain(attrs)


def ordered_tables() -> tuple:
    """Age 0-115 with prefix sums crossed with race aggregations and sex: ``(domain, tables)``."""
    race = race_blocks()
    dom = ffu.Domain({"sex": ["F", "M"], "race": race_labels(), "age": 116}, ordered=["age"])
    groups = [({"age": "prefix"}, 4.0, "age prefixes"),
              ({"age": "prefix", "race": race["alone"]}, 20.0, "age prefixes by race"),
              ({"age": "prefix", "sex": "identity", "race": race["count"]}, 40.0, "age prefixes by sex, races"),
              ({"race": race["combinations"], "sex": "identity"}, 50.0, "race combinations by sex"),
              ({}, 1.0, "total")]
    return dom, groups


def problem(case: str):
    if case == "ordered":
        dom, groups = ordered_tables()
    elif case in ("sf1", "sf1_targets", "sf1_states", "sf1_counties"):
        geography = {"sf1_states": "state", "sf1_counties": "county"}.get(case)
        targets = SF1_TABLE_TARGETS if case == "sf1_targets" else None
        dom, groups = domain(geography), sf1_tables(geography, targets)
    elif case in HIERARCHIES:
        dom, groups = hierarchy_tables(HIERARCHIES[case])
    else:
        geography = {"states": "state", "counties": "county"}.get(case)
        dom, groups = domain(geography), tables(geography)
    return ffu.FitnessProblem.from_workload(ffu.workloads.product(dom, groups, name=f"census tables ({case})"))


# ----------------------------------------------------------------------------- the HDMM-style strategy
@dataclasses.dataclass(frozen=True)
class _Reduced:
    """A symmetric matrix over one attribute that commutes with permuting values inside its exchangeable
    classes: ``avg`` (r, r) on the class averages and ``res`` (r,) its scalar on each class's residual."""

    avg: np.ndarray
    res: np.ndarray

    def trace_with(self, other: "_Reduced", dims: np.ndarray) -> float:
        """``tr(self other)`` over the cells (``dims``: each residual's dimension, ``|C_k| - 1``)."""
        return float(np.sum(self.avg * other.avg)) + float(np.sum(dims * self.res * other.res))


def _gram(block, classes) -> _Reduced:
    """``A^T A`` of a block, reduced: a block maps to itself under the class group (its rows permuted), so
    its Gram commutes with it (Schur: a matrix on the class averages and a scalar per residual)."""
    o = row_orbits(block.matrix, classes, block.kind)
    dims = np.maximum(classes.sizes - 1, 1)
    return _Reduced((o.U.T * o.count) @ o.U, (o.res.T @ o.count) / dims)


def _tse_factor(classes, G: _Reduced, read: _Reduced, steps: int) -> tuple[np.ndarray, _Reduced]:
    """``(Va, Sigma)``: the Gaussian total-squared-error strategy on one attribute, minimising ``tr(G Sigma)``
    with ``diag(Sigma^{-1}) <= 1`` on the cells, over the directions some block reads (``read``: the
    blocks' Gram, unweighted): the class averages ``Va`` (r, k_a) spans and the residuals of the classes
    where ``Sigma.res`` is positive.

    For multipliers ``lam`` on the cells, ``Sigma = P^{1/2} (P^{1/2} G P^{1/2})^{-1/2} P^{1/2}``
    (``P = diag(lam)`` on the read directions) solves ``Sigma G Sigma = P``, the stationarity of the
    Lagrangian; ``lam <- lam p`` (``p`` the profile, normalised) is its fixed point. ``G``, the
    multipliers and so every iterate commute with the class group: a dense (k_a, k_a) step on the class
    averages and a scalar one per class residual, the iterates of the dense step over the ``n`` values
    (3,143 counties: an ``n x n`` eigendecomposition per step otherwise). The best iterate is returned
    scaled to a profile of max 1, its average part ``Sigma.avg`` in ``Va``'s coordinates.
    """
    sizes, dims = classes.sizes.astype(float), np.maximum(classes.sizes - 1, 0).astype(float)
    w, V = linalg.eigh(read.avg)
    Va = V[:, w > 1e-12 * max(float(w[-1]), np.finfo(float).tiny)]
    on = (read.res > 1e-12 * max(float(read.res.max(initial=0.0)), np.finfo(float).tiny)) & (dims > 0)
    Ga, g = Va.T @ G.avg @ Va, G.res[on]
    scale = float(np.trace(Ga)) + float(np.sum(dims[on] * g))
    Ga, g = Ga / scale + 1e-12 * np.eye(Ga.shape[0]), g / scale + 1e-12   # the strategy does not depend on G's scale
    lam = sizes / classes.n                                                  # per class: its cells' multipliers summed
    best, best_sigma = math.inf, None
    for _ in range(steps):
        e, U = linalg.eigh((Va.T * (lam / sizes)) @ Va)
        half = (U * np.sqrt(np.maximum(e, 0.0))) @ U.T
        m, W = linalg.eigh(half @ Ga @ half)
        pres = (lam / sizes)[on]
        floor = 1e-12 * max(float(m.max(initial=0.0)), float((pres * g).max(initial=0.0)))
        sig_a = half @ ((W / np.sqrt(np.maximum(m, floor))) @ W.T) @ half
        sig_a = 0.5 * (sig_a + sig_a.T)
        sig_r = pres / np.sqrt(np.maximum(pres * g, floor))
        p = np.einsum("ki,ik->k", Va, linalg.solve(sig_a, Va.T, assume_a="pos")) / sizes
        p[on] += (1.0 - 1.0 / sizes[on]) / sig_r
        err = (float(np.sum(Ga * sig_a)) + float(np.sum(dims[on] * g * sig_r))) * float(p.max())
        if err < best:
            res = np.zeros(classes.r)
            res[on] = sig_r * float(p.max())
            best, best_sigma = err, _Reduced(sig_a * float(p.max()), res)
        lam = lam * p / float(lam @ p)
        lam = lam / lam.sum() + 1e-15 * sizes
    return Va, best_sigma


def _tse_mechanism(classes, Va: np.ndarray, sigma: _Reduced) -> tuple[np.ndarray, np.ndarray]:
    """``(B, Sigma)`` of a :func:`_tse_factor` strategy over the cells: orthonormal rows (the read class
    averages, then each read class's residual) and the covariance on them."""
    on = np.flatnonzero(sigma.res > 0)
    B = np.vstack([Va.T @ classes.average_basis()] + [classes.residual_basis(k) for k in on])
    S = linalg.block_diag(sigma.avg, *[sigma.res[k] * np.eye(int(classes.sizes[k]) - 1) for k in on])
    return B, S


def hdmm_solution(prob, lower_bound: float, sweeps: int = HDMM_SWEEPS, steps: int = HDMM_STEPS) -> KronSolution:
    """One Kronecker strategy optimised for the target-weighted total squared error (HDMM's OPT_x), each
    attribute's factor on its exchangeable classes (:func:`_tse_factor`)."""
    groups, a = prob.groups, len(prob.domain.sizes)
    classes = classes_of(prob.workload)
    grams = [[_gram(g.blocks[i], classes[i]) for g in groups] for i in range(a)]
    dims = [np.maximum(c.sizes - 1, 0) for c in classes]
    read = [_Reduced(sum(x.avg for x in gs), sum(x.res for x in gs)) for gs in grams]
    bases = [np.eye(c.r) for c in classes]
    sigmas = [_Reduced(np.eye(c.r), np.ones(c.r)) for c in classes]     # unit noise on every cell
    weights = np.array([1.0 / g.target for g in groups])
    for _ in range(sweeps):
        for i in range(a):
            full = [_on_averages(B, S) for B, S in zip(bases, sigmas)]          # each once per attribute step
            other = np.array([math.prod(grams[j][g].trace_with(full[j], dims[j]) for j in range(a) if j != i)
                              for g in range(len(groups))])
            G = _Reduced(sum(w * o * x.avg for w, o, x in zip(weights, other, grams[i])),
                         sum(w * o * x.res for w, o, x in zip(weights, other, grams[i])))
            bases[i], sigmas[i] = _tse_factor(classes[i], G, read[i], steps)
    factors = tuple(Factor.build((i,), *_tse_mechanism(classes[i], bases[i], sigmas[i])) for i in range(a))
    recon = {g: tuple(grp.blocks[i].matrix @ factors[i].B.T for i in range(a)) for g, grp in enumerate(groups)}
    return KronSolution.from_terms(prob, [Term(factors, recon)], method="hdmm-style", status="baseline",
                                   lower_bound=lower_bound, structure="kronecker strategy")


def _on_averages(Va: np.ndarray, sigma: _Reduced) -> _Reduced:
    """A :func:`_tse_factor` strategy's covariance with its average part on all the class averages."""
    return _Reduced(Va @ sigma.avg @ Va.T, sigma.res)


def identity_solution(prob, lower_bound: float) -> KronSolution:
    sizes = prob.domain.sizes
    factors = tuple(Factor.build((i,), np.eye(n), np.eye(n), profile=np.ones(n)) for i, n in enumerate(sizes))
    recon = {g: tuple(b.matrix for b in grp.blocks) for g, grp in enumerate(prob.groups)}
    return KronSolution.from_terms(prob, [Term(factors, recon)], method="identity", status="baseline",
                                   lower_bound=lower_bound, structure="identity")


# ----------------------------------------------------------------------------- cells
def _rss_mb() -> float:
    """The resident memory of this process (MB), from ``/proc`` (0 where there is none)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
    except OSError:
        return 0.0


def _measured(fn, every: float = RSS_EVERY):
    """``(fn(), seconds, peak MB)``: the peak is the process's resident memory sampled every
    ``every`` seconds during the call (what was already held included: an upper bound that
    does not slow the call down, unlike ``tracemalloc``)."""
    peak, done = [_rss_mb()], threading.Event()

    def sample():
        while not done.wait(every):
            peak[0] = max(peak[0], _rss_mb())

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    t0 = time.perf_counter()
    try:
        out = fn()
    finally:
        elapsed = time.perf_counter() - t0
        done.set()
        watcher.join()
    return out, elapsed, max(peak[0], _rss_mb())


def _load() -> float | None:
    """The machine's one-minute load average (None where unknown): timings depend on it."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _normalised(sol) -> float:
    """The privacy cost of ``sol`` scaled to meet every target exactly."""
    return sol.privacy_cost * sol.max_ratio


def _best_simple_of(prob, structures=("kronecker", "independent")):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # their gap is the point
        sols = [solve_kron(prob, structure=s) for s in structures]
    return min(sols, key=_normalised)


@functools.lru_cache(maxsize=None)
def _ours(case: str):
    """``(solution, seconds, peak MB)`` of ``method="kron"`` on ``case``, once per process; the
    solution is None when the solve ran past :data:`MAX_TIME` (plus a tenth)."""
    prob = problem(case)

    def solve():
        try:
            return _within(lambda: solve_kron(prob, tol=1e-3 if case == "ordered" else 1e-4, max_time=MAX_TIME),
                           1.1 * MAX_TIME)
        except OutOfTime:
            return None
    return _measured(solve)


def independent_levels(case: str = "hierarchy"):
    """``(privacy cost, lower bound, seconds, peak MB, statuses)`` of the hierarchy's levels each solved
    alone by ``method="kron"`` (defaults), the normalised privacy costs added (sequential composition of
    zCDP), the seconds added; the bound is the largest level's (each level's queries are a subset).

    A level is solved on the geography it reads: the nation's tables without the county attribute,
    the states' over 51 states (a state's count is the sum of its counties', so the cost is the same).
    """
    dom, groups = hierarchy_tables(HIERARCHIES[case])
    attrs = {a.name: a.size for a in dom.attributes}
    nation = {k: v for k, v in attrs.items() if k != "county"}
    spaces = {"nation": (nation, lambda b: b), "state": ({**nation, "state": len(STATE_COUNTIES)},
                                                         lambda b: {**b, "state": "identity"}),
              "county": (attrs, lambda b: b)}
    cost, bound, seconds, peak, statuses = 0.0, 0.0, 0.0, 0.0, []
    for level, (space, blocks_of) in spaces.items():
        level_groups = [(blocks_of({k: v for k, v in b.items() if level == "county" or k != "county"}), t)
                        for b, t, name in groups if name.endswith(f", {level}")]
        sub = ffu.FitnessProblem.from_workload(ffu.workloads.product(ffu.Domain(space), level_groups))
        sol, elapsed, mb = _measured(lambda: solve_kron(sub, max_time=MAX_TIME))
        cost, bound = cost + _normalised(sol), max(bound, sol.lower_bound)
        seconds, peak = seconds + elapsed, max(peak, mb)
        statuses.append(f"{level} {sol.status} in {elapsed:.0f} s")
    return cost, bound, seconds, peak, statuses


class OutOfTime(Exception):
    """A solve ran past its seconds (:func:`_within`)."""


def _within(fn, seconds: float):
    """``fn()``, or :class:`OutOfTime` after ``seconds`` (a timer signal: ``max_time`` is read between
    steps, and one per-attribute factor solve or per-group product runs to its end)."""
    def stop(*_):
        raise OutOfTime
    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@functools.lru_cache(maxsize=None)
def _best_simple(case: str):
    """``(solution, seconds, peak MB)`` of the best simple structure on ``case``, once per process."""
    prob = problem(case)
    return _measured(lambda: _best_simple_of(prob, SIMPLE.get(case, ("kronecker", "independent"))))


def records(prob, n: int, seed: int = 0):
    """Sparse counts of ``n`` records drawn uniformly over the domain of ``prob``."""
    rng = np.random.default_rng(seed)
    return prob.workload.domain.counts(np.stack([rng.integers(0, k, n) for k in prob.domain.sizes], axis=1))


def release_row(case: str, quick: bool = False) -> dict:
    """The release of ours from :data:`RECORDS` records (:data:`QUICK_RECORDS` with ``quick``): its
    time and memory, and the worst variance over target of the released answers."""
    prob = problem(case)
    ours = _ours(case)[0]
    counts = records(prob, QUICK_RECORDS if quick else RECORDS)
    rel, elapsed, peak = _measured(lambda: ffu.release_product(ours, prob.workload, counts, rng=0))
    worst = float(np.max(rel.variances / prob.workload.c))
    return {"cells": prob.d, "queries": prob.m, "privacy_cost": rel.privacy_cost, "worst": worst,
            "lower_bound": ours.lower_bound, "gap": ours.gap, "time_s": elapsed, "peak_MB": peak,
            "status": "within targets" if worst <= 1.0 + 1e-9 else "over target",
            "vs_simple": None, "load": _load(), "records": int(counts.counts.sum())}


def cell(case: str, mechanism: str, quick: bool = False) -> dict:
    """One mechanism on one table set: its normalised cost, time, memory and certified gap.

    ``worst`` is its largest variance over target at the privacy cost of ours, ``vs_simple``
    its privacy cost over the best simple structure's (both meeting every target): ours must
    never be above 1. ``load`` is the one-minute load average when the cell started.
    """
    if mechanism == RELEASE:
        return release_row(case, quick)
    load = _load()
    prob = problem(case)
    ours = _ours(case)[0]
    if ours is None:
        return _unfinished_row(case, mechanism, prob, load)
    simple = _normalised(_best_simple(case)[0]) if "best simple" not in SKIPPED.get(case, ()) else None
    if mechanism == LEVELS:
        cost, bound, elapsed, peak, statuses = independent_levels(case)
        return {"cells": prob.d, "queries": prob.m, "privacy_cost": cost, "worst": cost / _normalised(ours),
                "lower_bound": ours.lower_bound, "gap": cost / ours.lower_bound - 1.0, "time_s": elapsed,
                "peak_MB": peak, "status": "baseline: " + ", ".join(statuses),
                "vs_simple": None if simple is None else cost / simple, "load": load}
    if mechanism == "ours":
        sol, elapsed, peak = _ours(case)
    elif mechanism == RUNS:
        sol, elapsed, peak = _measured(lambda: solve_kron(prob, structure="levels", max_time=MAX_TIME))
    elif mechanism == "best simple":
        sol, elapsed, peak = _best_simple(case)
    else:
        run = {"HDMM-style": lambda: hdmm_solution(prob, ours.lower_bound),
               "identity": lambda: identity_solution(prob, ours.lower_bound)}[mechanism]
        sol, elapsed, peak = _measured(run)
    cost = _normalised(sol)
    status = sol.status
    if mechanism in ("ours", RUNS) and sol.info.get("parts"):
        status += f": {sol.info['structure']} ({_released_runs(sol)}), {_levels_bound(sol)}"
    return {"cells": prob.d, "queries": prob.m, "privacy_cost": cost, "worst": cost / _normalised(ours),
            "lower_bound": sol.lower_bound, "gap": cost / ours.lower_bound - 1.0, "time_s": elapsed,
            "peak_MB": peak, "status": status, "vs_simple": None if simple is None else cost / simple,
            "load": load}


def _released_runs(sol) -> str:
    """The runs of levels a levels solution releases, coarse to fine (``"nation+state | county"``), or the
    whole problem's mixture where it releases that."""
    joint = sol.info.get("joint") or {}
    if joint.get("released"):
        return f"the whole problem's mixture of {joint['mixed']} primal points, formed in {joint['form_time']:.0f} s"
    return " | ".join("+".join(dict.fromkeys(g.rsplit(", ", 1)[-1] for g in p["groups"]))
                      for p in sorted(sol.info["parts"], key=lambda p: p["levels"]) if p["released"])


def _levels_bound(sol) -> str:
    """Where a levels solution's bound comes from: the whole problem's coupled ascent, else the
    uniform sub-hierarchies (and the padded hierarchy's cost)."""
    joint, h = sol.info.get("joint"), sol.info.get("hierarchy")
    if joint:
        priced = "" if joint.get("privacy_cost") is None else f", {joint['privacy_cost']:.4g} priced exactly"
        return (f"bound from the whole problem's ascent on blocks coupled across the states ({joint['steps']} "
                f"steps, {joint['time']:.0f} s; a mixture of {joint['mixed']} of its primal points costs about "
                f"{joint['estimate']:.4g}{priced})")
    if h:
        return (f"bound from the {'/'.join(f'{S}x{m}' for S, m, _ in h['sub_bounds'])} uniform sub-hierarchies; "
                f"the padded hierarchy costs {h['optimum_at_most']:.4g}")
    return "bound from its runs"


def _unfinished_row(case: str, mechanism: str, prob, load) -> dict:
    """A row of ``case`` when ours did not finish in :data:`MAX_TIME`: ours says why, the identity
    and the independent levels are priced alone (the gap of the levels against their own bound)."""
    from ffu_cvx.solvers.kron import structure_of
    _, elapsed, peak = _ours(case)
    row = {"cells": prob.d, "queries": prob.m, "privacy_cost": None, "worst": None, "lower_bound": None,
           "gap": None, "time_s": elapsed, "peak_MB": peak, "vs_simple": None, "load": load}
    if mechanism == "ours":
        return {**row, "status": f"not finished in {1.1 * MAX_TIME:.0f} s: {structure_of(prob)[1]}"}
    if mechanism == LEVELS:
        cost, bound, elapsed, peak, statuses = independent_levels(case)
        return {**row, "privacy_cost": cost, "lower_bound": bound, "gap": cost / bound - 1.0, "time_s": elapsed,
                "peak_MB": peak, "status": "baseline: " + ", ".join(statuses)}
    sol, elapsed, peak = _measured(lambda: identity_solution(prob, 0.0))
    return {**row, "privacy_cost": _normalised(sol), "time_s": elapsed, "peak_MB": peak, "status": sol.status}


RELEASE = "ours: release"
LEVELS = "independent levels"
RUNS = "ours: levels"
NOTES = ("`worst`: the largest variance over target at the privacy cost of ours; `vs_simple`: the privacy cost "
         "over the best simple structure's, both meeting every target (never above 1 for ours); `gap`: the "
         "privacy cost over the certified lower bound of ours, minus 1; `load`: the one-minute load average when "
         "the cell started (2 cores). The release row draws its records uniformly over the domain: `worst` is "
         "the largest released variance over its target, `time_s` the release from sparse counts. On counties the "
         "best simple structure is the independent one alone (the Kronecker descent takes more than 400 s there); "
         "on sf1_states, sf1_counties and the hierarchies the simple structures are not run. The HDMM-style "
         "strategy solves each attribute's factor on its exchangeable classes (the same iterates as dense). "
         "`hierarchy`: the person tables at nation (target 1), state (4) and county (16) level, 3,143 counties in "
         "51 states of their real sizes; `independent levels` solves each level alone and adds the privacy costs "
         "(sequential composition of zCDP), its time the sum, its status each level's. Ours on the hierarchy solves "
         "the levels apart too (`structure` \"levels\": the states' unequal sizes leave a block too large to solve "
         "dense), the nation and the states together where that is cheaper, and bounds the optimum from below by "
         "the whole problem's dual ascent on blocks coupled across the states (a rigorous bound; its primal points "
         "are priced by an approximate step), and releases the cheapest mixture of those primal points instead, "
         "formed and priced exactly, where it costs less than the levels. `hierarchy_race`: the same tables without age, small enough to solve jointly and exactly (`ours`), "
         "beside `ours: levels` (composed as on the full hierarchy) and the independent levels: what sharing noise "
         "between the levels gains, certified.")
MECHANISMS = ("ours", "best simple", "HDMM-style", "identity")
CASES = ("national", "states", "counties", "ordered")
#: Cases run only when named (``--cases sf1``): HDMM's SF1 Persons workload (:func:`sf1_tables`), by state and
#: by county, and the geography hierarchy (:func:`hierarchy_tables`).
NAMED_CASES = ("sf1", "sf1_targets", "sf1_states", "sf1_counties", "hierarchy", "hierarchy_race")
#: Simple structures left out per case: on 3,143 counties the Kronecker descent's per-attribute SM-II over
#: the stacked county blocks takes more than 400 s; on SF1 by state and by county and on the hierarchies
#: the simple structures are left out (ours, the HDMM-style strategy, the identity and, on the
#: hierarchies, the independent levels are run).
SIMPLE = {"counties": ("independent",)}
SKIPPED = {"sf1_states": ("best simple",), "sf1_counties": ("best simple",), "hierarchy": ("best simple",),
           "hierarchy_race": ("best simple",)}
#: Records drawn for the release row (``--quick``: the smaller number).
RECORDS, QUICK_RECORDS = 1_000_000, 10_000


# ----------------------------------------------------------------------------- plain against accelerated ascent
#: Seeds of the random unions of the ascent bank and the seconds each ascent may take there.
BANK_SEEDS, BANK_MAX_TIME = tuple(range(8)), 900.0


def random_union(seed: int) -> tuple:
    """``(domain, groups)``: a random union of ranges, identities and totals over ``a`` (6-16 values)
    and ``s`` (2-3), targets 0.5-8 (the kind whose optimum leaves cells and queries slack)."""
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(6, 17)), int(rng.integers(2, 4))
    targets = (0.5, 1.0, 2.0, 4.0, 8.0)

    def ranges():
        lo = rng.integers(0, n, int(rng.integers(1, 5)))
        return {"ranges": [(int(a), int(rng.integers(a, n))) for a in lo]}

    groups = [({"a": ranges(), "s": "identity"}, float(rng.choice(targets))),
              ({"a": "identity", "s": str(rng.choice(["identity", "total"]))}, float(rng.choice(targets))),
              ({"a": ranges()}, float(rng.choice(targets)))]
    return {"a": n, "s": k}, groups


def ascent_bank(quick: bool = False) -> dict:
    """``{case: workload}`` of the comparison of plain and accelerated ascent: the unions of
    :data:`experiments.bench_kron.BANK`, :data:`BANK_SEEDS` random unions (:func:`random_union`)
    and the census table sets (national, sf1, ordered, states); ``quick``: three unions."""
    from . import bench_kron
    cases = {name: ffu.workloads.product(ffu.Domain(dom), groups)
             for name, (dom, groups) in list(bench_kron.BANK.items())[:3 if quick else None]}
    for seed in BANK_SEEDS[:0 if quick else None]:
        cases[f"random union, seed {seed}"] = ffu.workloads.product(*_domain_of(random_union(seed)))
    for case in () if quick else ("national", "sf1", "ordered", "states"):
        cases[case] = problem(case).workload
    return cases


def _domain_of(union: tuple) -> tuple:
    return ffu.Domain(union[0]), union[1]


def compare_ascent(quick: bool = False, tol: float = 1e-4, max_time: float = BANK_MAX_TIME) -> list:
    """Per bank case (:func:`ascent_bank`) the block ascent plain (``anderson=0``) and accelerated
    (the default): steps and seconds to the certified gap ``tol``, final cost and their ratios."""
    from ffu_cvx.solvers.kron import reduce as kron_reduce
    rows = []
    for case, wl in ascent_bank(quick).items():
        red = kron_reduce.reduce(wl)
        row = {"case": case}
        for label, kw in (("plain", {"anderson": 0}), ("accelerated", {})):
            t0 = time.perf_counter()
            res = kron_reduce.ascent(red, tol=tol, max_iter=100_000, max_time=max_time, **kw)
            row[label] = {"steps": res.nit, "time_s": time.perf_counter() - t0, "cost": res.cost,
                          "lower_bound": res.lower_bound, "status": res.status}
        p, a = row["plain"], row["accelerated"]
        row.update(steps_ratio=a["steps"] / p["steps"], time_ratio=a["time_s"] / p["time_s"],
                   cost_excess=a["cost"] / p["cost"] - 1.0)
        rows.append(row)
        print(f"{case}: steps {p['steps']} -> {a['steps']}, {p['time_s']:.2f} s -> {a['time_s']:.2f} s, "
              f"cost {p['cost']:.8g} -> {a['cost']:.8g} ({p['status']}, {a['status']})", flush=True)
    for key in ("steps_ratio", "time_ratio", "cost_excess"):
        vals = [r[key] for r in rows]
        print(f"{key}: median {np.median(vals):.3g}, worst {max(vals):.3g}")
    return rows


def main(argv=None):
    p = runner.parser("Census person tables: the reduction by exchangeable values against simple structures, "
                      "an HDMM-style Kronecker strategy and the identity, at equal privacy cost")
    p.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES) + list(NAMED_CASES))
    p.add_argument("--compare-ascent", action="store_true",
                   help="only compare the plain and the accelerated block ascent on a bank (compare_ascent)")
    args = p.parse_args(argv)
    if args.compare_ascent:
        return compare_ascent(args.quick)
    cases = ["national"] if args.quick else args.cases
    cells = [runner.Cell({"case": c, "mechanism": m, "quick": args.quick}, label=f"{c}: {m}",
                         row={"case": c, "mechanism": m})
             for c, m in itertools.product(cases, MECHANISMS) if m not in SKIPPED.get(c, ())]
    cells += [runner.Cell({"case": c, "mechanism": LEVELS, "quick": args.quick}, label=f"{c}: {LEVELS}",
                          row={"case": c, "mechanism": LEVELS}) for c in cases if c in HIERARCHIES]
    cells += [runner.Cell({"case": c, "mechanism": RUNS, "quick": args.quick}, label=f"{c}: {RUNS}",
                          row={"case": c, "mechanism": RUNS}) for c in cases if c == "hierarchy_race"]
    cells += [runner.Cell({"case": c, "mechanism": RELEASE, "quick": args.quick}, label=f"{c}: {RELEASE}",
                          row={"case": c, "mechanism": RELEASE}) for c in cases if c in ("national", "counties")]
    return runner.run_grid(NAME, cells, cell, args, version=CELL_VERSION,
                           table=runner.Table("Census person tables at equal privacy cost (worst variance / target)",
                                              COLUMNS, notes=NOTES, floatfmt=".4g"))


if __name__ == "__main__":
    runner.cli(main)
