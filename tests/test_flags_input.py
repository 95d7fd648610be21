"""Command-line flags and arguments: values and lists, a flag that takes the next flag or
nothing, numbers past float64, -k, spec names. Each bad one is exit 2, one line naming the
flag, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
from attack import Bad, check, spec

BIG = "1" + "0" * 400  # an integer beyond float64's range
DIGITS = "9" * 5000  # beyond Python's limit on parsing digits
RUN = spec("study: variance\ndims: [3]\npairs: 10\n")

CORPUS = [
    # --- values -----------------------------------------------------------------------------------
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
    Bad("escape-in-flag-value", ["variance", "--distribution", "normal\x1b]0;owned\x07"],
        "control character 0x1b", {}, "--distribution"),
    Bad("out-newline", ["variance", "--out", "a\nb"], "control character 0x0a", {}, "--out"),
    Bad("out-bidi-override", ["variance", "--out", "a\u202eb"], "control character U+202E",
        {}, "--out:"),
    # --- arguments that name no spec --------------------------------------------------------------
    Bad("unknown-example", ["worked-example", "money-bank"], "no spec named 'money-bank' "
        "(did you mean 'money-bank-grows'?)", {}, "worked-example:"),
    Bad("unknown-spec-name", ["variance", "day74-dim"], "no spec named 'day74-dim' "
        "(did you mean 'day74-dims'?); `sdpa variance --list` shows them", {}, "variance:"),
    Bad("run-missing-path", ["run", "nowhere"], "no such file or folder", {}, "nowhere:"),
    Bad("run-empty-folder", ["run", "emptydir"], "folder holds no *.yaml spec",
        {"emptydir/readme.txt": "no specs"}, "emptydir:"),
    # --- flags that took the next flag, or nothing ------------------------------------------------
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
    Bad("out-swallows-short-flag", ["variance", "--out", "-q"], "--out needs a value", {},
        "--out"),
    Bad("out-swallows-double-dash", ["variance", "--pairs", "--"], "--pairs needs a value", {},
        "--pairs"),
    # --- numbers beyond float64 (and Python's digit limit): one short line, no Python internals
    Bad("seed-5000-digits", ["variance", "--seed", DIGITS], "digits is beyond float64's range", {},
        "--seed: seed:"),
    Bad("pairs-beyond-int64", ["variance", "--pairs", "1e30"], "is too large a whole number",
        {}, "--pairs: pairs:"),
    Bad("flag-pairs-beyond-float", ["variance", "--dims", "3", "--pairs", BIG],
        "beyond float64's range", {}, "--pairs: pairs:"),
    Bad("flag-dims-item-beyond-float", ["variance", "--dims", "3", BIG],
        "beyond float64's range", {}, "--dims: dims[1]:"),
    Bad("flag-trials-5000-digits", ["softmax-sweep", "--trials", DIGITS],
        "a whole number of 5000 digits", {}, "--trials: trials:"),
    Bad("flag-steps-beyond-float", ["train", "--steps", BIG], "beyond float64's range", {},
        "--steps: steps:"),
    Bad("flag-keys-negative-beyond", ["gradients", "--keys", "-" + BIG],
        "beyond float64's range", {}, "--keys: keys:"),
    Bad("flag-seed-hex-beyond", ["variance", "--seed", "0x" + "f" * 300],
        "beyond float64's range", {}, "--seed: seed:"),
    Bad("flag-std-1e400", ["variance", "--std", "1e400"], "write .inf or -.inf", {},
        "--std: std:"),
    Bad("flag-workers-5000-digits", ["variance", "--workers", DIGITS],
        "(5000 characters) is not a number in range", {}, "--workers:"),
    Bad("flag-dpi-beyond", ["variance", "--dpi", BIG], "is not a number in range", {},
        "--dpi:"),
    Bad("flag-tolerance-infinite", ["compare", "A", "A", "--tolerance", "1e400"],
        "not a finite number", {"A/results.json": "{}"}, "--tolerance:"),
    Bad("flag-scheduler-local-digits", ["variance", "--scheduler", "local:" + DIGITS],
        "N must be 1 to 64", {}, "--scheduler:"),
    Bad("flag-annotations-long", ["variance", "--annotations", DIGITS],
        "(5000 characters)", {}, "--annotations:"),
    Bad("flag-scalings-long-word", ["softmax-sweep", "--scalings", "x" * 3000],
        "(3000 characters)", {}, "--scalings: scalings[0]:"),
    Bad("flag-learning-rate-union", ["train", "--learning-rates", "abc"],
        "learning_rates[0]: must be a number", {}, "--learning-rates: learning_rates[0]:"),
    # --- -k: bounded in length and depth ----------------------------------------------------------
    Bad("k-50000-parentheses", ["run", "s.yaml", "-k", "(" * 50000 + "dims" + ")" * 50000],
        "characters long; at most 1000", RUN, "-k:"),
    Bad("k-not-chain", ["run", "s.yaml", "-k", "not " * 50000 + "dims"],
        "characters long; at most 1000", RUN, "-k:"),
    Bad("k-33-parentheses", ["run", "s.yaml", "-k", "(" * 33 + "dims" + ")" * 33],
        "parentheses nested more than 32 deep", RUN, "-k:"),
    Bad("k-long-word", ["run", "s.yaml", "-k", "x" * 1001], "characters long", RUN, "-k:"),
    Bad("k-unclosed-deep", ["run", "s.yaml", "-k", "(" * 30 + "dims"], "missing ')'", RUN,
        "-k:"),
]


def test_corpus_is_large_and_distinct():
    assert len(CORPUS) >= 50
    assert len({b.id for b in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("bad", CORPUS, ids=lambda b: b.id)
def test_a_bad_flag_is_one_line_naming_it(sdpa, workdir: Path, bad: Bad):
    check(sdpa, workdir, bad)


# --- paths after list flags (options.gather_lists) ------------------------------------------------

LISTS = {"--text", "--dims"}
VALUES = frozenset({"--out", "--seed"})


@pytest.mark.parametrize("argv, parsed", [
    (["--text", "docs/a.md"], ["--text", "docs/a.md"]),
    (["--text", "/abs/a.md", "--no-plots"], ["--text", "/abs/a.md", "--no-plots"]),
    (["m", "--text", "docs/a.md", "/abs/b.md"], ["m", "--text", "docs/a.md,/abs/b.md"]),
    (["--text", "a.md", "org/model"], ["--text", "a.md", "org/model"]),
    (["--text", "docs/a.md", "org/model"], ["--text", "docs/a.md", "org/model"]),
    (["--out", "o/x", "--text", "a/b.md", "c/d.yaml"], ["--out", "o/x", "--text", "a/b.md",
                                                        "c/d.yaml"]),
    (["--dims", "3", "100", "exp/s.yaml"], ["--dims", "3,100", "exp/s.yaml"]),
    (["--dims", "-1", "2", "-q"], ["--dims", "-1,2", "-q"]),
])
def test_a_list_flag_takes_a_path_as_its_value(argv, parsed):
    from sdpa_cli.cli.options import gather_lists

    assert gather_lists(argv, LISTS, VALUES) == parsed


@pytest.mark.parametrize("order", ["model-first", "model-last"])
def test_inspect_reads_texts_named_by_folder_and_absolute_paths(sdpa, workdir: Path, order):
    pytest.importorskip("safetensors")
    pytest.importorskip("tokenizers")
    import inspect_fixtures as fx

    folder = fx.bert(workdir / "m")
    fx.write_tokenizer(folder, "bert")
    (workdir / "docs").mkdir()
    (workdir / "docs" / "t.txt").write_text(fx.text(400), encoding="utf-8")
    absolute = str(workdir / "docs" / "t.txt")
    texts = ["--text", "docs/t.txt"] if order == "model-last" else \
        ["--text", "docs/t.txt", absolute]
    # a bare word after a list is one more value: a MODEL after --text has a folder part
    argv = [*texts, "./m"] if order == "model-last" else ["m", *texts]
    got = sdpa("inspect", *argv, "--seq-len", "8", "--sequences", "2", "--no-plots",
               "--no-write", "--format", "json")
    assert got.code == 0, got.err
    assert got.json()["spec"]["text"] == [str(Path(t)) for t in texts[1:]]
