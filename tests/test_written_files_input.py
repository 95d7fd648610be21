"""sdpa's own files read back, damaged or planted: results.json (compare), the last-failed
record, run and batch manifests. Each is exit 2, one line naming the file and the field, read
without blocking on it or reading it whole; nothing written or lost."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from attack import Bad, check, spec, tampered

from sdpa_cli.report import manifest
from sdpa_cli.runner.selection import LAST_FAILED

LEVELS = 100_000
DIGITS = "9" * 5000  # beyond Python's limit on parsing digits
DEEP_ARRAY = "[" * LEVELS + "]" * LEVELS
DEEP_OBJECT = '{"a": ' * LEVELS + "1" + "}" * LEVELS
RUN = spec("study: variance\ndims: [3]\npairs: 10\n")


def planted(name: str, content: str, other: str = '{"study": "variance"}') -> dict[str, str]:
    """Folders A (a plain result) and B (its results.json planted) for `sdpa compare A B`."""
    return {"A/results.json": other, f"B/{name}": content}



PLANTED = [
    Bad("compare-deep-array", ["compare", "A", "B"], "results.json nests more than 64",
        planted("results.json", DEEP_ARRAY), "B/results.json:1:65:"),
    Bad("compare-deep-object", ["compare", "A", "B"], "results.json nests more than 64",
        planted("results.json", DEEP_OBJECT), "B/results.json:1:"),
    Bad("compare-deep-second-line", ["compare", "A", "B"], "nests more than 64",
        planted("results.json", '{"rows":\n' + DEEP_ARRAY + "}"), "B/results.json:2:"),
    Bad("compare-5000-digit-number", ["compare", "A", "B"], "cannot be read as JSON",
        planted("results.json", f'{{"x": {DIGITS}}}'), "B/results.json:"),
    Bad("compare-not-json", ["compare", "A", "B"], "is not valid JSON",
        planted("results.json", '{"rows": [1, 2'), "B/results.json:1:"),
    Bad("last-failed-deep-array", ["run", "s.yaml", "--out", "F", "--last-failed"],
        "the last-failed record nests more than 64",
        {**RUN, f"F/{LAST_FAILED}": "[" * 2 * LEVELS + "]" * 2 * LEVELS}, f"F/{LAST_FAILED}:1:"),
    Bad("last-failed-deep-object", ["run", "s.yaml", "--out", "F", "--lf"],
        "the last-failed record nests more than 64", {**RUN, f"F/{LAST_FAILED}": DEEP_OBJECT},
        f"F/{LAST_FAILED}:1:"),
    Bad("last-failed-corrupt", ["run", "s.yaml", "--out", "F", "--lf"],
        "the last-failed record is not valid JSON",
        {**RUN, f"F/{LAST_FAILED}": '{"failed": ['}, f"F/{LAST_FAILED}:1:"),
    Bad("run-folder-manifest-deep", ["variance", "s.yaml", "--out", "R"],
        "its manifest.json nests more than 64 levels deep", {**RUN, "R/manifest.json":
                                                             DEEP_ARRAY}, "--out:"),
    Bad("batch-manifest-deep", ["run", "s.yaml", "--out", "D"],
        "its sdpa-batch.json nests more than 64 levels deep",
        {**RUN, "D/index.md": "mine", "D/sdpa-batch.json": DEEP_OBJECT}, "--out:"),
]


def test_corpus_is_large_and_distinct():
    ids = [b.id for b in (*PLANTED, *DAMAGED)]
    assert len(ids) >= 30
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("bad", PLANTED, ids=lambda b: b.id)
def test_a_planted_file_is_one_line_naming_it(sdpa, workdir: Path, bad: Bad):
    check(sdpa, workdir, bad)


# --- what sdpa wrote (the `written` fixture's R and B), then damaged -------------------------

Setup = Callable[[Path, Path], None]  # (workdir, written) → the damaged copy in workdir


def _results(change: Callable[[dict], object], text: str | None = None) -> Setup:
    """R and R2, R2's results.json changed (or replaced by `text`)."""
    return lambda work, written: tampered(written, work, change, text)


def _manifest(change: Callable[[dict], object], *, digest: bool) -> Callable[[Path, Path], None]:
    """The batch B with its run folder's manifest edited; with `digest`, the edit also
    recomputes manifest_sha256 (a careful forger), so only the field checks remain."""
    def setup(work: Path, template: Path) -> None:
        shutil.copytree(template / "specs", work / "specs")
        shutil.copytree(template / "B", work / "B")
        path = work / "B" / "one" / manifest.NAME
        doc = json.loads(path.read_text(encoding="utf-8"))
        change(doc)
        if digest:
            doc[manifest.SELF_DIGEST] = manifest.self_digest(doc)
        path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return setup


def _record(text: str) -> Callable[[Path, Path], None]:
    def setup(work: Path, template: Path) -> None:
        shutil.copytree(template / "specs", work / "specs")
        shutil.copytree(template / "B", work / "B")
        (work / "B" / ".sdpa-lastfailed.json").write_text(text, encoding="utf-8")
    return setup


def _batch_manifest(change: Callable[[dict], object]) -> Callable[[Path, Path], None]:
    def setup(work: Path, template: Path) -> None:
        shutil.copytree(template / "specs", work / "specs")
        shutil.copytree(template / "B", work / "B")
        path = work / "B" / manifest.BATCH_NAME
        doc = json.loads(path.read_text(encoding="utf-8"))
        change(doc)
        path.write_text(json.dumps(doc), encoding="utf-8")
    return setup


def _set(path: tuple, value: object) -> Callable[[dict], None]:
    def change(doc: dict) -> None:
        target = doc
        for p in path[:-1]:
            target = target[p]
        target[path[-1]] = value
    return change


def _drop(key: str) -> Callable[[dict], None]:
    return lambda doc: doc.pop(key)


def _nan_se(work: Path, written: Path) -> None:
    path = tampered(written, work)
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["rows"][0]["se"] = "NAN"
    path.write_text(json.dumps(doc).replace('"NAN"', "NaN"), encoding="utf-8")


CMP = ["compare", "R", "R2"]
RUN_B = ["run", "specs", "--out", "B", "--no-plots", "-q", "--check"]

DAMAGED = [
    Bad("rows-list-of-ints", CMP, "rows[0]: expected an object", where="R2/results.json:",
        make=_results(_set(("rows",), [1, 2]))),
    Bad("rows-a-string", CMP, "rows: expected a list", where="R2/results.json:",
        make=_results(_set(("rows",), "x"))),
    Bad("rows-a-mapping", CMP, "rows: expected a list", where="R2/results.json:",
        make=_results(_set(("rows",), {"a": 1}))),
    Bad("row-se-a-word", CMP, "rows[0].se: expected a number or null", where="R2/results.json:",
        make=_results(_set(("rows", 0, "se"), "x"))),
    Bad("row-se-nan", CMP, "rows[0].se: expected a number or null", where="R2/results.json:",
        make=_nan_se),  # NaN is no JSON value: written by hand
    Bad("row-se-negative", CMP, "rows[0].mean_se: expected a number ≥ 0", where="R2/results.json:",
        make=_results(_set(("rows", 0, "mean_se"), -1.0))),
    Bad("results-no-version", CMP, "schema_version: expected a value", where="R2/results.json:",
        make=_results(_drop("schema_version"))),
    Bad("results-a-list", CMP, "(the document): expected an object", where="R2/results.json:",
        make=_results(lambda d: None, text="[]")),
    Bad("results-not-json", CMP, "is not valid JSON (", where="R2/results.json:",
        make=_results(lambda d: None, text='{"rows": [')),
    Bad("check-passed-yes", CMP, "checks[0].passed: expected true or false",
        where="R2/results.json:", make=_results(_set(("checks", 0, "passed"), "yes"))),
    Bad("tables-not-lists", CMP, "tables.t: expected a list", where="R2/results.json:",
        make=_results(_set(("tables",), {"t": 5}))),
    Bad("figure-name-climbs", CMP, "layout.figures[0].name: expected a string matching",
        where="R2/results.json:", make=_results(_set(("layout", "figures"), [{"name": "../x"}]))),
    Bad("status-edited", RUN_B, f"{manifest.SELF_DIGEST}: expected the digest",
        where="output folder: B/one/manifest.json:",
        make=_manifest(_set(("status",), "passed"), digest=False)),
    Bad("status-edited-digest-too", RUN_B, 'status: expected "failed" as results.json',
        where="output folder: B/one/manifest.json:",
        make=_manifest(_set(("status",), "passed"), digest=True)),
    Bad("manifest-workers-word", RUN_B, "workers is not what sdpa writes (expected a whole "
        "number)", where="output folder: B/one/manifest.json:",
        make=_manifest(_set(("workers",), "two"), digest=True)),
    Bad("manifest-status-unknown", RUN_B, "status is not what sdpa writes",
        where="output folder: B/one/manifest.json:",
        make=_manifest(_set(("status",), "maybe"), digest=True)),
    Bad("lastfailed-number", [*RUN_B, "--lf"], "failed[0]: expected a string",
        where="B/.sdpa-lastfailed.json:", make=_record('{"schema_version": 1, "failed": [3]}')),
    Bad("lastfailed-not-list", [*RUN_B, "--lf"], "failed: expected a list",
        where="B/.sdpa-lastfailed.json:", make=_record('{"schema_version": 1, "failed": "one"}')),
    Bad("lastfailed-not-json", [*RUN_B, "--lf"], "is not valid JSON (",
        where="B/.sdpa-lastfailed.json:", make=_record("{")),
    Bad("lastfailed-extra-field", [*RUN_B, "--lf"], "passed: expected no such field",
        where="B/.sdpa-lastfailed.json:",
        make=_record('{"schema_version": 1, "failed": [], "passed": ["one"]}')),
    Bad("batch-manifest-bytes-word", RUN_B, "outputs[0].bytes is not what sdpa writes "
        "(expected a whole number)", where="--out: B: index.md, report.html are not sdpa's",
        make=_batch_manifest(_set(("outputs", 0, "bytes"), "x"))),
    Bad("batch-manifest-no-version", RUN_B, "sdpa_version is not what sdpa writes",
        where="--out: B:", make=_batch_manifest(_drop("sdpa_version"))),
]


@pytest.mark.parametrize("bad", DAMAGED, ids=lambda b: b.id)
def test_a_damaged_file_of_sdpa_s_is_one_line_naming_its_field(sdpa, workdir: Path, written,
                                                                bad: Bad):
    setup = bad.make
    assert setup is not None
    check(sdpa, workdir, replace(bad, make=lambda work: setup(work, written)))


def test_a_results_file_with_a_5000_digit_number_is_refused_in_a_whole_sentence(sdpa, workdir,
                                                                              written):
    """The line quoted Python's message cut at 80 characters ("…value has 5000 di")."""
    tampered(written, workdir)
    path = workdir / "R2" / "results.json"
    path.write_text(path.read_text(encoding="utf-8").replace('"pairs": 10', '"pairs": '
                                                             + "1" * 5000, 1), encoding="utf-8")
    got = sdpa("compare", "R", "R2")
    assert got.code == 2
    assert got.err == ("R2/results.json: results.json cannot be read as JSON (it holds a whole "
                       "number of more than 4300 digits); not sdpa's: remove or replace it\n")



def test_a_quoted_library_message_keeps_its_end():
    from sdpa_cli.errors import whole

    long = "first words " + "x " * 300 + "and what to do last"
    shown = whole(long)
    assert shown.startswith("first words") and "and what to do last (" in shown
    assert len(shown) < 300 and whole("short one") == "short one"



# --- too large to read, or never done reading: refused before reading ------------------------


def _sparse(path: Path, size: int = 3 * 1024**3) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        f.truncate(size)



def test_compare_refuses_a_huge_results_json_without_reading_it(sdpa, workdir: Path):
    for side in ("A", "B"):
        _sparse(workdir / side / "results.json")
    r = sdpa("compare", "A", "B")
    lines = r.err.strip().splitlines()
    assert r.code == 2 and len(lines) == 1, r.err
    assert lines[0].startswith("A/results.json:") and "more than sdpa writes" in lines[0]



@pytest.mark.slow  # reads 6 GB (of sparse zeros): about 12 s
def test_compare_of_huge_figures_uses_bounded_memory(sdpa, workdir: Path):
    import resource
    import subprocess
    import sys

    for side in ("A", "B"):
        assert sdpa("variance", "--dims", "3", "--pairs", "10", "--seed", "1", "--no-plots",
                    "-q", "--out", side).code == 0
        _sparse(workdir / side / "x.png")  # 3 GB of zeros each: compared a chunk at a time

    def cap() -> None:  # less address space than one file: reading it whole must fail
        resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))

    done = subprocess.run([sys.executable, "-m", "sdpa_cli", "compare", "A", "B", "--exact"],
                          cwd=workdir, preexec_fn=cap, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr



@pytest.mark.parametrize("how", ["dev-zero", "fifo", "huge"])
def test_a_planted_last_failed_record_is_refused_not_read_whole(sdpa, workdir: Path, how):
    # With --last-failed the record chooses what runs, so one that cannot be sdpa's
    # is bad input (one line, exit 2), found without blocking on it or reading it whole.
    (workdir / "s.yaml").write_text("study: variance\ndims: [3]\npairs: 10\nseed: 1\n",
                                    encoding="utf-8")
    record = workdir / "R" / ".sdpa-lastfailed.json"
    record.parent.mkdir()
    if how == "dev-zero":
        record.symlink_to("/dev/zero")
    elif how == "fifo":
        os.mkfifo(record)
    else:
        _sparse(record)
    r = sdpa("run", "s.yaml", "--out", "R", "--lf", "--no-plots", "-q")
    lines = r.err.strip().splitlines()
    assert r.code == 2 and len(lines) == 1, r.err
    assert lines[0].startswith("R/.sdpa-lastfailed.json: ") and "last-failed record" in lines[0]
    assert [p.name for p in record.parent.iterdir()] == [record.name]  # nothing written
    r = sdpa("run", "s.yaml", "--out", "R", "--no-plots", "-q")  # not choosing by it: no record
    assert r.code == 0, r.err
