"""Noise samplers for releases: a vetted discrete Gaussian on a lattice (default) or numpy's floats.

Release layer, its bottom (below the solvers): imports numpy, ``model.privacy`` and ``model.validation``
(OpenDP only inside :class:`OpenDPSampler`), so every release path (dense, product, Fourier) can use it.

Every Gaussian mechanism here releases its answers as a linear image of

    u~ = A x + N(0, I),        A (n, d) the *whitened* strategy, Delta = max_i ||A e_i||_2,

(``A = C^{-1} B`` with ``C`` a Cholesky factor of the noise covariance; the answers are
``L C u~``), so a sampler only needs to perturb one vector ``u = A x`` (n,) of L2
sensitivity ``Delta`` with unit-variance noise. Two samplers do:

- :class:`OpenDPSampler` (the default): ``u`` is rounded to the lattice ``gamma Z^n``
  (``gamma`` a power of two at most ``lattice_rtol * Delta / sqrt(n)``) and OpenDP's exact
  discrete Gaussian (``opendp.measurements.make_gaussian`` on integer vectors, scale
  ``1 / gamma``) is added to the integers: the output is exactly an integer vector, and
  everything after (the scaling by ``gamma``, the map to the answers, the CSV's decimal
  digits) is post-processing, so no floating-point artefact of the noise can reveal the
  data. The rounding, and the allowance for the float error of ``u`` itself
  (:func:`whiten`), add ``gamma sqrt(n) + FLOAT_RTOL Delta`` to the sensitivity; the privacy
  numbers are OpenDP's own map (rho-zCDP) and OpenDP's conversion to (eps, delta), which
  is more conservative than the exact continuous Gaussian's (by 5-8 % in eps).
- :class:`NumpySampler` (by explicit choice, or implied by a seed): ``u + standard_normal``
  in floating point; reproducible from a seed, fast, exact continuous-Gaussian accounting,
  but not protected against floating-point attacks. Its statement says so in words.

:func:`check_resolution` refuses inputs at which an answer's float spacing would swallow
a visible part of its noise, before anything is drawn.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..model import privacy
from ..model.validation import positive

__all__ = ["Whitened", "whiten", "NoiseAccount", "OpenDPSampler", "NumpySampler", "SAMPLERS", "sampler_for",
           "inflation", "release_epsilon", "release_max_delta_m", "check_resolution",
           "RESOLUTION", "FLOAT_RTOL", "LATTICE_RTOL"]

#: Largest float error of the whitened answers (both neighbours together), relative to the sensitivity;
#: every account adds it to the sensitivity.
FLOAT_RTOL = 1e-5
#: Largest float spacing of an answer, as a fraction of its noise standard deviation, that a release accepts.
RESOLUTION = 1e-3
#: Largest absolute lattice integer (OpenDP adds the noise in int64; headroom for the noise itself).
INT_LIMIT = 2 ** 61
#: The samplers by name.
SAMPLERS = ("opendp", "numpy")
#: Default largest lattice rounding of OpenDP's sampler, relative to the sensitivity.
LATTICE_RTOL = 1e-6


@dataclass(frozen=True)
class Whitened:
    """The whitened strategy answers ``u = A x`` (n,) of one release, within :data:`FLOAT_RTOL` of exact.

    values : (n,) float64 or longdouble; sensitivity : ``Delta``, the L2 sensitivity of the
    exact ``A x`` (the square root of the mechanism's privacy cost). Made by :func:`whiten`.
    """

    values: np.ndarray
    sensitivity: float

    @property
    def n(self) -> int:
        return int(np.asarray(self.values).size)


def whiten(compute, sensitivity: float) -> Whitened:
    """The whitened answers ``compute(dtype)`` gives, in float64 or, where its error could pass the
    allowance, in long double; refused where even that could.

    compute : ``dtype -> (values (n,), abs_products (n,), depth)``: the answers computed in
    ``dtype``, the same products of absolute values (float64) and the longest chain of
    sums behind an entry, so that ``|fl(u) - u| <= (depth + 2) eps/2 abs_products``
    entrywise. The allowance is ``FLOAT_RTOL / 2 * sensitivity`` on the L2 norm of the
    error (two neighbours' errors together stay within ``FLOAT_RTOL * sensitivity``, which
    every account adds): a public constant, so nothing in a statement depends on the data.
    Whitened answers too large for their unit noise are refused (:func:`check_resolution`).
    """
    dm = positive(sensitivity, "sensitivity")
    bound = math.inf
    for dtype in (np.float64, np.longdouble):
        values, products, depth = compute(dtype)
        bound = (depth + 2) * float(np.finfo(dtype).eps) / 2 * float(np.linalg.norm(products)) * (1 + 1e-9)
        if bound <= FLOAT_RTOL / 2 * dm:
            check_resolution(values, 1.0, lambda j: "a whitened strategy answer")
            return Whitened(np.asarray(values), dm)
    raise ValueError(f"the counts are too large for the whitened answers to be computed within {FLOAT_RTOL:g} of "
                     f"the sensitivity {dm:.6g} (float error bound {bound:.3g}, even in long double): publish them "
                     "in coarser units")


@dataclass(frozen=True)
class NoiseAccount:
    """What drew a release's noise and the privacy it gives (the statement's ``noise`` entry).

    sampler : a name in :data:`SAMPLERS`; text : the sampler in words; dimension : n, the
    whitened answers perturbed; lattice : ``gamma`` (0 for numpy's floats); sensitivity :
    ``Delta`` of the mechanism; sensitivity_bound : what the accounting uses (``Delta`` plus
    the lattice rounding and :data:`FLOAT_RTOL` of it for the float error of ``u``: public
    numbers only); accounting : ``"opendp-zcdp"``
    (OpenDP's privacy map and its zCDP-to-(eps, delta) conversion) or ``"exact-gaussian"``
    (the continuous Gaussian's exact curve).
    """

    sampler: str
    text: str
    dimension: int
    lattice: float
    sensitivity: float
    sensitivity_bound: float
    accounting: str

    @property
    def rho(self) -> float:
        """rho of rho-zCDP: ``sensitivity_bound^2 / 2`` (unit noise)."""
        return privacy.zcdp_rho(self.sensitivity_bound)

    def epsilon(self, delta: float) -> float:
        """Smallest eps at which the release is (eps, delta)-DP under this accounting."""
        if self.accounting == "exact-gaussian":
            return privacy.gaussian_epsilon(delta, self.sensitivity_bound)
        return privacy.zcdp_epsilon(self.rho, delta)

    def as_dict(self) -> dict:
        return {"sampler": self.sampler, "text": self.text, "dimension": self.dimension, "lattice": self.lattice,
                "sensitivity": self.sensitivity, "sensitivity_bound": self.sensitivity_bound,
                "accounting": self.accounting}

    @classmethod
    def from_dict(cls, doc) -> "NoiseAccount":
        """The account a statement records (``ValueError`` naming a missing or bad field)."""
        if not isinstance(doc, dict):
            raise ValueError("the statement has no `noise` record (which sampler drew the noise)")
        try:
            out = cls(str(doc["sampler"]), str(doc["text"]), int(doc["dimension"]), float(doc["lattice"]),
                      float(doc["sensitivity"]), float(doc["sensitivity_bound"]), str(doc["accounting"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"the statement's `noise` record is incomplete or malformed: {exc!r}") from None
        if out.sampler not in SAMPLERS or out.accounting not in ("opendp-zcdp", "exact-gaussian"):
            raise ValueError(f"the statement's `noise` record names an unknown sampler {out.sampler!r} or "
                             f"accounting {out.accounting!r}")
        return out


def _lattice(delta_m: float, n: int, rtol: float) -> float:
    """The largest power of two at most ``rtol * delta_m / sqrt(n)``."""
    return 2.0 ** math.floor(math.log2(rtol * delta_m / math.sqrt(max(n, 1))))


@dataclass(frozen=True)
class OpenDPSampler:
    """OpenDP's exact discrete Gaussian on a fine lattice (see the module docstring).

    lattice_rtol : the lattice rounding may add at most this fraction to the sensitivity
    (1e-6: rho grows by 2e-6 relative); threads : worker threads drawing chunks (OpenDP
    releases the GIL while it samples); chunk : most draws per call into OpenDP (shorter
    vectors are split evenly among the threads).
    """

    lattice_rtol: float = LATTICE_RTOL
    threads: int = min(2, os.cpu_count() or 1)
    chunk: int = 1 << 15
    name = "opendp"

    def text(self) -> str:
        return ("OpenDP's exact discrete Gaussian (opendp.measurements.make_gaussian on integers) added to the "
                "whitened answers rounded to a lattice; privacy from OpenDP's own map and zCDP-to-(eps, delta) "
                "conversion, the rounding and float error included")

    def draw(self, whitened: Whitened, rng=None) -> tuple[np.ndarray, NoiseAccount]:
        """``(u + noise (n,) float64, account)`` for the whitened answers; ``rng`` must be None (OS entropy)."""
        if rng is not None:
            raise ValueError("`rng`: OpenDP's sampler draws from the operating system's entropy and takes no seed; "
                             "for reproducible noise (testing only) choose sampler='numpy'")
        dm, n = positive(whitened.sensitivity, "sensitivity"), whitened.n
        gamma = _lattice(dm, n, positive(self.lattice_rtol, "lattice_rtol"))
        values = np.asarray(whitened.values)
        big = int(np.argmax(np.abs(values))) if n else 0
        if n and abs(values[big]) / gamma >= INT_LIMIT:
            raise ValueError(f"whitened answer {big} = {float(values[big]):.6g} is too large for the lattice {gamma:.3g} "
                             "(more than 2^61 steps): the counts are too large for exact noise; reduce them "
                             "(e.g. publish in thousands)")
        bound = dm * (1.0 + FLOAT_RTOL) + gamma * math.sqrt(n)
        ints = np.rint(values / gamma).astype(np.int64)
        meas, d_in = self._measurement(gamma, bound)
        noisy = self._apply(meas, ints)
        rho = float(meas.map(d_in))
        bound_used = math.sqrt(2.0 * rho)  # OpenDP's map, at the integer sensitivity ceil(bound / gamma)
        account = NoiseAccount(self.name, self.text(), n, gamma, dm, max(bound_used, bound), "opendp-zcdp")
        return noisy.astype(float) * gamma, account

    @staticmethod
    def _measurement(gamma: float, bound: float):
        dp = _opendp()
        meas = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T=dp.i64)), dp.l2_distance(T=dp.i64),
                                  scale=1.0 / gamma)
        return meas, int(math.ceil(bound / gamma))

    def _apply(self, meas, ints: np.ndarray) -> np.ndarray:
        if ints.size == 0:
            return ints
        size = max(min(self.chunk, -(-ints.size // max(self.threads, 1))), 1)  # every thread busy on short vectors
        parts = [ints[i:i + size].tolist() for i in range(0, ints.size, size)]
        if self.threads > 1 and len(parts) > 1:
            with ThreadPoolExecutor(self.threads) as pool:
                out = list(pool.map(meas, parts))
        else:
            out = [meas(p) for p in parts]
        return np.concatenate([np.asarray(o, dtype=np.int64) for o in out])


@dataclass(frozen=True)
class NumpySampler:
    """numpy's floating-point Gaussian (``Generator.standard_normal``): reproducible and fast, not hardened.

    seeded : whether the caller gave a seed (the statement says the noise is reproducible).
    """

    seeded: bool = False
    name = "numpy"

    def text(self) -> str:
        words = ("numpy's floating-point Gaussian sampler (chosen explicitly: for research and speed studies; not "
                 "protected against floating-point attacks on the noise")
        return words + ("; seeded, so whoever knows the seed can remove the noise)" if self.seeded else ")")

    def account(self, sensitivity: float, n: int) -> NoiseAccount:
        """The account of ``n`` floating-point draws under L2 sensitivity ``sensitivity`` (plus :data:`FLOAT_RTOL`)."""
        dm = positive(sensitivity, "sensitivity")
        return NoiseAccount(self.name, self.text(), int(n), 0.0, dm, dm * (1.0 + FLOAT_RTOL), "exact-gaussian")

    def draw(self, whitened: Whitened, rng=None) -> tuple[np.ndarray, NoiseAccount]:
        """``(u + standard normal (n,), account)``: ``rng`` None, a seed or a Generator."""
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        values = np.asarray(whitened.values, dtype=float)
        account = self.account(whitened.sensitivity, whitened.n)
        return values + gen.standard_normal(values.shape), account


def inflation(sampler: str | None = "opendp") -> float:
    """The largest factor by which a release through ``sampler`` (default settings) accounts the
    sensitivity: ``1 + FLOAT_RTOL + 2 LATTICE_RTOL`` (OpenDP: the allowance, the lattice
    rounding and OpenDP's integer sensitivity), ``1 + FLOAT_RTOL`` (numpy), 1 (None: the ideal
    continuous Gaussian mechanism)."""
    return {"opendp": 1.0 + FLOAT_RTOL + 2.0 * LATTICE_RTOL, "numpy": 1.0 + FLOAT_RTOL, None: 1.0}[_name(sampler)]


def release_epsilon(delta_m: float, delta: float, sampler: str | None = "opendp", inflate: bool = True) -> float:
    """An upper bound on the eps at ``delta`` that a release through ``sampler`` of a mechanism with
    sensitivity ``delta_m`` states (OpenDP's conversion, or the exact Gaussian for numpy and None);
    ``inflate=False``: a lower bound (the sensitivity itself, without the sampler's allowances)."""
    dm = positive(delta_m, "delta_m") * (inflation(sampler) if inflate else 1.0)
    if _name(sampler) == "opendp":
        return privacy.zcdp_epsilon(privacy.zcdp_rho(dm), delta)
    return privacy.gaussian_epsilon(delta, dm)


def release_max_delta_m(epsilon: float, delta: float, sampler: str | None = "opendp") -> float:
    """The largest sensitivity whose release through ``sampler`` states at most (epsilon, delta)."""
    if _name(sampler) == "opendp":
        dm = math.sqrt(2.0 * privacy.zcdp_max_rho(epsilon, delta))
    else:
        dm = privacy.gaussian_max_delta_m(epsilon, delta)
    return dm / inflation(sampler)


def _name(sampler) -> str | None:
    name = getattr(sampler, "name", sampler)
    if name not in SAMPLERS and name is not None:
        raise ValueError(f"`sampler` must be one of {SAMPLERS} (or None: the ideal Gaussian), got {sampler!r}")
    return name


def sampler_for(sampler=None, rng=None):
    """The sampler a release uses: ``sampler`` a name in :data:`SAMPLERS`, an object with ``draw``, or None.

    None: OpenDP's, unless a seed or Generator is given (reproducible noise is numpy's, and
    its statement says it is seeded).
    """
    if sampler is None:
        return OpenDPSampler() if rng is None else NumpySampler(seeded=True)
    if hasattr(sampler, "draw") and not isinstance(sampler, str):
        return sampler  # a sampler object: OpenDPSampler, NumpySampler or one of the same interface
    if sampler == "opendp":
        return OpenDPSampler()
    if sampler == "numpy":
        return NumpySampler(seeded=rng is not None)
    raise ValueError(f"`sampler` must be one of {SAMPLERS} or a sampler object, got {sampler!r}")



def check_resolution(exact, sd, name=None) -> None:
    """Refuse exact answers whose float spacing exceeds :data:`RESOLUTION` of their noise SD.

    exact, sd : (m,) exact answers and their noise standard deviations; name : optional
    callable ``j -> str`` describing answer ``j`` (its label, the count behind it).
    ``ValueError`` naming the first such answer: its noise would be lost to rounding.
    """
    exact = np.abs(np.asarray(exact, dtype=float))
    sd = np.broadcast_to(np.asarray(sd, dtype=float), exact.shape)
    bad = np.flatnonzero(~(np.spacing(exact) <= RESOLUTION * sd))
    if bad.size:
        j = int(bad[0])
        what = f"answer {j} = {exact[j]:.6g}" + (f" ({name(j)})" if name is not None else "")
        raise ValueError(f"{what} is too large for its noise: its float spacing "
                         f"{np.spacing(exact[j]):.3g} exceeds {RESOLUTION:g} of its noise SD {sd[j]:.3g}, so the "
                         "noise would be lost to rounding; the counts are refused (publish them in coarser units)")


def _opendp():
    try:
        import opendp.prelude as dp
    except ImportError:  # pragma: no cover - opendp is a core dependency
        raise ImportError("the default noise sampler needs OpenDP: pip install opendp") from None
    dp.enable_features("contrib")
    return dp
