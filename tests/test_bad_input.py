"""A corpus of bad inputs: every one ends with exit 2, one clear line, nothing written."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

BIG = "study: variance\n" + "# padding\n" * 200_000  # over the 1 MiB limit


@dataclass
class Bad:
    id: str
    argv: list[str]
    says: str  # a fragment the one line must contain
    files: dict[str, str | bytes] = field(default_factory=dict)
    where: str | None = None  # the line must start with this (file:line:col, or the flag)


def spec(name: str, text: str | bytes) -> dict[str, str | bytes]:
    return {name: text}


CORPUS = [
    # --- the file itself --------------------------------------------------------------------
    Bad("yaml-syntax", ["variance", "s.yaml"], "YAML syntax: expected ',' or ']'",
        spec("s.yaml", "study: variance\ndims: [3, 100\n"), "s.yaml:3:1:"),
    Bad("tab-indent", ["variance", "s.yaml"], "a tab character; YAML indents with spaces only",
        spec("s.yaml", "study: variance\n\tdims: [3]\n"), "s.yaml:2:1:"),
    Bad("duplicate-key", ["variance", "s.yaml"], "duplicate key 'pairs' (first given on line 2)",
        spec("s.yaml", "study: variance\npairs: 10\npairs: 20\n"), "s.yaml:3:1: pairs:"),
    Bad("not-utf8", ["variance", "s.yaml"], "not UTF-8 text (byte 0xe9)",
        spec("s.yaml", "study: variance\ntitle: caf\xe9\n".encode("latin-1")), "s.yaml:2:11:"),
    Bad("empty-file", ["variance", "s.yaml"], "the spec is empty", spec("s.yaml", ""),
        "s.yaml:"),
    Bad("only-comments", ["variance", "s.yaml"], "the spec is empty",
        spec("s.yaml", "# nothing here\n"), "s.yaml:"),
    Bad("folder-not-file", ["variance", "adir"], "is a folder, not a spec file",
        {"adir/x.txt": "x"}, "adir:"),
    Bad("missing-file", ["variance", "nope.yaml"], "no such file", {}, "nope.yaml:"),
    Bad("top-level-list", ["variance", "s.yaml"], "a spec must be a mapping",
        spec("s.yaml", "- 3\n- 100\n"), "s.yaml:1:1:"),
    Bad("python-tag", ["variance", "s.yaml"], "unsupported YAML tag",
        spec("s.yaml", "study: variance\ntitle: !!python/object/apply:os.system [ls]\n"),
        "s.yaml:2:8: title:"),
    Bad("alias-bomb", ["validate", "s.yaml"], "more than 100000 values once aliases",
        spec("s.yaml", "a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
             "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
             "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nstudy: variance\n"), "s.yaml:"),
    Bad("merge-key", ["variance", "s.yaml"], "merge keys (<<) are not supported",
        spec("s.yaml", "study: variance\nbase: &b {pairs: 3}\nother:\n  <<: *b\n"),
        "s.yaml:4:3:"),
    Bad("too-large", ["variance", "s.yaml"], "a spec may be at most 1048576",
        spec("s.yaml", BIG), "s.yaml:"),
    # --- which study, which keys ---------------------------------------------------------
    Bad("unknown-study", ["run", "s.yaml"], "unknown study 'varianse' (did you mean 'variance'?)",
        spec("s.yaml", "study: varianse\n"), "s.yaml:1:8: study:"),
    Bad("missing-study", ["run", "s.yaml"], "study: missing; say which study this is",
        spec("s.yaml", "dims: [3]\n"), "s.yaml:"),
    Bad("other-command", ["jacobian", "s.yaml"], "this spec is for 'variance'",
        spec("s.yaml", "study: variance\n"), "s.yaml:1:8: study:"),
    Bad("unknown-key", ["variance", "s.yaml"], "unknown key (did you mean 'pairs'?)",
        spec("s.yaml", "study: variance\npairz: 10\n"), "s.yaml:2:1: pairz:"),
    Bad("unknown-key-nested", ["variance", "s.yaml"], "unknown key (did you mean 'quantity'?)",
        spec("s.yaml", "study: variance\ndocumented:\n  - {where: x, quantty: variance, "
             "value: 1}\n"), "s.yaml:3:16: documented[0].quantty:"),
    # --- wrong values in a spec ------------------------------------------------------------
    Bad("dims-not-a-list", ["variance", "s.yaml"], "must be a list",
        spec("s.yaml", "study: variance\ndims: many\n"), "s.yaml:2:7: dims:"),
    Bad("dims-empty", ["variance", "s.yaml"], "must not be empty",
        spec("s.yaml", "study: variance\ndims: []\n"), "s.yaml:2:7: dims:"),
    Bad("dim-zero", ["variance", "s.yaml"], "must be ≥ 1, got 0",
        spec("s.yaml", "study: variance\ndims: [3, 0]\n"), "s.yaml:2:11: dims[1]:"),
    Bad("dim-negative", ["variance", "s.yaml"], "must be ≥ 1, got -100",
        spec("s.yaml", "study: variance\ndims: [-100]\n"), "s.yaml:2:8: dims[0]:"),
    Bad("dim-fraction", ["variance", "s.yaml"], "must be a whole number, got 2.5",
        spec("s.yaml", "study: variance\ndims: [2.5]\n"), "s.yaml:2:8: dims[0]:"),
    Bad("pairs-below-2", ["variance", "s.yaml"], "must be ≥ 2, got 1",
        spec("s.yaml", "study: variance\npairs: 1\n"), "s.yaml:2:8: pairs:"),
    Bad("pairs-bool", ["variance", "s.yaml"], "must be a whole number, got true",
        spec("s.yaml", "study: variance\npairs: yes-please\n".replace("yes-please", "true")),
        "s.yaml:2:8: pairs:"),
    Bad("bins-zero", ["variance", "s.yaml"], "must be ≥ 1, got 0",
        spec("s.yaml", "study: variance\nbins: 0\n"), "s.yaml:2:7: bins:"),
    Bad("std-zero", ["variance", "s.yaml"], "must be > 0, got 0",
        spec("s.yaml", "study: variance\nstd: 0\n"), "s.yaml:2:6: std:"),
    Bad("std-negative", ["variance", "s.yaml"], "must be > 0, got -1.5",
        spec("s.yaml", "study: variance\nstd: -1.5\n"), "s.yaml:2:6: std:"),
    Bad("std-infinite", ["variance", "s.yaml"], "must be a finite number, got inf",
        spec("s.yaml", "study: variance\nstd: .inf\n"), "s.yaml:2:6: std:"),
    Bad("mean-nan", ["variance", "s.yaml"], "must be a finite number, got nan",
        spec("s.yaml", "study: variance\nmean: .nan\n"), "s.yaml:2:7: mean:"),
    Bad("correlation-above-1", ["variance", "s.yaml"], "must be ≤ 1, got 1.5",
        spec("s.yaml", "study: variance\ncorrelation: 1.5\n"), "s.yaml:2:14: correlation:"),
    Bad("name-escapes", ["variance", "s.yaml"], "must be a plain folder name",
        spec("s.yaml", "study: variance\nname: ../../etc\n"), "s.yaml:2:7: name:"),
    Bad("name-absolute", ["variance", "s.yaml"], "must be a plain folder name",
        spec("s.yaml", "study: variance\nname: /tmp/x\n"), "s.yaml:2:7: name:"),
    Bad("seed-negative", ["variance", "s.yaml"], "must be ≥ 0, got -1",
        spec("s.yaml", "study: variance\nseed: -1\n"), "s.yaml:2:7: seed:"),
    Bad("scaling-unknown", ["variance", "s.yaml"], "unknown scaling 'sqroot'",
        spec("s.yaml", "study: variance\nscalings: [sqroot]\n"), "s.yaml:2:12: scalings[0]:"),
    Bad("scaling-temperature-zero", ["variance", "s.yaml"], "temperature:T needs a number > 0",
        spec("s.yaml", "study: variance\nscalings: ['temperature:0']\n"),
        "s.yaml:2:12: scalings[0]:"),
    Bad("scaling-twice", ["variance", "s.yaml"], "'sqrt' is listed twice",
        spec("s.yaml", "study: variance\nscalings: [sqrt, sqrt]\n"),
        "s.yaml:2:18: scalings[1]:"),
    Bad("sphere-with-mean", ["variance", "s.yaml"], "unit vectors (distribution: sphere) have no "
        "mean", spec("s.yaml", "study: variance\ndistribution: sphere\nmean: 1\n"),
        "s.yaml:3:7: mean:"),
    Bad("exact-needs-gaussian", ["variance", "s.yaml"], "the exact method exists for normal and "
        "sphere", spec("s.yaml", "study: variance\ndistribution: uniform\nmethod: exact\n"),
        "s.yaml:3:9: method:"),
    Bad("heads-not-dividing", ["variance", "s.yaml"], "d_model 512 is not divisible by 7 heads",
        spec("s.yaml", "study: variance\nd_model: 512\nheads: 7\n"), "s.yaml:3:8: heads:"),
    Bad("d-model-alone", ["variance", "s.yaml"], "d_model and heads go together",
        spec("s.yaml", "study: variance\nd_model: 512\n"), "s.yaml:"),
    Bad("too-much-work", ["variance", "s.yaml"], "would draw 2e+14 random numbers",
        spec("s.yaml", "study: variance\ndims: [1000]\npairs: 100000000000\n"),
        "s.yaml:3:8: pairs:"),
    Bad("documented-unknown-quantity", ["variance", "s.yaml"], "no quantity 'varaince'",
        spec("s.yaml", "study: variance\ndims: [3]\ndocumented:\n  - {where: x, row: {dim: 3, "
             "scaling: none}, quantity: varaince, value: 3}\n"), "s.yaml: documented[0]:"),
    Bad("documented-no-row", ["variance", "s.yaml"], "no row has dim: 64",
        spec("s.yaml", "study: variance\ndims: [3]\ndocumented:\n  - {where: x, row: {dim: 64},"
             " quantity: variance, value: 64}\n"), "s.yaml: documented[0]:"),
    Bad("documented-unreadable", ["variance", "s.yaml"], "cannot read '1.2.3' as a printed "
        "number", spec("s.yaml", "study: variance\ndocumented:\n  - {where: x, quantity: mean,"
                       " value: 1.2.3}\n"), "s.yaml:3:39: documented[0].value:"),
    Bad("matrix-widths-differ", ["worked-example", "s.yaml"], "gives keys of width 3 but "
        "queries have width 2", spec("s.yaml", "study: worked-example\nparts:\n  - name: a\n"
                                     "    kind: attention\n    q: [[1, 2], [3, 4]]\n"
                                     "    k: [[1, 2, 3], [4, 5, 6]]\n"),
        "s.yaml:6:8: parts[0].k:"),
    Bad("matrix-ragged", ["worked-example", "s.yaml"], "every row of a matrix needs the same "
        "length", spec("s.yaml", "study: worked-example\nparts:\n  - name: a\n"
                       "    kind: attention\n    scores: [[1, 2], [3]]\n"),
        "s.yaml:5:22: parts[0].scores[1]:"),
    Bad("weights-do-not-fit", ["worked-example", "s.yaml"], "embeddings · w_q needs them equal",
        spec("s.yaml", "study: worked-example\nparts:\n  - name: a\n    kind: attention\n"
             "    embeddings: [[1, 2], [3, 4]]\n    w_q: [[1, 2, 3]]\n"
             "    w_k: [[1, 0], [0, 1]]\n"), "s.yaml:6:10: parts[0].w_q:"),
    Bad("no-parts", ["worked-example", "s.yaml"], "must not be empty",
        spec("s.yaml", "study: worked-example\nparts: []\n"), "s.yaml:2:8: parts:"),
    Bad("duplicate-names-in-batch", ["run", "a.yaml", "b.yaml"], "output name 'same' is also "
        "used by a.yaml", {"a.yaml": "study: variance\nname: same\n",
                           "b.yaml": "study: variance\nname: same\n"}, "b.yaml: name:"),
    # --- flags -----------------------------------------------------------------------------
    Bad("flag-not-a-number", ["variance", "--dims", "3", "x"], "must be a whole number, got 'x'",
        {}, "--dims: dims[1]:"),
    Bad("flag-negative-correlation", ["variance", "--correlation", "-2"], "must be ≥ -1, got -2",
        {}, "--correlation: correlation:"),
    Bad("flag-unknown", ["variance", "--dimz", "3"], "No such option '--dimz'. (Did you mean "
        "one of: '--dims'", {}, "sdpa variance:"),
    Bad("flag-format", ["variance", "--format", "xml"], "'xml' is not one of", {}, "--format:"),
    Bad("flag-workers-zero", ["variance", "--workers", "0"], "0 is not in the range", {},
        "--workers:"),
    Bad("flag-empty-list-item", ["variance", "--dims", "3,,4"], "empty item", {}, "--dims:"),
    Bad("flag-seed-text", ["variance", "--seed", "abc"], "must be a whole number, got 'abc'",
        {}, "--seed: seed:"),
    Bad("flags-conflict", ["softmax-sweep", "--scores", "1", "2", "--dims", "16"],
        "choose different score sources", {}, "--dims:"),
    Bad("flag-scale-zero", ["softmax-sweep", "--scores", "1", "2", "--scales", "0"],
        "must be > 0, got 0", {}, "--scales: scales[0]:"),
    Bad("flag-score-nan", ["softmax-sweep", "--scores", "1", ".nan"], "must be a finite number",
        {}, "--scores: scores[1]:"),
    Bad("flag-keys-huge", ["jacobian", "--score-stds", "1", "--keys", "1000000000"],
        "must be ≤ 1048576", {}, "--keys: keys[0]:"),
    Bad("flag-sequence-too-long", ["softmax-sweep", "--dims", "16", "--keys", "100000"],
        "n may be at most 4096", {}, "--keys: keys[0]:"),
    Bad("flag-threshold", ["softmax-sweep", "--scores", "1", "2", "--threshold", "1.5"],
        "must be < 1, got 1.5", {}, "--threshold: threshold:"),
    Bad("out-escapes-to-parent", ["variance", "--out", ".."], "is the current folder or holds "
        "it", {}, "--out:"),
    Bad("out-is-here", ["variance", "--out", "."], "is the current folder or holds it", {},
        "--out:"),
    Bad("out-not-a-run-folder", ["variance", "--out", "mine"], "not an sdpa run folder",
        {"mine/notes.txt": "mine"}, "--out:"),
    Bad("mean-beyond-float64", ["variance", "--mean", "1e200"], "|mean| may be at most 1e+150 "
        "× std", {}, "--mean: mean:"),
    Bad("std-beyond-float64", ["softmax-sweep", "--dims", "16", "--std", "1e200"],
        "must be ≤ 1e+150", {}, "--std: std:"),
    Bad("scores-lose-their-spread", ["softmax-sweep", "--dims", "16", "--mean", "1e100"],
        "|mean| may be at most 1e+06 × std", {}, "--mean: mean:"),
    Bad("out-through-a-file", ["variance", "--out", "afile/run"], "afile is a file, not a "
        "folder", {"afile": "x"}, "--out:"),
    Bad("unknown-example", ["worked-example", "money-bank"], "no spec named 'money-bank' "
        "(did you mean 'money-bank-grows'?)", {}, "worked-example:"),
    Bad("unknown-spec-name", ["variance", "day74-dim"], "no spec named 'day74-dim' "
        "(did you mean 'day74-dims'?); `sdpa variance --list` shows them", {}, "variance:"),
    Bad("run-missing-path", ["run", "nowhere"], "no such file or folder", {}, "nowhere:"),
    Bad("run-empty-folder", ["run", "emptydir"], "folder holds no *.yaml spec",
        {"emptydir/readme.txt": "no specs"}, "emptydir:"),
]


def test_corpus_is_large_and_distinct():
    assert len(CORPUS) >= 40
    assert len({b.id for b in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("bad", CORPUS, ids=lambda b: b.id)
def test_bad_input(sdpa, workdir: Path, bad: Bad):
    for name, content in bad.files.items():
        path = workdir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    before = sorted(p.relative_to(workdir) for p in workdir.rglob("*"))
    r = sdpa(*bad.argv)
    lines = r.err.strip().splitlines()
    assert r.code == 2, r.err
    assert len(lines) == 1, r.err
    assert "Traceback" not in r.err and r.out == ""
    assert bad.says in lines[0], lines[0]
    if bad.where is not None:
        assert lines[0].startswith(bad.where), lines[0]
    after = sorted(p.relative_to(workdir) for p in workdir.rglob("*"))
    assert after == before  # nothing written: no outputs/, no temporary folder


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
