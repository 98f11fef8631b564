"""Noise that cannot be inverted: the whitened answers every path perturbs, OpenDP's sampler on a
lattice by default, refusal of counts that would swallow the noise, independent streams, and
statements that verify only with their own numbers."""

import json
import math

import numpy as np
import pytest
from scipy import stats

import ffu_cvx as ffu
from ffu_cvx.model import privacy
from ffu_cvx.release import noise
from ffu_cvx.release.budget import smallest_budget
from ffu_cvx.release.mechanism import problem2
from ffu_cvx.cli.cli import main
from ffu_cvx.solvers.kron import KronSolution
from ffu_cvx.solvers.kron import reduce as kron_reduce
from ffu_cvx.release.release import check_statement, sidecar_path, verify

from test_exchangeable import UNIONS, product_problem


class Exact:
    """A sampler adding no noise that keeps what it was given: exposes what a release perturbs."""

    name = "numpy"

    def __init__(self):
        self.seen = []

    def draw(self, whitened, rng=None):
        self.seen.append(whitened)
        return np.asarray(whitened.values, dtype=float), noise.NumpySampler().account(whitened.sensitivity,
                                                                                      whitened.n)


def _prefix_mechanism(d=16):
    problem = ffu.FitnessProblem.from_workload(ffu.workloads.prefix(d))
    return ffu.GaussianMechanism(ffu.solve(problem, method="sdp"))


@pytest.fixture(scope="module")
def prefix():
    return _prefix_mechanism()


# ------------------------------------------------------------------ the whitened answers
def test_dense_whitened_answers_give_the_exact_answers_and_the_profile(prefix):
    x = np.arange(16) * 7.0
    rel = prefix.release(x, sampler=Exact())
    np.testing.assert_allclose(rel.answers, prefix.problem.W @ x, rtol=1e-12, atol=1e-9)
    cols = [np.sum(prefix.whitened(e).values ** 2) for e in np.eye(16)]
    np.testing.assert_allclose(cols, prefix.profile, rtol=1e-10)


def _kron_solutions():
    out = []
    for name in ("race aggregations x sex", "identity plus total is no structure", "first value apart"):
        problem = product_problem(*UNIONS[name])
        red = kron_reduce.reduce(problem.workload)
        res = kron_reduce.ascent(red, tol=1e-4, max_iter=2000)
        for implicit in (2, 10 ** 9):  # residual factors kept implicit, and formed
            out.append((name, problem.workload, KronSolution.from_terms(
                problem, red.terms(res.sigmas, implicit_min=implicit), lower_bound=res.lower_bound)))
    return out


@pytest.mark.parametrize("name, wl, sol", _kron_solutions(), ids=lambda v: v if isinstance(v, str) else "")
def test_structured_whitened_answers_give_the_exact_answers_and_the_profile(name, wl, sol):
    rng = np.random.default_rng(5)
    x = rng.poisson(4, wl.d) * (rng.random(wl.d) < 0.6)
    counts = ffu.Counts.from_histogram(wl.domain, x)
    for dtype in (np.float64, np.longdouble):
        values, _, _ = sol.whitened(counts, dtype)
        np.testing.assert_allclose(sol.from_whitened(values.astype(float)), wl.apply(counts), rtol=1e-12, atol=1e-9)
    cols = [np.sum(sol.whitened(ffu.Counts.from_histogram(wl.domain, e))[0] ** 2) for e in np.eye(wl.d)]
    np.testing.assert_allclose(cols, sol.profile, rtol=1e-10)
    rel = ffu.release_product(sol, wl, counts, sampler=Exact())
    np.testing.assert_allclose(rel.answers, wl.apply(counts), rtol=1e-12, atol=1e-9)


def _fourier_cases():
    marg = ffu.fourier.MarginalWorkload.from_targets((3, 2, 4), {(0, 1): 1.0, (0,): 2.0, (1, 2): 1.0, (): 5.0})
    fams = [ffu.fourier.ProductFamily((0,), [[1, 1, 0, 0, 0]], 1.0),
            ffu.fourier.ProductFamily((0, 1), [[1, 1, 1, 0, 0], [1, 0, 0, 0]], 2.0),
            ffu.fourier.ProductFamily((1,), [[1, -1, 0, 0]], 0.5)]
    return [("marginals", ffu.fourier.max_optimal(marg)),
            ("circulant", ffu.fourier.max_optimal(ffu.fourier.CirculantWorkload((5, 4), fams)))]


@pytest.mark.parametrize("name, mech", _fourier_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_fourier_whitened_answers_give_the_exact_answers_and_the_cost(name, mech):
    """Noise-free, the Fourier release's answers are exact; the whitened answers' worst cell has
    squared norm ``privacy_cost`` (marginal components and spectra alike)."""
    shape = mech.workload.domain
    hist = np.random.default_rng(2).poisson(3, shape).astype(float)
    spy = Exact()
    rel = mech.release(histogram=hist, sampler=spy)
    ref = mech.release(histogram=hist, rng=0)
    for got, noisy in zip(rel.answers, ref.answers):
        assert got.shape == noisy.shape
    if name == "circulant":
        W = ffu.fourier.dense_workload(mech.workload)[0]
        np.testing.assert_allclose(np.concatenate([a.ravel() for a in rel.answers]), W @ hist.ravel(), atol=1e-9)
    for A, m in rel.marginals.items():
        exact = hist.sum(axis=tuple(i for i in range(len(shape)) if i not in A))
        if name == "marginals":
            np.testing.assert_allclose(m, exact, atol=1e-9)
    worst = 0.0
    for cell in range(hist.size):
        unit = np.zeros(hist.size)
        unit[cell] = 1
        mech.release(histogram=unit.reshape(shape), sampler=spy)
        worst = max(worst, float(np.sum(np.asarray(spy.seen[-1].values, dtype=float) ** 2)))
    assert worst == pytest.approx(mech.privacy_cost, rel=1e-9)


# ------------------------------------------------------------------ the default sampler
def test_default_release_uses_opendp_on_a_lattice_and_states_it(prefix, tmp_path):
    rel = prefix.release(np.arange(16))
    acc = rel.noise
    assert acc.sampler == "opendp" and acc.accounting == "opendp-zcdp" and "OpenDP" in rel.statement()["text"]
    assert 0 < acc.lattice <= noise.LATTICE_RTOL * prefix.delta_m / math.sqrt(16)
    assert math.log2(acc.lattice) == int(math.log2(acc.lattice))  # a power of two: exact scaling
    assert prefix.delta_m < acc.sensitivity_bound <= prefix.delta_m * noise.inflation("opendp")
    # conservative: never below the exact Gaussian's epsilon, never above Bun-Steinke's conversion
    eps = rel.epsilon()
    rho = acc.rho
    assert privacy.gaussian_epsilon(1e-6, acc.sensitivity_bound) < eps < rho + 2 * math.sqrt(rho * math.log(1e6))
    assert eps == pytest.approx(noise.release_epsilon(prefix.delta_m, 1e-6), rel=1e-5)
    rel.to_csv(tmp_path / "a.csv")
    doc = verify(tmp_path / "a.csv")
    assert doc["noise"]["sampler"] == "opendp" and doc["epsilon"] == pytest.approx(eps, rel=1e-12)


def test_opendp_noise_lies_on_the_lattice():
    white = noise.Whitened(np.array([0.3, -1.7, 1e6 + 0.25]), 1.0)
    out, acc = noise.OpenDPSampler().draw(white)
    steps = out / acc.lattice
    np.testing.assert_array_equal(steps, np.round(steps))


def test_seed_means_numpy_and_opendp_takes_no_seed(prefix):
    rel = prefix.release(np.arange(16), rng=3)
    assert rel.noise.sampler == "numpy" and "seeded" in rel.noise.text and "not protected" in rel.noise.text
    np.testing.assert_array_equal(rel.answers, prefix.release(np.arange(16), rng=3).answers)
    with pytest.raises(ValueError, match="takes no seed"):
        prefix.release(np.arange(16), rng=3, sampler="opendp")
    with pytest.raises(ValueError, match="`sampler`"):
        prefix.release(np.arange(16), sampler="laplace")
    assert prefix.release(np.arange(16), sampler="numpy").noise.text.startswith("numpy's floating-point")


def test_opendp_releases_have_the_stated_variances_and_coverage():
    """5,000 releases through OpenDP's sampler: per-query variance ratios within sampling error,
    95% intervals covering 95 +/- 1%."""
    mech = _prefix_mechanism(8)
    x = np.array([3, 0, 12, 5, 40, 1, 0, 9])
    n = 5000
    draws = np.array([mech.release(x).answers for _ in range(n)]) - mech.problem.W @ x
    ratio = draws.var(axis=0, ddof=1) / mech.variances
    lo, hi = stats.chi2.ppf([0.0005, 0.9995], n - 1) / (n - 1)  # per query, family-wise about 1%
    assert np.all((ratio > lo) & (ratio < hi)), ratio
    cover = np.mean(np.abs(draws) <= 1.959963984540054 * np.sqrt(mech.variances))
    assert 0.94 <= cover <= 0.96


# ------------------------------------------------------------------ refusals
@pytest.mark.parametrize("big", [1e17, 1e300])
def test_counts_that_swallow_the_noise_are_refused(prefix, big):
    with pytest.raises(ValueError, match=r"answer 0 = .*x\[0\].*too large for its noise"):
        prefix.release(np.r_[big, np.zeros(15)])
    with pytest.raises(ValueError, match="too large for its noise"):
        prefix.release(np.r_[big, np.zeros(15)], rng=1)  # numpy's sampler too


def test_product_release_refuses_a_count_of_1e17():
    dom = ffu.Domain({"a": 3, "b": 2})
    wl = ffu.workloads.product(dom, [({"a": "identity"}, 1.0), ({}, 1.0, "total")])
    sol = ffu.solve(ffu.FitnessProblem.from_workload(wl), method="kron")
    x = np.zeros(6)
    x[2] = 1e17
    with pytest.raises(ValueError, match="too large for its noise"):
        ffu.release_product(sol, wl, x)


def test_cli_refuses_a_histogram_of_1e300_and_writes_nothing(tmp_path, capsys):
    spec = tmp_path / "p.json"
    spec.write_text(json.dumps({"workload": "prefix", "params": {"d": 16}}))
    assert main(["solve", str(spec), "--method", "sdp", "--out", str(tmp_path / "r.json"), "--quiet"]) == 0
    (tmp_path / "h.csv").write_text("0,1e300\n" + "".join(f"{i},0\n" for i in range(1, 16)))
    before = set(tmp_path.iterdir())
    assert main(["release", str(tmp_path / "r.json"), "--data", str(tmp_path / "h.csv"), "--out",
                 str(tmp_path / "a.csv")]) == 2
    err = capsys.readouterr().err
    assert "too large for its noise" in err and "1e+300" in err
    assert set(tmp_path.iterdir()) == before


def test_gaussian_mechanism_release_of_1e300_is_refused():
    sol = ffu.Solution.from_sigma(ffu.FitnessProblem(np.eye(4), np.ones(4)), np.eye(4), method="test", certify=False)
    with pytest.raises(ValueError, match="too large for its noise"):
        ffu.GaussianMechanism(sol).release([1e300, 1, 2, 3])


# ------------------------------------------------------------------ verify checks the statement
@pytest.mark.parametrize("field, factor", [("epsilon", 0.5), ("rho_zcdp", 0.5), ("privacy_cost", 0.5),
                                           ("delta_m", 0.9)])
def test_verify_fails_on_an_edited_statement(prefix, tmp_path, field, factor):
    prefix.release(np.arange(16)).to_csv(tmp_path / "a.csv")
    side = sidecar_path(tmp_path / "a.csv")
    doc = json.loads(side.read_text())
    verify(tmp_path / "a.csv")
    doc[field] *= factor
    side.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="edited"):
        verify(tmp_path / "a.csv")


def test_verify_fails_on_an_edited_text_or_noise_record(prefix):
    rel = prefix.release(np.arange(16))
    doc = json.loads(rel.statement_bytes("a.csv"))
    check_statement(doc)
    for edit in (lambda d: d.update(text=d["text"].replace("-differential", " differential").replace(
                     f"({d['epsilon']:.6g},", "(0.1,")),
                 lambda d: d["noise"].update(sensitivity_bound=d["noise"]["sensitivity_bound"] * 0.5),
                 lambda d: d.pop("noise")):
        bad = json.loads(json.dumps(doc))
        edit(bad)
        with pytest.raises(ValueError):
            check_statement(bad)


# ------------------------------------------------------------------ planning for the sampler
def test_problem2_meets_the_target_in_the_release_statement(prefix):
    for sampler in ("opendp", "numpy", None):
        p2 = problem2(prefix.solution, 2.0, 1e-6, sampler=sampler)
        assert p2.sampler == sampler
        eps = noise.release_epsilon(p2.delta_m, 1e-6, sampler)
        assert 2.0 * (1 - 1e-6) <= eps <= 2.0 * (1 + 1e-9)
    rel = ffu.GaussianMechanism(problem2(prefix.solution, 2.0, 1e-6).solution).release(np.arange(16))
    assert 1.999 <= rel.epsilon() <= 2.0 * (1 + 1e-9)


def test_budget_states_the_releases_epsilon_and_the_ideal_one():
    problem = ffu.FitnessProblem.from_workload(ffu.workloads.prefix(8))
    b = smallest_budget(problem, 1e-6, method="sdp")
    ideal = smallest_budget(problem, 1e-6, method="sdp", sampler=None)
    assert b.sampler == "opendp" and ideal.sampler is None
    assert ideal.epsilon == pytest.approx(b.ideal_epsilon) and b.epsilon > ideal.epsilon
    assert b.epsilon_lower_bound <= b.epsilon and "opendp sampler" in b.text()


def test_noise_benchmark_target_one_million_draws_in_chunks():
    """The chunked, threaded draw returns every value (the timing lives in experiments.bench_noise)."""
    sampler = noise.OpenDPSampler(chunk=1000)
    out, acc = sampler.draw(noise.Whitened(np.zeros(4321), 1.0))
    assert out.shape == (4321,) and acc.dimension == 4321 and np.unique(out).size > 4000


def _statement_without_time(rel) -> dict:
    doc = rel.statement()
    doc.pop("created_utc")
    return doc


def test_neighbouring_opendp_releases_state_the_same_numbers(prefix):
    """Nothing in a statement depends on the data: the lattice, the accounted sensitivity and every
    privacy number are the same for neighbouring histograms, small counts and large ones alike."""
    x = np.arange(16) * 1000.0
    y = x.copy()
    y[3] += 1
    big = x * 1e4
    docs = [_statement_without_time(prefix.release(v)) for v in (x, y, big)]
    assert docs[0] == docs[1] == docs[2]
    dom = ffu.Domain({"a": 4, "b": 3})
    wl = ffu.workloads.product(dom, [({"a": "identity", "b": "identity"}, 1.0), ({"a": "identity"}, 1.0)])
    sol = ffu.solve(ffu.FitnessProblem.from_workload(wl), method="kron")
    counts = np.arange(12) * 37
    near = counts.copy()
    near[5] -= 1
    docs = [_statement_without_time(ffu.release_product(sol, wl, c, coverage_draws=0)) for c in (counts, near)]
    assert docs[0] == docs[1]
