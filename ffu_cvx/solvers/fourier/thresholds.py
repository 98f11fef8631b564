"""Threshold (range-like) queries by circular embedding (spec § 5).

Solver layer: imports numpy, :mod:`ffu_cvx.model.validation` and
:mod:`ffu_cvx.solvers.fourier.workload`. A numeric attribute on ``[0, m)`` is embedded in
``Z_{2m}``, where the thresholds ``1[x <= t]`` are the shifts of one circular product
family (:func:`threshold_vector`, :func:`threshold_shift`); :func:`extended_marginals`
builds the product workload mixing thresholds and points, and
:func:`embedding_max_variance` is the 1-D optimum in closed form.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ...model import validation
from .workload import ProductFamily, CirculantWorkload, check_attrs, check_domain, mapping_items, target_weight

__all__ = ["threshold_vector", "threshold_shift", "embedding_max_variance", "extended_marginals"]


def threshold_vector(m: int) -> np.ndarray:
    """Indicator of ``[0, m)`` on ``Z_{2m}`` (2m,): the embedded threshold family's ``g``."""
    m = validation.positive_int(m, "m")
    h = np.zeros(2 * m)
    h[:m] = 1.0
    return h


def threshold_shift(t, m: int):
    """Shift ``s`` with ``h((x - s) mod 2m) = 1[x <= t]`` for x in [0, m): ``s = t - m + 1 mod 2m``."""
    return (np.asarray(t) - m + 1) % (2 * m)


def embedding_max_variance(m: int, privacy_cost: float = 1.0) -> float:
    """Closed-form optimum of the 1-D embedded threshold family (spec § 5):
    ``(1/2 + (1/2m) sum_{b odd} 1/sin(pi b / 2m))^2 / P``."""
    m = validation.positive_int(m, "m")
    P = validation.positive(privacy_cost, "privacy_cost")
    b = np.arange(1, 2 * m, 2)
    return float((0.5 + np.sum(1.0 / np.sin(np.pi * b / (2 * m))) / (2 * m)) ** 2 / P)


def extended_marginals(domain, numeric: Sequence[int], targets: Mapping) -> CirculantWorkload:
    """Extended marginals: threshold predicates on ``numeric`` attributes, points elsewhere.

    Each numeric attribute i with ``m = domain[i]`` values is embedded in ``Z_{2m}``
    (records keep their values in ``[0, m)``); the family for a set A is the product of
    ``threshold_vector(m)`` on numeric attributes and ``e_0`` (a marginal) on the others.
    Query ``1[x_i <= t]`` is the family's answer at shift :func:`threshold_shift` (t, m);
    the other shifts are the complements. Returns the :class:`CirculantWorkload` on the
    embedded domain (targets per family from ``targets`` {attrs: c}).
    """
    domain = check_domain(domain)
    numeric = set(check_attrs(tuple(numeric), len(domain), "`numeric`"))
    emb = tuple(2 * n if i in numeric else n for i, n in enumerate(domain))
    fams = []
    for k, c in mapping_items(targets, "targets"):
        A = tuple(sorted(check_attrs(k, len(domain), f"`targets` key {k!r}")))
        vecs = [threshold_vector(domain[i]) if i in numeric else np.eye(domain[i])[0] for i in A]
        fams.append(ProductFamily(A, vecs, target_weight(c, f"targets[{k!r}]")))
    return CirculantWorkload(emb, fams)
