"""`sdpa inspect` end to end on tiny checkpoints, and every bad input of issue 21: one line,
exit 2, nothing written."""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

import inspect_fixtures as fx

from sdpa_cli.studies.inspect.text import chunks, load_tokenizer

CONTRACT = ("seq_len", "layer", "head", "scaling", "score_std", "score_std_raw", "max_weight",
            "entropy_ratio", "frozen_share", "first_token_share")


def model(workdir: Path, family: str = "bert", **kw) -> Path:
    folder = getattr(fx, family)(workdir / "m", **kw)
    fx.write_tokenizer(folder, {"bert": "bert", "llama": "llama"}.get(family))
    (workdir / "t.txt").write_text(fx.text(400), encoding="utf-8")
    return folder


@pytest.mark.parametrize("family", ["bert", "gpt2", "llama"])
def test_a_tiny_checkpoint_gives_the_contract_rows(sdpa, workdir: Path, family: str):
    model(workdir, family)
    got = sdpa("inspect", "m", "--text", "t.txt", "--seq-len", "8", "16", "--sequences", "2",
               "--scalings", "none", "softcap:5", "--no-plots", "--format", "json")
    assert got.code == 0, got.err
    rows = got.json()["rows"]
    layers, heads = 2, 4 if family == "llama" else 2
    assert len(rows) == 2 * layers * heads * 3
    assert set(CONTRACT) <= set(rows[0])
    assert {r["scaling"] for r in rows} == {"model", "none", "softcap:5"}
    for r in rows:
        assert 0 <= r["frozen_share"] <= 1 and 0 < r["max_weight"] <= 1
        assert r["score_std"] >= 0


def test_init_runs_beside_trained_and_says_so(sdpa, workdir: Path):
    model(workdir)
    got = sdpa("inspect", "m", "--text", "t.txt", "--seq-len", "8", "--sequences", "2",
               "--weights", "init", "--seed", "3", "--no-plots", "--format", "json")
    assert got.code == 0, got.err
    doc = got.json()
    assert {r["weights"] for r in doc["rows"]} == {"trained", "init"}
    assert any("at initialisation" in f for f in doc["findings"])


def test_chunks_are_consecutive_and_wrapped(tmp_path: Path):
    fx.write_tokenizer(tmp_path, "bert", pad_to=16)  # the file's own padding is switched off
    tok = load_tokenizer(tmp_path / "tokenizer.json")
    assert tok.prefix == (1,) and tok.suffix == (2,) and tok.specials == 2
    body = tok.body("w0 w1 w2 w3 w4 w5 w6 w7")
    assert body == list(range(4, 12))
    got = chunks(tok, body, 5, 2, "x")
    assert got.tolist() == [[1, 4, 5, 6, 2], [1, 7, 8, 9, 2]]


@pytest.mark.slow  # matplotlib: seconds, not milliseconds
def test_figures_are_drawn(sdpa, workdir: Path):
    model(workdir)
    got = sdpa("inspect", "m", "--text", "t.txt", "--seq-len", "8", "16", "--sequences", "2",
               "--out", "o", "-q")
    assert got.code == 0, got.err
    names = {p.name for p in (workdir / "o").glob("*.png")}
    assert names == {"heatmaps.png", "pooled_scores.png", "entropy_vs_n.png",
                     "attention_picture.png", "head_types.png"}


def test_a_spec_whose_model_is_absent_is_skipped(sdpa, workdir: Path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(workdir / "empty-cache"))
    (workdir / "s.yaml").write_text("study: inspect\nmodel: nobody/nothing\n", encoding="utf-8")
    got = sdpa("inspect", "s.yaml", "--no-plots", "--check")
    assert got.code == 0, got.err
    assert "skipped" in got.out and "nobody/nothing" in got.out
    strict = sdpa("inspect", "s.yaml", "--no-plots", "--check", "--require-models", "true")
    assert strict.code == 1


class WritesAFile:
    """Unpickling this creates a file: proof that a loader unpickled it."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (open, (str(self.target), "w"))


def _pickle_only(w: Path) -> None:
    (w / "m").mkdir()
    (w / "m" / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (w / "m" / "pytorch_model.bin").write_bytes(pickle.dumps(WritesAFile(w / "PWNED")))
    fx.write_tokenizer(w / "m")


def _header(w: Path, raw: bytes) -> None:
    model(w)
    (w / "m" / "model.safetensors").write_bytes(raw)


def _shards(w: Path) -> None:
    model(w)
    (w / "m" / "model.safetensors").rename(w / "m" / "model-00001-of-00002.safetensors")
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors",
                            "b": "model-00002-of-00002.safetensors"}}
    (w / "m" / "model.safetensors.index.json").write_text(json.dumps(index))


def _config(w: Path, drop: str | None = None, **set_: object) -> None:
    model(w)
    cfg = json.loads((w / "m" / "config.json").read_text())
    cfg.pop(drop, None)
    cfg.update(set_)
    (w / "m" / "config.json").write_text(json.dumps(cfg))


def _huge(w: Path) -> None:
    """A valid checkpoint whose embedding has 1.5e9 rows (96 GB), in a sparse file: nothing
    is read; every other tensor as the tiny model has it."""
    model(w)
    import struct

    path = w / "m" / "model.safetensors"
    with path.open("rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        doc = json.loads(f.read(length))
    doc.pop("__metadata__", None)
    offset = 0
    for name, entry in doc.items():
        if name.endswith("word_embeddings.weight"):
            entry["shape"][0] = 1_500_000_000
        size = 4 * int(np.prod(entry["shape"]))
        entry["dtype"], entry["data_offsets"] = "F32", [offset, offset + size]
        offset += size
    header = json.dumps(doc).encode()
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        f.truncate(8 + len(header) + offset)


BAD = {
    "pickle-only": (_pickle_only, [], "never unpickles"),
    "truncated-header": (lambda w: _header(w, b"\x10\x00"), [], "corrupt safetensors header"),
    "header-too-long": (lambda w: _header(w, (10**6).to_bytes(8, "little") + b"{}"), [],
                        "claims 1000000 bytes"),
    "header-not-json": (lambda w: _header(w, (4).to_bytes(8, "little") + b"{{{{"), [],
                        "corrupt safetensors header"),
    "shard-missing": (_shards, [], "model-00002-of-00002.safetensors"),
    "config-missing-field": (lambda w: _config(w, "num_attention_heads"), [],
                             "num_attention_heads"),
    "unknown-model-type": (lambda w: _config(w, model_type="mamba"), [],
                           "'mamba' is not supported; supported: bert, gpt2, llama"),
    "relative-positions": (lambda w: _config(w, position_embedding_type="relative_key"), [],
                           "position_embedding_type 'relative_key' is not supported"),
    "no-tokenizer": (lambda w: (model(w), (w / "m" / "tokenizer.json").unlink()), [],
                     "no tokenizer.json"),
    "vocab-too-big": (lambda w: model(w, vocab=30), [],
                      "token ids reach 43 but the embedding has only 30 rows"),
    "text-not-utf8": (lambda w: (model(w), (w / "t.txt").write_bytes(b"w1 \xff w2")), [],
                      "not UTF-8: byte 0xff"),
    "text-too-short": (lambda w: (model(w), (w / "t.txt").write_text("w1 w2 w3")), [],
                       "too little text: 3 tokens"),
    "seq-len-above-positions": (lambda w: model(w, positions=16), ["--seq-len", "32"],
                                "above the model's max_position_embeddings 16"),
    "too-big-for-memory": (_huge, [], "GB of memory"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_exit_2_nothing_written(sdpa, workdir: Path, case: str):
    make, extra, says = BAD[case]
    make(workdir)
    if not (workdir / "t.txt").exists():
        (workdir / "t.txt").write_text(fx.text(400), encoding="utf-8")
    got = sdpa("inspect", "m", "--text", "t.txt", "--seq-len", "8", "--sequences", "2",
               "--out", "o", *extra)
    assert got.code == 2, got.err
    lines = [x for x in got.err.splitlines() if x.strip()]
    assert len(lines) == 1 and says in lines[0], got.err
    assert "Traceback" not in got.err
    assert not (workdir / "o").exists()
    assert not (workdir / "PWNED").exists()
    assert "torch.load" not in got.err  # the way out it names never unpickles either


def test_without_the_models_extra_it_names_the_extra(sdpa, workdir: Path, monkeypatch):
    model(workdir)
    monkeypatch.setitem(sys.modules, "safetensors", None)  # import now raises ImportError
    got = sdpa("inspect", "m", "--out", "o")
    assert got.code == 2
    assert "pip install 'sdpa[models]'" in got.err and len(got.err.strip().splitlines()) == 1
    assert not (workdir / "o").exists()


def test_an_unknown_model_name_is_refused(sdpa, workdir: Path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(workdir / "empty"))
    got = sdpa("inspect", "org/none", "--out", "o")
    assert got.code == 2 and "sdpa never downloads" in got.err
    assert np.all([not (workdir / "o").exists()])


def test_random_tokens_are_a_seeded_control(sdpa, workdir: Path):
    model(workdir)
    args = ("inspect", "m", "--random-tokens", "true", "--seed", "4", "--seq-len", "8",
            "--sequences", "2", "--no-plots", "--format", "json")
    first, again = sdpa(*args), sdpa(*args)
    assert first.code == 0, first.err
    assert first.json()["rows"] == again.json()["rows"]  # same seed, same draws
    assert any("uniform random token ids" in n for n in first.json()["notes"])
    other = sdpa(*args[:5], "5", *args[6:])
    assert other.json()["rows"] != first.json()["rows"]


@pytest.mark.parametrize("part", ["config.json", "header"])
def test_a_model_file_nested_10_5_deep_is_one_line(sdpa, workdir, part):
    # the checkpoint's JSON goes through sdpa's one bounded reader (issue 25)
    from sdpa_cli.studies.inspect import tiny

    model = Path(tiny.example_files(workdir)["model"])
    deep = "[" * 100_000 + "]" * 100_000
    if part == "config.json":
        (model / "config.json").write_text(deep, encoding="utf-8")
    else:
        raw = deep.encode()
        (model / "model.safetensors").write_bytes(len(raw).to_bytes(8, "little") + raw)
    r = sdpa("inspect", str(model), "--no-plots", "--out", "o")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
    assert "nests more than 64 levels" in r.err and not (workdir / "o").exists()


def test_too_little_text_names_the_flags_with_values_that_fit(sdpa, workdir: Path):
    """30 words, bert's 2 special tokens: 4 sequences of 16 need 56 body tokens. The line
    names --sequences and --seq-len with values the text holds, and each of them runs."""
    model(workdir)
    (workdir / "t.txt").write_text(fx.text(30), encoding="utf-8")
    got = sdpa("inspect", "m", "--text", "t.txt", "--seq-len", "16", "--sequences", "4",
               "--no-write", "-q")
    assert got.code == 2
    (line,) = got.err.strip().splitlines()
    assert "too little text: 30 tokens" in line
    assert "give --sequences 2 or --seq-len 9 (spec: sequences, seq_len), or more text" in line
    for fix in (["--seq-len", "16", "--sequences", "2"], ["--seq-len", "9", "--sequences", "4"]):
        assert sdpa("inspect", "m", "--text", "t.txt", *fix, "--no-write", "-q").code == 0
