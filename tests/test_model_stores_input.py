"""Attacks on where a model is found: the Ollama store, model folders, the model path."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")
pytest.importorskip("gguf")

import gguf_build as gb
import inspect_fixtures as fx
from attack import Bad, check

DIGEST = "ab" * 32
BLOB = f"sha256-{DIGEST}"
RUN = ["--text", "t.txt", "--seq-len", "8", "--sequences", "2", "--out", "o"]


def _text(w: Path) -> None:
    (w / "t.txt").write_text(fx.text(400), encoding="utf-8")


def _ollama(blob: Callable[[Path], None], manifest: str | None = None) -> Callable[[Path], None]:
    """An Ollama store at ./ollama whose tiny:latest names blob sha256-ab…; `blob` makes it."""
    def make(w: Path) -> None:
        man = w / "ollama/manifests/registry.ollama.ai/library/tiny/latest"
        man.parent.mkdir(parents=True)
        man.write_text(manifest if manifest is not None else json.dumps(
            {"layers": [{"mediaType": "application/vnd.ollama.image.model",
                         "digest": f"sha256:{DIGEST}"}]}), encoding="utf-8")
        (w / "ollama" / "blobs").mkdir()
        blob(w / "ollama" / "blobs" / BLOB)
        _text(w)
    return make


def _fifo(p: Path) -> None:
    os.mkfifo(p)


def _link(target: str) -> Callable[[Path], None]:
    return lambda p: os.symlink(target, p)


def _folder(files: dict[str, Callable[[Path], None]], index: object = None
            ) -> Callable[[Path], None]:
    """The tiny Llama folder at ./m, its files replaced by what `files` makes (None: removed),
    and a shard index written when given."""
    def make(w: Path) -> None:
        folder = fx.llama(w / "m")
        fx.write_tokenizer(folder, "llama")
        for name, fn in files.items():
            (folder / name).unlink()
            fn(folder / name)
        if index is not None:
            (folder / "model.safetensors.index.json").write_text(json.dumps(index),
                                                                 encoding="utf-8")
        _text(w)
    return make


def ollama(id: str, says: str, make: Callable[[Path], None]) -> Bad:
    return Bad(id, ["inspect", "tiny", *RUN], says, make=make,
               where="ollama/manifests/registry.ollama.ai/library/tiny/latest: ")


def folder(id: str, says: str, make: Callable[[Path], None], where: str = "m") -> Bad:
    return Bad(id, ["inspect", "m", *RUN], says, make=make, where=where)


def path(id: str, says: str, make: Callable[[Path], None]) -> Bad:
    return Bad(id, ["inspect", "x.gguf", *RUN], says, make=lambda w: (make(w / "x.gguf"),
                                                                      _text(w)),
               where="x.gguf: ")


CORPUS = [
    ollama("ollama-blob-fifo", f"names blob {BLOB}, which is a FIFO, not a regular file",
           _ollama(_fifo)),
    ollama("ollama-blob-folder", f"names blob {BLOB}, which is a folder", _ollama(Path.mkdir)),
    ollama("ollama-blob-dev-zero", "which is a character device, not a regular file",
           _ollama(_link("/dev/zero"))),
    ollama("ollama-blob-dangling", "which is a link to nothing, not a regular file",
           _ollama(_link("nowhere"))),
    ollama("ollama-blob-link-to-fifo", "which is a FIFO, not a regular file",
           _ollama(lambda p: (os.mkfifo(p.parent / "f"), os.symlink("f", p)))),
    ollama("ollama-layers-not-list", "not an Ollama manifest (no list of layers)",
           _ollama(lambda p: None, json.dumps({"layers": {"a": 1}}))),
    ollama("ollama-digest-number", "the model layer's digest '5' is not sha256:HEX",
           _ollama(lambda p: None, json.dumps({"layers": [
               {"mediaType": "application/vnd.ollama.image.model", "digest": 5}]}))),
    ollama("ollama-manifest-not-object", "not an Ollama manifest (no list of layers)",
           _ollama(lambda p: None, "[1, 2]")),
    Bad("ollama-manifest-fifo", ["inspect", "tiny", *RUN], "the Ollama manifest is a FIFO",
        make=lambda w: (_ollama(lambda p: None)(w), (w / "ollama/manifests/registry.ollama.ai"
                                                      "/library/tiny/latest").unlink(),
                        os.mkfifo(w / "ollama/manifests/registry.ollama.ai/library/tiny/"
                                      "latest")),
        where="ollama/manifests/registry.ollama.ai/library/tiny/latest: "),
    folder("empty-shard-index", "its weight_map names no shard",
           _folder({"model.safetensors": lambda p: None}, {"weight_map": {}}),
           "m/model.safetensors.index.json: weight_map: "),
    folder("shard-index-of-lists", "not a shard index",
           _folder({}, {"weight_map": {"a": ["x"]}}), "m/model.safetensors.index.json: "),
    folder("shard-is-fifo", "names shard 'a.safetensors', which is a FIFO, not a regular file",
           lambda w: (_folder({}, {"weight_map": {"x": "a.safetensors"}})(w),
                      os.mkfifo(w / "m" / "a.safetensors")),
           "m/model.safetensors.index.json: weight_map: "),
    folder("shard-up-a-folder", "names shard '../a.safetensors', which is not in m",
           _folder({}, {"weight_map": {"x": "../a.safetensors"}}),
           "m/model.safetensors.index.json: weight_map: "),
    folder("weights-fifo", "model.safetensors is a FIFO, not a regular file",
           _folder({"model.safetensors": _fifo}), "m/model.safetensors: "),
    folder("weights-dev-zero", "model.safetensors is a character device",
           _folder({"model.safetensors": _link("/dev/zero")}), "m/model.safetensors: "),
    folder("config-dev-zero", "config.json is a character device, not a regular file",
           _folder({"config.json": _link("/dev/zero")}), "m/config.json: "),
    folder("config-fifo", "config.json is a FIFO, not a regular file",
           _folder({"config.json": _fifo}), "m/config.json: "),
    folder("tokenizer-fifo", "tokenizer.json is not a regular file",
           _folder({"tokenizer.json": _fifo}), "m/tokenizer.json: "),
    path("model-fifo", "the model is a FIFO, not a GGUF file or a model folder", _fifo),
    path("model-dev-zero", "the model is a character device", _link("/dev/zero")),
    path("model-dangling", "the model is a link to nothing", _link("gone.gguf")),
    path("model-link-to-fifo", "the model is a FIFO",
         lambda p: (os.mkfifo(p.parent / "f"), os.symlink("f", p))),
]


def test_corpus_is_large_and_distinct():
    assert len(CORPUS) >= 20
    assert len({b.id for b in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("case", CORPUS, ids=lambda b: b.id)
def test_hostile_store_is_one_line(sdpa, workdir: Path, monkeypatch, case: Bad):
    monkeypatch.setenv("OLLAMA_MODELS", "ollama")  # relative: the line shows it so
    monkeypatch.setenv("HF_HUB_CACHE", "hub")
    check(sdpa, workdir, case)


def test_an_ollama_blob_that_is_a_link_to_a_gguf_is_read(sdpa, workdir: Path, monkeypatch):
    """Links are followed (stores are often links into another disk): only what a link leads
    to is judged."""
    monkeypatch.setenv("OLLAMA_MODELS", str(workdir / "ollama"))
    _ollama(lambda p: os.symlink(gb.gguf(p.parent.parent.parent / "real.gguf"), p))(workdir)
    got = sdpa("inspect", "tiny", *RUN, "--no-plots", "-q")
    assert got.code == 0, got.err
