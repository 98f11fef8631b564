"""SM-II's certificate bookkeeping: the best certified lower bound of a run and when to refresh it.

Solver layer (SM-II): imports ``model.certificate``, ``model.problem``, :mod:`ffu_cvx.solvers.smii.backend` and
:mod:`ffu_cvx.solvers.smii.model` only. Certificates are float64 and their multipliers and bounds
numpy whatever the array backend: the cheap bound's algebra runs on the backend's device
(``on``), the dual ascent on the host.

Stopping is certified: at the end of a sub-problem :func:`ffu_cvx.model.certificate.certify`
starts from ``(w, u / c)`` (with option ``cheap_certificate`` the bound of ``(w, u / c)``
alone, without the ascent's steps), the best bound
so far is kept (every certificate's bound is valid), and the solver stops when the
relative gap of the normalised cost ``alpha * max_ratio`` is at most ``tol``. The
certificate is skipped when the best bound already certifies ``tol``, and for at most
``CERTIFY_MAX_SKIPS`` sub-problems in a row while the gap is far above ``tol`` or the
bound has stalled.
"""

from __future__ import annotations

import math

from ...model import certificate
from ...model.problem import FitnessProblem
from .backend import of
from .model import Point

#: A sub-problem's end reuses the best bound instead of certifying, for at most
#: ``CERTIFY_MAX_SKIPS`` sub-problems in a row, when the gap it gives is above
#: ``CERTIFY_SKIP`` times ``tol`` or the last certificate moved the bound by less than
#: ``CERTIFY_STALL`` times ``tol``. The limit is needed: with unlimited skips a stalled bound
#: never moves again and a run can end at ``t_max`` uncertified though its iterate is optimal.
CERTIFY_SKIP = 3.0
CERTIFY_STALL = 0.01
CERTIFY_MAX_SKIPS = 3
#: Without the cheap certificate the certificate's dual ascent stops once a step raises the
#: bound by less than this fraction of the gap still open between the iterate's cost and
#: the bound (``certify(stall=...)``): each step is an SVD, and the first few do most of the work.
ASCENT_STALL = 0.01
#: A certificate's bound may fall short of the exact one by up to this fraction of ``tol``
#: (relative), so that it may take the faster Gram route of
#: :func:`ffu_cvx.model.certificate.nuclear_norm`; smaller values make large bases fall back to
#: ``svdvals`` (the Gram margin widens with the order).
CERTIFY_SLACK = 0.2
#: :meth:`BoundKeeper.offer` adds one exact dual-ascent step from a KKT step's multipliers when the
#: step's gap is over ``tol`` but at most this multiple of it: such a step (an SVD of order k) can
#: certify ``tol`` and save a further KKT step (a QP).
ASCEND_WITHIN = 3.0


class BoundKeeper:
    """The best lower bound certified so far in one run, with its multipliers.

    ``value`` (0 before the first certificate), ``lam`` (d,), ``mu`` (m,); ``gain`` is
    the relative rise of the bound at the last certificate and ``skips`` the
    certificates skipped since the last dual ascent (never while the gap is over ``tol`` without
    ``skip``); ``cheap``: the bound of the soft-max weights alone, no dual ascent. ``on``: the problem's arrays on an
    accelerator backend (:class:`~ffu_cvx.solvers.smii.backend.Placed`), None on numpy.
    """

    def __init__(self, problem: FitnessProblem, tol: float, on=None, skip: bool = True, cheap: bool = False):
        self.problem, self.tol, self.on, self.skip, self.cheap = problem, tol, on, skip, cheap
        self.value, self.lam, self.mu = 0.0, None, None
        self.gain, self.skips = math.inf, 0

    @property
    def lower_bound(self) -> float:
        """The best bound, NaN before the first certificate."""
        return self.value if self.value > 0 else math.nan

    def gap(self, alpha: float) -> float:
        """Relative gap ``alpha / bound - 1`` of a normalised cost; NaN before the first certificate."""
        return alpha / self.value - 1.0 if self.value > 0 else math.nan

    def certifies(self, alpha: float) -> bool:
        """Whether the best bound already certifies ``tol`` for the normalised cost ``alpha``."""
        return alpha <= self.value * (1.0 + self.tol)

    def _skip(self, gap: float) -> bool:
        """Whether a sub-problem's end may reuse the best bound (see the module docstring)."""
        far = gap > CERTIFY_SKIP * self.tol
        return gap <= self.tol or (self.skip and self.skips < CERTIFY_MAX_SKIPS and (far or self.gain < CERTIFY_STALL * self.tol))

    def _bound(self, p: Point, kappa: float, c_int):
        """``(lower bound, lam, mu)`` certified at ``p`` (internal targets ``c_int``; both on any backend)."""
        problem, bk = self.problem, of(p.w)
        w = bk.to_numpy(p.w)
        mu_w = bk.to_numpy(p.u) / problem.c  # the soft-max weights as multipliers (mu_w . c = 1)
        if self.cheap:
            # The bound is F^2: F's relative slack counts twice.
            lb = certificate.lower_bound(problem, w, mu_w, slack=0.5 * CERTIFY_SLACK * self.tol, on=self.on)
            return lb, w, mu_w
        p, c_int = p.to_numpy(), bk.to_numpy(c_int)
        s = p.ratio(kappa)
        cert = certificate.certify(problem, p.sigma / s, lam=p.w, mu=mu_w, profile=p.g * s,
                                   variances=p.h * c_int / s, stall=ASCENT_STALL)
        return cert.lower_bound, cert.lam, cert.mu

    def offer(self, lam, mu, alpha: float | None = None) -> float:
        """The bound of multipliers ``lam`` (d,) and ``mu`` (m,; per variance ratio
        ``var_j / c_j``) from outside the soft maxes (:mod:`ffu_cvx.solvers.smii.kkt`), kept if best. With
        ``alpha``, the normalised cost they came with, and a gap over ``tol`` but within ``ASCEND_WITHIN``
        of it, one exact dual-ascent step (:func:`ffu_cvx.model.certificate.ascent_step`) from them is
        offered too; the larger bound is returned."""
        mu = mu / self.problem.c
        lb = self._keep(lam, mu)
        if alpha is not None and self.tol < self.gap(alpha) <= ASCEND_WITHIN * self.tol:
            step = certificate.ascent_step(self.problem, lam / lam.sum(), mu / float(mu @ self.problem.c))
            if step is not None:
                lb = max(lb, self._keep(step[1], step[2]))
        return lb

    def _keep(self, lam, mu) -> float:
        """The bound of ``lam`` (d,) and ``mu`` (m,; per variance), kept if best."""
        lb = certificate.lower_bound(self.problem, lam, mu, slack=0.5 * CERTIFY_SLACK * self.tol, on=self.on)
        if lb > self.value:
            self.value, self.lam, self.mu = lb, lam, mu
        return lb

    def certify(self, p: Point, kappa: float, c_int, force: bool = True) -> float:
        """Certify ``p`` and return its gap against the best bound (inf while no bound is positive).

        With ``force=False`` the dual ascent is skipped when :meth:`_skip` says so. ``p``
        and ``c_int`` may live on any array backend: the cheap bound (``cheap``)
        is computed there when the keeper was given that backend's arrays (``on``, a
        :class:`~ffu_cvx.solvers.smii.backend.Placed`), the dual ascent on numpy.
        """
        if not force and self.value > 0:
            gap = p.cost(kappa) / self.value - 1.0
            if self._skip(gap):
                self.skips += 1
                return gap
        self.skips = 0
        lb, lam, mu = self._bound(p, kappa, c_int)
        if lb > self.value:
            self.gain = lb / self.value - 1.0 if self.value > 0 else math.inf
            self.value, self.lam, self.mu = lb, lam, mu
        else:
            self.gain = 0.0
        return p.cost(kappa) / self.value - 1.0 if self.value > 0 else math.inf
