"""CI reports: JUnit XML against the common schema, GitHub annotations, summaries."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import write_spec

from sdpa_cli.report.annotate import escape_data, escape_property

DATA = Path(__file__).parent / "data"
# One match, one accepted finding, and a list whose second number is wrong (line 14, col 17).
TINY = """study: worked-example
title: tiny
source: "000_0e5125495e9ebe01.txt, test"
parts:
  - name: p
    kind: attention
    tokens: [a, b]
    q: [[1, 0], [0, 1]]
    k: [[1, 0], [0, 1]]
documented:
  - {where: "Step 1", quantity: "scores[0][0]", value: 1}
  - {where: "Step 2", quantity: "scores[0][1]", value: 5, accepted: "a known slip"}
  - {where: "Step 3", quantity: "scores[1]",
     value: [0, 7]}
"""


@pytest.fixture
def specs(specs: Path) -> Path:
    """The shared batch with a worked example, c-tiny, in place of c-ok."""
    (specs / "c-ok.yaml").unlink()
    write_spec(specs, "c-tiny.yaml", TINY)
    return specs


def _junit(sdpa, specs: Path, workdir: Path, *extra: str) -> Path:
    xml = workdir / "reports" / "junit.xml"
    r = sdpa("run", str(specs), "--no-plots", "--junit-xml", str(xml), "--annotations", "none",
             *extra)
    assert r.code in (0, 1), r.err
    return xml


def test_junit_validates_against_the_common_schema(sdpa, specs, workdir):
    xmlschema = pytest.importorskip("xmlschema")
    xml = _junit(sdpa, specs, workdir)
    schema = xmlschema.XMLSchema(str(DATA / "junit-jenkins.xsd"))
    schema.validate(str(xml))  # raises with the offending element if it does not fit


def test_junit_parses_in_junitparser_with_the_right_cases(sdpa, specs, workdir):
    junitparser = pytest.importorskip("junitparser")
    xml = _junit(sdpa, specs, workdir, "--check")
    suites = {s.name: s for s in junitparser.JUnitXml.fromfile(str(xml))}
    assert set(suites) == {"a-ok", "b-failing", "c-tiny"}
    ok, failing, tiny = suites["a-ok"], suites["b-failing"], suites["c-tiny"]
    assert (ok.tests, ok.failures, ok.errors) == (4, 0, 0)  # one check per (dim, rule)
    assert failing.failures == failing.tests == 2
    # tiny: 2 checks (identities, audit) + 4 audited numbers; the audit check and one number fail
    assert (tiny.tests, tiny.failures) == (6, 2)
    cases = {c.name: c for c in tiny}
    accepted = cases["audit: 000_0e5125495e9ebe01.txt, Step 2: scores[0][1]"]
    assert accepted.is_passed and "a known slip" in (accepted.system_out or "")
    wrong = cases["audit: 000_0e5125495e9ebe01.txt, Step 3: scores[1][1]"]
    assert not wrong.is_passed and "printed 7" in wrong.result[0].message
    props = {p.name: p.value for p in tiny.properties()}
    assert props["study"] == "worked-example"
    assert props["accepted: audit: 000_0e5125495e9ebe01.txt, Step 2: scores[0][1]"] == \
        "a known slip"
    assert all(float(s.time) >= 0 for s in suites.values())


def test_fail_fast_skips_appear_as_skipped_cases(sdpa, specs, workdir):
    junitparser = pytest.importorskip("junitparser")
    xml = _junit(sdpa, specs, workdir, "--check", "--fail-fast")
    suites = {s.name: s for s in junitparser.JUnitXml.fromfile(str(xml))}
    assert suites["c-tiny"].skipped == 1


def test_github_annotations_point_at_the_documented_number(sdpa, workdir, monkeypatch):
    spec = write_spec(workdir, "tiny.yaml", TINY)
    summary = workdir / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    r = sdpa("worked-example", str(spec), "--no-write", "-q", "--check")
    assert r.code == 1
    lines = [ln for ln in r.err.splitlines() if ln.startswith("::error")]
    assert lines == [f"::error file={spec},line=14,col=17,title=sdpa audit::tiny: "
                     "000_0e5125495e9ebe01.txt, Step 3: scores[1][1]: printed 7, computed 1.0"]
    text = summary.read_text()
    assert "| tiny | worked-example | ❌ failed | 1/2 |" in text
    assert f"`{spec}:14`" in text
    assert not (workdir / "outputs").exists()  # --no-write


def test_no_annotations_without_github_actions(sdpa, workdir, monkeypatch):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    spec = write_spec(workdir, "tiny.yaml", TINY)
    r = sdpa("worked-example", str(spec), "--no-write", "-q")
    assert "::error" not in r.err


def test_bad_spec_becomes_an_annotation_at_its_line(sdpa, workdir):
    spec = write_spec(workdir, "bad.yaml", "study: variance\ndims: [4, -3]\n")
    r = sdpa("variance", str(spec), "--annotations", "github")
    assert r.code == 2
    m = re.search(r"^::error file=([^,]+),line=2,col=\d+,title=sdpa%3A bad spec::.*dims",
                  r.err, re.M)
    assert m and m.group(1) == str(spec).replace(":", "%3A").replace(",", "%2C")


def test_gitlab_codequality_lists_each_failure(sdpa, specs, workdir):
    report = workdir / "cq.json"
    r = sdpa("run", str(specs), "--no-plots", "--no-write", "--codequality", str(report), "-q")
    assert r.code == 0
    issues = json.loads(report.read_text())
    assert {i["check_name"] for i in issues} == {"sdpa-check", "sdpa-audit"}
    assert len({i["fingerprint"] for i in issues}) == len(issues)
    audit = next(i for i in issues if i["check_name"] == "sdpa-audit")
    assert audit["location"] == {"path": str(specs / "c-tiny.yaml"), "lines": {"begin": 14}}


def test_escaping_follows_githubs_rules():
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


def test_no_write_touches_nothing_and_keeps_the_exit_code(sdpa, specs, workdir):
    before = sorted(p.relative_to(workdir) for p in workdir.rglob("*"))
    r = sdpa("run", str(specs), "--no-write", "--check", "--format", "json")
    assert r.code == 1 and "--no-write: nothing was written" in r.err
    assert {e["name"]: e["status"] for e in r.json()["experiments"]} == {
        "a-ok": "passed", "b-failing": "failed", "c-tiny": "failed"}
    r = sdpa("variance", str(specs / "b-failing.yaml"), "--no-write", "--check",
             "--format", "json")
    assert r.code == 1 and r.json()["passed"] is False
    assert sorted(p.relative_to(workdir) for p in workdir.rglob("*")) == before


def test_worked_example_all_writes_junit(sdpa, workdir):
    junitparser = pytest.importorskip("junitparser")
    xml = workdir / "all.xml"
    r = sdpa("worked-example", "--all", "--no-write", "-q", "--junit-xml", str(xml),
             "--format", "json")
    suites = list(junitparser.JUnitXml.fromfile(str(xml)))
    assert [s.name for s in suites] == [e["name"] for e in r.json()["examples"]]
    assert sum(s.tests for s in suites) == sum(len(e["checks"]) + len(e["audit"])
                                               for e in r.json()["examples"])


def test_a_bad_spec_reaches_codequality_and_the_step_summary(sdpa, workdir, monkeypatch):
    spec = write_spec(workdir, "bad.yaml", "study: variance\ndims: [4, -3]\n")
    summary = workdir / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    report = workdir / "reports" / "cq.json"
    r = sdpa("run", str(spec), "--out", "batch", "--codequality", str(report))
    assert r.code == 2
    issues = json.loads(report.read_text())
    assert [(i["check_name"], i["severity"], i["location"]) for i in issues] == [
        ("sdpa-spec", "blocker", {"path": str(spec), "lines": {"begin": 2}})]
    assert "dims[1]: must be ≥ 1" in issues[0]["description"]
    text = summary.read_text()
    assert text.startswith("## sdpa: bad input, nothing ran") and f"{spec}:2:" in text
    assert not (workdir / "batch").exists()  # nothing else was written
