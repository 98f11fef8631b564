"""One way to pass a solver's options: a frozen, validated value, or its fields by keyword.

Solver layer, its bottom: imports the standard library's ``dataclasses`` only. Each solver's tunables are a
frozen dataclass that checks every field when built (a ``ValueError`` names the field):
:class:`ffu_cvx.solvers.smii.Options` (SM-II and gradient descent), :class:`ffu_cvx.solvers.sdp.driver.SDPOptions`
(the exact SDP and its refinement) and :class:`ffu_cvx.solvers.kron.KronOptions` (the Kronecker
solver). A solver takes that value (``options=``), its fields by keyword, or both (the
keywords then replace the value's fields); :func:`build` is the one place that turns a call's
arguments into the value.
"""

from __future__ import annotations

import dataclasses

__all__ = ["build"]


def build(cls, options, keywords: dict, who: str, *, allowed=None, defaults=None):
    """The ``cls`` options of one call to ``who``.

    ``options``: an instance of ``cls`` or None; ``keywords``: field values given by name,
    replacing those of ``options`` (without ``options``: over ``defaults``, then the class's
    own defaults). A keyword not in ``allowed`` (default: every field of ``cls``) or an
    ``options`` of another class is a ``TypeError``; a bad value is the ``ValueError`` of
    ``cls`` naming its field.
    """
    names = [f.name for f in dataclasses.fields(cls)] if allowed is None else list(allowed)
    unknown = sorted(set(keywords) - set(names))
    if unknown:
        raise TypeError(f"{who}() got unexpected option(s) {unknown}; it accepts {sorted(names)}")
    if options is None:
        return cls(**{**(defaults or {}), **keywords})
    if not isinstance(options, cls):
        raise TypeError(f"{who}() takes `options` of type {cls.__module__}.{cls.__qualname__}, "
                        f"got {type(options).__name__}")
    return dataclasses.replace(options, **keywords) if keywords else options
