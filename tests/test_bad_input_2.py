"""Bad-input corpus, round two (issue 13): exit 2, one located line, nothing written or lost."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from attack import Bad, check
from attack import snapshot as _snapshot

from sdpa_cli.report import manifest

__all__ = ["Bad", "_snapshot", "spec", "worked"]


def spec(text: str, name: str = "s.yaml") -> dict[str, str | bytes]:
    return {name: text}


def worked(part: str) -> dict[str, str | bytes]:
    return spec("study: worked-example\ntitle: t\nsource: s\nparts:\n  - name: p\n" + part)


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


DIGITS = "9" * 5000
DEEP = "study: variance\nx: " + "[" * 5000 + "]" * 5000 + "\n"

CORPUS = [
    # --- reading the spec file: bounded, regular files only ------------------------------------
    Bad("dev-zero", ["variance", "/dev/zero"], "is a character device, not a regular file",
        {}, "/dev/zero:"),
    Bad("dev-null-run", ["run", "/dev/null"], "not a regular file", {}, "/dev/null:"),
    Bad("dangling-spec-link", ["variance", "gone.yaml"], "symbolic link to nothing", {},
        "gone.yaml:", {"gone.yaml": "nowhere.yaml"}),
    Bad("spec-name-not-utf8", ["variance", "\udcff.yaml"], "no such file", {}, "\\xff.yaml:"),
    Bad("spec-name-control", ["variance", "a\x1b[2Jb.yaml"], "control character 0x1b", {},
        "a\\x1b[2Jb.yaml:"),
    Bad("one-byte-over", ["variance", "s.yaml"], "a spec may be at most 1048576",
        spec("study: variance\n#" + "x" * (1048576 - 17) + "\n")),
    # --- YAML that used to escape as a traceback or a multi-line error --------------------------
    Bad("deep-flow-nesting", ["variance", "s.yaml"], "nested more than", spec(DEEP), "s.yaml:2:"),
    Bad("deep-map-nesting", ["variance", "s.yaml"], "nested more than",
        spec("study: variance\nx: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n"), "s.yaml:2:"),
    Bad("deep-block-nesting", ["variance", "s.yaml"], "nested more than",
        spec("study: variance\nx:\n" + "".join(" " * i + "- \n" for i in range(0, 400, 1))),
        "s.yaml:"),
    Bad("int-beyond-float-pairs", ["variance", "s.yaml"], "pairs",
        spec(f"study: variance\npairs: {'1' + '0' * 400}\n"), "s.yaml:2:8: pairs:"),
    Bad("int-beyond-float-mean", ["variance", "s.yaml"], "mean",
        spec(f"study: variance\nmean: -{'1' + '0' * 400}\n"), "s.yaml:2:7: mean:"),
    Bad("int-5000-digits", ["variance", "s.yaml"], "seed",
        spec(f"study: variance\nseed: {DIGITS}\n"), "s.yaml:2:7: seed:"),
    Bad("int-beyond-float-documented", ["variance", "s.yaml"], "documented[0].value",
        spec("study: variance\ndims: [3]\ndocumented:\n  - {where: x, quantity: variance, "
             f"value: {'1' + '0' * 400}}}\n"), "s.yaml:4:"),
    Bad("int-beyond-float-scores", ["softmax-sweep", "s.yaml"], "scores[1]",
        spec(f"study: softmax-sweep\nscores: [1, {'1' + '0' * 400}]\n"), "s.yaml:2:"),
    Bad("tagged-key-merge", ["variance", "s.yaml"], "keys must be plain words",
        spec("study: variance\n!!merge <<: {pairs: 3}\n"), "s.yaml:2:1:"),
    Bad("tagged-key-float", ["variance", "s.yaml"], "keys must be plain words",
        spec("study: variance\n!!float abc: 1\n"), "s.yaml:2:1:"),
    Bad("tagged-key-python", ["variance", "s.yaml"], "not tagged (!!python/name:os.system)",
        spec("study: variance\n? !!python/name:os.system\n: 1\n"), "s.yaml:"),
    Bad("tagged-key-binary", ["variance", "s.yaml"], "keys must be plain words",
        spec("study: variance\n!!binary aGk=: 3\n"), "s.yaml:2:1:"),
    Bad("complex-key", ["variance", "s.yaml"], "keys must be plain words",
        spec("study: variance\n? [a, b]\n: 1\n"), "s.yaml:2:3:"),
    Bad("title-escape", ["variance", "s.yaml"], "control character 0x1b",
        spec('study: variance\ntitle: "a\\e[31mred"\n'), "s.yaml:2:8: title:"),
    Bad("title-bell", ["variance", "s.yaml"], "control character 0x07",
        spec('study: variance\ntitle: "ding\\a"\n'), "s.yaml:2:8: title:"),
    Bad("key-control", ["variance", "s.yaml"], "control character 0x08",
        spec('study: variance\n"pa\\bairs": 3\n'), "s.yaml:2:1:"),
    Bad("note-c1-control", ["variance", "s.yaml"], "control character 0x9b",
        spec('study: variance\ndims: [3]\ndocumented:\n  - {where: x, quantity: variance, '
             'value: 3, note: "\\x9b2J"}\n'), "s.yaml:4:"),
    # A bidirectional override turns the rest of the line around on the screen ("Trojan
    # Source"): refused like the C0/C1 controls, in spec text and in flag values.
    Bad("title-bidi-override", ["variance", "s.yaml"], "control character U+202E",
        spec('study: variance\ntitle: "abc\u202edef"\n'), "s.yaml:2:8: title:"),
    Bad("description-bidi-isolate", ["variance", "s.yaml"], "control character U+2066",
        spec('study: variance\ndescription: "x\u2066y"\n'), "s.yaml:2:14: description:"),
    Bad("out-bidi-override", ["variance", "--out", "a\u202eb"], "control character U+202E",
        {}, "--out:"),
    # --- flags that took the next flag, or nothing -------------------------------------------
    Bad("out-swallows-flag", ["variance", "--out", "--no-plots"], "--out needs a value", {},
        "--out needs a value"),
    Bad("dims-swallows-flag", ["variance", "--dims", "--no-plots"], "--dims needs a value", {},
        "--dims"),
    Bad("pairs-swallows-flag", ["variance", "--pairs", "--check"], "--pairs needs a value", {},
        "--pairs"),
    Bad("scalings-swallows-flag", ["variance", "--scalings", "--pairs", "10"],
        "--scalings needs a value", {}, "--scalings"),
    Bad("run-out-swallows-flag", ["run", "--out", "--check"], "--out needs a value", {},
        "--out"),
    Bad("workers-last", ["variance", "--workers"], "--workers needs a value", {}, "--workers"),
    Bad("format-last", ["variance", "--format"], "--format needs a value", {}, "--format"),
    Bad("pairs-empty", ["variance", "--pairs", ""], "--pairs needs a value", {}, "--pairs"),
    Bad("seed-empty", ["variance", "--seed", ""], "--seed needs a value", {}, "--seed"),
    Bad("dim-empty", ["softmax-sweep", "--scores", "1", "2", "--dim", ""], "--dim needs a value",
        {}, "--dim"),
    Bad("out-empty", ["variance", "--out", ""], "--out needs a value", {}, "--out"),
    Bad("out-empty-inline", ["variance", "--out="], "--out needs a value", {}, "--out"),
    Bad("seed-blank", ["variance", "--seed", "   "], "--seed needs a value", {}, "--seed"),
    Bad("escape-in-flag-value", ["variance", "--distribution", "normal\x1b]0;owned\x07"],
        "control character 0x1b", {}, "--distribution"),
    Bad("out-newline", ["variance", "--out", "a\nb"], "control character 0x0a", {}, "--out"),
    # --- attacks on the fixes above, as an attacker would try them ------------------------------
    Bad("spec-link-to-device", ["variance", "z.yaml"], "not a regular file", {}, "z.yaml:",
        {"z.yaml": "/dev/zero"}),
    Bad("out-swallows-short-flag", ["variance", "--out", "-q"], "--out needs a value", {},
        "--out"),
    Bad("out-swallows-double-dash", ["variance", "--pairs", "--"], "--pairs needs a value", {},
        "--pairs"),
    Bad("nul-in-title", ["variance", "s.yaml"], "control character 0x00",
        spec('study: variance\ntitle: "a\\0b"\n'), "s.yaml:2:8: title:"),
    Bad("del-in-name", ["variance", "s.yaml"], "control character 0x7f",
        spec('study: variance\nsource: "x\\x7f"\n'), "s.yaml:2:9: source:"),
    Bad("documented-5000-digits", ["variance", "s.yaml"], "beyond float64's range",
        spec("study: variance\ndims: [3]\ndocumented:\n  - {where: x, quantity: variance, "
             f"value: {DIGITS}}}\n"), "s.yaml:4:"),
    Bad("worked-negative-huge", ["worked-example", "./s.yaml"], "values reach beyond",
        worked("    kind: variance\n    values: [-1e200, 1]\n"), "s.yaml:7:13:"),
    Bad("out-link-to-file", ["variance", "--out", "link"], "exists and is not a folder",
        {"afile.txt": "mine"}, "--out:", {"link": "afile.txt"}),
    Bad("batch-manifest-is-link", ["run", "s.yaml", "--out", "site"], "not sdpa's",
        {**spec("study: variance\ndims: [3]\npairs: 10\n"), "site/index.md": "mine",
         "real.json": "{}"}, "--out:", {"site/sdpa-batch.json": "../real.json"}),
    # --- a 5000-digit seed: one short line, no Python internals --------------------------------
    Bad("seed-5000-digits", ["variance", "--seed", DIGITS], "digits is beyond float64's range", {},
        "--seed: seed:"),
    Bad("pairs-beyond-int64", ["variance", "--pairs", "1e30"], "is too large a whole number",
        {}, "--pairs: pairs:"),
    # --- work, memory and output guards, before anything runs ----------------------------------
    Bad("rows-variance-flags", ["variance", "--dims", *map(str, range(1, 1202)), "--pairs", "2"],
        "would make a table of 2402 rows", {}, "--dims: dims:"),
    Bad("rows-variance-file", ["variance", "s.yaml"], "at most 2000: give fewer dims",
        spec("study: variance\npairs: 2\ndims: [" + ", ".join(map(str, range(1, 1100))) +
             "]\n"), "s.yaml:3:7: dims:"),
    Bad("memory-softmax-explicit", ["softmax-sweep", "--scores", *["1"] * 4096, "--scales",
                                    *map(str, range(1, 1001))],
        "GB of memory; at most 1 GB", {}, "--scales: scales:"),
    Bad("output-softmax-explicit", ["softmax-sweep", "--scores", *["1"] * 4096, "--scales",
                                    *map(str, range(1, 301))],
        "MB of files in the run folder; at most 100 MB", {}, "--scales: scales:"),
    Bad("output-jacobian-explicit", ["jacobian", "--scores", *["1"] * 4096, "--scales",
                                     *map(str, range(1, 301))],
        "of files in the run folder", {}, "--scales: scales:"),
    Bad("rows-softmax-vectors", ["softmax-sweep", "--dims", *map(str, range(1, 60)),
                                 "--keys", *map(str, range(2, 40)), "--trials", "2"],
        "dims × keys × scalings", {}, "--dims: dims:"),
    Bad("rows-gaussian", ["jacobian", "s.yaml"], "keys × score_stds",
        spec("study: jacobian\nkeys: [" + ", ".join(map(str, range(2, 60))) + "]\n"
             "score_stds: [" + ", ".join(str(i / 10) for i in range(1, 60)) + "]\n"),
        "s.yaml:3:13: score_stds:"),
    Bad("pairs-hours", ["variance", "s.yaml"], "hours of work",
        spec("study: variance\ndims: [3]\npairs: 1000000000000\n"), "s.yaml:3:8: pairs:"),
    Bad("scale-1e308", ["softmax-sweep", "--scores", "1", "0.5", "0", "-0.5", "--scales",
                        "1e308"], "scale 1e+308 is outside [1e-300, 1e+300]", {},
        "--scales: scales[0]:"),
    Bad("scale-subnormal", ["jacobian", "--scores", "1", "0", "--scales", "1", "1e-310"],
        "is outside [1e-300, 1e+300]", {}, "--scales: scales[1]:"),
    Bad("scale-rule-temperature", ["softmax-sweep", "--scores", "1", "0", "--dim", "4",
                                   "--scalings", "temperature:1e-320"],
        "is outside [1e-300, 1e+300]", {}, "--scalings: scalings[0]:"),
    Bad("scale-in-file", ["softmax-sweep", "s.yaml"], "is outside",
        spec("study: softmax-sweep\nscores: [1, 0]\nscales: [1, 5e-324]\n"),
        "s.yaml:3:13: scales[1]:"),
    # --- worked examples whose arithmetic overflows: refused, located --------------------------
    Bad("worked-values-1e308", ["worked-example", "./s.yaml"], "values reach beyond",
        worked("    kind: variance\n    values: [1e308, -1e308, 1e308]\n"),
        "s.yaml:7:13: parts[0].values:"),
    Bad("worked-divisor-tiny", ["worked-example", "./s.yaml"], "values ÷ divisor",
        worked("    kind: variance\n    values: [1, 2, 3]\n    divisor: 5e-324\n"),
        "s.yaml:8:14: parts[0].divisor:"),
    Bad("worked-q-1e308", ["worked-example", "./s.yaml"], "products of q and k",
        worked("    kind: attention\n    tokens: [a]\n    q: [[1e308, 1e308]]\n"
               "    k: [[1, 1]]\n"), "s.yaml:9:8: parts[0].k:"),
    Bad("worked-scale-tiny", ["worked-example", "./s.yaml"], "scores ÷",
        worked("    kind: attention\n    tokens: [a, b]\n    scores: [[1, 2], [3, 4]]\n"
               "    d_k: 2\n    scale: 5e-324\n"), "s.yaml:10:12: parts[0].scale:"),
    Bad("worked-scores-huge", ["worked-example", "./s.yaml"], "scores reach",
        worked("    kind: attention\n    tokens: [a, b]\n    scores: [[1e308, -1e308], [3, 4]]\n"
               "    d_k: 2\n"), "s.yaml:8:13: parts[0].scores:"),
    Bad("worked-embeddings", ["worked-example", "./s.yaml"], "products of embeddings and w_q",
        worked("    kind: attention\n    tokens: [a]\n    embeddings: [[1e100, 1]]\n"
               "    w_q: [[1e100], [1]]\n    w_k: [[1], [1]]\n"),
        "s.yaml:9:10: parts[0].w_q:"),
    Bad("worked-variances", ["worked-example", "./s.yaml"], "variances reach",
        worked("    kind: scaling-arithmetic\n    dims: [1]\n    variances: [1e300]\n"),
        "s.yaml:8:16: parts[0].variances:"),
    # --- folders sdpa did not write: refused, untouched ----------------------------------------
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
    Bad("out-symlink-to-user-folder", ["variance", "--out", "link"], "not an sdpa run folder",
        {"mine/manifest.json": "{}"}, "--out:", {"link": "mine"}),
    Bad("out-dangling-symlink", ["variance", "--out", "link"], "does not exist", {},
        "--out:", {"link": "nowhere/deeper"}),
    Bad("batch-user-index", ["run", "s.yaml", "--out", "."], "index.md is not sdpa's",
        {**spec("study: variance\ndims: [3]\npairs: 10\n"), "index.md": "mine"}, "--out:"),
    Bad("batch-user-report", ["run", "s.yaml", "--out", "site"], "report.html is not sdpa's",
        {**spec("study: variance\ndims: [3]\npairs: 10\n"), "site/report.html": "mine"},
        "--out:"),
    Bad("batch-fake-manifest", ["run", "s.yaml", "--out", "site"], "not sdpa's",
        {**spec("study: variance\ndims: [3]\npairs: 10\n"), "site/index.md": "mine",
         "site/sdpa-batch.json": "{}"}, "--out:"),
    Bad("name-index-md", ["run", "s.yaml"], "index.md",
        spec("study: variance\nname: index.md\ndims: [3]\n"), "s.yaml:2:7: name:"),
    Bad("name-report-html", ["run", "s.yaml"], "report.html",
        spec("study: variance\nname: report.html\ndims: [3]\n"), "s.yaml:2:7: name:"),
    Bad("name-batch-manifest", ["run", "s.yaml"], "sdpa-batch.json",
        spec("study: variance\nname: sdpa-batch.json\ndims: [3]\n"), "s.yaml:2:7: name:"),
    # --- round three (harden2): attacks on the fixes above ----------------------------------
    Bad("out-symlink-loop", ["variance", "--dims", "3", "--out", "L"], "loop of symbolic links",
        {}, "--out:", {"L": "L"}),
    Bad("out-symlink-loop-pair", ["variance", "--dims", "3", "--out", "a/sub"],
        "loop of symbolic links", {}, "--out:", {"a": "b", "b": "a"}),
    Bad("run-out-symlink-loop", ["run", "s.yaml", "--out", "L"], "loop of symbolic links",
        spec("study: variance\ndims: [3]\npairs: 10\n"), None, {"L": "L"}),
    Bad("power-vanishes-gradients", ["gradients", "--dims", "4", "--scalings", "power:1e300"],
        "multiplies the scores by 0", {}, "--scalings: scalings[0]:"),
    Bad("power-overflows-train", ["train", "--dims", "2", "--scalings", "power:-1e300"],
        "multiplies the scores by inf", {}, "--scalings: scalings[0]:"),
    Bad("power-vanishes-softmax", ["softmax-sweep", "--dims", "4", "--scalings", "power:1e300"],
        "multiplies by 0", {}, "--scalings: scalings[0]:"),
    Bad("power-overflows-jacobian-file", ["jacobian", "s.yaml"], "multiplies by inf",
        spec("study: jacobian\ndims: [4]\nscalings: [none, 'power:-1e300']\n"),
        "s.yaml:3:"),
    Bad("logn-overflows-gradients", ["gradients", "--dims", "4", "--scalings", "logn:1e308"],
        "outside [1e-300, 1e+300]", {}, "--scalings: scalings[0]:"),
    Bad("memory-additive-weights", ["softmax-sweep", "--dims", "4096", "--keys", "2", "--trials",
                                    "2", "--additive", "100000"],
        "GB of memory; at most 1 GB: lower additive", {}, "--additive: additive:"),
    Bad("memory-train-embeddings", ["train", "--dims", "16", "--d-model", "4096", "--vocab",
                                    "100000", "--pairs", "1", "--batch", "1", "--steps", "1",
                                    "--log-every", "1"],
        "GB of memory; at most 1 GB: lower vocab or d_model", {}, "--vocab: vocab:"),
    Bad("work-train-many-tiny-steps", ["train", "--dims", "1", "--d-model", "2", "--vocab", "2",
                                       "--pairs", "1", "--batch", "1", "--steps", "100000000",
                                       "--seeds", "1", "--scalings", "none", "--optimisers",
                                       "sgd", "--learning-rates", "0.1", "--log-every",
                                       "10000000"],
        "steps of work", {}, "--steps: steps:"),
]


def test_corpus_is_large_and_distinct():
    assert len(CORPUS) >= 60
    assert len({b.id for b in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("bad", CORPUS, ids=lambda b: b.id)
def test_bad_input(sdpa, workdir: Path, bad: Bad):
    check(sdpa, workdir, bad)


def test_fifo_is_refused_without_blocking(sdpa, workdir: Path):
    os.mkfifo(workdir / "pipe.yaml")  # opening it for reading would wait for a writer
    r = sdpa("variance", "pipe.yaml")
    assert r.code == 2 and r.err.strip().startswith("pipe.yaml:")
    assert "not a regular file" in r.err and len(r.err.strip().splitlines()) == 1


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


def test_a_3_gb_spec_is_refused_without_reading_it(sdpa, workdir: Path, monkeypatch):
    from sdpa_cli.spec import yamlio

    big = workdir / "big.yaml"
    with big.open("wb") as f:
        f.truncate(3 * 1024**3)  # sparse: takes no disk, but reads as 3 GB of zeros
    read = []
    real_read = os.read
    monkeypatch.setattr(yamlio.os, "read", lambda fd, n: read.append(n) or real_read(fd, n))
    r = sdpa("variance", "big.yaml")
    assert r.code == 2 and r.err.strip() == ("big.yaml: is 3221225472 bytes; a spec may be at "
                                             "most 1048576")
    assert sum(read) == 0 and big.stat().st_size == 3 * 1024**3


# --- round three (harden2): what sdpa must not delete, read whole, or block on ----------------


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


def test_variance_with_a_vanishing_power_rule_is_null_with_a_note(sdpa, workdir: Path):
    # power:1e300 at d = 3: d^P overflows; the factor is 0 (a row of zeros, a note), never an
    # OverflowError reported as an internal error
    r = sdpa("variance", "--dims", "3", "1000", "--pairs", "10", "--seed", "1", "--scalings",
             "power:1e300", "power:-1e300", "--no-plots", "-q", "--out", "run")
    assert r.code == 0, r.err
    assert "internal error" not in r.err


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
    # Issue 25: with --last-failed the record chooses what runs, so one that cannot be sdpa's
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


def test_the_worked_weights_figure_draws_a_bounded_number_of_parts():
    # 1500 attention parts drew one figure of 1500 panels: over a minute, gigapixels
    from sdpa_cli import registry
    from sdpa_cli.framework.context import RunContext
    from sdpa_cli.runner import loader as spec_mod
    from sdpa_cli.studies.worked_example import replay as worked

    parts = [{"name": f"p{i}", "kind": "attention", "tokens": ["a", "b"],
              "scores": [[1, 2], [3, 4]], "d_k": 2} for i in range(30)]
    s = spec_mod.load(None, study="worked-example",
                      overrides={"title": "t", "source": "s", "parts": parts})
    result = registry.get("worked-example").run(s, RunContext(figures=True))
    (fig,) = result.figures
    assert len(fig.data["parts"]) == worked.FIGURE_MAX_PARTS
    assert f"first {worked.FIGURE_MAX_PARTS} of the 30" in fig.caption


def test_echoed_text_escapes_bidirectional_controls():
    from sdpa_cli.errors import one_line

    assert one_line("a\u202eb\u2066c\x1bd") == "a\\u202eb\\u2066c\\x1bd"
    assert one_line("÷√d ‖J‖_F") == "÷√d ‖J‖_F"  # ordinary non-ASCII text is left alone


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
