"""A privacy ledger: the budget a publisher sets for one data set and every release charged to it.

Release layer, its bottom (below the solvers): imports ``model`` (``privacy`` (zCDP conversions),
``validation``) and ``io`` (``jsonio``, ``files`` (atomic writes and the lock)).

A ledger is a JSON Lines file: a header (the data set, the budget (eps, delta) and the rho
it allows) and one line per release charged (what, when, the answers file and its digest,
rho-zCDP, the eps of that release alone at the ledger's delta). Releases compose in zCDP:
the spent rho is the sum of the charges', converted to (eps, delta) at the ledger's delta
by OpenDP's conversion (:func:`ffu_cvx.model.privacy.zcdp_epsilon`); a charge that would take
the spent rho past the budget's is refused before anything is written.

Every line records the SHA-256 digest of the line before it and of itself: an edited,
removed or reordered line breaks the chain and the ledger refuses to load, naming the
line (tamper-evident, not tamper-proof: whoever can write the file can also recompute the
chain, which is why each release's statement records the digest of its own entry).
Writers take turns under an exclusive lock on ``<ledger>.lock`` and replace the file
atomically, so concurrent or interrupted releases never lose or double-count a charge:
:meth:`Ledger.charge` holds the lock while the release's files are renamed into place
and appends the charge just before the renames, with SIGINT and SIGTERM held back.
"""

from __future__ import annotations

import hashlib
import json
import math
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..io import jsonio
from ..io.files import atomic_write_bytes, locked
from ..model import privacy
from ..model.validation import positive

__all__ = ["Ledger", "Charge", "BUDGET_RTOL"]

#: Relative slack under which a charge still fits the budget (rounding of the conversions).
BUDGET_RTOL = 1e-9
FORMAT = "ffu-cvx privacy ledger"


def _digest(entry: dict) -> str:
    body = {k: v for k, v in entry.items() if k != "digest"}
    return "sha256:" + hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _sealed(entry: dict, prev: str | None) -> dict:
    out = dict(entry, prev=prev)
    out["digest"] = _digest(out)
    return out


@dataclass(frozen=True)
class Charge:
    """One release charged to a ledger: ``index`` (1, 2, ...), ``what`` (the workload), ``answers_file``,
    ``answers_sha256``, ``rho``, ``epsilon`` (that release alone at the ledger's delta), ``created_utc``,
    ``digest`` (of its ledger line)."""

    index: int
    what: str
    answers_file: str
    answers_sha256: str
    rho: float
    epsilon: float
    created_utc: str
    digest: str


class Ledger:
    """The ledger file at ``path`` (read and checked by :meth:`open`, made by :meth:`create`).

    Attributes: ``path``, ``dataset``, ``epsilon`` and ``delta`` (the budget), ``rho_budget``
    (the largest total rho within it), ``charges`` (tuple of :class:`Charge`).
    """

    def __init__(self, path: Path, header: dict, charges: tuple):
        self.path, self.header, self.charges = path, header, charges
        self.dataset = str(header["dataset"])
        self.epsilon, self.delta = float(header["epsilon"]), float(header["delta"])
        self.rho_budget = float(header["rho_budget"])

    # ------------------------------------------------------------------ files
    @classmethod
    def create(cls, path, epsilon: float, delta: float, dataset: str = "") -> "Ledger":
        """A new ledger at ``path`` with the budget (epsilon, delta); an existing file is never replaced."""
        path = Path(path)
        epsilon, delta = positive(epsilon, "epsilon"), positive(delta, "delta")
        if not delta < 1:
            raise ValueError(f"`delta` must be in (0, 1), got {delta!r}")
        rho = privacy.zcdp_max_rho(epsilon, delta)
        header = _sealed({"format": FORMAT, "version": 1, "dataset": dataset or path.stem, "epsilon": epsilon,
                          "delta": delta, "rho_budget": rho, "created_utc": _now()}, None)
        with locked(_lock_path(path)):
            if path.exists():
                raise ValueError(f"ledger {path} exists; it is left as it is (a ledger is created once)")
            atomic_write_bytes(path, _lines([header]))
        return cls(path, header, ())

    @classmethod
    def open(cls, path) -> "Ledger":
        """The ledger at ``path``, its chain of digests checked (``ValueError`` naming the first bad line)."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read ledger {path}: {exc.strerror or exc}") from None
        entries, prev = [], None
        for n, line in enumerate(text.splitlines(), start=1):
            try:
                entry = json.loads(line)
            except ValueError:
                raise ValueError(f"ledger {path} line {n} is not a ledger entry (not JSON): the file was edited or "
                                 "damaged") from None
            if not isinstance(entry, dict) or entry.get("prev") != prev or entry.get("digest") != _digest(entry):
                raise ValueError(f"ledger {path} line {n} does not match its digest chain: the ledger was edited; "
                                 "its charges cannot be trusted")
            entries.append(entry)
            prev = entry["digest"]
        if not entries or entries[0].get("format") != FORMAT:
            raise ValueError(f"{path} is not an {FORMAT} (no header line)")
        charges = tuple(Charge(**{k: e[k] for k in Charge.__dataclass_fields__}) for e in entries[1:])
        if [c.index for c in charges] != list(range(1, len(charges) + 1)):
            raise ValueError(f"ledger {path}: its charges are not numbered 1..{len(charges)}: the ledger was edited")
        return cls(path, entries[0], charges)

    # ------------------------------------------------------------------ numbers
    @property
    def spent_rho(self) -> float:
        """rho-zCDP of every charge composed."""
        return math.fsum(c.rho for c in self.charges)

    def spent_epsilon(self, rho: float | None = None) -> float:
        """eps at the ledger's delta of ``rho`` (default: what is spent; 0 when nothing is)."""
        rho = self.spent_rho if rho is None else rho
        return privacy.zcdp_epsilon(rho, self.delta) if rho > 0 else 0.0

    @property
    def remaining_rho(self) -> float:
        return max(self.rho_budget - self.spent_rho, 0.0)

    def fits(self, rho: float) -> bool:
        """Whether a release of ``rho`` fits in what remains."""
        return self.spent_rho + rho <= self.rho_budget * (1 + BUDGET_RTOL)

    # ------------------------------------------------------------------ charging
    @contextmanager
    def charge(self, rho: float, what: str, answers_file: str, answers_sha256: str):
        """Reserve a charge of ``rho`` under the ledger's lock; yields ``(entry, commit)``.

        The ledger is read again under the lock (other writers' charges count) and the
        charge refused (``ValueError``, nothing written) if it does not fit. ``entry`` (a
        dict) says what the release's statement records; ``commit()`` appends the charge
        (call it where the release's files are renamed into place, see
        :func:`ffu_cvx.io.files.atomic_write_group`). The lock is held until the block ends.
        """
        rho = positive(rho, "rho")
        with locked(_lock_path(self.path)):
            now = Ledger.open(self.path)
            if not now.fits(rho):
                raise ValueError(
                    f"ledger {self.path}: this release (rho = {rho:.6g}, eps = {now.spent_epsilon(rho):.4g} alone at "
                    f"delta {now.delta:g}) does not fit: spent rho {now.spent_rho:.6g} (eps {now.spent_epsilon():.4g}) "
                    f"of the budget rho {now.rho_budget:.6g} (eps {now.epsilon:g}, delta {now.delta:g}); nothing "
                    "was written")
            last = now.charges[-1].digest if now.charges else now.header["digest"]
            line = _sealed({"index": len(now.charges) + 1, "what": what, "answers_file": answers_file,
                            "answers_sha256": answers_sha256, "rho": rho, "epsilon": now.spent_epsilon(rho),
                            "created_utc": _now()}, last)
            spent = now.spent_rho + rho
            entry = {"ledger": self.path.name, "dataset": now.dataset, "entry": line["index"],
                     "entry_digest": line["digest"], "spent_rho": spent, "spent_epsilon": now.spent_epsilon(spent),
                     "budget_epsilon": now.epsilon, "budget_delta": now.delta,
                     "remaining_rho": max(now.rho_budget - spent, 0.0)}
            text = self.path.read_bytes()

            def commit() -> None:
                atomic_write_bytes(self.path, text + _lines([line]))

            yield entry, commit

    def table(self) -> list[dict]:
        """One row per charge: index, date, what, answers file, rho, eps alone, eps spent after it (at delta)."""
        rows, spent = [], 0.0
        for c in self.charges:
            spent += c.rho
            rows.append({"entry": c.index, "created_utc": c.created_utc, "what": c.what, "answers_file": c.answers_file,
                         "rho": c.rho, "epsilon": c.epsilon, "spent_epsilon": self.spent_epsilon(spent)})
        return rows

    def summary(self) -> str:
        """What is spent and what remains, in one sentence."""
        return (f"ledger {self.path.name} ({self.dataset!r}): {len(self.charges)} releases, spent rho "
                f"{self.spent_rho:.6g} = eps {self.spent_epsilon():.6g} at delta {self.delta:g}, of the budget eps "
                f"{self.epsilon:g} (rho {self.rho_budget:.6g}); remaining rho {self.remaining_rho:.6g}")


def _lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def _lines(entries) -> bytes:
    return "".join(jsonio.dumps(e) + "\n" for e in entries).encode()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
