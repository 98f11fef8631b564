"""Accuracy in the publisher's words: margins of error at a confidence level, per query or per table.

Model layer: imports numpy, scipy.special and ``validation``; scipy.stats only inside :func:`coverage`.

Every answer carries Gaussian noise of variance ``v``, so "within ``±M`` at level ``L``"
(two-sided) holds exactly when ``v <= (M / z_L)^2`` with ``z_L`` the standard normal
quantile at ``(1 + L) / 2``. A :class:`Target` is one of

- a variance (``{"variance": v}`` or a plain number);
- a margin per query (``{"margin": M, "level": L}``): each answer within ``±M`` with
  probability ``L``;
- a joint margin for a table of ``m`` queries (``{"margin": M, "level": L, "joint": true}``):
  every answer of the table within ``±M`` *at once* with probability at least ``L``.

**The joint guarantee.** The noise of a table is a centred Gaussian vector, correlated
in any way. Šidák's inequality (Šidák 1967; it holds for every centred Gaussian
vector, whatever its covariance) gives
``P(|e_1| <= M_1, ..., |e_m| <= M_m) >= prod_j P(|e_j| <= M_j)``, so meeting each query at
the level ``L^(1/m)`` guarantees the table jointly at level ``L``. It is never looser than
Bonferroni's ``1 - (1 - L)/m`` and equals the truth for independent noise; with
positively correlated noise the true joint coverage is higher, and
:func:`joint_coverage` measures it by Monte Carlo with an exact (Clopper-Pearson)
confidence interval, so a statement can say both what is guaranteed and what was seen.

>>> t = target({"margin": 50, "level": 0.95})
>>> round(t.variance, 2)
650.79
>>> t.text("each county total")
'each county total within ±50 at 95%'
>>> j = target({"margin": 50, "level": 0.95, "joint": True}, queries=200)
>>> j.query_level == 0.95 ** (1 / 200)
True
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Real

import numpy as np
from scipy import special

from . import validation

__all__ = ["Target", "target", "variances", "z_value", "margin_of", "joint_coverage", "coverage", "Coverage",
           "KINDS", "targets_phrase"]

#: The kinds of :class:`Target`.
KINDS = ("variance", "margin", "joint")
_KEYS = {"variance": {"variance"}, "margin": {"margin", "level"}, "joint": {"margin", "level", "joint"}}


def z_value(level: float) -> float:
    """Two-sided standard normal quantile for confidence ``level`` in (0, 1)."""
    return float(special.ndtri(0.5 + 0.5 * validation.fraction(level, "level")))


def margin_of(variance, level: float):
    """Half-width ``z_L sqrt(variance)`` of the two-sided interval at ``level`` (scalar or array)."""
    return z_value(level) * np.sqrt(variance)


@dataclass(frozen=True)
class Target:
    """One accuracy target, as the publisher stated it, and the variance it means.

    kind : ``"variance"``, ``"margin"`` or ``"joint"``; variance : the variance target
    (> 0) of each query; margin, level : the stated margin and confidence (None for a
    variance); queries : the number of queries a joint target covers (1 otherwise);
    query_level : the level each query must meet (``level ** (1 / queries)`` for a joint
    target, Šidák; ``level`` for a margin).
    """

    kind: str
    variance: float
    margin: float | None = None
    level: float | None = None
    queries: int = 1

    @property
    def query_level(self) -> float | None:
        if self.level is None:
            return None
        return self.level ** (1.0 / self.queries) if self.kind == "joint" else self.level

    def text(self, what: str = "each answer") -> str:
        """The target in words, e.g. ``"each answer within ±50 at 95%"``."""
        if self.kind == "variance":
            return f"{what} with noise variance at most {self.variance:.6g}"
        if self.kind == "margin":
            return f"{what} within ±{self.margin:.6g} at {_percent(self.level)}"
        return (f"all {self.queries} answers of {what} within ±{self.margin:.6g} at once with probability at least "
                f"{_percent(self.level)} (each at {_percent(self.query_level, 4)}, Šidák)")

    def short(self) -> str:
        """The target in a few words, for a table cell: ``"±50 at 95%"``."""
        if self.kind == "variance":
            return f"variance <= {self.variance:.6g}"
        return f"±{self.margin:.6g} at {_percent(self.level)}" + (
            f", all {self.queries} at once" if self.kind == "joint" and self.queries > 1 else "")

    def column(self) -> str:
        """The target in an answers file's ``target`` column: :meth:`short`, and for a joint target the
        columns that hold its simultaneous intervals (``lower`` and ``upper`` are each answer's own)."""
        if self.kind == "joint" and self.queries > 1:
            return (f"all {self.queries} within ±{self.margin:.6g} at once at {_percent(self.level)}: "
                    "joint_lower, joint_upper")
        return self.short()

    def half_width(self, variance):
        """Half-width of the interval that states this target's margin for answers of ``variance`` (scalar or
        array): at :attr:`query_level`, so that for a joint target the intervals of all its answers hold at once
        with probability at least :attr:`level` (Šidák). None for a variance target."""
        return None if self.kind == "variance" else margin_of(variance, self.query_level)

    def achieved(self, variance: float) -> str:
        """What a variance delivers, in this target's words (the margin at its level, or the variance)."""
        if self.kind == "variance":
            return f"variance {variance:.6g}"
        return f"±{float(margin_of(variance, self.query_level)):.6g} at {_percent(self.level)}" + \
            (" jointly" if self.kind == "joint" and self.queries > 1 else "")

    def as_dict(self) -> dict:
        """JSON-able form (what a RESULT or statement records)."""
        out = {"kind": self.kind, "variance": self.variance}
        if self.kind != "variance":
            out.update(margin=self.margin, level=self.level, query_level=self.query_level, queries=self.queries)
        return out


def _percent(level: float, digits: int = 3) -> str:
    return f"{100 * level:.{digits}g}%"


#: How :func:`targets_phrase` names each kind of target.
_PHRASES = {"variance": "variance targets", "margin": "margins of error at their confidence levels",
            "joint": "joint margins of error (every answer of a table at once)"}


def targets_phrase(kinds) -> str:
    """The targets of ``kinds`` (a collection of :data:`KINDS`) in words, e.g. ``"variance targets"`` or
    ``"margins of error at their confidence levels"`` (none: variance targets).

    >>> targets_phrase(["margin", "variance"])
    'variance targets and margins of error at their confidence levels'
    """
    given = set(kinds)
    if not given <= set(KINDS):
        raise ValueError(f"target kinds must be among {KINDS}, got {sorted(given)}")
    words = [_PHRASES[k] for k in KINDS if k in given] or [_PHRASES["variance"]]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def target(spec, name: str = "target", queries: int = 1) -> Target:
    """The :class:`Target` of ``spec``: a number (a variance) or a mapping with ``variance``; or
    ``margin`` and ``level`` (and ``joint: true`` for every one of ``queries`` answers at once).

    ``ValueError`` naming ``name`` and the field when the spec is not one of these.
    """
    if isinstance(spec, Real) and not isinstance(spec, bool):
        return Target("variance", validation.positive(spec, name))
    if not isinstance(spec, dict):
        raise ValueError(f"`{name}` must be a variance (a number) or an object with `variance`, or `margin` and "
                         f"`level` (and `joint`), got {spec!r}")
    kind = "joint" if spec.get("joint") else ("margin" if "margin" in spec else "variance")
    extra = set(spec) - _KEYS[kind] - ({"joint"} if kind == "margin" else set())
    if extra or not _KEYS[kind] - {"joint"} <= set(spec):
        raise ValueError(f"`{name}` must give exactly `variance`, or `margin` and `level` (optionally `joint`), got "
                         f"keys {sorted(spec)}")
    if "joint" in spec and not isinstance(spec["joint"], bool):
        raise ValueError(f"`{name}.joint` must be true or false, got {spec['joint']!r}")
    if kind == "variance":
        return Target("variance", validation.positive(spec["variance"], f"{name}.variance"))
    margin = validation.positive(spec["margin"], f"{name}.margin")
    level = validation.fraction(spec["level"], f"{name}.level")
    m = validation.positive_int(queries, "queries") if kind == "joint" else 1
    per_query = level ** (1.0 / m) if kind == "joint" else level
    return Target(kind, (margin / z_value(per_query)) ** 2, margin, level, m)


def variances(spec, m: int, name: str = "c") -> tuple[np.ndarray, Target | None]:
    """The (m,) variance targets of ``spec`` and, when one target covers them all, that :class:`Target`.

    ``spec``: an array of variances (m,) or a number; one target mapping for every query
    (``{"margin": M, "level": L}``, with ``"joint": true`` for all ``m`` at once); or a list
    of ``m`` numbers and per-query mappings (a joint target needs one mapping for all).
    """
    if isinstance(spec, dict):
        goal = target(spec, name, queries=m)
        return np.full(m, goal.variance), goal
    if isinstance(spec, (list, tuple)) and any(isinstance(v, dict) for v in spec):
        if len(spec) != m:
            raise ValueError(f"`{name}` must give one target per query ({m}), got {len(spec)}")
        goals = [target(v, f"{name}[{j}]") for j, v in enumerate(spec)]
        if any(g.kind == "joint" for g in goals):
            raise ValueError(f"`{name}`: a joint target covers several queries: give it once for all of them, "
                             "not per query")
        return np.array([g.variance for g in goals]), None
    return spec, None


@dataclass(frozen=True)
class Coverage:
    """A Monte Carlo estimate of a joint coverage: ``hits`` of ``draws``, ``rate``, and the
    Clopper-Pearson interval ``(low, high)`` at ``confidence``."""

    hits: int
    draws: int
    low: float
    high: float
    confidence: float

    @property
    def rate(self) -> float:
        return self.hits / self.draws

    def text(self) -> str:
        return (f"measured joint coverage {100 * self.rate:.2f}% over {self.draws} simulated releases "
                f"({_percent(self.confidence)} interval {100 * self.low:.2f}%-{100 * self.high:.2f}%)")


def joint_coverage(sample_noise, margins, draws: int = 2000, rng=None, confidence: float = 0.95) -> Coverage:
    """How often every answer's noise lies within its margin at once, by simulation.

    sample_noise : ``rng -> (m,)`` one draw of the answers' noise (e.g. a structured
    Solution's ``sample_answer_noise``); margins : (m,) or a scalar; draws : number of
    simulated releases. The noise is the mechanism's own, never the data's: this costs no
    privacy. Returns a :class:`Coverage` with an exact binomial interval.
    """
    draws = validation.positive_int(draws, "draws")
    gen = np.random.default_rng(rng)
    margins = np.asarray(margins, dtype=float)
    hits = sum(bool(np.all(np.abs(sample_noise(gen)) <= margins)) for _ in range(draws))
    return coverage(hits, draws, confidence)


def coverage(hits: int, draws: int, confidence: float = 0.95) -> Coverage:
    """The :class:`Coverage` of ``hits`` successes in ``draws`` simulated releases, with its exact interval."""
    draws = validation.positive_int(draws, "draws")
    confidence = validation.fraction(confidence, "confidence")
    from scipy import stats  # a slow import, needed only here

    ci = stats.binomtest(int(hits), draws).proportion_ci(confidence_level=confidence, method="exact")
    return Coverage(int(hits), draws, float(ci.low), float(ci.high), confidence)
