"""Release from records for a product workload: exact answers from sparse counts plus the mechanism's noise.

Release layer, its top: imports numpy, ``model`` (``accuracy``, ``fingerprint``, ``privacy``, ``result``),
``workloads`` (``counts``, ``products``) and the release modules ``mechanism`` (the dense GaussianMechanism),
``noise`` and ``release`` (the Release type).

:func:`release_product` is agnostic of the mechanism. The exact answers ``W x`` come
from :meth:`ffu_cvx.workloads.products.ProductWorkload.apply` on sparse counts (each group needs
only its marginal; the domain is never materialised). By default the answers are
released through OpenDP's sampler (:mod:`ffu_cvx.release.noise`): the noise source's whitened
strategy answers (``whitened``: a structured Solution from the sparse counts, a
:class:`ffu_cvx.release.mechanism.GaussianMechanism` or a dense Solution from the histogram) are
perturbed and mapped back (``from_whitened``). With numpy's sampler (by choice or a
seed) the noise is ``sample_answer_noise(rng)`` ((m,) with covariance ``W Sigma W^T``)
of whatever provides it. Its ``variances`` (m,) give the intervals and its
``privacy_cost`` the statement. Counts whose answers would swallow their noise are
refused first.

A release is bound to what was solved (:func:`noise_source`): a Solution or mechanism
is used only for the workload, domain and targets of its own problem, and any other
noise source must carry the :func:`ffu_cvx.model.fingerprint.of` of the workload it was made
for. Noise made for other queries could leave an exact combination of the true answers
unprotected, so a mismatch is refused, naming what differs. Nothing computed from the
counts without noise (the number of records, of non-empty cells) enters the Release.
"""

from __future__ import annotations

from pathlib import PurePath

import numpy as np

from ..model import fingerprint, privacy
from ..model.accuracy import coverage
from ..model.result import Solution
from ..workloads.counts import Counts
from ..workloads.products import ProductWorkload
from . import noise
from .mechanism import GaussianMechanism
from .release import DEFAULT_DELTA, TARGET_RTOL, Release, check_level, generator

__all__ = ["release_product", "noise_source", "WORKLOAD_RTOL", "COVERAGE_DRAWS"]

#: Relative agreement required between a dense Solution's W and c and the workload's (the same queries).
WORKLOAD_RTOL = 1e-9
#: Simulated releases behind a joint target's measured coverage (the interval's half-width is about 1 point).
COVERAGE_DRAWS = 2000
#: Seed of those simulations: they use no data, so a fixed seed publishes nothing and makes them reproducible.
COVERAGE_SEED = 20260101


def _refuse(what: str) -> None:
    raise ValueError(f"`solution` was solved for another problem than this workload: {what}; solve this "
                     "workload (ffu.solve(FitnessProblem.from_workload(wl))) and release that solution")


def _check_dense(problem, workload: ProductWorkload) -> None:
    """A dense problem asks the workload's queries with its targets, or the release is refused."""
    if (problem.m, problem.d) != (workload.m, workload.d):
        _refuse(f"it is for {problem.m} queries over {problem.d} cells, the workload has {workload.m} over "
                f"{workload.d}")
    W, c = workload.dense()
    if not np.allclose(problem.W, W, rtol=WORKLOAD_RTOL, atol=WORKLOAD_RTOL * np.abs(W).max()):
        _refuse("it answers other queries (its W differs)")
    if not np.allclose(problem.c, c, rtol=WORKLOAD_RTOL, atol=0.0):
        j = int(np.argmax(np.abs(problem.c - c) / c))
        _refuse(f"its variance targets differ (query {j} ({workload.label(j)!r}): {float(problem.c[j])!r} against "
                f"the workload's {float(c[j])!r})")


def _check_bound(source, workload: ProductWorkload) -> None:
    """``source`` was made for ``workload`` (its problem, or its ``fingerprint``), or ``ValueError``."""
    problem = _field(source, "problem", None)
    if problem is not None and hasattr(problem, "groups"):
        diff = fingerprint.product_mismatch(problem, workload)
        if diff is not None:
            _refuse(diff)
    elif problem is not None and hasattr(problem, "W"):
        _check_dense(problem, workload)
    else:
        mark = _field(source, "fingerprint", None)
        if mark is None:
            raise ValueError(f"`solution` ({type(source).__name__}) does not say which workload it was solved for: "
                             "a noise source needs a `problem` or a `fingerprint` (ffu_cvx.model.fingerprint.of(workload))")
        if mark != fingerprint.of(workload):
            _refuse(f"its fingerprint {str(mark)[:20]}... is not this workload's {fingerprint.of(workload)[:20]}...")


def noise_source(solution_or_mechanism, workload: ProductWorkload):
    """What draws the answers' noise, checked to be made for ``workload``: a GaussianMechanism (a dense
    Solution is wrapped in one) or any object with ``sample_answer_noise``, ``variances`` and ``privacy_cost``."""
    obj = solution_or_mechanism
    if isinstance(obj, Solution) and obj.sigma is not None:
        obj = GaussianMechanism(obj)
    if not hasattr(obj, "sample_answer_noise"):
        raise ValueError(f"`solution` must be a Solution, a GaussianMechanism or an object with "
                         f"sample_answer_noise(rng), variances and privacy_cost; got {type(obj).__name__}")
    for attr in ("variances", "privacy_cost"):
        if not hasattr(obj, attr) and not (isinstance(obj, dict) and attr in obj):
            raise ValueError(f"`solution` samples noise but has no `{attr}`; a noise source needs "
                             "sample_answer_noise(rng), variances (m,) and privacy_cost")
    _check_bound(obj, workload)
    return obj


_MISSING = object()


def _field(obj, name: str, default=_MISSING):
    if isinstance(obj, dict) and name in obj:
        return obj[name]
    return getattr(obj, name) if default is _MISSING else getattr(obj, name, default)


def _variances(source, workload: ProductWorkload) -> np.ndarray:
    """The answers' variances (m,): the source's, or group by group where it keeps none
    (a KronSolution of more than ``VARIANCES_MAX`` queries)."""
    variances = _field(source, "variances")
    if variances is None and hasattr(source, "group_variances"):
        variances = np.concatenate([source.group_variances(g) for g in range(len(workload.groups))])
    return np.asarray(variances, dtype=float)


def _mechanism_text(source) -> str:
    if isinstance(source, GaussianMechanism):
        return source.description
    method = source.get("method") if isinstance(source, dict) else getattr(source, "method", None)
    return f"correlated Gaussian noise with covariance W Sigma W^T, Sigma from method {method or type(source).__name__!r}"


def release_product(solution_or_mechanism, workload: ProductWorkload, counts, rng=None, level: float = 0.95,
                    delta: float = DEFAULT_DELTA, coverage_draws: int = COVERAGE_DRAWS, sampler=None) -> Release:
    """Noisy answers ``W x + noise`` of a product workload for ``counts``, labelled, with intervals.

    Parameters
    ----------
    solution_or_mechanism : a structured Solution or any object with ``sample_answer_noise(rng)``
        ((m,) noise with covariance ``W Sigma W^T``), ``variances`` (m,) and ``privacy_cost``;
        or a dense Solution / GaussianMechanism of this workload (small domains).
    workload : ProductWorkload
    counts : Counts (``workload.domain.counts(records)``), or records in any form
        ``Domain.counts`` takes, or a dense histogram (d,) of a small domain.
    rng : None (OS entropy: a real release), or a seed / Generator (testing only: whoever
        knows the seed can remove the noise).
    level : confidence level of the intervals; delta : the delta of the statement's epsilon.
    coverage_draws : simulated releases (the mechanism's noise alone) measuring the joint
        coverage of each group with a joint target (0: none).
    sampler : None, ``"opendp"``, ``"numpy"`` or a sampler (:func:`ffu_cvx.release.noise.sampler_for`).

    Returns
    -------
    Release with answers, variances, lower, upper (m,), lazy labels, each query's group and
    the privacy statement (domain, and per group its target and whether its answers meet
    it, in ``info``); a path given as ``counts`` is among its ``inputs``.
    """
    if not isinstance(workload, ProductWorkload):
        raise ValueError(f"`workload` must be a ProductWorkload (ffu.workloads.product), got {type(workload).__name__}")
    level = check_level(level)
    source = noise_source(solution_or_mechanism, workload)
    inputs = {"records": counts} if isinstance(counts, (str, PurePath)) else {}
    if not isinstance(counts, Counts):
        counts = (Counts.from_histogram(workload.domain, counts) if np.ndim(counts) == 1 and not isinstance(counts, str)
                  else workload.domain.counts(counts))
    exact = workload.apply(counts)
    variances = _variances(source, workload)
    if variances.shape != (workload.m,):
        raise ValueError(f"the mechanism's `variances` have shape {variances.shape}, the workload has {workload.m} "
                         "queries: it was solved for another workload")
    noise.check_resolution(exact, np.sqrt(variances), lambda j: f"query {workload.label(j)!r}")
    answers, account = _noisy(source, noise.sampler_for(sampler, rng), counts, exact,
                              None if rng is None else generator(rng))
    coverage = _joint_coverages(source, workload, coverage_draws)
    info = {"domain": workload.domain.spec(), "ordered": list(workload.domain.ordered),
            **({"levels": workload.domain.levels} if workload.domain.levels else {}),
            "groups": _group_accuracy(workload, variances, coverage)}
    neighbours = getattr(source, "neighbours", privacy.ADD_REMOVE)
    return Release.build(answers, variances, level, labels=workload.labels,
                         privacy_cost=float(_field(source, "privacy_cost")), neighbours=neighbours,
                         mechanism=_mechanism_text(source), name=workload.name, statement_delta=delta,
                         groups=workload.group_index(), group_names=tuple(g.name for g in workload.groups),
                         info=info, targets=workload.c, group_targets=tuple(g.accuracy for g in workload.groups),
                         inputs=inputs, noise=account, fingerprint=fingerprint.of(workload))


def _whitened(source, counts: Counts) -> noise.Whitened:
    """The source's whitened strategy answers on ``counts`` (:func:`ffu_cvx.release.noise.whiten`)."""
    if isinstance(source, GaussianMechanism):
        return source.whitened(counts.dense())
    if hasattr(source, "whitened"):
        return noise.whiten(lambda dtype: source.whitened(counts, dtype),
                            float(np.sqrt(float(_field(source, "privacy_cost")))))
    raise ValueError(f"the noise source ({type(source).__name__}) cannot give its whitened strategy answers, "
                     "which OpenDP's sampler perturbs: release with sampler='numpy' (floating-point noise)")


def _noisy(source, draw, counts: Counts, exact: np.ndarray, gen) -> tuple[np.ndarray, noise.NoiseAccount]:
    """``(answers (m,), the sampler's account)``: through the whitened answers, or with numpy's sampler
    the exact answers plus ``sample_answer_noise``."""
    if isinstance(draw, noise.NumpySampler):
        extra = np.asarray(source.sample_answer_noise(gen if gen is not None else generator(None)), dtype=float)
        if extra.shape != exact.shape:
            raise ValueError(f"sample_answer_noise returned shape {extra.shape}, expected {exact.shape}")
        return exact + extra, draw.account(float(np.sqrt(float(_field(source, "privacy_cost")))), exact.size)
    noisy, account = draw.draw(_whitened(source, counts), gen)
    return np.asarray(source.from_whitened(noisy), dtype=float), account


def _group_accuracy(workload: ProductWorkload, variances: np.ndarray, coverage: dict) -> list:
    """Per group: name, target (variance, and in the publisher's words), queries, first query, the worst
    variance and what it delivers in those words, whether all meet the target, and for a joint
    target the measured joint coverage."""
    out = []
    for i, g in enumerate(workload.groups):
        worst = float(variances[workload.offsets[i]:workload.offsets[i + 1]].max())
        goal = g.accuracy
        entry = {"name": g.name, "target": g.target, "queries": g.m, "first_query": workload.offsets[i],
                 "max_variance": worst, "meets_target": bool(worst <= g.target * (1 + TARGET_RTOL)),
                 "accuracy": {**goal.as_dict(), "stated": goal.text(f"each answer of {g.name!r}" if goal.kind != "joint"
                                                                    else repr(g.name)),
                              "achieved": goal.achieved(worst)}}
        if i in coverage:
            entry["accuracy"]["measured"] = {"rate": coverage[i].rate, "low": coverage[i].low,
                                             "high": coverage[i].high, "draws": coverage[i].draws,
                                             "text": coverage[i].text()}
        out.append(entry)
    return out


def _joint_coverages(source, workload: ProductWorkload, draws: int) -> dict:
    """{group: :class:`ffu_cvx.model.accuracy.Coverage`} of each joint target, from the mechanism's own noise
    (no data: the simulation is public), ``draws`` simulated releases shared by the groups, one held at a time."""
    joint = [i for i, g in enumerate(workload.groups) if g.accuracy.kind == "joint"]
    if not joint or not draws:
        return {}
    hits = dict.fromkeys(joint, 0)
    for k in range(draws):
        noise = np.abs(np.asarray(source.sample_answer_noise(np.random.default_rng([COVERAGE_SEED, k]))))
        for i in joint:
            part = noise[workload.offsets[i]:workload.offsets[i + 1]]
            hits[i] += bool(np.all(part <= workload.groups[i].accuracy.margin))
    return {i: coverage(h, draws) for i, h in hits.items()}
