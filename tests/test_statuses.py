"""A spec that measured nothing is `skipped` in every view, never passed (issue 34)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import EXPERIMENTS, write_spec

MISSING = """\
study: inspect
title: a model that is not on this machine
model: nobody/not-a-model
"""


@pytest.fixture
def specs(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with one spec that runs and one whose model is missing."""
    monkeypatch.setenv("HF_HUB_CACHE", str(workdir / "empty-cache"))
    folder = workdir / "specs"
    folder.mkdir()
    write_spec(folder, "gone.yaml", MISSING)
    (folder / "why-sqrt.yaml").write_bytes(
        (EXPERIMENTS / "variance" / "why-sqrt.yaml").read_bytes())
    return folder


def test_a_batch_says_skipped_everywhere(sdpa, specs: Path, workdir: Path) -> None:
    junit = workdir / "junit.xml"
    r = sdpa("run", str(specs), "--no-plots", "--check", "--junit-xml", str(junit))
    assert r.code == 0, r.err  # skipped fails nothing, even under --check
    assert "[1/2] gone skipped" in r.err
    assert "passed" not in r.err.split("[1/2] gone", 1)[1].split("\n", 1)[0]
    assert "2 experiments: 1 passed, 1 skipped" in r.out
    assert "skipped gone: model 'nobody/not-a-model' is not on this machine" in r.out
    # JSON: the run's word, why, and a batch that did not fail
    out = workdir / "outputs"
    doc = json.loads((out / "gone" / "results.json").read_text())
    assert doc["status"] == "skipped" and "not on this machine" in doc["skipped"]
    assert json.loads((out / "gone" / "manifest.json").read_text())["status"] == "skipped"
    assert json.loads((out / "why-sqrt" / "results.json").read_text())["status"] == "passed"
    # JUnit: the spec's suite holds one <skipped> case with the reason
    suites = {s.get("name"): s for s in ET.parse(junit).getroot().iter("testsuite")}
    gone = suites["gone"]
    assert gone.get("skipped") == "1" and gone.get("failures") == "0"
    skipped = gone.find("testcase/skipped")
    assert skipped is not None and "not on this machine" in skipped.get("message", "")
    # the report's badge and index.md say skipped, not passed
    html = (out / "report.html").read_text()
    assert '<span class="status skipped">skipped</span>' in html
    assert "Skipped: nothing was measured" in html
    index = (out / "index.md").read_text()
    assert "**skipped**" in index and "- nothing was measured: model 'nobody/not-a-model'" in index
    assert "**skipped**: nothing was measured" in (out / "gone" / "table.md").read_text()


def test_batch_json_counts_a_skip_apart(sdpa, specs: Path) -> None:
    r = sdpa("run", str(specs), "--no-plots", "--format", "json", "-q")
    doc = r.json()
    assert doc["counts"]["skipped"] == 1 and doc["counts"]["passed"] == 1
    assert doc["passed"] is True  # nothing failed
    status = {e["name"]: e["status"] for e in doc["experiments"]}
    assert status == {"gone": "skipped", "why-sqrt": "passed"}


def test_require_models_fails_a_batch(sdpa, specs: Path) -> None:
    r = sdpa("run", str(specs), "--no-plots", "--check", "--require-models", "-q")
    assert r.code == 1
    assert "gone.yaml: FAIL model present" in r.err


def test_check_on_a_study_that_measured_nothing(sdpa, specs: Path) -> None:
    r = sdpa("inspect", str(specs / "gone.yaml"), "--check", "--no-plots")
    assert r.code == 0
    assert "skipped: nothing was measured" in r.out
    assert "--check: nothing was measured, so nothing was checked" in r.out
    assert "checks:" not in r.out and "passed" not in r.out  # no empty table, no "passed"
    r = sdpa("inspect", str(specs / "gone.yaml"), "--check", "--no-plots",
             "--require-models", "true")
    assert r.code == 1
    assert "FAIL model present" in r.out


CLAIMED = MISSING + """\
fetch: fetch it from the shelf in room 4
claims:
  - where: "Large Embedding Dimensions"
    document: 001_409455fed8d25d77.txt
    claim: a claim only this model can judge
    tests:
      - quantity: median_score_std_raw
        row: {weights: trained, seq_len: 128, scaling: model}
        op: ">"
        value: 8
"""


def test_a_skipped_runs_claims_stay_in_the_count_untested(sdpa, specs: Path) -> None:
    """A claim only a missing model can judge is counted, untested, with the run's reason,
    and the reason gives the spec's own way to get the model (issue 34)."""
    write_spec(specs, "gone.yaml", CLAIMED)
    r = sdpa("run", str(specs), "--no-plots", "--format", "json", "-q")
    assert r.code == 0, r.err
    claims = json.loads((Path(r.json()["folder"]) / "sdpa-batch.json").read_text())["claims"]
    mine = [c for c in claims if c["claim"] == "a claim only this model can judge"]
    assert len(mine) == 1 and mine[0]["status"] == "untested" and mine[0]["runs"] == ["gone"]
    doc = json.loads((Path(r.json()["folder"]) / "gone" / "results.json").read_text())
    (entry,) = [a for a in doc["audit"] if a["kind"] == "claim"]
    assert entry["reason"].startswith("this run measured nothing: model 'nobody/not-a-model'")
    assert "get it with: fetch it from the shelf in room 4" in entry["reason"]
    assert "hf download" not in entry["reason"]


def test_markdown_says_each_claims_verdict(sdpa, workdir: Path) -> None:
    """table.md words a claim by its verdict (holds, fails, …), never as a number's
    mismatch; a printed number's status names its cause."""
    r = sdpa("worked-example", "i-am-happy", "--no-plots", "-q")
    assert r.code == 0, r.err
    md = (workdir / "outputs" / "i-am-happy" / "table.md").read_text()
    audit, claims = md.split("## The document's claims", 1)
    doc = json.loads((workdir / "outputs" / "i-am-happy" / "results.json").read_text())
    verdicts = [a["status"] for a in doc["audit"] if a["kind"] == "claim"]
    rows = [line for line in claims.splitlines() if line.startswith("| **")]
    assert [row.split("**")[1] for row in rows] == verdicts
    assert {"fails", "untested"} <= set(verdicts)
    assert "**mismatch**" not in md
    assert "| mismatch: carried from weights[1][0]" in audit
