"""Workloads of the fitness-for-use paper, as ``Workload`` values (W, c, labels, domain).

Every builder is deterministic given its ``seed``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .problem import validate_workload

__all__ = ["Workload", "prefix", "from_matrix"]


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
        if len(self.labels) != W.shape[0]:
            raise ValueError(f"`labels` needs one entry per query ({W.shape[0]}), got {len(self.labels)}")
        if int(np.prod(self.domain)) != W.shape[1]:
            raise ValueError(f"`domain` {self.domain} has {int(np.prod(self.domain))} cells but W has {W.shape[1]} columns")
        W.setflags(write=False)
        c.setflags(write=False)
        object.__setattr__(self, "W", W)
        object.__setattr__(self, "c", c)
        object.__setattr__(self, "labels", tuple(str(s) for s in self.labels))
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


def prefix(d: int) -> Workload:
    """Prefix (one-sided range) queries on an ordered domain of size ``d``: Tables 2 and 3.

    ``W`` is the (d, d) upper-triangular ones matrix (query j counts cells ``0..j``
    read along a row of ``W``: ``W[i, j] = 1`` for ``i <= j``, as in the paper), targets 1.
    """
    d = _check_size(d)
    return Workload(np.triu(np.ones((d, d))), np.ones(d), ("prefix",) * d, (d,), f"prefix(d={d})", {"d": d})


def from_matrix(W, c, labels=None, domain=None, name="custom") -> Workload:
    """A user's workload ``W`` (m, d) with targets ``c`` (m,) (a scalar is broadcast)."""
    W, c = validate_workload(W, c)
    labels = tuple(labels) if labels is not None else ("query",) * W.shape[0]
    domain = tuple(domain) if domain is not None else (W.shape[1],)
    return Workload(W, c, labels, domain, name, {})
