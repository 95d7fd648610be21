"""report.html opens with the findings: each experiment's verdict and found:
lines, the documents' root errors and the claims' coverage, each linking to its section."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import EXPERIMENTS


def test_report_opens_with_findings_that_link_to_their_sections(sdpa, workdir: Path) -> None:
    specs = [EXPERIMENTS / "worked-example" / f"{n}.yaml"
             for n in ("i-am-happy", "variance-by-dimension")]
    r = sdpa("run", *specs, "--out", "batch", "-q", "--no-plots")
    assert r.code == 0, r.err
    page = (workdir / "batch" / "report.html").read_text(encoding="utf-8")
    body = page[page.index("<body>"):]
    # the answer first: the findings section comes before the table of contents
    assert body.index('<div id="findings"') < body.index('<nav id="contents">')
    findings = body[body.index('<div id="findings"'):body.index('<nav id="contents">')]
    # root errors first: i-am-happy's two wrong weight rows, variance-by-dimension's two
    # inconsistencies (each entered as such in its spec), 5 claims judged in i-am-happy
    assert "documents: 2 errors of their own, 2 inconsistencies" in findings
    assert re.search(r"claims: \d+ holds, \d+ partly, \d+ fails, \d+ untested", findings)
    assert "Root errors of the documents" in findings and "material" in findings
    for name in ("i-am-happy", "variance-by-dimension"):
        assert f'<a href="#x-{name}">' in findings  # each line links to its section
    ids = set(re.findall(r'id="([^"]+)"', page))
    links = set(re.findall(r'href="#([^"]+)"', findings))
    assert links and links <= ids
