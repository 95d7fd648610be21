"""Flags that name where sdpa writes: --junit-xml, --codequality, --out; worked variances."""

from __future__ import annotations

import json
import os
import stat
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


# --- a report's path: never blocking on a FIFO, never replacing a link, a device or sdpa's own
# files ----------------------------------------------------------------------------------------


def test_junit_xml_to_a_fifo_nobody_reads_fails_without_blocking(sdpa, workdir: Path):
    os.mkfifo(workdir / "fifo")
    r = sdpa("variance", "--dims", "3", "--pairs", "10", "--seed", "1", "--no-plots", "-q",
             "--junit-xml", "fifo")
    assert r.code == 1 and r.err.strip() == "--junit-xml: cannot write fifo: a FIFO nobody reads"
    assert (workdir / "fifo").is_fifo()



def test_junit_xml_through_a_symlink_keeps_the_link(sdpa, workdir: Path):
    (workdir / "real.xml").write_text("", encoding="utf-8")  # empty: nothing of the user's
    (workdir / "link.xml").symlink_to("real.xml")
    r = sdpa("variance", "--dims", "3", "--pairs", "10", "--seed", "1", "--no-plots", "-q",
             "--junit-xml", "link.xml")
    assert r.code == 0, r.err
    assert (workdir / "link.xml").is_symlink()
    assert (workdir / "real.xml").read_text(encoding="utf-8").startswith("<?xml")



@pytest.mark.skipif(os.geteuid() != 0, reason="making device nodes needs root")
@pytest.mark.parametrize(("minor", "code"), [(3, 0), (7, 1)])  # null, full
def test_a_device_named_for_a_report_is_written_not_replaced(sdpa, workdir: Path, minor, code):
    # write_atomic used to swap a regular file in for the device: as root, --junit-xml
    # /dev/null (or /dev/full) replaced the system's device node
    dev = workdir / "dev"
    os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    for flag in ("--junit-xml", "--codequality"):
        r = sdpa("variance", "--dims", "3", "--pairs", "10", "--seed", "1", "--no-plots", "-q",
                 flag, "dev", "--out", f"run{flag}")
        assert r.code == code, r.err
        assert stat.S_ISCHR(os.lstat(dev).st_mode)
        if code:
            assert r.err.strip() == f"{flag}: cannot write dev: No space left on device"



def test_a_step_summary_fifo_fails_without_blocking(sdpa, workdir: Path, monkeypatch):
    os.mkfifo(workdir / "fifo")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", "fifo")
    r = sdpa("variance", "--dims", "3", "--pairs", "10", "--seed", "1", "--no-plots", "-q",
             "--annotations", "github")
    assert r.code == 1
    assert r.err.strip().splitlines()[-1] == ("GITHUB_STEP_SUMMARY: cannot write fifo: a FIFO "
                                              "nobody reads")



def test_a_bad_specs_step_summary_fifo_names_the_variable(sdpa, workdir: Path, monkeypatch):
    # a bad spec's summary went out as "cannot write fifo: …", naming no variable
    os.mkfifo(workdir / "fifo")
    (workdir / "s.yaml").write_text("study: variance\ndims: [0]\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", "fifo")
    r = sdpa("variance", "s.yaml", "--annotations", "github")
    assert r.code == 2
    assert r.err.strip().splitlines()[-1] == ("GITHUB_STEP_SUMMARY: cannot write fifo: a FIFO "
                                              "nobody reads")


def test_a_report_never_lands_in_a_run_folder_or_over_a_batch_file(sdpa, workdir: Path):
    """--junit-xml R/manifest.json used to overwrite the run folder's manifest after the run,
    so sdpa then refused to replace its own folder. Reports aimed inside a run folder, or
    over a batch folder's own files, are refused before anything runs; nothing is written."""
    small = ("--dims", "3", "--pairs", "10", "--seed", "1", "--no-plots", "-q")
    assert sdpa("variance", *small, "--out", "R").code == 0
    before = {p.name: p.read_bytes() for p in (workdir / "R").iterdir()}
    for flag in ("--junit-xml", "--codequality"):
        r = sdpa("variance", *small, "--out", "other", flag, "R/manifest.json")
        assert r.code == 2 and r.err.strip() == \
            f"{flag}: R is an sdpa run folder; write the report outside it"
        r = sdpa("variance", *small, "--out", "new", flag, "new/report.xml")
        assert r.code == 2 and r.err.strip() == \
            f"{flag}: new is the run folder this command writes; write the report outside it"
        r = sdpa("run", str(workdir / "R" / "spec.yaml"), "--out", "B", "-q", flag,
                 "B/index.md")
        assert r.code == 2 and r.err.strip() == \
            f"{flag}: index.md is one of the batch folder's own files; choose another name"
    assert {p.name: p.read_bytes() for p in (workdir / "R").iterdir()} == before
    assert not any((workdir / n).exists() for n in ("other", "new", "B"))
    # A report beside the batch's run folders is fine, and the batch can run again over it.
    for _ in range(2):
        r = sdpa("run", str(workdir / "R" / "spec.yaml"), "--out", "B", "-q", "--junit-xml",
                 "B/junit.xml")
        assert r.code == 0, r.err
    assert (workdir / "B" / "junit.xml").read_text(encoding="utf-8").startswith("<?xml")



def test_junit_xml_through_a_link_never_writes_into_another_run(sdpa, workdir, written):
    import shutil

    shutil.copytree(written / "R", workdir / "other")
    before = snapshot(workdir / "other")
    (workdir / "to-results").symlink_to("other/results.json")
    (workdir / "to-folder").symlink_to("other")
    for report in ("to-results", "to-folder/new.xml", "other/deeper/new.xml"):
        got = sdpa(*SMALL, "--out", "mine", "--junit-xml", report)
        assert got.code == 2 and got.err.startswith("--junit-xml: "), got.err
        assert "is an sdpa run folder; write the report outside it" in got.err
    assert snapshot(workdir / "other") == before and not (workdir / "mine").exists()

