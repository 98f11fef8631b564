"""Release from records for a product workload: exact answers from sparse counts plus the mechanism's noise.

Mechanisms layer: imports numpy, ``counts``, ``products``, ``mechanism`` (the dense
GaussianMechanism), ``release`` and ``privacy``.

:func:`release_product` is agnostic of the mechanism. The exact answers ``W x`` come
from :meth:`ffu_cvx.products.ProductWorkload.apply` on sparse counts (each group needs
only its marginal; the domain is never materialised); the noise comes from
``noise.sample_answer_noise(rng)`` ((m,) with covariance ``W Sigma W^T``) whatever
provides it: a structured Solution (``method="kron"``) that samples in factored form, a
:class:`ffu_cvx.mechanism.GaussianMechanism`, or a dense Solution (wrapped in one; its
problem must be this workload's dense problem, so the domain is small). Its
``variances`` (m,) give the intervals and its ``privacy_cost`` the statement.
"""

from __future__ import annotations

import numpy as np

from . import privacy
from .counts import Counts
from .mechanism import GaussianMechanism
from .products import ProductWorkload
from .release import DEFAULT_DELTA, Release, check_level, generator, z_value
from .result import Solution

__all__ = ["release_product", "noise_source", "WORKLOAD_RTOL"]

#: Relative agreement required between a dense Solution's W and the workload's (the same queries).
WORKLOAD_RTOL = 1e-9


def noise_source(solution_or_mechanism, workload: ProductWorkload):
    """What draws the answers' noise: the object itself if it has ``sample_answer_noise``, else the
    :class:`GaussianMechanism` of a dense Solution of ``workload`` (checked to be the same queries)."""
    obj = solution_or_mechanism
    if hasattr(obj, "sample_answer_noise"):
        for attr in ("variances", "privacy_cost"):
            if not hasattr(obj, attr) and not (isinstance(obj, dict) and attr in obj):
                raise ValueError(f"`solution` samples noise but has no `{attr}`; a noise source needs "
                                 "sample_answer_noise(rng), variances (m,) and privacy_cost")
        return obj
    if not isinstance(obj, Solution):
        raise ValueError(f"`solution` must be a Solution, a GaussianMechanism or an object with "
                         f"sample_answer_noise(rng), variances and privacy_cost; got {type(obj).__name__}")
    mech = GaussianMechanism(obj)
    problem = mech.problem
    if (problem.m, problem.d) != (workload.m, workload.d):
        raise ValueError(f"`solution` is for {problem.m} queries over {problem.d} cells, the workload has {workload.m} "
                         f"over {workload.d}; solve this workload (FitnessProblem.from_workload(wl))")
    W, _ = workload.dense()
    if not np.allclose(problem.W, W, rtol=WORKLOAD_RTOL, atol=WORKLOAD_RTOL * np.abs(W).max()):
        raise ValueError("`solution` answers other queries than this workload (its W differs); solve this workload")
    return mech


def _field(obj, name: str):
    return obj[name] if isinstance(obj, dict) and name in obj else getattr(obj, name)


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
                    delta: float = DEFAULT_DELTA) -> Release:
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

    Returns
    -------
    Release with answers, variances, lower, upper (m,), lazy labels, each query's group and
    the privacy statement (domain and groups in ``info``).
    """
    if not isinstance(workload, ProductWorkload):
        raise ValueError(f"`workload` must be a ProductWorkload (ffu.workloads.product), got {type(workload).__name__}")
    level = check_level(level)
    source = noise_source(solution_or_mechanism, workload)
    if not isinstance(counts, Counts):
        counts = (Counts.from_histogram(workload.domain, counts) if np.ndim(counts) == 1 and not isinstance(counts, str)
                  else workload.domain.counts(counts))
    exact = workload.apply(counts)
    variances = _variances(source, workload)
    if variances.shape != (workload.m,):
        raise ValueError(f"the mechanism's `variances` have shape {variances.shape}, the workload has {workload.m} "
                         "queries: it was solved for another workload")
    noise = np.asarray(source.sample_answer_noise(generator(rng)), dtype=float)
    if noise.shape != (workload.m,):
        raise ValueError(f"sample_answer_noise returned shape {noise.shape}, expected ({workload.m},)")
    answers = exact + noise
    half = z_value(level) * np.sqrt(variances)
    info = {"domain": workload.domain.spec(), "ordered": list(workload.domain.ordered), "records": counts.n_records,
            "groups": [{"name": g.name, "target": g.target, "queries": g.m, "first_query": workload.offsets[i]}
                       for i, g in enumerate(workload.groups)]}
    neighbours = getattr(source, "neighbours", privacy.ADD_REMOVE)
    return Release(answers=answers, variances=variances, lower=answers - half, upper=answers + half, level=level,
                   labels=workload.labels, privacy_cost=float(_field(source, "privacy_cost")), neighbours=neighbours,
                   mechanism=_mechanism_text(source), name=workload.name, statement_delta=delta,
                   groups=workload.group_index(), group_names=tuple(g.name for g in workload.groups), info=info)
