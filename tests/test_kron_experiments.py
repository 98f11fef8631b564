"""The census experiment and the Kronecker benchmark in their quick forms."""

import pytest

from experiments import bench_kron, census


def test_census_quick_compares_at_equal_privacy():
    rows = {r["mechanism"]: r for r in census.main(["--quick", "--quiet"])}
    assert set(rows) == set(census.MECHANISMS)
    kron = rows["kron"]
    assert kron["ratio"] == pytest.approx(1.0, rel=1e-6) and kron["gap"] <= 1e-4
    for name in ("identity", "GM (Kronecker)", "HM (Kronecker)"):
        # at equal privacy cost a baseline's worst ratio is its cost over the solver's
        assert rows[name]["ratio"] == pytest.approx(rows[name]["privacy_cost"] / kron["privacy_cost"], rel=1e-6)
        assert rows[name]["ratio"] > 1.0 and rows[name]["lower_bound"] == kron["lower_bound"]


def test_bench_kron_quick_bank_matches_the_dense_optimum():
    rows = bench_kron.main(["--quick", "--quiet", "--cases", "bank"])
    assert len(rows) == len(bench_kron.QUICK_BANK)
    for r in rows:
        assert abs(r["kron_excess"]) <= 1e-4 and r["bound_excess"] <= 1e-9
        assert r["kron"] <= min(r["kronecker"], r["independent"])
