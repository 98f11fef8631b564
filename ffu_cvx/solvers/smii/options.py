"""SM-II's options: one frozen, validated value (the keywords of ``solve_smii`` and ``solve_gd``).

Solver layer (SM-II): imports ``solvers.options`` (:func:`ffu_cvx.solvers.options.build`), ``model.validation``,
:mod:`ffu_cvx.solvers.smii.backend` (to check
``array_backend``), :mod:`ffu_cvx.solvers.smii.multipliers`, :mod:`ffu_cvx.solvers.smii.kkt` (for the start's range of ``k``) and :mod:`ffu_cvx.solvers.smii.polish`
(for ``REFINE_AUTO_MAX_K``, ``REFINE_BUDGET``) only.
Every option is checked when the value is built (a ``ValueError`` names it, says what
was seen and what is allowed; an unknown keyword is a ``TypeError``); :meth:`Options.resolved` replaces the ``"auto"`` and ``None``
defaults by what they mean for a basis of size ``k``. :func:`ffu_cvx.solvers.smii.solve_smii`
documents each option; :meth:`Options.paper` switches off every addition to the paper's
Algorithm 1 (:data:`PAPER`). The constants the additions are tuned by are listed in one table,
``docs/design/smii.rst`` ("Tuned constants").
"""

from __future__ import annotations

import dataclasses
import math

from ...model import validation
from ..options import build
from . import backend, kkt
from .multipliers import SHIFT_CAP, SHIFT_FLOOR
from .polish import REFINE_AUTO_MAX_K, REFINE_BUDGET

__all__ = ["FLOAT32_MIN_K", "PRECONDITION_MIN_K", "ASCENT_MIN_K", "ASCENT_MAX_K", "PAPER", "Options",
           "smii_options", "gd_options"]

#: ``precondition="auto"`` preconditions CG for bases larger than this, except on the paper's unshifted
#: schedule (``t_shift=None``), where plain CG certifies more workloads.
PRECONDITION_MIN_K = 4
#: ``float32="auto"``: CG's Hessian products in single precision from this basis size (the float32
#: product keeps every soft-max weight the float64 one keeps); below it they save too little.
FLOAT32_MIN_K = 256
#: ``start="auto"``: the dual-ascent start (:func:`ffu_cvx.solvers.smii.model.ascent_start`) on the bases where
#: KKT steps finish (its tight bound lets them begin early), on numpy and a shifted schedule; else the
#: cheapest classic start.
ASCENT_MIN_K, ASCENT_MAX_K = kkt.MIN_K, kkt.MAX_K
#: ``restarts``: a shifted sub-problem whose gap exceeds this multiple of the best so far has gone astray
#: (slack constraints' multipliers decayed, the soft max stopped seeing them and the iterate drifted where
#: ``F`` is flat): KKT steps finish from the best end where they may, else the run resumes from the
#: cheapest iterate, sharper, and no longer ends sub-problems by the settle rule.
RESTART_GAP = 3.0
#: ``cheap_certificate="auto"``: bases larger than this certify by the bound of the soft-max weights alone
#: (:func:`ffu_cvx.model.certificate.lower_bound`, one singular-value evaluation); there the dual ascent of
#: :func:`ffu_cvx.model.certificate.certify` costs seconds a certificate and barely moves the bound.
CHEAP_CERTIFY_K = 256
#: The values of ``start``.
STARTS = ("auto", "ascent", "cheapest", "identity")
#: The options :func:`ffu_cvx.solvers.smii.solve_gd` accepts, and its own defaults for the rest
#: (a long run of plain gradient steps on the paper's unshifted schedule).
GD_OPTIONS = ("t1", "t2", "mu", "nttol", "ntrel", "sigma_ls", "beta", "maxiter", "tol", "t_max", "max_time",
              "verbose", "array_backend")
GD_DEFAULTS = dict(maxiter=100_000, max_time=60.0, maxcg=1, maxcg_cap=1, t_shift=math.inf, refine=False,
                   precondition=False, float32=False)
#: :meth:`Options.paper`: the fields that switch off what this implementation adds to Algorithm 1 (the start
#: ``Q = I`` of §6.3, ``t1, t2`` times ``mu`` each sub-problem, ``maxcg`` plain CG iterations, a sub-problem
#: ending on ``|delta| < NTTOL``); ``docs/design/smii.rst`` gives the table. The stop stays certified.
PAPER = dict(start="identity", t_shift=None, ntrel=0.0, maxcg_cap=5, radius=None, precondition=False,
             float32=False, settle=False, skip_certificates=False, restarts=None, shift_cap=None, shift_floor=None,
             fast_rise=False, kkt=False, mixing=False, rebalance=False, rescale=False, refine=False)


@dataclasses.dataclass(frozen=True)
class Options:
    """The settings of one SM-II (or gradient-descent) run; see :func:`ffu_cvx.solvers.smii.solve_smii`."""

    t1: float = 1.0
    t2: float = 1.0
    mu: float = 10.0
    maxcg: int = 5
    maxcg_cap: int = 40
    tol2: float = 1e-10
    nttol: float = 1e-10
    sigma_ls: float = 0.01
    beta: float = 0.5
    maxiter: int = 2000
    tol: float = 1e-4
    t_max: float = 1e9
    radius: float | None = 1.0
    ntrel: float = 1e-3
    max_time: float | None = None
    t_shift: float | None = 30.0
    refine: bool | str = "auto"
    precondition: bool | str = "auto"
    float32: bool | str = "auto"
    verbose: bool = False
    array_backend: str = "numpy"
    refine_budget: float = REFINE_BUDGET
    start: str = "auto"
    # The heuristics beyond Algorithm 1, each switchable per call (``docs/design/smii.rst``
    # gives the benchmark bank's ablation that keeps each one).
    kkt: bool | str = "auto"
    mixing: bool = True
    restarts: float | None = RESTART_GAP
    settle: bool = True
    skip_certificates: bool = True
    shift_cap: float | None = SHIFT_CAP
    shift_floor: float | None = SHIFT_FLOOR
    fast_rise: bool = True
    rescale: bool | str = "auto"
    cheap_certificate: bool | str = "auto"
    rebalance: bool = True

    @classmethod
    def paper(cls, **overrides) -> "Options":
        """Algorithm 1 as published (:data:`PAPER` over the defaults), ``overrides`` on top; certified."""
        return cls(**{**PAPER, **overrides})

    def __post_init__(self):
        checked = {name: validation.positive(getattr(self, name), name)
                   for name in ("t1", "t2", "tol2", "nttol", "tol", "t_max")}
        if not validation.positive(self.mu, "mu") > 1:
            raise ValueError(f"`mu` (the factor that grows t1, t2) must be > 1, got {self.mu!r}")
        checked.update(mu=float(self.mu), sigma_ls=validation.fraction(self.sigma_ls, "sigma_ls"),
                       beta=validation.fraction(self.beta, "beta"),
                       ntrel=validation.nonnegative(self.ntrel, "ntrel"),
                       max_time=validation.positive(self.max_time, "max_time", allow_none=True),
                       radius=validation.positive(self.radius, "radius", allow_none=True),
                       maxcg=validation.positive_int(self.maxcg, "maxcg"),
                       maxcg_cap=validation.positive_int(self.maxcg_cap, "maxcg_cap"),
                       maxiter=validation.positive_int(self.maxiter, "maxiter"),
                       refine=validation.flag(self.refine, "refine", extra=("auto",)),
                       precondition=validation.flag(self.precondition, "precondition", extra=("auto",)),
                       float32=validation.flag(self.float32, "float32", extra=("auto",)),
                       verbose=validation.flag(self.verbose, "verbose"),
                       array_backend=backend.check(self.array_backend, "array_backend"),
                       refine_budget=validation.positive(self.refine_budget, "refine_budget"),
                       kkt=validation.flag(self.kkt, "kkt", extra=("auto",)),
                       rescale=validation.flag(self.rescale, "rescale", extra=("auto",)),
                       cheap_certificate=validation.flag(self.cheap_certificate, "cheap_certificate", extra=("auto",)),
                       restarts=validation.positive(self.restarts, "restarts", allow_none=True),
                       shift_cap=validation.positive(self.shift_cap, "shift_cap", allow_none=True),
                       shift_floor=validation.positive(self.shift_floor, "shift_floor", allow_none=True),
                       **{name: validation.flag(getattr(self, name), name)
                          for name in ("mixing", "settle", "skip_certificates", "fast_rise", "rebalance")})
        # t_shift: None or inf never shifts (the paper's schedule).
        t_shift = validation.positive(self.t_shift, "t_shift", allow_none=True, allow_inf=True)
        checked["t_shift"] = math.inf if t_shift is None else t_shift
        if self.start not in STARTS:
            raise ValueError(f"`start` must be one of {STARTS}, got {self.start!r}")
        if self.start == "ascent" and checked["t_shift"] == math.inf:
            raise ValueError("`start='ascent'` begins at t1 = t2 = t_shift and needs a finite `t_shift`; "
                             "use start='cheapest' on the paper's schedule")
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    def resolved(self, k: int) -> "Options":
        """These options with their ``"auto"`` values (``precondition``, ``float32``, ``refine``, ``start``,
        ``kkt``, ``rescale``, ``cheap_certificate``) made concrete for a basis of size ``k``."""
        precondition = self.precondition
        if precondition == "auto":
            precondition = k > PRECONDITION_MIN_K and math.isfinite(self.t_shift)
        float32 = k >= FLOAT32_MIN_K if self.float32 == "auto" else self.float32
        refine = k <= REFINE_AUTO_MAX_K if self.refine == "auto" else self.refine
        start = self.start
        if start == "auto":
            ascent = ASCENT_MIN_K <= k <= ASCENT_MAX_K and math.isfinite(self.t_shift) and self.array_backend == "numpy"
            start = "ascent" if ascent else "cheapest"
        kkt_on = kkt.MIN_K <= k <= kkt.MAX_K if self.kkt == "auto" else self.kkt
        # From backend.LARGE_K each sub-problem starts from the last point rescaled rather than factored afresh
        # (below it that saves milliseconds, and the fresh factorisation keeps numpy and torch within 1e-10).
        rescale = k >= backend.LARGE_K if self.rescale == "auto" else self.rescale
        cheap = k > CHEAP_CERTIFY_K if self.cheap_certificate == "auto" else self.cheap_certificate
        return dataclasses.replace(self, precondition=precondition, float32=float32,
                                   refine=refine, start=start, kkt=kkt_on, rescale=rescale, cheap_certificate=cheap)


def smii_options(options: Options | None = None, **keywords) -> Options:
    """:class:`Options` of an SM-II run: ``options`` with ``keywords`` (fields) on top
    (:func:`ffu_cvx.solvers.options.build`; an unknown keyword is a ``TypeError`` listing the valid ones)."""
    return build(Options, options, keywords, "solve_smii")


def gd_options(options: Options | None = None, **keywords) -> Options:
    """:class:`Options` of a gradient-descent run: ``options``, else ``GD_DEFAULTS``, with ``GD_OPTIONS`` by
    keyword on top."""
    return build(Options, options, keywords, "solve_gd", allowed=GD_OPTIONS, defaults=GD_DEFAULTS)
