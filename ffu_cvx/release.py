"""A self-describing release: noisy answers, their intervals and labels, and the privacy statement.

Mechanisms layer (its bottom): imports numpy, scipy.special, ``privacy``, ``validation``,
``jsonio``, ``files`` and ``version`` (pandas only inside :meth:`Release.to_frame`); :mod:`ffu_cvx.mechanism` and :mod:`ffu_cvx.product_release`
build a :class:`Release`.

A Release knows what protects it: the privacy cost ``alpha = Delta_M^2`` of the
mechanism that drew its noise, hence (eps, delta) at any delta (exact Gaussian
mechanism, :meth:`Release.epsilon`) and rho-zCDP, the neighbouring relation, the
mechanism, the tool's version and the time of the release. :meth:`Release.to_csv`
writes the answers CSV and, beside it, a JSON sidecar (:func:`sidecar_path`) holding that
statement, each atomically. Post-processing (:meth:`Release.postprocess`: non-negativity,
rounding) never touches the answers themselves: it adds a ``postprocessed`` column, and
the statement lists the steps as post-processing (free of privacy cost, but no longer
unbiased, and the intervals are those of the raw answers).
"""

from __future__ import annotations

import csv
import dataclasses
import io
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from scipy import special

from . import jsonio, privacy, validation
from .files import atomic_write_bytes
from .version import __version__

__all__ = ["Release", "DEFAULT_DELTA", "TOOL", "sidecar_path", "statement_text", "check_level", "z_value",
           "generator", "utc_now"]

#: delta at which a statement gives epsilon unless told otherwise.
DEFAULT_DELTA = 1e-6
#: Name of the tool in every statement.
TOOL = "ffu-cvx"
#: Suffix of the privacy statement written beside an answers file.
SIDECAR_SUFFIX = ".privacy.json"
#: The answers CSV's columns, in order (``group`` and ``postprocessed`` only when present).
COLUMNS = ("query", "group", "label", "answer", "variance", "std", "lower", "upper", "postprocessed")


def check_level(level) -> float:
    """A confidence level in (0, 1)."""
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"`level` must be a confidence level in (0, 1), e.g. 0.95, got {level!r}")
    return level


def z_value(level: float) -> float:
    """Two-sided standard normal quantile for confidence ``level``."""
    return float(special.ndtri(0.5 + 0.5 * level))


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


def statement_text(m: int, name: str, epsilon: float, delta: float, rho: float, alpha: float, neighbours: str,
                   mechanism: str) -> str:
    """One paragraph: what releasing ``m`` answers of ``name`` satisfies, and why."""
    return (f"Releasing the {m} answers of {name!r} satisfies ({epsilon:.6g}, {delta:g})-differential privacy and "
            f"{rho:.6g}-zCDP (privacy cost alpha = Delta_M^2 = {alpha:.6g}; neighbours: {neighbours}, i.e. "
            f"histograms differing by one in one cell; {mechanism}; exact Gaussian mechanism, Balle and Wang 2018).")


@dataclass(frozen=True)
class Release(privacy.GaussianPrivacy):
    """Noisy workload answers from one run of a mechanism, with their privacy statement.

    answers, variances, lower, upper : (m,) noisy answers, their exact variances and the
    two-sided confidence interval at ``level`` (``answers -/+ z sqrt(variances)``);
    labels : (m,) query labels (a sequence, possibly lazy; may be empty); privacy_cost :
    alpha of the mechanism that drew the noise; neighbours : the neighbouring relation
    its privacy holds for (:data:`ffu_cvx.privacy.ADD_REMOVE`); mechanism : what drew the
    noise; name : the workload's name; statement_delta : the delta at which the statement
    gives epsilon; groups : (m,) group of each query or None, with group_names; info :
    more JSON-able description for the sidecar (the domain, the groups); postprocessed,
    postprocessing : see :meth:`postprocess`; created_utc, tool_version : when and by what.
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
    postprocessing: tuple = ()
    created_utc: str = field(default_factory=utc_now)
    tool_version: str = __version__

    @property
    def m(self) -> int:
        """Number of answers."""
        return len(self.answers)

    @property
    def std(self) -> np.ndarray:
        """(m,) standard deviations of the answers."""
        return np.sqrt(self.variances)

    def epsilon(self, delta: float | None = None) -> float:
        """Smallest eps at which the release is (eps, delta)-DP (default: :attr:`statement_delta`)."""
        return super().epsilon(self.statement_delta if delta is None else delta)

    def statement(self, delta: float | None = None) -> dict:
        """The privacy statement as JSON-able values (what the sidecar holds)."""
        delta = self.statement_delta if delta is None else validation.positive(delta, "delta")
        eps = self.epsilon(delta)
        text = statement_text(self.m, self.name, eps, delta, self.rho, self.privacy_cost, self.neighbours,
                              self.mechanism)
        post = None
        if self.postprocessing:
            post = {"steps": list(self.postprocessing), "column": "postprocessed",
                    "note": "post-processing of the released answers: it costs no privacy, but the postprocessed "
                            "values are no longer unbiased and the intervals are those of the raw answers"}
            text += f" Post-processing (no privacy cost): {', '.join(self.postprocessing)}."
        return jsonio.jsonable({
            "epsilon": eps, "delta": delta, "rho_zcdp": self.rho, "privacy_cost": self.privacy_cost,
            "delta_m": self.delta_m, "neighbours": self.neighbours, "mechanism": self.mechanism,
            "workload": self.name, "queries": self.m, "confidence_level": self.level,
            "tool": {"name": TOOL, "version": self.tool_version}, "created_utc": self.created_utc,
            "post_processing": post, "text": text, **self.info,
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
        return dataclasses.replace(self, postprocessed=values, postprocessing=tuple(steps))

    def _columns(self) -> list:
        present = {"group": self.groups is not None, "postprocessed": self.postprocessed is not None}
        return [c for c in COLUMNS if present.get(c, True)]

    def csv_bytes(self) -> bytes:
        """The answers CSV: one row per query (see :data:`COLUMNS`), numbers written exactly (``repr``)."""
        cols = self._columns()
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(cols)
        labels = iter(self.labels) if len(self.labels) == self.m else iter(("",) * self.m)
        std = self.std
        for j, label in zip(range(self.m), labels):
            row = {"query": j, "label": label, "answer": self.answers[j], "variance": self.variances[j],
                   "std": std[j], "lower": self.lower[j], "upper": self.upper[j]}
            if self.groups is not None:
                g = int(self.groups[j])
                row["group"] = self.group_names[g] if self.group_names else g
            if self.postprocessed is not None:
                row["postprocessed"] = self.postprocessed[j]
            w.writerow([repr(float(row[c])) if isinstance(row[c], (float, np.floating)) else row[c] for c in cols])
        return buf.getvalue().encode()

    def statement_bytes(self, answers_path=None, delta: float | None = None) -> bytes:
        """The sidecar JSON (the statement, and the answers file it belongs to)."""
        doc = {"answers_file": None if answers_path is None else Path(answers_path).name, **self.statement(delta)}
        return (jsonio.dumps(doc, indent=1) + "\n").encode()

    def to_csv(self, path, delta: float | None = None) -> tuple[Path, Path]:
        """Write the answers CSV to ``path`` and the statement to :func:`sidecar_path` beside it.

        Each file is written atomically (:mod:`ffu_cvx.files`), the statement first, so an
        answers file never appears without the statement that goes with it. Returns both paths.
        """
        path = Path(path)
        side = sidecar_path(path)
        atomic_write_bytes(side, self.statement_bytes(path, delta))
        atomic_write_bytes(path, self.csv_bytes())
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
        if self.postprocessed is not None:
            values["postprocessed"] = self.postprocessed
        frame = pd.DataFrame({c: values[c] for c in self._columns()})
        frame.attrs["privacy"] = self.statement()
        return frame
