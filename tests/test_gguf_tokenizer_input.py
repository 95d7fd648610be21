"""Attacks on the tokenizer a GGUF file (or a tokenizer.json) describes, and odd valid ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("gguf")

import gguf_build as gb
import inspect_fixtures as fx
from attack import Bad, check, peak_run
from gguf_build import Typed

ARGV = ["inspect", "m.gguf", "--text", "t.txt", "--seq-len", "8", "--sequences", "2",
        "--out", "o"]
NAN, INF = float("nan"), float("inf")
N_SPM = len(gb.spm_tokens())  # 276 tokens


def _model(tokenizer: dict[str, Any], **kw: Any):
    def make(w: Path) -> None:
        gb.gguf(w / "m.gguf", tokenizer=tokenizer, **kw)
        (w / "t.txt").write_text(fx.text(400), encoding="utf-8")
    return make


def bad(id: str, says: str, tokenizer: dict[str, Any], key: str | None = None,
        **kw: Any) -> Bad:
    """A case whose one line starts with the file and (when given) the key."""
    where = "m.gguf: " + (f"{key}: " if key else "")
    return Bad(id, ARGV, says, make=_model(tokenizer, **kw), where=where)


def arr(kind: str, values: list) -> Typed:
    return Typed("ARRAY", values, kind)


M, PRE, TOK, TYPES, SCORES, MERGES = ("tokenizer.ggml." + k for k in (
    "model", "pre", "tokens", "token_type", "scores", "merges"))
UNK, BOS, EOS = ("tokenizer.ggml." + k for k in ("unknown_token_id", "bos_token_id",
                                                  "eos_token_id"))
ADD_BOS, ADD_EOS, PREFIX = ("tokenizer.ggml." + k for k in ("add_bos_token", "add_eos_token",
                                                            "add_space_prefix"))
BYTES = fx.byte_tokens()
# a byte-level vocabulary with the merges "a b" → "ab" and "ab c" → "abc" available
MERGED = [*BYTES, "ab", "abc"]


def nested(n: int) -> list[str]:
    """A SentencePiece vocabulary of 'x', 'xx', …, n x's: every split of every token is a pair
    of tokens, so the merges hold n³/3 characters."""
    return ["x" * k for k in range(1, n + 1)]


CORPUS = [
    # --- which tokenizer -------------------------------------------------------------------
    bad("model-array", f"{M} is an array of 2 strings, expected a string",
        gb.bpe(**{M: ["gpt2", "llama"]}), M),
    bad("model-number", f"{M} is 7, expected a string", gb.bpe(**{M: 7}), M),
    bad("model-unknown", "'bert9' is not supported (gpt2, llama)", gb.bpe(**{M: "bert9"}), M),
    bad("pre-array", f"{PRE} is an array of 2 strings, expected a string",
        gb.bpe(**{PRE: ["llama3", "x"]}), PRE),
    bad("pre-number", f"{PRE} is 3, expected a string", gb.bpe(**{PRE: 3}), PRE),
    bad("pre-bool", f"{PRE} is true, expected a string", gb.bpe(**{PRE: True}), PRE),
    # --- the tokens and their types --------------------------------------------------------
    bad("tokens-missing", f"GGUF metadata has no {TOK}", gb.bpe(**{TOK: None}), TOK),
    bad("tokens-numbers", f"{TOK} is an array of 3 numbers (int32), expected an array of "
        "strings",
        gb.bpe(**{TOK: arr("INT32", [1, 2, 3])}), TOK),
    bad("tokens-one-string", f"{TOK} is 'abc', expected an array of strings",
        gb.bpe(**{TOK: "abc"}), TOK),
    bad("types-floats", f"{TYPES} is an array of 256 numbers (float32), expected an array of "
        "integers", gb.bpe(**{TYPES: arr("FLOAT32", [1.0] * 256)}), TYPES),
    bad("types-short", f"{TYPES} gives 3 types for 256 tokens",
        gb.bpe(**{TYPES: arr("INT32", [1, 1, 1])}), TYPES),
    bad("types-strings", f"{TYPES} is an array of 256 strings, expected an array of integers",
        gb.bpe(**{TYPES: ["1"] * 256}), TYPES),
    bad("types-one-number", f"{TYPES} is 1, expected an array of integers",
        gb.bpe(**{TYPES: 1}), TYPES),
    # --- SentencePiece scores --------------------------------------------------------------
    bad("scores-missing", f"GGUF metadata has no {SCORES}", gb.spm(**{SCORES: None}), SCORES),
    bad("scores-short", f"{SCORES} gives 2 scores for {N_SPM} tokens",
        gb.spm(**{SCORES: arr("FLOAT32", [0.0, 1.0])}), SCORES),
    bad("scores-nan", f"{SCORES}[5] is nan; scores rank the merges and must be numbers",
        gb.spm(**{SCORES: arr("FLOAT32", [0.0] * 5 + [NAN] + [0.0] * (N_SPM - 6))}),
        SCORES),
    bad("scores-strings", f"{SCORES} is an array of {N_SPM} strings, expected an array of "
        "numbers", gb.spm(**{SCORES: ["0"] * N_SPM}), SCORES),
    bad("scores-one-number", f"{SCORES} is 0.5, expected an array of numbers",
        gb.spm(**{SCORES: 0.5}), SCORES),
    # --- merges ----------------------------------------------------------------------------
    bad("merge-left-unknown", f"{MERGES}[0] 'zz c' names 'zz', which is not a token",
        gb.bpe(**{TOK: MERGED, TYPES: None, MERGES: ["zz c"]}), MERGES),
    bad("merge-right-unknown", f"{MERGES}[1] 'ab zz' names 'zz', which is not a token",
        gb.bpe(**{TOK: MERGED, TYPES: None, MERGES: ["a b", "ab zz"]}), MERGES),
    bad("merge-result-unknown", f"{MERGES}[0] 'b c' makes 'bc', which is not a token",
        gb.bpe(**{TOK: MERGED, TYPES: None, MERGES: ["b c"]}), MERGES),
    bad("merge-no-space", f"{MERGES} holds 'abc', not 'LEFT RIGHT'",
        gb.bpe(**{TOK: MERGED, TYPES: None, MERGES: ["abc"]}), MERGES),
    bad("merge-empty-side", f"{MERGES} holds 'a ', not 'LEFT RIGHT'",
        gb.bpe(**{TOK: MERGED, TYPES: None, MERGES: ["a "]}), MERGES),
    bad("merges-numbers", f"{MERGES} is an array of 2 numbers (int32), expected an array of "
        "strings",
        gb.bpe(**{MERGES: arr("INT32", [1, 2])}), MERGES),
    bad("merges-one-string", f"{MERGES} is 'a b', expected an array of strings",
        gb.bpe(**{TOK: MERGED, TYPES: None, MERGES: "a b"}), MERGES),
    bad("spm-merges-unknown", f"{MERGES}[0] '▁w zz' names 'zz', which is not a token",
        gb.spm(**{MERGES: ["▁w zz"]}), MERGES),
    # --- special token ids -----------------------------------------------------------------
    bad("unk-string", f"{UNK} is '0', expected an integer", gb.spm(**{UNK: "0"}), UNK),
    bad("unk-nan", f"{UNK} is nan, expected an integer", gb.spm(**{UNK: NAN}), UNK),
    bad("unk-inf", f"{UNK} is inf, expected an integer", gb.spm(**{UNK: INF}), UNK),
    bad("unk-array", f"{UNK} is an array of 2 numbers (int32), expected an integer",
        gb.spm(**{UNK: arr("INT32", [0, 1])}), UNK),
    bad("unk-negative", f"{UNK} is -1, not a token id (0 to {N_SPM - 1})",
        gb.spm(**{UNK: Typed("INT32", -1)}), UNK),
    bad("unk-beyond", f"{UNK} is 100000, not a token id (0 to {N_SPM - 1})",
        gb.spm(**{UNK: 100_000}), UNK),
    bad("unk-bool", f"{UNK} is true, expected an integer", gb.spm(**{UNK: True}), UNK),
    bad("bos-beyond", f"{BOS} is 256, not a token id (0 to 255)", gb.bpe(**{BOS: 256}), BOS),
    bad("bos-negative", f"{BOS} is -5, not a token id (0 to 255)",
        gb.bpe(**{BOS: Typed("INT64", -5)}), BOS),
    bad("bos-string", f"{BOS} is '1', expected an integer", gb.bpe(**{BOS: "1"}), BOS),
    bad("bos-float", f"{BOS} is 1.5, expected an integer", gb.bpe(**{BOS: 1.5}), BOS),
    bad("bos-missing", f"GGUF metadata has no {BOS}", gb.bpe(**{BOS: None}), BOS),
    bad("eos-beyond", f"{EOS} is 4000000000, not a token id (0 to 255)",
        gb.bpe(**{ADD_EOS: True, EOS: 4_000_000_000}), EOS),
    bad("eos-array", f"{EOS} is an array of 2 numbers (int32), expected an integer",
        gb.bpe(**{ADD_EOS: True, EOS: arr("INT32", [1, 2])}), EOS),
    # --- flags -----------------------------------------------------------------------------
    bad("add-bos-string", f"{ADD_BOS} is 'yes', expected true or false",
        gb.bpe(**{ADD_BOS: "yes"}), ADD_BOS),
    bad("add-bos-array", f"{ADD_BOS} is an array of 2 booleans, expected true or false",
        gb.bpe(**{ADD_BOS: arr("BOOL", [True, False])}), ADD_BOS),
    bad("add-bos-two", f"{ADD_BOS} is 2, expected true or false",
        gb.bpe(**{ADD_BOS: 2}), ADD_BOS),
    bad("add-eos-float", f"{ADD_EOS} is 1.0, expected true or false",
        gb.bpe(**{ADD_EOS: 1.0}), ADD_EOS),
    bad("space-prefix-string", f"{PREFIX} is 'false', expected true or false",
        gb.spm(**{PREFIX: "false"}), PREFIX),
    # --- sizes -----------------------------------------------------------------------------
    bad("nested-prefixes", "nest as prefixes of one another",
        gb.spm(**{TOK: nested(600), SCORES: arr("FLOAT32", [0.0] * 600), TYPES: None,
                  BOS: 0, UNK: 0}), TOK),
    bad("more-tokens-than-rows", "the tokenizer's token ids reach 255 but the embedding has "
        "only 200 rows", gb.bpe(), None, rows=200),
    bad("duplicate-tokens-past-rows", "the tokenizer's token ids reach 256 but the embedding "
        "has only 256 rows", gb.bpe(**{TOK: [*BYTES, "a"], TYPES: None}), None, rows=256),
]


def test_corpus_is_large_and_distinct():
    assert len(CORPUS) >= 45
    assert len({b.id for b in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("case", CORPUS, ids=lambda b: b.id)
def test_hostile_tokenizer_is_one_line(sdpa, workdir: Path, case: Bad):
    t = time.perf_counter()
    check(sdpa, workdir, case)
    assert time.perf_counter() - t < 20  # never in proportion to a claimed size


# ---- valid but odd: they run, with the special tokens where the file says --------------------

def _spm_specials(bos: str, eos: str | None = None) -> dict[str, Any]:
    """A SentencePiece vocabulary whose BOS (id 1) is spelled `bos` and EOS (id 2) `eos`
    (added after each sequence when given)."""
    tokens = gb.spm_tokens()
    tokens[1] = bos
    if eos is not None:
        tokens[2] = eos
    return gb.spm(**{TOK: tokens, ADD_EOS: eos is not None})


GOOD = {
    "bos-dollar-B": _spm_specials("$B"),
    "bos-dollar-A": _spm_specials("$A"),
    "bos-with-space": _spm_specials("<s> x"),
    "bos-with-colon": _spm_specials("<s>:1"),
    "bos-dollar": _spm_specials("$"),
    "eos-dollar-B-colon": _spm_specials("<s>", "$B:1"),
    "bos-and-eos-one-token": gb.spm(**{ADD_EOS: True, EOS: 1}),
    "bpe-bos-dollar-A-colon": gb.bpe(**{TOK: [BYTES[0], "$A:0", *BYTES[2:]]}),
    "empty-token-text": gb.spm(**{TOK: [*gb.spm_tokens(), ""], SCORES: arr(
        "FLOAT32", [0.0] * (N_SPM + 1)), TYPES: None}),
    "empty-control-token": gb.bpe(**{TOK: ["", *BYTES[1:]], TYPES: arr("INT32",
                                                                       [3] + [1] * 255)}),
    "user-defined-with-space": gb.bpe(**{TOK: [*BYTES, "w1 w2"],
                                         TYPES: arr("INT32", [1] * 256 + [4])}),
    "unknown-token-types": gb.bpe(**{TYPES: arr("INT32", [99] * 256)}),
    "negative-infinite-scores": gb.spm(**{SCORES: arr("FLOAT32", [-INF] * N_SPM)}),
}


@pytest.mark.parametrize("case", list(GOOD))
def test_odd_but_valid_tokenizer_runs(sdpa, workdir: Path, case: str):
    tokenizer = GOOD[case]
    _model(tokenizer)(workdir)
    got = sdpa(*ARGV, "--no-plots")
    assert got.code == 0, got.err
    doc = json.loads((workdir / "o" / "results.json").read_text(encoding="utf-8"))
    first = doc["tokens"]["text"]["8"][0]
    bos = tokenizer.get(BOS, 1)
    assert first[0] == bos and len(first) == 8
    if tokenizer.get(ADD_EOS):
        assert first[-1] == tokenizer.get(EOS)


@pytest.mark.slow  # a process of its own (about 2 s); json-template-panics is the quick one
def test_a_rust_panic_is_one_line_on_stderr(workdir: Path):
    """In a process of its own, so the panic's own report on stderr (Rust writes it there,
    past Python's sys.stderr) is seen: a merge whose result is not a token panics inside
    `tokenizers` on the first text it encodes, unless the merge is refused first."""
    _model(gb.bpe(**{TOK: MERGED, TYPES: None, MERGES: ["b c"]}))(workdir)
    done = subprocess.run([sys.executable, "-m", "sdpa_cli", *ARGV], cwd=workdir,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "panicked" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"m.gguf: {MERGES}: "), done.stderr


PANIC = """
import sys
from tokenizers import Tokenizer, models, processors
from sdpa_cli.errors import InputError
from sdpa_cli.studies.inspect.boundary import guarded

tok = Tokenizer(models.BPE({"a": 0, "$B": 1}, []))
tok.post_processor = processors.TemplateProcessing(single="$B $A", special_tokens=[("$B", 1)])
try:
    guarded("m.gguf", lambda: tok.encode("a"))
except InputError as e:
    print(e.lines()[0], file=sys.stderr)
    sys.exit(2)
"""


@pytest.mark.slow  # a process of its own
def test_a_panic_inside_tokenizers_is_one_line_naming_the_file(workdir: Path):
    """A panic sdpa does not foresee (one forced in a post-processor built by hand) is caught
    at the boundary, its Rust report (several lines on file descriptor 2) kept off stderr,
    and said as one line naming the file."""
    done = subprocess.run([sys.executable, "-c", PANIC], cwd=workdir, capture_output=True,
                          text=True, timeout=120, check=False,
                          env={**os.environ, "RUST_BACKTRACE": "1"})
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("m.gguf: the tokenizers library failed on it (it "
                                  "panicked): index out of bounds"), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr


def test_one_token_of_300000_characters_is_quick(sdpa, workdir: Path):
    """Its 299,999 splits are never tried: no other token is that long, so no split of it is
    two tokens (the splits of a token are only those its lengths allow)."""
    tokens = [*gb.spm_tokens(), "y" * 300_000]
    _model(gb.spm(**{TOK: tokens, SCORES: arr("FLOAT32", [0.0] * len(tokens)),
                     TYPES: None}))(workdir)
    t = time.process_time()
    got = sdpa(*ARGV, "--no-plots", "-q")
    assert got.code == 0, got.err
    assert time.process_time() - t < 10  # the splits of that token would cost tens of seconds


@pytest.mark.slow
@pytest.mark.parametrize("n", [2100, 2600])  # files of 2.2 and 3.4 MB: merges of GBs
def test_a_megabyte_vocabulary_of_nested_prefixes_is_refused_at_once(workdir: Path, n: int):
    import resource

    tokens = nested(n)
    _model(gb.spm(**{TOK: tokens, SCORES: arr("FLOAT32", [0.0] * n), TYPES: None, BOS: 0,
                     UNK: 0}))(workdir)
    # the children's CPU is counted over the worker's life: this run's is the difference
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    done, peak = peak_run(ARGV, workdir, 120)
    assert done.returncode == 2, done.stderr
    assert "nest as prefixes of one another" in done.stderr
    assert peak < 400 * 1024  # kB: the file and Python, never the merges
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before < 60


# ---- a safetensors checkpoint's tokenizer.json: the same reader, the same rules ------------

def _tokenizer_json(change) -> Any:
    """The tiny Llama folder ./m, its tokenizer.json changed by `change` (the parsed JSON)."""
    def make(w: Path) -> None:
        folder = fx.llama(w / "m")
        fx.write_tokenizer(folder, "llama")
        doc = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
        change(doc)
        (folder / "tokenizer.json").write_text(json.dumps(doc), encoding="utf-8")
        (w / "t.txt").write_text(fx.text(400), encoding="utf-8")
    return make


def _template_b(doc: dict) -> None:
    doc["post_processor"]["single"] = [{"Sequence": {"id": "B", "type_id": 0}},
                                       {"Sequence": {"id": "A", "type_id": 0}}]


JSON_ARGV = ["inspect", "m", "--text", "t.txt", "--seq-len", "8", "--sequences", "2",
             "--out", "o"]
TOKENIZER_JSON = [
    Bad("json-sparse-id-past-rows", JSON_ARGV, "the tokenizer's token ids reach 1000 but the "
        "embedding has only 44 rows", make=_tokenizer_json(
            lambda d: d["model"]["vocab"].update(w5=1000)), where="m/tokenizer.json: "),
    Bad("json-special-id-past-rows", JSON_ARGV, "the tokenizer's token ids reach 500 but the "
        "embedding has only 44 rows", make=_tokenizer_json(
            lambda d: d["post_processor"]["special_tokens"]["<s>"].update(ids=[500])),
        where="m/tokenizer.json: "),
    Bad("json-template-panics", JSON_ARGV, "failed on it (it panicked)",
        make=_tokenizer_json(_template_b), where="m/tokenizer.json: "),
    Bad("json-unknown-model", JSON_ARGV, "the tokenizers library (reading tokenizer.json) "
        "failed on it", make=_tokenizer_json(lambda d: d["model"].update(type="Word9")),
        where="m/tokenizer.json: "),
]


@pytest.mark.parametrize("case", TOKENIZER_JSON, ids=lambda b: b.id)
def test_hostile_tokenizer_json_is_one_line(sdpa, workdir: Path, case: Bad):
    check(sdpa, workdir, case)


@pytest.mark.parametrize("tokenizer", [
    gb.spm(), gb.bpe(),
    gb.spm(**{TOK: [*gb.spm_tokens(), gb.spm_tokens()[5]],  # a text listed twice, last
              SCORES: arr("FLOAT32", [0.0] * (N_SPM + 1)), TYPES: None}),
    gb.bpe(**{TOK: [*BYTES, "ab", BYTES[3]], TYPES: None})], ids=["spm", "bpe", "spm-twice",
                                                               "bpe-twice"])
def test_the_highest_id_a_gguf_states_is_its_vocabularys(tmp_path: Path, tokenizer) -> None:
    """inspect passes the token count's highest id instead of reading the vocabulary whole."""
    from sdpa_cli.studies.inspect.gguf_file import read_header
    from sdpa_cli.studies.inspect.gguf_tokenizer import build, highest_id
    from sdpa_cli.studies.inspect.text import wrap

    path = gb.gguf(tmp_path / "m.gguf", tokenizer=tokenizer)
    meta = read_header(path).metadata
    read = wrap(build(meta, path), path, decoded=True)
    assert read.top == highest_id(meta) == len(meta[TOK]) - 1
