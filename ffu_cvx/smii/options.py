"""SM-II's options: one frozen, validated value (the keywords of ``solve_smii`` and ``solve_gd``).

Solver layer (SM-II): imports ``validation``, :mod:`ffu_cvx.smii.backend` (to check
``array_backend``), :mod:`ffu_cvx.smii.kkt` (for the start's range of ``k``) and :mod:`ffu_cvx.smii.polish`
(for ``REFINE_AUTO_MAX_K``, ``REFINE_BUDGET``) only.
Every option is checked when the value is built (a ``ValueError`` names it, says what
was seen and what is allowed; an unknown keyword is a ``TypeError``); :meth:`Options.resolved` replaces the ``"auto"`` and ``None``
defaults by what they mean for a basis of size ``k``. :func:`ffu_cvx.smii.solve_smii`
documents each option.
"""

from __future__ import annotations

import dataclasses
import math

from .. import validation
from . import backend, kkt
from .multipliers import SHIFT_CAP, SHIFT_FLOOR
from .polish import REFINE_AUTO_MAX_K, REFINE_BUDGET

__all__ = ["FLOAT32_MIN_K", "PRECONDITION_MIN_K", "ASCENT_MIN_K", "ASCENT_MAX_K", "Options", "smii_options",
           "gd_options"]

#: ``precondition="auto"`` preconditions CG for bases larger than this. On prefix and random
#: ranges alone the eigendecomposition per Newton step pays for itself only from about k = 96,
#: but across ``bench_workloads``' six small classes (prefix-decades, random ranges, 4-ary trees,
#: dense-ca, Gaussian, mixed; d = 32, 48, 64, 96, seeds 0-11, tol 1e-4, refine off, one BLAS
#: thread) plain CG takes 35,256 Newton steps, 1.3 million Hessian products and leaves 8 of
#: the 288 runs uncertified (targets over decades at d = 64 and 96: t_max or maxiter, alpha
#: stuck above the optimum at t = 1e9 with CG at its 40-product cap); preconditioned,
#: 10,370 steps, 50,459 products and none uncertified. At d = 8-24 it also takes fewer steps (6,782 against 7,427 over the same
#: classes) and 5x fewer products; at d = 4 the two are even. On the paper's schedule
#: (``t_shift=None``: t grows to ~1e4-1e9) "auto" keeps plain CG: preconditioned, prefix
#: d = 32, 64, 128, 256 and a 4-ary tree d = 64 ended at t_max 1.0e-4 to 1.3e-3 above tol,
#: where plain CG certified them at t = 3.6e4-6.4e4.
PRECONDITION_MIN_K = 4
#: ``float32="auto"`` evaluates CG's Hessian products in single precision for bases of at
#: least this size (the float32 product keeps every weight the float64 one keeps). Measured on
#: ``bench_workloads``' problems, tol 1e-4, one BLAS thread, the two precisions side by side: at d = 256 prefix, targets over decades, random ranges and
#: 4-ary trees (13 cells) took 636 -> 672 Newton steps and 84.3 -> 61.1 s, at d = 512
#: 808 -> 766 steps and 364.8 -> 179.3 s; at d = 128 only 610 -> 651 steps and 11.6 -> 10.5 s,
#: so below 256 the iterates stay float64's.
FLOAT32_MIN_K = 256
#: ``maxcg_cap=None``: CG may take up to this many iterations a Newton step (plain CG by
#: doubling its budget, preconditioned CG while a product pays, see
#: :func:`ffu_cvx.smii.newton.extension_pays`). Against preconditioned CG stopped at ``maxcg``,
#: at d = 512 the doubling rule up to 40 takes 1.1-1.3x as long and the payoff rule 0.83x
#: (``bench_workloads`` cells).
MAXCG_CAP = 40
#: ``start="auto"`` starts from the dual ascent (:func:`ffu_cvx.smii.model.ascent_start`) on the
#: bases where KKT steps finish (``kkt.MIN_K`` to ``kkt.MAX_K``: the start's tight bound lets them begin
#: early), on numpy (the ascent runs on the host) and a shifted schedule; else from the cheapest
#: classic start. Measured up to d = 2,048 (an ascent step is an SVD of order k). Same run, one BLAS thread,
#: tol 1e-4, `bench_workloads`, the classic start -> the ascent: d = 64 and 96, seven
#: classes, seeds 0-11 (146 cells, every one certified both ways) 19.4 -> 17.2 s, 3,538 -> 2,578 Newton
#: steps; d = 128, six classes, seeds 0-3, 4.1 -> 3.1 s; d = 256 (seeds 0-2) 14.6 -> 10.1 s; d = 512
#: 65.0 -> 51.9 s; d = 1,024 (tol 1e-3) 203.0 -> 157.6 s.
ASCENT_MIN_K, ASCENT_MAX_K = kkt.MIN_K, kkt.MAX_K
#: ``sub_maxit``: a sub-problem ends after this many Newton steps: without a cap, a slow sub-problem
#: can spend the whole run (mixed scales d = 64, seed 1: 1,084 steps and no certificate; capped, 232).
SUB_MAXIT = 50
#: ``rescale="auto"``: from this basis size the next sub-problem starts from the point rescaled
#: (:func:`~ffu_cvx.smii.model.renormalise`) instead of factored afresh: 0.5 s a sub-problem at
#: k = 2048, one BLAS thread. Below it the saving is milliseconds, and the fresh factorisation keeps
#: numpy's and torch's runs within 1e-10 of each other (rescaled, random ranges d = 32 drifted 1.2e-10).
RESCALE_MIN_K = 1000
#: ``restarts``: a shifted sub-problem whose gap exceeds this multiple of the best gap so far has gone
#: astray (slack constraints' multipliers decay, the soft max stops seeing them, the iterate drifts where
#: ``F`` is flat: random ranges d = 1024, seed 1, gap 8e-3 to 0.7 in three steps). KKT steps finish from
#: the best end where its gap is under ``kkt.START``; else the solver goes back to the cheapest iterate,
#: sharpens ``t`` and no longer ends sub-problems by the settle rule.
RESTART_GAP = 3.0
#: ``cheap_certificate="auto"``: bases larger than this certify with the bound of the soft-max weights
#: themselves (:func:`ffu_cvx.certificate.lower_bound`, one singular-value evaluation): the two dual-ascent
#: steps and re-evaluations of :func:`ffu_cvx.certificate.certify` cost about 4 s each time at k = 1011 and
#: raised the bound by at most 1e-5 (relative).
CHEAP_CERTIFY_K = 256
#: The values of ``start``.
STARTS = ("auto", "ascent", "cheapest")
#: The options :func:`ffu_cvx.smii.solve_gd` accepts, and its own defaults for the rest
#: (a long run of plain gradient steps on the paper's unshifted schedule).
GD_OPTIONS = ("t1", "t2", "mu", "nttol", "ntrel", "sigma_ls", "beta", "maxiter", "tol", "t_max", "max_time",
              "verbose", "array_backend")
GD_DEFAULTS = dict(maxiter=100_000, max_time=60.0, maxcg=1, maxcg_cap=1, t_shift=math.inf, refine=False,
                   precondition=False, float32=False)


@dataclasses.dataclass(frozen=True)
class Options:
    """The settings of one SM-II (or gradient-descent) run; see :func:`ffu_cvx.smii.solve_smii`."""

    t1: float = 1.0
    t2: float = 1.0
    mu: float = 10.0
    maxcg: int = 5
    maxcg_cap: int | None = None
    tol2: float = 1e-10
    nttol: float = 1e-10
    sigma_ls: float = 0.01
    beta: float = 0.5
    maxiter: int = 2000
    tol: float = 1e-4
    t_max: float = 1e9
    radius: float = 1.0
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
    fast_rise: bool = True
    shift_cap: float | None = SHIFT_CAP
    shift_floor: float | None = SHIFT_FLOOR
    sub_maxit: int | None = SUB_MAXIT
    rescale: bool | str = "auto"
    adaptive_growth: bool = True
    cheap_certificate: bool | str = "auto"

    def __post_init__(self):
        checked = {name: validation.positive(getattr(self, name), name)
                   for name in ("t1", "t2", "tol2", "nttol", "tol", "t_max", "radius")}
        if not validation.positive(self.mu, "mu") > 1:
            raise ValueError(f"`mu` (the factor that grows t1, t2) must be > 1, got {self.mu!r}")
        checked.update(mu=float(self.mu), sigma_ls=validation.fraction(self.sigma_ls, "sigma_ls"),
                       beta=validation.fraction(self.beta, "beta"),
                       ntrel=validation.nonnegative(self.ntrel, "ntrel"),
                       max_time=validation.positive(self.max_time, "max_time", allow_none=True),
                       maxcg=validation.positive_int(self.maxcg, "maxcg"),
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
                          for name in ("mixing", "settle", "skip_certificates", "fast_rise",
                                       "adaptive_growth")})
        if self.sub_maxit is not None:
            checked["sub_maxit"] = validation.positive_int(self.sub_maxit, "sub_maxit")
        if self.maxcg_cap is not None:
            checked["maxcg_cap"] = validation.positive_int(self.maxcg_cap, "maxcg_cap")
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
        """These options with ``precondition``, ``float32``, ``maxcg_cap``, ``refine`` and ``start`` made
        concrete for a basis of size ``k``."""
        precondition = self.precondition
        if precondition == "auto":
            precondition = k > PRECONDITION_MIN_K and math.isfinite(self.t_shift)
        float32 = k >= FLOAT32_MIN_K if self.float32 == "auto" else self.float32
        maxcg_cap = MAXCG_CAP if self.maxcg_cap is None else self.maxcg_cap
        refine = k <= REFINE_AUTO_MAX_K if self.refine == "auto" else self.refine
        start = self.start
        if start == "auto":
            ascent = ASCENT_MIN_K <= k <= ASCENT_MAX_K and math.isfinite(self.t_shift) and self.array_backend == "numpy"
            start = "ascent" if ascent else "cheapest"
        kkt_on = kkt.MIN_K <= k <= kkt.MAX_K if self.kkt == "auto" else self.kkt
        rescale = k >= RESCALE_MIN_K if self.rescale == "auto" else self.rescale
        cheap = k > CHEAP_CERTIFY_K if self.cheap_certificate == "auto" else self.cheap_certificate
        return dataclasses.replace(self, precondition=precondition, float32=float32, maxcg_cap=maxcg_cap,
                                   refine=refine, start=start, kkt=kkt_on, rescale=rescale, cheap_certificate=cheap)


def _check_names(options: dict, allowed, who: str) -> None:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise TypeError(f"{who}() got unexpected option(s) {unknown}; it accepts {sorted(allowed)}")


def smii_options(**options) -> Options:
    """:class:`Options` of an SM-II run; an unknown keyword is a ``TypeError`` listing the valid ones."""
    _check_names(options, [f.name for f in dataclasses.fields(Options)], "solve_smii")
    return Options(**options)


def gd_options(**options) -> Options:
    """:class:`Options` of a gradient-descent run: ``GD_OPTIONS`` by keyword over ``GD_DEFAULTS``."""
    _check_names(options, GD_OPTIONS, "solve_gd")
    return Options(**{**GD_DEFAULTS, **options})
