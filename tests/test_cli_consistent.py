"""The command line's consistent tables: records to non-negative integer tables that add up, with intervals."""

import csv
import json

import numpy as np

from ffu_cvx.cli.cli import main
from ffu_cvx.release.release import verify

SPEC = {"name": "agency", "domain": {"county": 6, "age": 4, "sex": ["F", "M"]},
        "groups": [{"blocks": {"county": "identity"}, "margin": 40, "level": 0.95, "name": "county totals"},
                   {"blocks": {"county": "identity", "age": "identity", "sex": "identity"}, "margin": 25,
                    "level": 0.95, "name": "age x sex x county"}]}


def test_release_consistent_tables_add_up(tmp_path, capsys):
    (tmp_path / "s.json").write_text(json.dumps(SPEC))
    rng = np.random.default_rng(0)
    rows = "".join(f"{c},{a},{'FM'[s]}\n" for c, a, s in zip(rng.integers(0, 6, 900), rng.integers(0, 4, 900),
                                                             rng.integers(0, 2, 900)))
    (tmp_path / "rec.csv").write_text("county,age,sex\n" + rows)
    assert main(["solve", str(tmp_path / "s.json"), "--out", str(tmp_path / "r.json"), "--quiet"]) == 0
    out = tmp_path / "a.csv"
    assert main(["release", str(tmp_path / "r.json"), "--records", str(tmp_path / "rec.csv"), "--out", str(out),
                 "--consistent", "--seed", "1"]) == 0
    assert "consistent tables [##############################] 100%" in capsys.readouterr().err
    doc = verify(out)
    assert "exact Gaussian intervals" in doc["post_processing"]["note"]
    table = list(csv.DictReader(open(out, newline="", encoding="utf-8")))
    published = np.array([float(r["postprocessed"]) for r in table])
    lo, hi = (np.array([float(r[k]) for r in table]) for k in ("postprocessed_lower", "postprocessed_upper"))
    assert np.all(published >= 0) and np.all(published == np.round(published)) and np.all(lo <= hi)
    totals, cells = published[:6], published[6:].reshape(6, 8)
    np.testing.assert_array_equal(totals, cells.sum(axis=1))  # every county's cells add up to its total
    assert table[0]["target"] == "±40 at 95%"
    code = main(["release", str(tmp_path / "r.json"), "--records", str(tmp_path / "rec.csv"), "--out",
                 str(tmp_path / "b.csv"), "--consistent", "--round"])
    assert code == 2 and "--consistent goes with --records alone" in capsys.readouterr().err
