"""Solver options as one frozen value: SM-II's paper preset, the SDP's and the Kronecker solver's options,
``ffu.solve(..., options=...)``, and SM-II's log through ``logging``."""

from __future__ import annotations

import dataclasses
import importlib
import logging
import pkgutil
import re
from numbers import Real
from pathlib import Path

import pytest

import ffu_cvx as ffu
from ffu_cvx import workloads
from ffu_cvx.solvers import smii
from ffu_cvx.solvers.kron import KronOptions
from ffu_cvx.solvers.sdp.driver import SDPOptions
from ffu_cvx.solvers.smii.options import PAPER
from ffu_cvx.model.status import OPTIMAL

DESIGN = Path(__file__).resolve().parent.parent / "docs" / "design" / "smii.rst"


def prefix_problem(d: int) -> ffu.FitnessProblem:
    return ffu.FitnessProblem.from_workload(workloads.prefix(d))


def design_section(title: str) -> str:
    """The text of one section of ``docs/design/smii.rst``."""
    text = DESIGN.read_text(encoding="utf-8")
    start = text.index(f"\n{title}\n") + 1
    end = re.search(r"\n[^\n]+\n-{3,}\n", text[start + len(title) + 2:])
    return text[start:start + len(title) + 2 + (end.start() if end else len(text))]


def rst(value) -> str:
    """How the design page's table writes an option's value."""
    if isinstance(value, str):
        return f'``"{value}"``'
    return f"``{value}``" if value is None or isinstance(value, bool) else f"{value:g}"


def test_paper_preset_reaches_the_sdp_certified():
    problem = prefix_problem(64)
    exact = ffu.solve(problem, method="sdp")
    sol = ffu.solve(problem, method="smii", options=smii.Options.paper())
    assert sol.status == OPTIMAL
    assert sol.privacy_cost == pytest.approx(exact.privacy_cost, rel=1e-3)
    assert 0 <= sol.gap <= smii.Options().tol
    assert sol.lower_bound <= exact.privacy_cost * (1 + 1e-9)
    # Algorithm 1 as published: no shifts (t grows to ~log(d)/tol), no KKT steps, mixes or restarts.
    assert sol.info["t1"] > 1e3 and sol.info["kkt_steps"] == sol.info["restarts"] == 0 and sol.info["mix"] is None


def test_paper_preset_differs_from_the_defaults_in_the_listed_fields():
    default, paper = smii.Options(), smii.Options.paper()
    changed = {f.name for f in dataclasses.fields(smii.Options) if getattr(default, f.name) != getattr(paper, f.name)}
    assert changed == set(PAPER)
    table = design_section("Algorithm 1 as published")
    rows = re.findall(r"^   \* - .*\n     - ``(\w+)``\n     - .*\n     - (.*)$", table, flags=re.MULTILINE)
    assert {name for name, _ in rows} == set(PAPER) and len(rows) == len(PAPER)
    assert {name: value for name, value in rows} == {name: rst(value) for name, value in PAPER.items()}
    assert smii.Options.paper(tol=1e-3, mu=5.0) == dataclasses.replace(paper, tol=1e-3, mu=5.0)


def test_every_numeric_constant_of_smii_is_in_the_table():
    table = design_section("Tuned constants")
    for info in pkgutil.iter_modules(smii.__path__):
        if info.name == "log":
            continue  # the log's layout
        module = importlib.import_module(f"ffu_cvx.solvers.smii.{info.name}")
        for name, value in vars(module).items():
            if name.isupper() and isinstance(value, Real) and not isinstance(value, bool):
                assert f"``{name}``" in table, f"{info.name}.{name}"


def test_options_value_and_keywords_are_one_way():
    problem = prefix_problem(8)
    opts = smii.Options(tol=1e-6, refine=False)
    by_value = ffu.solve(problem, method="smii", options=opts)
    by_name = ffu.solve(problem, method="smii", tol=1e-6, refine=False)
    assert by_value.privacy_cost == by_name.privacy_cost and by_value.nit == by_name.nit
    looser = ffu.solve(problem, method="smii", options=opts, tol=1e-3)  # keywords replace the value's fields
    assert looser.gap <= 1e-3 and looser.nit <= by_value.nit
    with pytest.raises(TypeError, match="SDPOptions"):
        ffu.solve(problem, method="sdp", options=opts)
    with pytest.raises(TypeError, match="bogus"):
        ffu.solve(problem, method="smii", options=opts, bogus=1)
    with pytest.raises(ValueError, match="`maxcg`"):
        smii.Options(maxcg=0)
    with pytest.raises(ValueError, match="`radius`"):
        smii.Options.paper(radius=-1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.tol = 1.0


def test_sdp_options():
    problem = prefix_problem(8)
    sol = ffu.solve(problem, method="sdp", options=SDPOptions(refine=False, solver="CLARABEL"))
    assert sol.status == OPTIMAL and "refine_levels" not in sol.info and sol.info["solver"] == "CLARABEL"
    assert ffu.solve(problem, method="sdp", refine=False).privacy_cost == pytest.approx(sol.privacy_cost, rel=1e-8)
    for bad, name in ((dict(tol=0), "`tol`"), (dict(solver="MOSEK"), "`solver`"), (dict(solver_tol=2.0), "`solver_tol`"),
                      (dict(formulation="naive"), "`formulation`"), (dict(warm_start="cold"), "`warm_start`"),
                      (dict(max_time=-1), "`max_time`"), (dict(slack=0.5), "`slack`"),
                      (dict(threshold=0.0), "`threshold`"), (dict(refine="yes"), "`refine`"),
                      (dict(solver_options=[1]), "`solver_options`")):
        with pytest.raises(ValueError, match=name):
            SDPOptions(**bad)


def test_kron_options():
    problem = ffu.FitnessProblem.from_workload(workloads.product(ffu.Domain({"a": 6, "b": 2}),
                                                                 [({"a": "prefix", "b": "identity"}, 2.0)]))
    sol = ffu.solve(problem, method="kron", options=KronOptions(structure="product"))
    assert sol.info["structure"] == "product"
    assert sol.privacy_cost == pytest.approx(ffu.solve(problem, method="kron").privacy_cost, rel=1e-9)
    for bad, name in ((dict(tol=-1), "`tol`"), (dict(factor_method="lbfgs"), "`factor_method`"),
                      (dict(structure="dense"), "`structure`"), (dict(max_iter=0), "`max_iter`"),
                      (dict(max_time=0), "`max_time`")):
        with pytest.raises(ValueError, match=name):
            KronOptions(**bad)
    with pytest.raises(TypeError, match="KronOptions"):
        ffu.solve(problem, method="kron", options=smii.Options())


def test_smii_logs_through_logging(caplog, capsys):
    with caplog.at_level(logging.DEBUG, logger="ffu_cvx.solvers.smii"):
        ffu.solve(prefix_problem(4), method="smii")
    lines = [r.getMessage() for r in caplog.records if r.name == "ffu_cvx.solvers.smii"]
    assert any("objective" in line and "alpha" in line for line in lines)
    assert any(line.strip().startswith("status optimal") for line in lines)
    assert all(r.levelno == logging.DEBUG for r in caplog.records if r.name == "ffu_cvx.solvers.smii")
    assert capsys.readouterr().out == ""  # nothing printed without verbose
    caplog.clear()
    ffu.solve(prefix_problem(4), method="smii")  # no handler left behind: silent again
    assert not [r for r in caplog.records if r.name == "ffu_cvx.solvers.smii" and r.levelno < logging.INFO]
