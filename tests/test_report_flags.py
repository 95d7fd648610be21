"""Flags that name where sdpa writes: --junit-xml, --codequality, --out; worked variances."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from attack import Bad, check, snapshot

SPEC = "study: variance\ndims: [3]\npairs: 10\nseed: 1\n"
SMALL = ["variance", "--dims", "3", "--pairs", "10", "--seed", "1", "--no-plots", "-q"]
NOT_OURS = "holds a file sdpa did not write"
PYTEST_XML = ('<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">'
              "<testsuite/></testsuites>\n")
ESLINT = json.dumps([{"description": "x", "check_name": "no-unused-vars", "fingerprint": "1",
                      "severity": "minor", "location": {"path": "a.js", "lines": {"begin": 1}}}])


def _sparse(name: str, size: int):
    def make(w: Path) -> None:
        with (w / name).open("wb") as f:
            f.truncate(size)
    return make


def _sdpa_junit_cut(w: Path) -> None:
    """sdpa's own first bytes, but not its end: a report cut short is not replaced either."""
    (w / "r.xml").write_text('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="sdpa" '
                             'tests="1">\n  <testsuite name="mine">\n', encoding="utf-8")


def worked(variances: str) -> dict[str, str]:
    return {"w.yaml": "study: worked-example\nparts:\n  - name: s\n    kind: scaling-arithmetic"
                      f"\n    dims: [1, 2, 3]\n    variances: {variances}\n"}


CORPUS = [
    Bad("junit-over-the-spec", ["run", "s.yaml", "--out", "O", "--no-plots", "--junit-xml",
                                "s.yaml"], f"s.yaml {NOT_OURS} (not an sdpa JUnit XML report)",
        {"s.yaml": SPEC}, "--junit-xml: "),
    Bad("codequality-over-the-spec", ["run", "s.yaml", "--out", "O", "--no-plots",
                                      "--codequality", "s.yaml"],
        f"s.yaml {NOT_OURS} (not an sdpa code-quality report)", {"s.yaml": SPEC},
        "--codequality: "),
    Bad("junit-over-a-readme", [*SMALL, "--junit-xml", "README.md"], NOT_OURS,
        {"README.md": "# my notes\n"}, "--junit-xml: "),
    Bad("junit-over-pytests-report", [*SMALL, "--junit-xml", "report.xml"], NOT_OURS,
        {"report.xml": PYTEST_XML}, "--junit-xml: "),
    Bad("junit-over-a-cut-sdpa-report", [*SMALL, "--junit-xml", "r.xml"], NOT_OURS,
        make=_sdpa_junit_cut, where="--junit-xml: "),
    Bad("junit-over-a-huge-file", [*SMALL, "--junit-xml", "big.xml"], NOT_OURS,
        make=_sparse("big.xml", 65 * 1024**2), where="--junit-xml: "),
    Bad("codequality-over-eslints", [*SMALL, "--codequality", "gl.json"], NOT_OURS,
        {"gl.json": ESLINT}, "--codequality: "),
    Bad("codequality-over-an-object", [*SMALL, "--codequality", "gl.json"], NOT_OURS,
        {"gl.json": '{"a": 1}'}, "--codequality: "),
    Bad("codequality-over-not-json", [*SMALL, "--codequality", "gl.json"], NOT_OURS,
        {"gl.json": "not json"}, "--codequality: "),
    Bad("codequality-over-a-huge-file", [*SMALL, "--codequality", "gl.json"], NOT_OURS,
        make=_sparse("gl.json", 65 * 1024**2), where="--codequality: "),
    Bad("junit-through-a-link-to-notes", [*SMALL, "--junit-xml", "r.xml"],
        "r.xml (which leads to", {"notes.txt": "mine\n"}, "--junit-xml: ",
        {"r.xml": "notes.txt"}),
    Bad("codequality-through-a-link-to-the-spec", ["run", "s.yaml", "--out", "O", "--no-plots",
                                                   "--codequality", "q.json"],
        NOT_OURS, {"s.yaml": SPEC}, "--codequality: ", {"q.json": "s.yaml"}),
    Bad("out-in-proc", ["variance", "--dims", "3", "--pairs", "10", "--out", "/proc/x"],
        "cannot write in /proc: No such file or directory", {}, "--out: "),
    Bad("out-in-proc-self", ["variance", "--dims", "3", "--pairs", "10", "--out",
                             "/proc/self/x/y"], "cannot write in /proc/self/x", {}, "--out: "),
    Bad("batch-out-in-proc", ["run", "s.yaml", "--out", "/proc/x", "-q"],
        "cannot write in /proc/x", {"s.yaml": SPEC}, "--out: "),
    Bad("worked-variance-tiny-reference", ["worked-example", "w.yaml", "--no-plots", "-q"],
        "a variance of 4.94e-324 is below 1e-150", worked("[5e-324, 1e150, 3]"),
        "w.yaml:6:16: parts[0].variances: "),
    Bad("worked-variance-tiny-later", ["worked-example", "w.yaml", "--no-plots", "-q"],
        "a variance of 1e-200 is below 1e-150", worked("[1, 1e-200, 3]"),
        "w.yaml:6:16: parts[0].variances: "),
    Bad("worked-variance-negative", ["worked-example", "w.yaml", "--no-plots", "-q"],
        "is -5: a variance is the mean of squares and cannot be negative",
        worked("[1, -5, 3]"), "w.yaml:6:20: parts[0].variances[1]: "),
]


def test_corpus_is_large_and_distinct():
    assert len(CORPUS) >= 15
    assert len({b.id for b in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("case", CORPUS, ids=lambda b: b.id)
def test_a_flag_that_would_overwrite_or_cannot_write_is_one_line(sdpa, workdir: Path,
                                                                 case: Bad):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a raw RuntimeWarning is an internal error here
        check(sdpa, workdir, case)


@pytest.mark.parametrize("flag", ["--junit-xml", "--codequality"])
def test_sdpa_replaces_its_own_report_and_an_empty_file(sdpa, workdir: Path, flag):
    (workdir / "empty").write_bytes(b"")
    for target in ("r", "r", "empty"):  # the second run replaces the first run's report
        got = sdpa(*SMALL, "--out", "o", flag, target)
        assert got.code == 0, got.err
        assert (workdir / target).read_bytes().startswith(b"<?xml" if flag == "--junit-xml"
                                                          else b"[")


def test_a_report_with_findings_is_replaced_by_the_next_run(sdpa, workdir: Path):
    """A code-quality report that lists failures (issues named sdpa-…) is sdpa's too."""
    (workdir / "s.yaml").write_text(SPEC + "documented:\n  - {where: a claim, row: {dim: 3, "
                                    "scaling: none}, quantity: variance, value: 99}\n",
                                    encoding="utf-8")
    first = sdpa("run", "s.yaml", "--out", "O", "--no-plots", "-q", "--codequality", "q.json")
    issues = json.loads((workdir / "q.json").read_text(encoding="utf-8"))
    assert first.code == 0 and issues and issues[0]["check_name"].startswith("sdpa-"), first.err
    again = sdpa("run", "s.yaml", "--out", "O", "--no-plots", "-q", "--codequality", "q.json",
                 "--force")
    assert again.code == 0, again.err


def test_bad_input_never_writes_its_code_quality_report_over_a_users_file(sdpa, workdir):
    """The bad-input path writes --codequality too: over the spec it is refused, the spec
    kept."""
    (workdir / "s.yaml").write_text(SPEC, encoding="utf-8")
    before = snapshot(workdir)
    got = sdpa("variance", "--dims", "x", "--codequality", "s.yaml")
    assert got.code == 2 and f"--codequality: s.yaml {NOT_OURS}" in got.err, got.err
    assert snapshot(workdir) == before


def test_out_on_a_read_only_disk_stays_exit_1(sdpa, workdir: Path, monkeypatch):
    """The machine's state, not the path: a full or read-only disk is exit 1, unnamed."""
    import errno

    from sdpa_cli.report import runfolder

    def full(*a, **k):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(runfolder, "make_folders", full)
    got = sdpa(*SMALL, "--out", "o")
    assert got.code == 1 and got.err.strip().startswith("cannot write in ."), got.err
