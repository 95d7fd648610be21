"""Where a run's folder goes: its name, --out, the folders sdpa replaces (its own, whole) and
those it refuses (another's, a link to one, a leftover it cannot prove its own)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from attack import Bad, check, snapshot, spec

from sdpa_cli.report import manifest

V = "study: variance\ndims: [3]\npairs: 10\nseed: 1\n"
TINY = ("variance", "--dims", "3", "--pairs", "10", "--seed", "1", "--no-plots", "-q")


def fake_run_folder(extra: dict[str, str] | None = None, *, kind: str = manifest.KIND,
                    version: int = manifest.SCHEMA_VERSION,
                    path: str = "table.md") -> dict[str, str | bytes]:
    """A folder whose manifest.json looks like sdpa's (marker, schema, outputs) and lists
    table.md with its true size and hash: sdpa's own, unless a case changes something."""
    body = "# a table\n"
    entry = {"path": path, "bytes": len(body.encode()),
             "sha256": manifest.sha256_bytes(body.encode())}
    doc = {"kind": kind, "schema_version": version, "outputs": [entry]}
    out: dict[str, str | bytes] = {"prev/manifest.json": json.dumps(doc),
                                   "prev/table.md": body}
    out.update({f"prev/{k}": v for k, v in (extra or {}).items()})
    return out


CORPUS = [
    # --- names: a plain folder name, never a batch folder's own file ------------------------------
    Bad("name-escapes", ["variance", "s.yaml"], "must be a plain folder name",
        spec("study: variance\nname: ../../etc\n"), "s.yaml:2:7: name:"),
    Bad("name-absolute", ["variance", "s.yaml"], "must be a plain folder name",
        spec("study: variance\nname: /tmp/x\n"), "s.yaml:2:7: name:"),
    Bad("name-index-md", ["run", "s.yaml"], "index.md",
        spec("study: variance\nname: index.md\ndims: [3]\n"), "s.yaml:2:7: name:"),
    Bad("name-report-html", ["run", "s.yaml"], "report.html",
        spec("study: variance\nname: report.html\ndims: [3]\n"), "s.yaml:2:7: name:"),
    Bad("name-batch-manifest", ["run", "s.yaml"], "sdpa-batch.json",
        spec("study: variance\nname: sdpa-batch.json\ndims: [3]\n"), "s.yaml:2:7: name:"),
    Bad("duplicate-names-in-batch", ["run", "a.yaml", "b.yaml"], "output name 'same' is also "
        "used by a.yaml", {"a.yaml": "study: variance\nname: same\n",
                           "b.yaml": "study: variance\nname: same\n"}, "b.yaml: name:"),
    # --- names derived from the spec's file name --------------------------------------------------
    Bad("stem-index-md", ["run", "index.md.yaml"], "comes from the file name 'index.md.yaml'",
        {"index.md.yaml": V}, "index.md.yaml: name:"),
    Bad("stem-report-html", ["run", "report.html.yaml"], "batch folder's own file",
        {"report.html.yaml": V}, "report.html.yaml: name:"),
    Bad("stem-batch-manifest", ["run", "sdpa-batch.json.yml"], "set `name:` or rename",
        {"sdpa-batch.json.yml": V}, "sdpa-batch.json.yml: name:"),
    Bad("stem-upper-case", ["run", "INDEX.MD.yaml"], "'INDEX.MD' comes from the file name",
        {"INDEX.MD.yaml": V}, "INDEX.MD.yaml: name:"),
    Bad("null-name-index-md", ["validate", "index.md.yaml"], "comes from the file name",
        {"index.md.yaml": V + "name: null\n"}, "index.md.yaml: name:"),
    Bad("empty-name-report", ["run", "report.html.yaml"], "comes from the file name",
        {"report.html.yaml": V + "name:\n"}, "report.html.yaml: name:"),
    Bad("stem-for-study-command", ["variance", "index.md.yaml", "--no-plots"],
        "comes from the file name", {"index.md.yaml": V}, "index.md.yaml: name:"),
    Bad("yaml-and-yml-same-name", ["run", "."], "output name 'a' is also used by",
        {"a.yaml": V, "a.yml": V}, None),
    Bad("dotdot-and-spec", ["run", "..yaml", "spec.yaml"], "output name 'spec' is also used",
        {"..yaml": V + "name: null\n", "spec.yaml": V}, "spec.yaml:"),
    Bad("name-climbs", ["run", "s.yaml"], "name", {"s.yaml": V + "name: ../x\n"},
        "s.yaml:5:7: name:"),
    Bad("name-hidden", ["run", "s.yaml"], "name", {"s.yaml": V + "name: .sdpa-lastfailed.json\n"},
        "s.yaml:5:7: name:"),
    Bad("name-explicit-reserved-case", ["run", "s.yaml"], "batch folder's own file",
        {"s.yaml": V + "name: Report.HTML\n"}, "s.yaml:5:7: name:"),
    Bad("name-too-long", ["run", "s.yaml"], "name", {"s.yaml": V + "name: " + "n" * 101 + "\n"},
        "s.yaml:5:7: name:"),
    # --- --out: never the current folder, a file, or through a link to one ------------------------
    Bad("out-escapes-to-parent", ["variance", "--out", ".."], "is the current folder or holds "
        "it", {}, "--out:"),
    Bad("out-is-here", ["variance", "--out", "."], "is the current folder or holds it", {},
        "--out:"),
    Bad("out-not-a-run-folder", ["variance", "--out", "mine"], "not an sdpa run folder",
        {"mine/notes.txt": "mine"}, "--out:"),
    Bad("out-through-a-file", ["variance", "--out", "afile/run"], "afile is a file, not a "
        "folder", {"afile": "x"}, "--out:"),
    Bad("out-link-to-file", ["variance", "--out", "link"], "exists and is not a folder",
        {"afile.txt": "mine"}, "--out:", {"link": "afile.txt"}),
    Bad("out-symlink-to-user-folder", ["variance", "--out", "link"], "not an sdpa run folder",
        {"mine/manifest.json": "{}"}, "--out:", {"link": "mine"}),
    Bad("out-dangling-symlink", ["variance", "--out", "link"], "does not exist", {},
        "--out:", {"link": "nowhere/deeper"}),
    Bad("out-symlink-loop", ["variance", "--dims", "3", "--out", "L"], "loop of symbolic links",
        {}, "--out:", {"L": "L"}),
    Bad("out-symlink-loop-pair", ["variance", "--dims", "3", "--out", "a/sub"],
        "loop of symbolic links", {}, "--out:", {"a": "b", "b": "a"}),
    Bad("run-out-symlink-loop", ["run", "s.yaml", "--out", "L"], "loop of symbolic links",
        spec("study: variance\ndims: [3]\npairs: 10\n"), None, {"L": "L"}),
    # --- folders sdpa did not write: refused, untouched -------------------------------------------
    Bad("webapp-manifest-empty", ["variance", "--out", "webapp"], "not an sdpa run folder",
        {"webapp/manifest.json": "{}", "webapp/index.html": "<p>mine</p>"}, "--out:"),
    Bad("webapp-manifest-list", ["variance", "--out", "webapp"], "not an sdpa run folder",
        {"webapp/manifest.json": "[1, 2]", "webapp/app.js": "x"}, "--out:"),
    Bad("manifest-is-symlink", ["variance", "--out", "prev"], "not an sdpa run folder",
        {"prev/real.json": "{}", "prev/table.md": "x"}, "--out:",
        {"prev/manifest.json": "real.json"}),
    Bad("manifest-not-json", ["variance", "--out", "prev"], "not an sdpa run folder",
        {"prev/manifest.json": "\x00\x01garbage"}, "--out:"),
    Bad("marker-but-extra-file", ["variance", "--out", "prev"], "holds files sdpa did not "
        "write (notes.txt)", fake_run_folder({"notes.txt": "my notes"}), "--out:"),
    Bad("marker-but-changed-file", ["variance", "--out", "prev"], "changed since sdpa wrote "
        "them (table.md)", {**fake_run_folder(), "prev/table.md": "# edited by hand\n"},
        "--out:"),
    Bad("marker-but-same-size-edit", ["variance", "--out", "prev"], "changed since sdpa wrote",
        {**fake_run_folder(), "prev/table.md": "# a tablE\n"}, "--out:"),
    Bad("marker-but-missing-file", ["variance", "--out", "prev"], "lists are missing (table.md)",
        {"prev/manifest.json": fake_run_folder()["prev/manifest.json"]}, "--out:"),
    Bad("marker-lists-parent-path", ["variance", "--out", "prev"], "does not list its files",
        fake_run_folder(path="../table.md"), "--out:"),
    Bad("marker-newer-schema", ["variance", "--out", "prev"], "newer than this sdpa knows",
        fake_run_folder(version=manifest.SCHEMA_VERSION + 1), "--out:"),
    Bad("marker-of-a-batch", ["variance", "--out", "prev"], "has no sdpa marker",
        fake_run_folder(kind=manifest.BATCH_KIND), "--out:"),
    Bad("listed-file-is-a-link", ["variance", "--out", "prev"], "changed since sdpa wrote",
        {"prev/manifest.json": fake_run_folder()["prev/manifest.json"],
         "elsewhere.md": "# a table\n"}, "--out:", {"prev/table.md": "../elsewhere.md"}),
    Bad("default-out-user-folder", ["variance", "--dims", "3"], "not an sdpa run folder",
        {"outputs/variance/manifest.json": "{}"}, "output folder"),
    # --- batch folders: their own files are sdpa's or the batch is refused ------------------------
    Bad("batch-user-index", ["run", "s.yaml", "--out", "."], "index.md is not sdpa's",
        {**spec("study: variance\ndims: [3]\npairs: 10\n"), "index.md": "mine"}, "--out:"),
    Bad("batch-user-report", ["run", "s.yaml", "--out", "site"], "report.html is not sdpa's",
        {**spec("study: variance\ndims: [3]\npairs: 10\n"), "site/report.html": "mine"},
        "--out:"),
    Bad("batch-fake-manifest", ["run", "s.yaml", "--out", "site"], "not sdpa's",
        {**spec("study: variance\ndims: [3]\npairs: 10\n"), "site/index.md": "mine",
         "site/sdpa-batch.json": "{}"}, "--out:"),
    Bad("batch-manifest-is-link", ["run", "s.yaml", "--out", "site"], "not sdpa's",
        {**spec("study: variance\ndims: [3]\npairs: 10\n"), "site/index.md": "mine",
         "real.json": "{}"}, "--out:", {"site/sdpa-batch.json": "../real.json"}),
]


def test_corpus_is_large_and_distinct():
    assert len(CORPUS) >= 40
    assert len({b.id for b in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("bad", CORPUS, ids=lambda b: b.id)
def test_a_folder_sdpa_may_not_write_is_one_line(sdpa, workdir: Path, bad: Bad):
    check(sdpa, workdir, bad)


def test_the_fake_run_folder_is_replaced_when_it_is_sdpa_s(sdpa, workdir: Path):
    # The control for the marker cases above: unchanged, the same folder is sdpa's to replace,
    # so each refusal above comes from the one thing its case changed.
    for name, content in fake_run_folder().items():
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (workdir / name).write_text(str(content), encoding="utf-8")
    r = sdpa("variance", "--dims", "3", "--pairs", "10", "--seed", "1", "--no-plots", "-q",
             "--out", "prev")
    assert r.code == 0, r.err
    assert manifest.run_folder_problem(workdir / "prev") == ""
    assert (workdir / "prev" / "table.md").read_text(encoding="utf-8") != "# a table\n"


def test_a_batch_never_writes_into_a_run_folder(sdpa, workdir, written):
    shutil.copytree(written / "R", workdir / "R")
    before = snapshot(workdir / "R")
    (workdir / "s.yaml").write_text("study: variance\ndims: [3]\npairs: 10\nseed: 1\n",
                                    encoding="utf-8")
    for argv, says in [
        (["run", "s.yaml", "--out", "R", "--no-plots", "-q"], "--out: R is an sdpa run folder"),
        (["run", "s.yaml", "--out", "R/sub", "--no-plots", "-q"], "--out: R/sub lies inside"),
        ([*TINY, "--out", "R/x"], "--out: R/x lies inside the sdpa run folder"),
        (["variance", "--all", "--out", "R", "--no-plots", "-q"], "output folder: R/"),
    ]:
        got = sdpa(*argv)
        assert got.code == 2 and got.err.startswith(says), got.err
        assert "sdpa run folder" in got.err
    assert snapshot(workdir / "R") == before
    assert sdpa(*TINY, "--out", "R").code == 0  # replacing it whole is still fine


def test_a_file_that_takes_the_name_during_the_run_is_never_swapped_away(tmp_path: Path):
    from sdpa_cli.errors import RunError
    from sdpa_cli.report.runfolder import RunFolder

    target = tmp_path / "run"
    folder = RunFolder(target)
    with folder as tmp:
        (tmp / "results.json").write_text("{}", encoding="utf-8")
        target.write_text("precious\n", encoding="utf-8")  # someone else's, mid-run
        with pytest.raises(RunError, match="exists and is not a folder"):
            folder.commit()
    assert target.read_text(encoding="utf-8") == "precious\n"
    assert sorted(os.listdir(tmp_path)) == ["run"]


# --- leftovers of a killed run: removed only when they are provably sdpa's ------------------------


@pytest.mark.parametrize("kind", ["tmp", "old"])
def test_a_user_folder_named_like_a_stale_temporary_is_left_alone(sdpa, workdir: Path, kind):
    # clean_stale used to trust the name: .NAME.tmp-PID-HEX of a dead PID was removed, and
    # .NAME.old-… was renamed into NAME, whatever it held.
    stale = workdir / "outputs" / f".variance.{kind}-999999-deadbeef"
    stale.mkdir(parents=True)
    (stale / "notes.txt").write_text("precious", encoding="utf-8")
    r = sdpa("variance", "--dims", "3", "--pairs", "10", "--seed", "1", "--no-plots", "-q")
    assert r.code == 0, r.err
    assert (stale / "notes.txt").read_text(encoding="utf-8") == "precious"
    assert manifest.run_folder_problem(workdir / "outputs" / "variance") == ""


def test_a_stale_temporary_run_folder_is_still_removed(sdpa, workdir: Path):
    # the control: what a killed run leaves (sdpa's own file names, nothing else) goes
    stale = workdir / "outputs" / ".variance.tmp-999999-deadbeef"
    stale.mkdir(parents=True)
    (stale / "results.json").write_text("{", encoding="utf-8")
    (stale / "histograms.png").write_bytes(b"\x89PNG")
    r = sdpa("variance", "--dims", "3", "--pairs", "10", "--seed", "1", "--no-plots", "-q")
    assert r.code == 0, r.err
    assert not stale.exists()
