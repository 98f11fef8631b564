"""A self-describing release: noisy answers, their intervals and labels, and the privacy statement.

Release layer, its bottom (below the solvers, which build Releases): imports numpy, ``model`` (``accuracy``
(``z_value``, the targets' words), ``privacy``, ``validation``), ``io`` (``jsonio``, ``files``), ``version`` and the
release modules ``noise`` (the :class:`ffu_cvx.release.noise.NoiseAccount`) and ``ledger``; pandas only inside
:meth:`Release.to_frame`; :mod:`ffu_cvx.pml` (its bounds' names and :mod:`ffu_cvx.pml.formulas`) only inside
:meth:`LaplaceAccount.check`: the one import of a higher layer in the package, function-level because the PML
package builds its releases on this module. Every mechanism's release is a :class:`Release`: :mod:`ffu_cvx.release.mechanism` and
:mod:`ffu_cvx.release.product_release` (Gaussian), :mod:`ffu_cvx.solvers.fourier.release` (Gaussian, Fourier) and
:mod:`ffu_cvx.pml.release` (Laplace) build one, and all write, state and verify their files here.

A Release knows what protects it: the privacy cost ``alpha = Delta_M^2`` of the
mechanism that drew its noise and the account of that noise: Gaussian noise from a sampler
(:class:`ffu_cvx.release.noise.NoiseAccount`: which sampler, the lattice, the sensitivity the accounting
uses), hence (eps, delta) at any delta (:meth:`Release.epsilon`) and rho-zCDP; or Laplace noise
(:class:`LaplaceAccount`: its scale, pure eps-DP and the PML leakage it was calibrated to). The
intervals follow the noise (:func:`half_width`). The statement also names the neighbouring relation, the
mechanism, the tool's version and the time of the release; and, where the mechanism
was solved for targets (variances, or margins of error at a confidence level, per query or
for a whole table at once), which answers meet them, in the words they were given, and by
what factor the others miss. Answers under a joint target also get simultaneous intervals
(``joint_lower``, ``joint_upper``), which hold for all of their table at once. It holds nothing computed from the data without noise: no record count, no count
of non-empty cells, no exact answer.

:meth:`Release.to_csv` writes the answers CSV and, beside it, a JSON sidecar
(:func:`sidecar_path`) holding that statement and the SHA-256 digest of the answers
file, as one unit (:func:`ffu_cvx.io.files.atomic_write_group`: the statement is renamed
into place last, an interrupt cannot come between the two, concurrent writers take
turns); it never writes onto an input, a read-only file, another release's statement
or, unless ``overwrite=True``, any existing file. :func:`verify` checks that an answers
file sits beside its own statement and that the statement's privacy numbers are those
its recorded mechanism and noise give (an edited epsilon, rho, cost or leakage fails).
Post-processing (:meth:`Release.postprocess`: non-negativity, rounding) never touches the
answers themselves: it adds a ``postprocessed`` column, and the statement lists the steps as
post-processing (free of privacy cost, but no longer unbiased, and the intervals are those of
the raw answers).
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from ..io import jsonio
from ..io.files import atomic_write_bytes, atomic_write_group, check_output
from ..model import privacy, validation
from ..model.accuracy import targets_phrase, z_value
from ..version import __version__
from .ledger import Ledger
from .noise import NoiseAccount

__all__ = ["Release", "LaplaceAccount", "DEFAULT_DELTA", "TOOL", "sidecar_path", "statement_text", "check_level",
           "z_value", "half_width", "generator", "utc_now", "verify", "check_statement", "digest", "accuracy_summary",
           "TARGET_RTOL"]

#: delta at which a statement gives epsilon unless told otherwise.
DEFAULT_DELTA = 1e-6
#: Name of the tool in every statement.
TOOL = "ffu-cvx"
#: Suffix of the privacy statement written beside an answers file.
SIDECAR_SUFFIX = ".privacy.json"
#: Relative slack under which a variance counts as meeting its target.
TARGET_RTOL = 1e-6
#: The answers CSV's columns, in order (``group``, ``target``, ``joint*`` and ``postprocessed*`` only when present:
#: ``target`` is the group's accuracy target in the publisher's words, where one is a margin; ``joint_lower`` /
#: ``_upper`` the simultaneous intervals of the answers under a joint target (empty for the others);
#: ``postprocessed_lower`` / ``_upper`` the post-processed values' own interval, where one was made).
COLUMNS = ("query", "group", "label", "answer", "variance", "std", "lower", "upper", "target", "joint_lower",
           "joint_upper", "postprocessed",
           "postprocessed_lower", "postprocessed_upper")


def check_level(level) -> float:
    """A confidence level in (0, 1)."""
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"`level` must be a confidence level in (0, 1), e.g. 0.95, got {level!r}")
    return level


def generator(rng) -> np.random.Generator:
    """``None`` (OS entropy), an int seed, a SeedSequence/BitGenerator, or a Generator."""
    if isinstance(rng, (bool, float, str)):
        raise ValueError(f"`rng` must be None, an integer seed or a numpy Generator, got {rng!r}")
    try:
        return np.random.default_rng(rng)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`rng` must be None, an integer seed or a numpy Generator: {exc}") from None


def utc_now() -> str:
    """The current time, UTC, ISO 8601 to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def sidecar_path(path) -> Path:
    """Where the privacy statement of the answers file ``path`` goes: ``answers.csv`` -> ``answers.privacy.json``."""
    path = Path(path)
    return path.with_name(path.stem + SIDECAR_SUFFIX) if path.suffix else path.with_name(path.name + SIDECAR_SUFFIX)


def digest(data: bytes) -> str:
    """``"sha256:<hex>"`` of ``data`` (what a statement records of its answers file)."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def accuracy_summary(variances, targets, kinds=()) -> dict:
    """Which of the answers meet their targets, and by what factor the others miss.

    variances, targets : (m,) achieved and target variances; kinds : how the targets were
    given (:data:`ffu_cvx.model.accuracy.KINDS`; none: variances), which the sentence follows.
    Returns JSON-able values: ``queries``, ``within_target`` (count), ``worst_ratio`` (max
    variance / target), ``met`` (all within ``TARGET_RTOL``) and a sentence ``text``.
    """
    ratio = np.asarray(variances, dtype=float) / np.asarray(targets, dtype=float)
    within = int(np.sum(ratio <= 1 + TARGET_RTOL))
    worst = float(ratio.max()) if ratio.size else 0.0
    m = int(ratio.size)
    phrase = targets_phrase(kinds)
    margins = set(kinds) - {"variance"}
    if within == m:
        text = (f"All {m} answers meet their {phrase} (worst variance/" +
                ("the variance its target allows" if margins else "target") + f" {worst:.4g}).")
    else:
        text = (f"Only {within} of {m} answers meet their {phrase}: the worst variance is {worst:.4g} times " +
                ("what its target allows." if margins else "its target."))
    return {"queries": m, "within_target": within, "worst_ratio": worst, "met": within == m, "text": text}


def statement_text(m: int, name: str, epsilon: float, delta: float, rho: float, alpha: float, neighbours: str,
                   mechanism: str, noise: NoiseAccount | None = None) -> str:
    """One paragraph: what releasing ``m`` answers of ``name`` satisfies, and why (``noise``: the sampler's account)."""
    if noise is None:
        how = "exact Gaussian mechanism, Balle and Wang 2018"
    else:
        lattice = f"; lattice spacing {noise.lattice:.6g}" if noise.lattice else ""
        how = (f"noise: {noise.text}{lattice}; sensitivity {noise.sensitivity:.9g} accounted as "
               f"{noise.sensitivity_bound:.9g}; " + ("(eps, delta) by OpenDP's conversion from zCDP"
                                                     if noise.accounting == "opendp-zcdp" else
                                                     "(eps, delta) of the exact Gaussian mechanism"))
    return (f"Releasing the {m} answers of {name!r} satisfies ({epsilon:.6g}, {delta:g})-differential privacy and "
            f"{rho:.6g}-zCDP (privacy cost alpha = Delta_M^2 = {alpha:.6g}; neighbours: {neighbours}, i.e. "
            f"histograms differing by one in one cell; {mechanism}; {how}).")


#: What draws Laplace noise, in a statement's words.
LAPLACE_SAMPLER = ("numpy's floating-point Laplace sampler (reproducible from a seed; not protected against "
                   "floating-point attacks)")


@dataclass(frozen=True)
class LaplaceAccount:
    """Laplace noise of scale ``b`` on every answer and the privacy it gives (a statement's ``noise`` entry).

    scale : ``b`` (0: no noise, the exact answers); sensitivity : the answers' L1 sensitivity
    under the release's neighbouring relation, so the release is ``sensitivity / b``-DP (pure);
    pml_epsilon : the pointwise maximal leakage target (nats) it was calibrated to; alpha : the
    context assumption (every record falls in each class with probability at least alpha);
    bound : the PML bound that certifies it (``"sign"``, ``"safe"`` or ``"corollary"``, see
    :mod:`ffu_cvx.pml`); leakage : that bound at ``b`` (nats, within pml_epsilon); pml_sensitivity :
    ``Delta_1``, the L1 sensitivity under substitution that every PML bound uses.
    """

    scale: float
    sensitivity: float
    pml_epsilon: float
    alpha: float
    bound: str
    leakage: float
    pml_sensitivity: float

    #: The noise distribution, as the statement's ``noise`` entry names it.
    distribution = "laplace"

    def epsilon(self, delta: float | None = None) -> float:
        """eps of the pure eps-DP of the release, at every delta: ``sensitivity / b`` (0 when the answers do not
        depend on the data, inf without noise)."""
        if self.sensitivity == 0:
            return 0.0
        return self.sensitivity / self.scale if self.scale > 0 else math.inf

    @property
    def rho(self) -> float:
        """rho of rho-zCDP: ``eps^2 / 2``, which pure eps-DP implies (Bun and Steinke 2016)."""
        return self.epsilon() ** 2 / 2

    @property
    def variance(self) -> float:
        """Each answer's noise variance, ``2 b^2``."""
        return 2.0 * self.scale ** 2

    def half_width(self, level: float) -> float:
        """Half-width of each answer's interval at ``level``: ``b ln(1 / (1 - level))``, since a Laplace(b)
        draw ``Z`` has ``P(|Z| <= t) = 1 - e^{-t/b}``."""
        return -self.scale * math.log1p(-level)

    def text(self, m: int, name: str, neighbours: str, mechanism: str) -> str:
        """One paragraph: what releasing ``m`` answers of ``name`` satisfies, pure DP and PML, and why."""
        eps = self.epsilon()
        dp = (f"satisfies {eps:.6g}-differential privacy (pure: delta = 0) and {self.rho:.6g}-zCDP"
              if math.isfinite(eps) else "is not differentially private (b = 0: the exact answers)")
        return (f"Releasing the {m} answers of {name!r} {dp} (neighbours: {neighbours}; {mechanism}; noise: Laplace "
                f"of scale b = {self.scale:.9g} on every answer, L1 sensitivity {self.sensitivity:.9g}; "
                f"{LAPLACE_SAMPLER}). If every record falls in each class with probability at least alpha = "
                f"{self.alpha:.6g}, its pointwise maximal leakage is at most {self.leakage:.6g} nats, within the "
                f"target {self.pml_epsilon:.6g} ({self.bound} bound, substitution L1 sensitivity "
                f"{self.pml_sensitivity:.9g}; Zhao, Saeidian and Oechtering).")

    def phrases(self) -> list[str]:
        """What :meth:`text` must say of the numbers: the DP epsilon (when finite) and the leakage."""
        eps, leakage = self.epsilon(), f"at most {self.leakage:.6g} nats"
        return [f"{eps:.6g}-differential privacy", leakage] if math.isfinite(eps) else [leakage]

    def as_dict(self) -> dict:
        return {"distribution": self.distribution, "text": LAPLACE_SAMPLER, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, doc) -> "LaplaceAccount":
        """The account a statement records (``ValueError`` naming a missing or bad field)."""
        try:
            return cls(**{f.name: (str if f.name == "bound" else float)(doc[f.name]) for f in dataclasses.fields(cls)})
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"the statement's Laplace `noise` record is incomplete or malformed: {exc!r}") from None

    def check(self, neighbours: str, where) -> None:
        """Recompute the leakage from the record: Corollary 1's closed form ``-log(alpha + (1 - alpha)
        e^{-Delta_1/b})`` bounds every PML bound (it is the ``"corollary"`` one), ``log(1/alpha)`` without
        noise (0 when ``Delta_1 = 0``); the leakage is within it and the target, and the sensitivity is the
        substitution one (under add/remove, at least half of it). ``ValueError`` naming the field."""
        from ..pml import BOUNDS
        from ..pml.formulas import corollary

        if not (self.scale >= 0 and self.sensitivity >= 0 and self.pml_sensitivity >= 0 and 0 < self.alpha <= 0.5
                and self.bound in BOUNDS and self.leakage >= 0 and neighbours in privacy.NEIGHBOURS):
            raise ValueError(f"{where}: the Laplace noise record has a scale, sensitivity, alpha, bound or leakage, "
                             "or the statement a neighbouring relation, out of range: the statement was edited")
        if self.scale > 0:
            closed = corollary(self.pml_sensitivity, self.scale, self.alpha)
        else:
            closed = -math.log(self.alpha) if self.pml_sensitivity > 0 else 0.0
        exact = self.bound == "corollary" or self.scale == 0
        slack = 1 + STATEMENT_RTOL
        if (not math.isclose(self.leakage, closed, rel_tol=STATEMENT_RTOL, abs_tol=1e-300) if exact
                else self.leakage > closed * slack):
            raise ValueError(f"{where}: leakage = {self.leakage!r} is not what its bound gives at b = {self.scale!r} "
                             f"(Corollary 1: {closed!r}): the statement was edited")
        if self.scale > 0 and self.leakage > self.pml_epsilon * slack:
            raise ValueError(f"{where}: leakage = {self.leakage!r} exceeds its target pml_epsilon = "
                             f"{self.pml_epsilon!r}: the statement was edited")
        if (self.sensitivity != self.pml_sensitivity if neighbours == privacy.SUBSTITUTE
                else self.pml_sensitivity > 2 * self.sensitivity * slack):
            raise ValueError(f"{where}: sensitivity = {self.sensitivity!r} under {neighbours!r} does not fit the "
                             f"substitution sensitivity {self.pml_sensitivity!r}: the statement was edited")


def half_width(variances, level: float, noise=None) -> np.ndarray:
    """(m,) half-width of each answer's two-sided interval at ``level``: ``z sqrt(variance)`` under Gaussian noise,
    ``b ln(1 / (1 - level))`` under Laplace noise (``noise`` a :class:`LaplaceAccount`)."""
    variances = np.asarray(variances, dtype=float)
    if isinstance(noise, LaplaceAccount):
        return np.full(variances.shape, noise.half_width(level))
    return z_value(level) * np.sqrt(variances)


@dataclass(frozen=True)
class Release(privacy.GaussianPrivacy):
    """Noisy workload answers from one run of a mechanism, with their privacy statement.

    answers, variances, lower, upper : (m,) noisy answers, their exact variances and the
    two-sided confidence interval at ``level`` (:func:`half_width`: ``answers -/+ z sqrt(variances)``
    under Gaussian noise, ``answers -/+ b ln(1/(1 - level))`` under Laplace noise); labels : (m,)
    query labels (a sequence, possibly lazy; may be empty); privacy_cost : ``Delta_M^2``, the squared
    sensitivity in units of the noise (Gaussian: alpha, the L2 sensitivity over the standard deviation;
    Laplace: the L1 sensitivity over ``b``, so ``Delta_M`` is its epsilon); neighbours : the neighbouring relation
    its privacy holds for (:data:`ffu_cvx.model.privacy.ADD_REMOVE`); mechanism : what drew the
    noise; name : the workload's name; statement_delta : the delta at which the statement
    gives epsilon; groups : (m,) group of each query or None, with group_names; info :
    more JSON-able description for the sidecar (the domain, the groups); postprocessed_interval :
    ``(lower, upper, how)``, the post-processed values' own interval at ``level`` ((m,) each)
    and one phrase saying how it was made (e.g. exact intervals of unbiased values), or None; postprocessed,
    postprocessing : see :meth:`postprocess`; created_utc, tool_version : when and by what;
    noise : the sampler's account; fingerprint : :func:`ffu_cvx.model.fingerprint.of` the workload
    answered (a product workload's release), which everything derived from it checks;
    targets : (m,) the variance targets, or None; group_targets : each group's
    :class:`~ffu_cvx.model.accuracy.Target` (or the one target of ungrouped answers), in the words
    the statement and the ``target`` column use; noise : the account of the noise, Gaussian
    (:class:`ffu_cvx.release.noise.NoiseAccount`) or Laplace (:class:`LaplaceAccount`); shapes : each
    group's array shape (its answers in C order, :attr:`tables`), or (); marginals : a Fourier
    release's reconstructed marginals ``{attribute set: array}`` (consistent), or None.
    """

    answers: np.ndarray
    variances: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    level: float
    labels: tuple
    privacy_cost: float
    neighbours: str = privacy.ADD_REMOVE
    mechanism: str = "Gaussian mechanism"
    name: str = "workload"
    statement_delta: float = DEFAULT_DELTA
    groups: np.ndarray | None = None
    group_names: tuple = ()
    info: dict = field(default_factory=dict)
    postprocessed: np.ndarray | None = None
    postprocessed_interval: tuple | None = None
    postprocessing: tuple = ()
    created_utc: str = field(default_factory=utc_now)
    tool_version: str = __version__
    targets: np.ndarray | None = None
    group_targets: tuple = ()
    inputs: dict = field(default_factory=dict, repr=False, compare=False)
    noise: NoiseAccount | LaplaceAccount | None = None
    fingerprint: str | None = None
    shapes: tuple = ()
    marginals: dict | None = field(default=None, repr=False, compare=False)

    @classmethod
    def build(cls, answers, variances, level: float, **fields) -> "Release":
        """A Release of ``answers`` and ``variances`` (m,) with each answer's interval at ``level`` for its
        noise (``fields["noise"]``, :func:`half_width`); ``fields``: the other fields."""
        level = check_level(level)
        answers, variances = np.asarray(answers, dtype=float), np.asarray(variances, dtype=float)
        half = half_width(variances, level, fields.get("noise"))
        return cls(answers=answers, variances=variances, lower=answers - half, upper=answers + half, level=level,
                   **fields)

    @property
    def distribution(self) -> str:
        """The noise distribution: ``"gaussian"`` or ``"laplace"``."""
        return "laplace" if isinstance(self.noise, LaplaceAccount) else "gaussian"

    @property
    def m(self) -> int:
        """Number of answers."""
        return len(self.answers)

    @property
    def answers_digest(self) -> str:
        """``"sha256:<hex>"`` of the noisy answers (float64 bytes): what binds a derived product to this release."""
        return digest(np.ascontiguousarray(self.answers, dtype=float).tobytes())

    @property
    def std(self) -> np.ndarray:
        """(m,) standard deviations of the answers."""
        return np.sqrt(self.variances)

    def interval(self, level: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(lower, upper)`` (m,): each answer's two-sided interval at ``level`` (default :attr:`level`, the
        ``lower`` and ``upper`` fields) for the release's noise (:func:`half_width`)."""
        if level is None:
            return self.lower, self.upper
        half = half_width(self.variances, check_level(level), self.noise)
        return self.answers - half, self.answers + half

    @property
    def tables(self) -> tuple:
        """Each group's answers as an array of its shape (:attr:`shapes`, C order), e.g. a Fourier release's
        marginal or family answers per set; () when no shapes are recorded."""
        cuts = np.cumsum([math.prod(s) for s in self.shapes])[:-1]
        return tuple(a.reshape(s) for a, s in zip(np.split(self.answers, cuts), self.shapes))

    def epsilon(self, delta: float | None = None) -> float:
        """Smallest eps at which the release is (eps, delta)-DP (default: :attr:`statement_delta`): the
        noise's accounting (:attr:`noise`; Laplace: pure eps-DP at every delta), or the exact Gaussian
        mechanism's without one."""
        delta = self.statement_delta if delta is None else delta
        return super().epsilon(delta) if self.noise is None else self.noise.epsilon(delta)

    @property
    def rho(self) -> float:
        """rho of rho-zCDP, from the noise's account when there is one."""
        return super().rho if self.noise is None else self.noise.rho

    def statement(self, delta: float | None = None, ledger: dict | None = None) -> dict:
        """The privacy statement as JSON-able values (what the sidecar holds); ``ledger``: the charge's
        entry (:meth:`ffu_cvx.release.ledger.Ledger.charge`), stated with what remains. Under Laplace noise the
        statement is pure DP (``delta`` 0) and the PML leakage (:meth:`LaplaceAccount.text`)."""
        if isinstance(self.noise, LaplaceAccount):
            delta, eps = 0.0, self.epsilon()
            text = self.noise.text(self.m, self.name, self.neighbours, self.mechanism)
        else:
            delta = self.statement_delta if delta is None else validation.positive(delta, "delta")
            eps = self.epsilon(delta)
            text = statement_text(self.m, self.name, eps, delta, self.rho, self.privacy_cost, self.neighbours,
                                  self.mechanism, self.noise)
        post = None
        if self.postprocessing:
            post = {"steps": list(self.postprocessing), "column": "postprocessed",
                    "note": "post-processing of the released answers: it costs no privacy, but the postprocessed "
                            "values are no longer unbiased; " + (
                                "the lower and upper columns are the raw answers' exact intervals, "
                                "postprocessed_lower and postprocessed_upper the postprocessed values' own "
                                f"intervals ({self.postprocessed_interval[2]})" if self.postprocessed_interval
                                else "the intervals are those of the raw answers")}
            text += f" Post-processing (no privacy cost): {'; '.join(self.postprocessing)}."
        accuracy = None
        if self.targets is not None:
            accuracy = accuracy_summary(self.variances, self.targets, [t.kind for t in self.group_targets])
            text += " " + accuracy["text"]
        joint = None
        if self.joint_interval is not None:
            joint = {"columns": ["joint_lower", "joint_upper"],
                     "note": "simultaneous intervals of the answers under a joint target: all the answers of such a "
                             "table lie within them at once with probability at least its level (Šidák); lower and "
                             f"upper are each answer's own interval at {100 * self.level:g}%"}
            text += (" For the answers under a joint target, joint_lower and joint_upper hold for all of their table "
                     "at once at its level.")
        if ledger is not None:
            text += (f" Charged to the privacy ledger {ledger['ledger']} (entry {ledger['entry']}): with it, "
                     f"rho {ledger['spent_rho']:.6g} = eps {ledger['spent_epsilon']:.6g} at delta "
                     f"{ledger['budget_delta']:g} is spent of the budget eps {ledger['budget_epsilon']:g}; "
                     f"rho {ledger['remaining_rho']:.6g} remains.")
        return jsonio.jsonable({
            "epsilon": eps, "delta": delta, "rho_zcdp": self.rho, "privacy_cost": self.privacy_cost,
            "delta_m": self.delta_m, "neighbours": self.neighbours, "mechanism": self.mechanism,
            "workload": self.name, "queries": self.m, "confidence_level": self.level,
            "tool": {"name": TOOL, "version": self.tool_version}, "created_utc": self.created_utc,
            "post_processing": post, "accuracy": accuracy, "joint_intervals": joint, "text": text,
            "noise": None if self.noise is None else self.noise.as_dict(), "ledger": ledger,
            "workload_fingerprint": self.fingerprint, **self.info,
        })

    def postprocess(self, *, nonnegative: bool = False, round: bool = False) -> "Release":
        """A copy with a ``postprocessed`` column: answers clipped at 0 and/or rounded to integers.

        Post-processing costs no privacy; the raw ``answers`` (unbiased, with their
        intervals) stay as they are, and the statement lists the steps.
        """
        values = np.asarray(self.answers, dtype=float).copy()
        steps = []
        if nonnegative:
            values = np.maximum(values, 0.0)
            steps.append("negative answers set to 0 (non-negativity)")
        if round:
            values = np.round(values)
            steps.append("answers rounded to the nearest integer")
        if not steps:
            raise ValueError("`postprocess` needs nonnegative=True and/or round=True")
        return self.derived(values, steps, made_from=(self.answers_digest, self.fingerprint))

    def check_derived(self, made_from: tuple) -> None:
        """``ValueError`` unless ``made_from`` = ``(answers digest, workload fingerprint)`` is this release's:
        a derived product (post-processing, consistent tables) goes only beside the release it was made from."""
        digest, fingerprint_ = made_from
        if digest != self.answers_digest:
            raise ValueError(f"this product was made from the release with answers {str(digest)[:19]}..., not from "
                             f"this one ({self.answers_digest[:19]}...): derived tables go only beside their own "
                             "release")
        if fingerprint_ != self.fingerprint:
            raise ValueError(f"this product is of the workload {str(fingerprint_)[:20]}..., the release answers "
                             f"{str(self.fingerprint)[:20]}...: derived tables go only beside their own release")

    def derived(self, values, steps, *, made_from: tuple, interval: tuple | None = None) -> "Release":
        """A copy with ``values`` (m,) as its ``postprocessed`` column, ``steps`` in its statement and
        ``interval`` = ``(lower (m,), upper (m,), how)`` as their own; refused unless made from this release
        (:meth:`check_derived`)."""
        self.check_derived(made_from)
        values = np.asarray(values, dtype=float)
        if values.shape != (self.m,):
            raise ValueError(f"derived values have shape {values.shape}, the release {self.m} answers")
        return dataclasses.replace(self, postprocessed=values, postprocessing=tuple(steps),
                                   postprocessed_interval=interval)

    def write_derived(self, path, data: bytes, what: str, made_from: tuple, overwrite: bool = False) -> Path:
        """Write a derived product's file ``path`` atomically: checked as :meth:`check_derived`, never over an
        input, and never onto a release's statement (``*.privacy.json``) or answers (a file with a statement
        beside it), ``overwrite`` or not."""
        self.check_derived(made_from)
        path = check_output(path, what, self.inputs, overwrite)
        if path.name.endswith(SIDECAR_SUFFIX) or sidecar_path(path).exists():
            raise ValueError(f"{what} {path} would replace a release's "
                             f"{'privacy statement' if path.name.endswith(SIDECAR_SUFFIX) else 'answers'}; "
                             "choose another file (overwrite=True never replaces a release's files)")
        return atomic_write_bytes(path, data)

    def _target_index(self) -> np.ndarray | None:
        """(m,) each answer's index into :attr:`group_targets` (its group's, or the one target of
        ungrouped answers), or None when the targets are not stated per group."""
        if self.groups is not None and self.group_targets:
            return np.asarray(self.groups)
        if self.groups is None and len(self.group_targets) == 1:
            return np.zeros(self.m, dtype=int)
        return None

    @property
    def _stated(self) -> bool:
        """Whether some target is a margin (then the CSV states each query's target in words)."""
        return self._target_index() is not None and any(t.kind != "variance" for t in self.group_targets)

    @property
    def joint_interval(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(lower, upper)`` (m,): for the answers under a joint target, intervals that all hold at once with
        probability at least its level (each at its Šidák level, :attr:`ffu_cvx.model.accuracy.Target.query_level`);
        NaN for the other answers. None when no target is joint."""
        index = self._target_index()
        if index is None or not any(t.kind == "joint" for t in self.group_targets):
            return None
        half = np.full(self.m, np.nan)
        for g, goal in enumerate(self.group_targets):
            if goal.kind == "joint":
                rows = index == g
                half[rows] = goal.half_width(self.variances[rows])
        return self.answers - half, self.answers + half

    def _columns(self) -> list:
        joint = self.joint_interval is not None
        present = {"group": self.groups is not None, "postprocessed": self.postprocessed is not None,
                   "target": self._stated, "joint_lower": joint, "joint_upper": joint,
                   "postprocessed_lower": self.postprocessed_interval is not None,
                   "postprocessed_upper": self.postprocessed_interval is not None}
        return [c for c in COLUMNS if present.get(c, True)]

    def csv_bytes(self) -> bytes:
        """The answers CSV: one row per query (see :data:`COLUMNS`), numbers written exactly (``repr``)."""
        cols = self._columns()
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(cols)
        labels = iter(self.labels) if len(self.labels) == self.m else iter(("",) * self.m)
        std, index, stated, joint = self.std, self._target_index(), self._stated, self.joint_interval
        for j, label in zip(range(self.m), labels):
            row = {"query": j, "label": label, "answer": self.answers[j], "variance": self.variances[j],
                   "std": std[j], "lower": self.lower[j], "upper": self.upper[j]}
            if self.groups is not None:
                g = int(self.groups[j])
                row["group"] = self.group_names[g] if self.group_names else g
            if stated:
                row["target"] = self.group_targets[index[j]].column()
            if joint is not None:
                inside = not np.isnan(joint[0][j])
                row["joint_lower"], row["joint_upper"] = (joint[0][j], joint[1][j]) if inside else ("", "")
            if self.postprocessed is not None:
                row["postprocessed"] = self.postprocessed[j]
            if self.postprocessed_interval is not None:
                row["postprocessed_lower"] = self.postprocessed_interval[0][j]
                row["postprocessed_upper"] = self.postprocessed_interval[1][j]
            w.writerow([repr(float(row[c])) if isinstance(row[c], (float, np.floating)) else row[c] for c in cols])
        return buf.getvalue().encode()

    def statement_bytes(self, answers_path=None, delta: float | None = None, answers: bytes | None = None,
                        ledger: dict | None = None) -> bytes:
        """The sidecar JSON: the statement, the answers file it belongs to and that file's digest."""
        doc = {"answers_file": None if answers_path is None else Path(answers_path).name,
               "answers_sha256": digest(self.csv_bytes() if answers is None else answers),
               **self.statement(delta, ledger)}
        return (jsonio.dumps(doc, indent=1) + "\n").encode()

    @staticmethod
    def check_paths(path, inputs: dict | None = None, overwrite: bool = False) -> tuple[Path, Path]:
        """``(answers path, statement path)`` if a release may be written there (see :meth:`file_group`)."""
        path = Path(path)
        if path.name.endswith(SIDECAR_SUFFIX):
            raise ValueError(f"answers file {path} has the name of a privacy statement ({SIDECAR_SUFFIX}); "
                             "give the answers a name such as answers.csv")
        side = sidecar_path(path)
        check_output(path, "answers file", inputs, overwrite)
        check_output(side, "privacy statement", inputs, overwrite)
        return path, side

    def file_group(self, path, delta: float | None = None, overwrite: bool = False) -> list[tuple[Path, bytes]]:
        """The answers CSV at ``path`` and its statement, as ``[(path, bytes), (sidecar, bytes)]``, checked.

        Refused before anything is written (``ValueError`` naming the path): a folder; a
        name of a privacy statement (``*.privacy.json``, so no release overwrites
        another's statement); one of :attr:`inputs`; a read-only file; an existing file
        unless ``overwrite``.
        """
        path, side = self.check_paths(path, self.inputs, overwrite)
        answers = self.csv_bytes()
        return [(path, answers), (side, self.statement_bytes(path, delta, answers))]

    def to_csv(self, path, delta: float | None = None, overwrite: bool = False, ledger=None,
               written: list | None = None) -> tuple[Path, Path]:
        """Write the answers CSV to ``path`` and the statement to :func:`sidecar_path` beside it.

        The two are one unit (see the module docstring and :meth:`file_group` for what is
        refused); the statement records the answers' digest (:func:`verify`). ``ledger``
        (a path or :class:`ffu_cvx.release.ledger.Ledger`): the release is charged to it, or refused
        before anything is written if it does not fit the budget; the charge is appended
        as the files are renamed into place, and the statement says what remains. ``written``:
        a list the paths are appended to once in place. Returns both paths.
        """
        if ledger is None:
            path, side = atomic_write_group(self.file_group(path, delta, overwrite), written)
            return path, side
        book = ledger if isinstance(ledger, Ledger) else Ledger.open(ledger)
        path, side = self.check_paths(path, {**self.inputs, "privacy ledger": book.path}, overwrite)
        answers = self.csv_bytes()
        with book.charge(self.rho, self.name, path.name, digest(answers)) as (entry, commit):
            atomic_write_group([(path, answers), (side, self.statement_bytes(path, delta, answers, entry))],
                               written, before_rename=commit)
        return path, side

    def to_frame(self):
        """A pandas DataFrame of the answers CSV's columns; the statement is in ``frame.attrs["privacy"]``."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("Release.to_frame needs pandas: pip install pandas (or ffu-cvx[pandas])") from None
        values = {"query": np.arange(self.m), "label": list(self.labels) if len(self.labels) == self.m else [""] * self.m,
                  "answer": self.answers, "variance": self.variances, "std": self.std, "lower": self.lower,
                  "upper": self.upper}
        if self.groups is not None:
            values["group"] = [self.group_names[g] for g in self.groups] if self.group_names else self.groups
        if self._stated:
            values["target"] = [self.group_targets[g].column() for g in self._target_index()]
        if self.joint_interval is not None:
            values["joint_lower"], values["joint_upper"] = self.joint_interval
        if self.postprocessed is not None:
            values["postprocessed"] = self.postprocessed
        if self.postprocessed_interval is not None:
            values["postprocessed_lower"], values["postprocessed_upper"] = self.postprocessed_interval[:2]
        frame = pd.DataFrame({c: values[c] for c in self._columns()})
        frame.attrs["privacy"] = self.statement()
        return frame


def verify(path) -> dict:
    """The privacy statement of the answers file ``path``, checked to be its own.

    Reads :func:`sidecar_path` of ``path`` and checks that it names this answers file and
    records the SHA-256 digest of its bytes; ``ValueError`` naming both files otherwise.
    """
    path = Path(path)
    side = sidecar_path(path)
    try:
        answers, doc = path.read_bytes(), json.loads(side.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot verify answers {path} against {side}: {exc}") from None
    if not isinstance(doc, dict) or doc.get("answers_file") != path.name:
        raise ValueError(f"privacy statement {side} does not belong to answers file {path.name}")
    if doc.get("answers_sha256") != digest(answers):
        raise ValueError(f"answers file {path} is not the one its privacy statement {side} describes "
                         "(digest differs): the pair is not one release")
    check_statement(doc, side)
    return doc


#: Relative agreement required between a statement's privacy numbers and those recomputed from its mechanism.
STATEMENT_RTOL = 1e-9


def check_statement(doc: dict, where="the privacy statement") -> None:
    """Recompute a statement's privacy numbers from what it records of the mechanism and the noise.

    Gaussian noise: the sampler's sensitivity must be ``sqrt(privacy_cost)``; ``rho_zcdp``,
    ``delta_m`` and ``epsilon`` at the stated ``delta`` what its accounting gives, and the text
    must state that epsilon and rho. Laplace noise (:class:`LaplaceAccount`): ``delta`` 0,
    ``epsilon`` = ``delta_m`` = sensitivity / b, ``privacy_cost`` its square, ``rho_zcdp`` half of
    that, the leakage what :meth:`LaplaceAccount.check` recomputes, and the text must state the
    epsilon and the leakage. ``ValueError`` naming the first field that disagrees.
    """
    record = doc.get("noise")
    laplace = isinstance(record, dict) and record.get("distribution") == LaplaceAccount.distribution
    noise = LaplaceAccount.from_dict(record) if laplace else NoiseAccount.from_dict(record)
    try:
        cost, delta = jsonio.number(doc["privacy_cost"]), float(doc["delta"])
        stated = {k: jsonio.number(doc[k]) for k in ("epsilon", "rho_zcdp", "delta_m")}
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{where} lacks a privacy number: {exc!r}") from None
    if laplace:
        noise.check(doc.get("neighbours"), where)
        eps = noise.epsilon()
        expect = {"epsilon": eps, "rho_zcdp": noise.rho, "delta_m": eps, "privacy_cost": eps ** 2}
        stated["privacy_cost"] = cost
        phrases = noise.phrases()
        if delta != 0:
            raise ValueError(f"{where}: delta = {delta!r} under Laplace noise, which is pure DP (delta 0): the "
                             "statement was edited")
    else:
        expect = {"epsilon": noise.epsilon(delta), "rho_zcdp": noise.rho, "delta_m": noise.sensitivity}
        if not math.isclose(noise.sensitivity, math.sqrt(cost), rel_tol=STATEMENT_RTOL):
            raise ValueError(f"{where}: privacy_cost {cost!r} is not the sampler's sensitivity^2 "
                             f"({noise.sensitivity!r}^2): the statement was edited")
        if not noise.sensitivity_bound >= noise.sensitivity:
            raise ValueError(f"{where}: the accounted sensitivity {noise.sensitivity_bound!r} is below the "
                             f"mechanism's {noise.sensitivity!r}: the statement was edited")
        phrases = [f"({expect['epsilon']:.6g}, {delta:g})", f"{expect['rho_zcdp']:.6g}-zCDP"]
    for key, value in expect.items():
        if not (math.isclose(stated[key], value, rel_tol=STATEMENT_RTOL) or (math.isinf(value)
                                                                            and math.isnan(stated[key]))):
            raise ValueError(f"{where}: {key} = {stated[key]!r} is not the {value!r} that its mechanism and "
                             "noise give: the statement was edited")
    text = str(doc.get("text", ""))
    if not all(phrase in text for phrase in phrases):
        raise ValueError(f"{where}: its text does not state the privacy numbers its record gives: the statement "
                         "was edited")
