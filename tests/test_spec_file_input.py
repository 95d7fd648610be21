"""A spec file as sdpa reads it: its path, bytes, YAML syntax, tags, aliases, keys, shape and
size, and the text it may hold. Each bad one is exit 2, one located line, nothing written."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from attack import Bad, check, spec

BIG = "study: variance\n" + "# padding\n" * 200_000  # over the 1 MiB limit
DEEP = "study: variance\nx: " + "[" * 5000 + "]" * 5000 + "\n"
_HEAD = "study: variance\n"


def chain(anchors: int = 20, per: int = 31, head: str = "study: variance\n") -> str:
    """Anchors each nesting `per` levels around the one before."""
    lines = [head.rstrip("\n")]
    for i in range(anchors):
        lines.append(f"a{i}: &a{i} " + "[" * per + (f"*a{i - 1}" if i else "1") + "]" * per)
    return "\n".join(lines) + "\n"


def fan(levels: int = 6) -> str:
    """Ten aliases per level: 10**levels values from a few lines."""
    lines = ["study: variance", "l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


CORPUS = [
    # --- the file itself --------------------------------------------------------------------------
    Bad("yaml-syntax", ["variance", "s.yaml"], "YAML syntax: expected ',' or ']'",
        spec("study: variance\ndims: [3, 100\n"), "s.yaml:3:1:"),
    Bad("tab-indent", ["variance", "s.yaml"], "a tab character; YAML indents with spaces only",
        spec("study: variance\n\tdims: [3]\n"), "s.yaml:2:1:"),
    Bad("duplicate-key", ["variance", "s.yaml"], "duplicate key 'pairs' (first given on line 2)",
        spec("study: variance\npairs: 10\npairs: 20\n"), "s.yaml:3:1: pairs:"),
    Bad("not-utf8", ["variance", "s.yaml"], "not UTF-8 text (byte 0xe9)",
        spec("study: variance\ntitle: caf\xe9\n".encode("latin-1")), "s.yaml:2:11:"),
    Bad("empty-file", ["variance", "s.yaml"], "the spec is empty", spec(""),
        "s.yaml:"),
    Bad("only-comments", ["variance", "s.yaml"], "the spec is empty",
        spec("# nothing here\n"), "s.yaml:"),
    Bad("folder-not-file", ["variance", "adir"], "is a folder, not a spec file",
        {"adir/x.txt": "x"}, "adir:"),
    Bad("missing-file", ["variance", "nope.yaml"], "no such file", {}, "nope.yaml:"),
    Bad("top-level-list", ["variance", "s.yaml"], "a spec must be a mapping",
        spec("- 3\n- 100\n"), "s.yaml:1:1:"),
    Bad("python-tag", ["variance", "s.yaml"], "unsupported YAML tag",
        spec("study: variance\ntitle: !!python/object/apply:os.system [ls]\n"),
        "s.yaml:2:8: title:"),
    Bad("merge-key", ["variance", "s.yaml"], "merge keys (<<) are not supported",
        spec("study: variance\nbase: &b {pairs: 3}\nother:\n  <<: *b\n"),
        "s.yaml:4:3:"),
    Bad("too-large", ["variance", "s.yaml"], "a spec may be at most 1048576",
        spec(BIG), "s.yaml:"),
    Bad("one-byte-over", ["variance", "s.yaml"], "a spec may be at most 1048576",
        spec("study: variance\n#" + "x" * (1048576 - 17) + "\n")),
    # --- the path: bounded, regular files only ----------------------------------------------------
    Bad("dev-zero", ["variance", "/dev/zero"], "is a character device, not a regular file",
        {}, "/dev/zero:"),
    Bad("dev-null-run", ["run", "/dev/null"], "not a regular file", {}, "/dev/null:"),
    Bad("dangling-spec-link", ["variance", "gone.yaml"], "symbolic link to nothing", {},
        "gone.yaml:", {"gone.yaml": "nowhere.yaml"}),
    Bad("spec-link-to-device", ["variance", "z.yaml"], "not a regular file", {}, "z.yaml:",
        {"z.yaml": "/dev/zero"}),
    Bad("spec-name-not-utf8", ["variance", "\udcff.yaml"], "no such file", {}, "\\xff.yaml:"),
    Bad("spec-name-control", ["variance", "a\x1b[2Jb.yaml"], "control character 0x1b", {},
        "a\\x1b[2Jb.yaml:"),
    # --- which study, which keys ------------------------------------------------------------------
    Bad("unknown-study", ["run", "s.yaml"], "unknown study 'varianse' (did you mean 'variance'?)",
        spec("study: varianse\n"), "s.yaml:1:8: study:"),
    Bad("missing-study", ["run", "s.yaml"], "study: missing; say which study this is",
        spec("dims: [3]\n"), "s.yaml:"),
    Bad("other-command", ["jacobian", "s.yaml"], "this spec is for 'variance'",
        spec("study: variance\n"), "s.yaml:1:8: study:"),
    Bad("unknown-key", ["variance", "s.yaml"], "unknown key (did you mean 'pairs'?)",
        spec("study: variance\npairz: 10\n"), "s.yaml:2:1: pairz:"),
    Bad("unknown-key-nested", ["variance", "s.yaml"], "unknown key (did you mean 'quantity'?)",
        spec("study: variance\ndocumented:\n  - {where: x, quantty: variance, "
             "value: 1}\n"), "s.yaml:3:16: documented[0].quantty:"),
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
    # --- nesting, and aliases that expand past the depth and size bounds --------------------------
    Bad("deep-flow-nesting", ["variance", "s.yaml"], "nested more than", spec(DEEP), "s.yaml:2:"),
    Bad("deep-map-nesting", ["variance", "s.yaml"], "nested more than",
        spec("study: variance\nx: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n"), "s.yaml:2:"),
    Bad("deep-block-nesting", ["variance", "s.yaml"], "nested more than",
        spec("study: variance\nx:\n" + "".join(" " * i + "- \n" for i in range(0, 400, 1))),
        "s.yaml:"),
    Bad("alias-bomb", ["validate", "s.yaml"], "more than 100000 values once aliases",
        spec("a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
             "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
             "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nstudy: variance\n"), "s.yaml:"),
    Bad("alias-chain-validate", ["validate", "s.yaml"], "once aliases", spec(chain()),
        "s.yaml:3:"),
    Bad("alias-chain-study", ["variance", "s.yaml"], "nested more than 32 levels deep once",
        spec(chain()), "s.yaml:3:"),
    Bad("alias-chain-run", ["run", "s.yaml"], "once aliases", spec(chain()), "s.yaml:3:"),
    Bad("alias-chain-2x17", ["validate", "s.yaml"], "once aliases", spec(chain(2, 17)),
        "s.yaml:3:"),
    Bad("alias-recursive-list", ["validate", "s.yaml"], "once aliases",
        spec("study: variance\na: &a [*a]\n"), "s.yaml:2:"),
    Bad("alias-recursive-map", ["variance", "s.yaml"], "once aliases",
        spec("study: variance\na: &a {b: *a}\n"), "s.yaml:2:"),
    Bad("alias-recursive-indirect", ["validate", "s.yaml"], "once aliases",
        spec("study: variance\na: &a [1, [2, [3, *a]]]\n"), "s.yaml:2:"),
    Bad("alias-recursive-block", ["validate", "s.yaml"], "once aliases",
        spec("study: variance\na: &a\n  - 1\n  - *a\n"), "s.yaml:"),
    Bad("alias-fan-out-1e6", ["validate", "s.yaml"], "more than 100000 values once aliases",
        spec(fan()), "s.yaml:"),
    Bad("alias-in-documented", ["worked-example", "s.yaml"], "once aliases",
        spec(chain(2, 31, "study: worked-example\ntitle: t\nsource: s") +
             "parts:\n  - {name: p, kind: variance, values: [1, 2]}\ndocumented:\n"
             "  - {where: x, quantity: variance.values, value: *a1}\n"), "s.yaml:"),
    # --- the text it holds: no control characters -------------------------------------------------
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
    Bad("nul-in-title", ["variance", "s.yaml"], "control character 0x00",
        spec('study: variance\ntitle: "a\\0b"\n'), "s.yaml:2:8: title:"),
    Bad("del-in-name", ["variance", "s.yaml"], "control character 0x7f",
        spec('study: variance\nsource: "x\\x7f"\n'), "s.yaml:2:9: source:"),
    # --- its shape, checked before it is parsed ---------------------------------------------------
    Bad("flow-200k-items", ["variance", "s.yaml"], "199999 commas",
        {"s.yaml": _HEAD + "dims: [" + ", ".join(["1"] * 200000) + "]\n"}, "s.yaml:2:"),
    Bad("block-200k-lines", ["variance", "s.yaml"], "200002 lines; a spec may have at most "
        "10000", {"s.yaml": _HEAD + "dims:\n" + "- 1\n" * 200000}, "s.yaml:10001:1:"),
    Bad("comments-10001", ["variance", "s.yaml"], "at most 10000 (checked before it is parsed)",
        {"s.yaml": _HEAD + "#\n" * 10000}, "s.yaml:10001:1:"),
    Bad("blank-900k", ["variance", "s.yaml"], "900001 lines", {"s.yaml": _HEAD + "\n" * 900000},
        "s.yaml:10001:1:"),
    Bad("flow-map-30k", ["variance", "s.yaml"], "at most 20000 (checked before",
        {"s.yaml": _HEAD + "x: {" + ", ".join(f"a{i}: 1" for i in range(30000))
                      + "}\n"}, "s.yaml:2:"),
    Bad("nested-lists", ["variance", "s.yaml"], "commas (items of",
        {"s.yaml": _HEAD + "x: [" + ", ".join(["[1, 2]"] * 20000) + "]\n"}, "s.yaml:2:"),
    Bad("many-documents", ["variance", "s.yaml"], "lines; a spec may have at most",
        {"s.yaml": _HEAD + "---\na: 1\n" * 20000}, "s.yaml:10001:1:"),
    Bad("quoted-items", ["variance", "s.yaml"], "commas",
        {"s.yaml": _HEAD + "x: [" + ", ".join(['"a"'] * 25000) + "]\n"}, "s.yaml:2:"),
    Bad("many-keys", ["variance", "s.yaml"], "lines",
        {"s.yaml": _HEAD + "".join(f"k{i}: 1\n" for i in range(12000))}, "s.yaml:10001:1:"),
    Bad("shape-in-batch", ["run", "s.yaml"], "lines", {"s.yaml": _HEAD + "#\n" * 20000},
        "s.yaml:10001:1:"),
    Bad("shape-in-validate", ["validate", "s.yaml"], "commas",
        {"s.yaml": _HEAD + "title: '" + "," * 20001 + "'\n"}, "s.yaml:"),
    Bad("no-final-newline", ["variance", "s.yaml"], "10001 lines",
        {"s.yaml": _HEAD + "#\n" * 9999 + "#"}, "s.yaml:10001:1:"),
]


def test_corpus_is_large_and_distinct():
    assert len(CORPUS) >= 60
    assert len({b.id for b in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("bad", CORPUS, ids=lambda b: b.id)
def test_a_bad_spec_file_is_one_located_line(sdpa, workdir: Path, bad: Bad):
    check(sdpa, workdir, bad)


def test_located_lines_point_at_the_right_text():
    # Where a message names a key, the text at its line:col in the file is that key.
    checked = 0
    for bad in CORPUS:
        m = re.match(r"^s\.yaml:(\d+):(\d+): ([\w\[\].]+):", bad.where or "")
        if not m or not ("unknown key" in bad.says or "duplicate key" in bad.says):
            continue
        line, col, field_name = int(m[1]), int(m[2]), m[3]
        key = re.split(r"[.\[]", field_name)[-1]
        text = bad.files["s.yaml"]
        assert isinstance(text, str)
        assert text.splitlines()[line - 1][col - 1:].startswith(key), bad.id
        checked += 1
    assert checked >= 3


def test_fifo_is_refused_without_blocking(sdpa, workdir: Path):
    os.mkfifo(workdir / "pipe.yaml")  # opening it for reading would wait for a writer
    r = sdpa("variance", "pipe.yaml")
    assert r.code == 2 and r.err.strip().startswith("pipe.yaml:")
    assert "not a regular file" in r.err and len(r.err.strip().splitlines()) == 1


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


@pytest.mark.parametrize("text, title", [
    ('"\\U0001F600 ok"', "\U0001F600 ok"),
    ('"\\ud83d\\ude00 ok"', "\U0001F600 ok"),  # a pair written as JSON writes an emoji
])
def test_an_emoji_written_as_escapes_is_that_emoji(sdpa, workdir, text, title):
    (workdir / "s.yaml").write_text(f"study: variance\ndims: [3]\npairs: 10\nseed: 1\n"
                                    f"title: {text}\n", encoding="utf-8")
    got = sdpa("variance", "s.yaml", "--no-plots", "-q", "--out", "O")
    assert got.code == 0, got.err
    assert f'"title": "{title}"' in (workdir / "O" / "results.json").read_text(encoding="utf-8")


@pytest.mark.parametrize("line, where", [
    ('title: "\\ud800"', "s.yaml:4:8: title: text holds a lone surrogate (U+D800)"),
    ('source: "a\\udcff"', "s.yaml:4:9: source: text holds a lone surrogate (U+DCFF)"),
    ('title: "\\ude00\\ud83d"', "s.yaml:4:8: title: text holds a lone surrogate (U+DE00)"),
    ('"\\ud800": 1', "s.yaml:4:1: a key holds a lone surrogate (U+D800)"),
])
def test_a_lone_surrogate_in_a_spec_is_one_line_not_an_internal_error(sdpa, workdir, line,
                                                                     where):
    (workdir / "s.yaml").write_text(f"study: variance\ndims: [3]\npairs: 10\n{line}\n",
                                    encoding="utf-8")
    for argv in (["variance", "s.yaml", "--no-plots", "-q"], ["run", "s.yaml", "--no-plots"]):
        got = sdpa(*argv)
        assert got.code == 2 and got.err.startswith(where), got.err
    assert not (workdir / "outputs").exists()
