"""`sdpa compare A B` (issue 12): parameters, quantities in standard errors, exact mode."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from conftest import write_spec

from sdpa_cli.report.comparison import compare

VARIANCE = "study: variance\ndims: [4, 16]\npairs: 300\nseed: {seed}\n"
WORKED = """study: worked-example
title: tiny
source: "000_0e5125495e9ebe01.txt, test"
parts:
  - {{name: p, kind: attention, tokens: [a, b], q: [[1, 0], [0, {x}]], k: [[1, 0], [0, 1]]}}
"""


def _fake_run(folder: Path, rows: list[dict], spec: dict | None = None) -> Path:
    folder.mkdir(parents=True)
    # every field results.json must have (compare reads it against its schema)
    doc = {"schema_version": 1, "sdpa_version": "0", "study": "variance", "name": folder.name,
           "title": "", "source": "", "spec": {"study": "variance", **(spec or {"seed": 1})},
           "rows": rows, "checks": [], "audit": [], "passed": True, "theory": [], "notes": []}
    (folder / "results.json").write_text(json.dumps(doc))
    return folder


def test_monte_carlo_quantities_are_judged_in_standard_errors(tmp_path):
    a = _fake_run(tmp_path / "a" / "r", [{"dim": 4, "variance": 1.0, "se": 0.1,
                                          "mean": 0.0, "mean_se": 0.5, "ratio": 0.9}])
    b = _fake_run(tmp_path / "b" / "r", [{"dim": 4, "variance": 1.3, "se": 0.2,
                                          "mean": 0.0, "mean_se": 0.5, "ratio": 0.8}],
                  spec={"seed": 2})
    z = (1.0 - 1.3) / math.sqrt(0.1**2 + 0.2**2)  # −1.3416…
    doc = compare(a, b, tolerance=1.35)
    run = doc["runs"][0]
    q = {x["field"]: x for x in run["quantities"]}
    assert q["variance"]["kind"] == "monte-carlo"
    assert q["variance"]["z"] == pytest.approx(z, rel=1e-12)
    assert (q["variance"]["se_a"], q["variance"]["se_b"]) == (0.1, 0.2)
    assert q["dim"]["kind"] == "exact" and q["mean"]["z"] == 0.0
    assert q["ratio"]["kind"] == "unjudged"  # random, and no standard error to judge it by
    assert run["parameters"] == [{"key": "seed", "a": 1, "b": 2}]
    assert doc["agree"] is True
    assert compare(a, b, tolerance=1.3)["agree"] is False


def test_two_seeds_agree_and_a_tiny_tolerance_does_not(sdpa, workdir):
    for seed in (1, 2):
        spec = write_spec(workdir, f"s{seed}.yaml", VARIANCE.format(seed=seed))
        assert sdpa("variance", str(spec), "--out", f"r{seed}", "--no-plots", "-q").code == 0
    r = sdpa("compare", "r1", "r2", "--format", "json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["schema_version"] == 1 and doc["sdpa_version"]
    assert {p["key"] for p in doc["runs"][0]["parameters"]} == {"name", "seed"}  # s1, s2
    assert sdpa("compare", "r1", "r2", "--tolerance", "0.0001").code == 1
    md = sdpa("compare", "r1", "r2", "--format", "markdown")
    assert md.out.startswith("# sdpa compare: r1 vs r2: agree")
    assert "| seed | 1 | 2 |" in md.out


def test_a_deterministic_difference_fails(sdpa, workdir):
    for x in (1, 2):
        spec = write_spec(workdir, f"w{x}.yaml", WORKED.format(x=x))
        assert sdpa("worked-example", str(spec), "--out", f"w{x}", "--no-plots", "-q").code == 0
    assert sdpa("compare", "w1", "w1").code == 0
    r = sdpa("compare", "w1", "w2")
    assert r.code == 1
    assert "differs ✗" in r.out


def test_batches_exact_mode_and_bad_input(sdpa, workdir):
    specs = workdir / "specs"
    specs.mkdir()
    write_spec(specs, "a.yaml", VARIANCE.format(seed=1))
    write_spec(specs, "b.yaml", WORKED.format(x=1))
    assert sdpa("run", str(specs), "--out", "b1", "--no-plots", "-q").code == 0
    shutil.copytree(workdir / "b1", workdir / "b2")
    assert sdpa("compare", "b1", "b2").code == 0
    assert sdpa("compare", "b1", "b2", "--exact").code == 0
    csv = workdir / "b2" / "a" / "table.csv"
    csv.write_bytes(csv.read_bytes() + b"\n")
    r = sdpa("compare", "b1", "b2", "--exact")
    assert r.code == 1 and "differs: a/table.csv" in r.out
    shutil.rmtree(workdir / "b2" / "b")
    r = sdpa("compare", "b1", "b2")
    assert r.code == 1 and "only in b1: b" in r.out
    assert sdpa("compare", "b1", "nowhere").code == 2
    r = sdpa("compare", "b1", "b1/a")
    assert r.code == 2 and "not one of each" in r.err


def test_rows_are_paired_by_the_columns_that_name_them(tmp_path):
    # B adds d = 8 in the middle: d = 16 must be compared with d = 16, not with d = 8.
    def row(dim: int, variance: float) -> dict:
        return {"dim": dim, "scaling": "none", "pairs": 300, "variance": variance, "se": 0.5}

    a = _fake_run(tmp_path / "a" / "r", [row(4, 4.1), row(16, 15.8)],
                  spec={"dims": [4, 16], "pairs": 300})
    b = _fake_run(tmp_path / "b" / "r", [row(4, 3.9), row(8, 8.2), row(16, 16.3)],
                  spec={"dims": [4, 8, 16], "pairs": 300})
    run = compare(a, b)["runs"][0]
    assert run["parameters"] == [{"key": "dims", "a": [4, 16], "b": [4, 8, 16]}]
    assert "table rows: row dim=8 only in B" in run["problems"]
    variance = {q["row"]: q for q in run["quantities"] if q["field"] == "variance"}
    assert (variance[1]["a"], variance[1]["b"]) == (15.8, 16.3)
    assert abs(variance[1]["z"]) < 1  # the same d: within a standard error
    assert all(q["agree"] for q in run["quantities"])  # what differs is the missing row
    assert run["agree"] is False


def test_rows_named_by_nothing_stable_are_paired_by_position(tmp_path):
    # `hits` is a measured whole number: it names no row, so rows keep their positions.
    a = _fake_run(tmp_path / "a" / "r", [{"hits": 3, "x": 1.0, "x_se": 0.1},
                                         {"hits": 5, "x": 2.0, "x_se": 0.1}])
    b = _fake_run(tmp_path / "b" / "r", [{"hits": 4, "x": 1.05, "x_se": 0.1},
                                         {"hits": 6, "x": 2.05, "x_se": 0.1}])
    run = compare(a, b)["runs"][0]
    assert run["problems"] == []
    x = [q for q in run["quantities"] if q["field"] == "x"]
    assert [(q["a"], q["b"]) for q in x] == [(1.0, 1.05), (2.0, 2.05)]


def test_the_summary_names_a_few_differing_parameters_in_one_screen(sdpa, workdir,
                                                                      monkeypatch):
    """A run from flags against a shipped spec differed in its claims and documented
    numbers: the summary printed them as one line of 4,000 characters of Python reprs."""
    claims = [{"where": f"w{i}", "claim": "x" * 200, "tests": [], "untested": "no"}
              for i in range(6)]
    rows = [{"dim": d, "variance": float(d), "se": 0.1} for d in range(30)]
    _fake_run(workdir / "a", rows, spec={"seed": 1, "bins": 50})
    _fake_run(workdir / "b", [{**r, "variance": r["variance"] + 5.0} for r in rows],
              spec={"seed": 2, "bins": 40, "claims": claims, "title": "t" * 300,
                    "documented": [{"where": "x", "value": i} for i in range(12)]})
    monkeypatch.setenv("COLUMNS", "80")
    r = sdpa("compare", "a", "b")
    assert r.code == 1
    lines = r.out.splitlines()
    assert len(lines) <= 24 and max(map(len, lines)) <= 80
    said = " ".join(r.out.split())
    # the study's own fields first, then the spec's bookkeeping; lists by their size
    assert ("parameters differ (5): bins 50 → 40; claims — → [6 items]; documented — → "
            "[12 items]; seed 1 → 2; and 1 more (title)") in said
    assert "… and 22 more that differ (--format json or markdown lists every quantity)" in said
