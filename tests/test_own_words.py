"""sdpa's own sentences say what was measured: the Jacobian's ends, what
the material count counts, compare's last line, and the batch totals the audit page names."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import EXPERIMENTS

from sdpa_cli.framework.causes import Tally
from sdpa_cli.numerics.softmax import jacobian
from sdpa_cli.report import comparison
from sdpa_cli.runner import loader
from sdpa_cli.studies.saturation.score_text import expect_lines


def test_the_jacobian_does_not_vanish_at_uniform_weights() -> None:
    """At uniform weights ‖J‖_F = √(n−1)/n (not zero at fixed n); the expect line says so and
    no longer says the gradient vanishes at both ends."""
    for n in (2, 16, 1024):
        p = np.full(n, 1.0 / n)
        frobenius = float(np.linalg.norm(jacobian(p)))  # the full n × n matrix
        assert math.isclose(frobenius, math.sqrt(n - 1) / n, rel_tol=1e-12)
    spec = loader.load(None, study="jacobian", overrides={"score_stds": [0.5, 2], "keys": [16],
                                                          "trials": 40, "seed": 1})
    words = " ".join(expect_lines(spec, jacobian=True))
    assert "vanishes at both ends" not in words
    assert "vanishes only towards one-hot weights" in words and "√(n−1)/n" in words
    assert "lock onto one key once" not in words  # freezing is onto a few keys first


def test_the_material_count_says_what_it_counts() -> None:
    """'3 inconsistencies (5 material)' read as five material inconsistencies; the material
    errors are among all the root errors, and the headline says so."""
    t = Tally(own=32, inconsistent=3, carried=39, rounding=19, material=5, matched=258,
              numbers=399)
    text = t.headline("their")
    assert "(5 material)" not in text
    assert "32 errors of their own, 3 inconsistencies; 5 of the 35 root errors are material " \
           "(flip a conclusion)" in text
    one = Tally(own=0, inconsistent=1, carried=0, rounding=0, material=1, matched=2, numbers=3)
    assert "1 of the 1 root error is material (flips a conclusion)" in one.headline()


def test_compare_says_agreement_and_missing_runs_apart() -> None:
    """Ten runs that agree plus one folder on one side only: the line says both facts, and
    the exit code (1) follows the missing folder, as the help text documents."""
    runs = [{"name": f"r{i}", "agree": True} for i in range(10)]
    doc = {"runs": runs, "problems": ["only in A: extra"], "tolerance": 4.0, "agree": False}
    line = comparison.verdict_line(doc)
    assert line.startswith("10 run(s) compared: all agree (tolerance ±4 se)")
    assert "1 run folder(s) on one side only" in line and "they differ" not in line
    assert comparison.exit_code(doc) == 1
    doc = {**doc, "problems": [], "runs": [*runs[:9], {"name": "r9", "agree": False}]}
    assert comparison.verdict_line(doc).startswith("10 run(s) compared: 1 differ, 9 agree")
    doc = {**doc, "runs": runs, "agree": True}
    assert comparison.verdict_line(doc) == "10 run(s) compared: all agree (tolerance ±4 se)"
    assert comparison.exit_code(doc) == 0


@pytest.mark.slow  # ≥ 1 s; moved out of the quick tier (its 75 s budget)
def test_the_batch_totals_are_where_the_audit_page_says(sdpa, workdir: Path) -> None:
    """`sdpa help audit` names sdpa-batch.json's `audit` for the batch totals: it holds them,
    equal to what `--format json` prints, and each claim once with its verdict."""
    folder = workdir / "specs"
    folder.mkdir()
    for name in ("rules-field-aligned", "rules-field-vs-dim"):
        src = next(EXPERIMENTS.rglob(f"{name}.yaml"))
        shutil.copy(src, folder / src.name)
    r = sdpa("run", str(folder), "--no-plots", "-q", "--format", "json",
             "--out", str(workdir / "b"))
    assert r.code == 0, r.err
    doc = json.loads((workdir / "b" / "sdpa-batch.json").read_text())
    assert doc["audit"] == r.json()["audit"]
    # the three claims both specs judge are one claim each, decided on independent q, k
    shared = [c for c in doc["claims"] if len(c["runs"]) == 2]
    assert len(shared) == 3
    assert all(c["status"] == "holds" and c["runs"][0] == "rules-field-vs-dim"
               and "beyond its setting" in c["why"] for c in shared)
    assert doc["audit"]["claims_holds"] == sum(c["status"] == "holds" for c in doc["claims"])


def test_train_says_one_verdict_per_claim_and_leads_with_what_it_found(sdpa) -> None:
    """The claims table, the found: lines and the audit give each claim the same one word
    (it used to print "holds as 'trains worse'" in the table and partly in the audit), and
    the first found: line says which rules reached the target accuracy where."""
    r = sdpa("train", "--dims", "8", "--steps", "20", "--seeds", "1", "--batch", "8",
             "--vocab", "4", "--pairs", "2", "--d-model", "8", "--seed", "1", "--no-plots",
             "--format", "json")
    assert r.code == 0, r.err
    doc = r.json()
    table = {row["claim"].replace('"', ""): row["verdict"] for row in doc["tables"]["claims"]}
    audit = {a["quantity"]: a["status"] for a in doc["audit"] if a["kind"] == "claim"}
    assert table == audit
    assert set(table.values()) <= {"holds", "partly", "fails", "untested"}
    assert doc["findings"][0].startswith("reaching 90% accuracy within 20 steps (any "
                                         "optimiser or rate): unscaled ")
    for claim, verdict in table.items():
        if verdict != "untested":
            assert f"claim {claim}: {verdict}" in [f.replace('"', "") for f in
                                                   doc["findings"]]
