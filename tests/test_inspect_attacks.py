"""Attacks on inspect's loader: hostile model folders, GGUF files, texts and
caches. Each is refused before the forward with one line naming the file, the tensor or field,
and what was expected; exit 2, nothing written; time and memory bounded by the input."""

from __future__ import annotations

import json
import os
import struct
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")
pytest.importorskip("gguf")

import inspect_fixtures as fx

from sdpa_cli.studies.inspect.text import load_tokenizer

Make = Callable[[Path], object]


def _llama(w: Path, **kw: object) -> Path:
    folder = fx.llama(w / "m", **kw)  # type: ignore[arg-type]
    fx.write_tokenizer(folder, "llama")
    return folder


def _config(change: Callable[[dict], None], family: str = "llama") -> Make:
    def make(w: Path) -> None:
        folder = _llama(w) if family == "llama" else getattr(fx, family)(w / "m")
        if family != "llama":
            fx.write_tokenizer(folder, "bert" if family == "bert" else None)
        cfg = json.loads((folder / "config.json").read_text())
        change(cfg)
        (folder / "config.json").write_text(json.dumps(cfg))
    return make


def _tensors(change: Callable[[dict], None]) -> Make:
    """Rewrite the tiny Llama's safetensors with `change` applied to its tensor dict."""
    def make(w: Path) -> None:
        from safetensors.numpy import load_file, save_file

        folder = _llama(w)
        t = load_file(str(folder / "model.safetensors"))
        change(t)
        save_file(t, str(folder / "model.safetensors"))
    return make


def _dtype(name: str, dtype: str) -> Make:
    """Rewrite one tensor's dtype in the header (the same byte count: F32 → I32; an F8 tensor
    is written with its own byte size)."""
    def make(w: Path) -> None:
        folder = _llama(w)
        path = folder / "model.safetensors"
        raw = path.read_bytes()
        (n,) = struct.unpack("<Q", raw[:8])
        doc = json.loads(raw[8:8 + n])
        data = raw[8 + n:]
        entry = doc[name]
        a, b = entry["data_offsets"]
        if dtype.startswith("F8"):  # one byte each: shrink the tensor's bytes in place
            count = (b - a) // 4
            data = data[:a] + bytes(count) + data[b:]
            for e in doc.values():
                if isinstance(e, dict) and "data_offsets" in e and e["data_offsets"][0] > a:
                    e["data_offsets"] = [x - 3 * count for x in e["data_offsets"]]
            entry["data_offsets"] = [a, a + count]
        entry["dtype"] = dtype
        head = json.dumps(doc).encode()
        path.write_bytes(struct.pack("<Q", len(head)) + head + data)
    return make


def _gguf(**kw: object) -> Make:
    def make(w: Path) -> None:
        fx.llama_gguf(w / "m" / "model.gguf", **kw)  # type: ignore[arg-type]
    return make


def _raw(kv: list, tensors: list = (), data: bytes = b"", **kw: object) -> Make:
    def make(w: Path) -> None:
        (w / "m").mkdir()
        fx.raw_gguf(w / "m" / "model.gguf", kv, tensors, data, **kw)  # type: ignore[arg-type]
    return make


def s8(text: str) -> bytes:
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


ARCH = ("general.architecture", 8, s8("llama"))
U32 = lambda v: struct.pack("<I", v)  # noqa: E731

# case → (make the model folder, what the one line says)
FOLDERS: dict[str, tuple[Make, str]] = {
    "missing-layer-tensor": (_tensors(lambda t: t.pop("model.layers.1.self_attn.k_proj.weight")),
                             "'layers.1.self_attn.k_proj.weight' (layer 1 of the config's 2)"),
    "3-layers-for-2": (_config(lambda c: c.update(num_hidden_layers=3)),
                       "no tensor 'layers.2.input_layernorm.weight' (layer 2 of the config's 3)"),
    "wrong-embedding-width": (_config(lambda c: c.update(hidden_size=20)),
                              "'embed_tokens.weight' has shape [44, 16]; the config implies "
                              "[44, 20]"),
    "string-rms-eps": (_config(lambda c: c.update(rms_norm_eps="1e-6")), "rms_norm_eps"),
    "string-layer-norm-eps": (_config(lambda c: c.update(layer_norm_eps="1e-12"), "bert"),
                              "layer_norm_eps must be a finite positive number"),
    "unknown-activation": (_config(lambda c: c.update(hidden_act="swiglu9")),
                           "hidden_act 'swiglu9' is not supported"),
    "unknown-rope-type": (_config(lambda c: c.update(rope_scaling={"rope_type": "yarn9",
                                                                   "factor": 2.0})),
                          "rope type 'yarn9' is not supported"),
    "head-dim-0": (_config(lambda c: c.update(head_dim=0)), "head_dim must be an integer"),
    "bool-hidden-size": (_config(lambda c: c.update(hidden_size=True)), "hidden_size"),
    "float-layers": (_config(lambda c: c.update(num_hidden_layers=2.5)), "num_hidden_layers"),
    "kv-heads-not-divisor": (_config(lambda c: c.update(num_key_value_heads=3)),
                             "not a multiple of num_key_value_heads 3"),
    # transformers 5 reads the factor here: ignoring it ran a partial-rotary model fully rotated
    "partial-rotary-in-rope-parameters": (_config(lambda c: c.update(rope_parameters={
        "rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5})),
        "rope_parameters.partial_rotary_factor other than 1 is not supported"),
    "nan-rope-theta": (_config(lambda c: c.update(rope_theta=float("nan"))), "rope_theta"),
    "negative-rope-theta": (_config(lambda c: c.update(rope_theta=-1.0)), "rope_theta"),
    "layer-types-wrong-length": (_config(lambda c: c.update(layer_types=["full_attention"])),
                                 "layer_types must list 2"),
    "sliding-without-window": (_config(lambda c: c.update(
        layer_types=["sliding_attention"] * 2, sliding_window=None)), "sliding_window"),
    "qwen3-without-q-norm": (_config(lambda c: c.update(model_type="qwen3")),
                             "no tensor 'layers.0.self_attn.q_norm.weight'"),
    "gpt2-string-flag": (_config(lambda c: c.update(scale_attn_weights="yes"), "gpt2"),
                         "scale_attn_weights must be true or false"),
    "bert-short-positions": (_config(lambda c: c.update(max_position_embeddings=99), "bert"),
                             "position_embeddings.weight' has shape [64, 16]"),
    "q-proj-wrong-rows": (_tensors(lambda t: t.update({
        "model.layers.0.self_attn.q_proj.weight": np.zeros((20, 16), np.float32)})),
        "'layers.0.self_attn.q_proj.weight' has shape [20, 16]; the config implies [24, 16]"),
    "bias-wrong-shape": (_tensors(lambda t: t.update({
        "model.layers.0.self_attn.q_proj.bias": np.zeros(5, np.float32)})),
        "q_proj.bias' has shape [5]"),
    "one-d-embedding": (_tensors(lambda t: t.update({
        "model.embed_tokens.weight": np.zeros(44, np.float32)})), "expected [vocabulary, width]"),
    "f8-tensor": (_dtype("model.layers.0.mlp.up_proj.weight", "F8_E4M3"),
                  "is F8_E4M3; only float weights are measured"),
    "int-tensor": (_dtype("model.layers.1.mlp.down_proj.weight", "I32"),
                   "is I32; only float weights are measured"),
    # GGUF
    "gguf-missing-tensor": (_gguf(drop=("blk.1.attn_k.weight",)),
                            "'layers.1.self_attn.k_proj.weight' (layer 1 of the config's 2)"),
    "gguf-3-layers-for-2": (_gguf(meta={"llama.block_count": 3}), "layer 2 of the config's 3"),
    "gguf-unknown-arch": (_gguf(arch="mamba9"), "GGUF architecture 'mamba9' is not supported"),
    "gguf-string-heads": (_gguf(meta={"llama.attention.head_count": "4"}),
                          "llama.attention.head_count is '4', expected an integer"),
    "gguf-heads-0": (_gguf(meta={"llama.attention.head_count": 0}), "num_attention_heads"),
    "gguf-partial-rope": (_gguf(meta={"llama.rope.dimension_count": 4}),
                          "partial rotation is not supported"),
    "gguf-no-tokens": (_raw([ARCH, ("llama.block_count", 4, U32(1))]),
                       "GGUF metadata has no llama.embedding_length"),
    "gguf-bad-magic": (lambda w: (w / "m").mkdir() or (w / "m" / "model.gguf").write_bytes(
        b"GGML" + bytes(60)), "not a GGUF file"),
    "gguf-truncated": (lambda w: (w / "m").mkdir() or (w / "m" / "model.gguf").write_bytes(
        fx.llama_gguf(w / "x.gguf").read_bytes()[:300]), "runs past the end of the file"),
    "gguf-version-99": (_raw([ARCH], version=99), "GGUF version 99 is not read"),
    "gguf-huge-kv-count": (_raw([ARCH], counts=(0, 1 << 60)), "metadata entries"),
    "gguf-huge-tensor-count": (_raw([ARCH], counts=(1 << 60, 1)), "tensors at byte"),
    "gguf-huge-string": (_raw([("general.architecture", 8, struct.pack("<Q", 1 << 62))]),
                         "runs past the end of the file"),
    "gguf-huge-array": (_raw([ARCH, ("tokenizer.ggml.tokens", 9,
                                     struct.pack("<IQ", 8, 1 << 61))]),
                        "tokenizer.ggml.tokens at byte"),
    "gguf-nested-array": (_raw([ARCH, ("x", 9, struct.pack("<IQ", 9, 1))]),
                          "arrays of arrays are not read"),
    "gguf-duplicate-key": (_raw([ARCH, ARCH]), "listed twice"),
    "gguf-bad-alignment": (_raw([ARCH, ("general.alignment", 4, U32(3))]),
                           "general.alignment 3 is not a power of two"),
    "gguf-tensor-outside": (_raw([ARCH], [("token_embd.weight", [16, 4], 0, 1 << 40)]),
                            "lies outside the file's data"),
    "gguf-no-width": (_raw([ARCH], [("token_embd.weight", [16, 4], 0, 0)], bytes(256)),
                      "GGUF metadata has no llama.embedding_length"),
    "gguf-two-files": (lambda w: [fx.llama_gguf(w / "m" / f"{x}.gguf") for x in "ab"],
                       "holds 2 GGUF files (a.gguf, b.gguf): name one"),
}


@pytest.mark.parametrize("case", list(FOLDERS))
def test_hostile_model_is_one_line_exit_2_nothing_written(sdpa, workdir: Path, case: str):
    make, says = FOLDERS[case]
    make(workdir)
    (workdir / "t.txt").write_text(fx.text(400), encoding="utf-8")
    t = time.perf_counter()
    got = sdpa("inspect", "m", "--text", "t.txt", "--seq-len", "8", "--sequences", "2",
               "--out", "o")
    assert time.perf_counter() - t < 20  # never proportional to a claimed size
    assert got.code == 2, got.err
    lines = [x for x in got.err.splitlines() if x.strip()]
    assert len(lines) == 1 and says in lines[0], got.err
    assert "Traceback" not in got.err and not (workdir / "o").exists()


def test_an_int_gguf_tensor_is_refused_as_not_float(tmp_path: Path):
    """A tensor the forward reads stored as I32 (ggml type 26): refused by name and type."""
    from sdpa_cli.errors import InputError
    from sdpa_cli.studies.inspect.checkpoint import open_checkpoint

    path = fx.llama_gguf(tmp_path / "m.gguf")
    header = path.read_bytes()
    name = b"blk.0.ffn_up.weight"
    at = header.index(name) + len(name) + 4 + 2 * 8  # after n_dims and the two dims
    patched = header[:at] + struct.pack("<I", 26) + header[at + 4:]
    path.write_bytes(patched)
    with pytest.raises(InputError) as e:
        open_checkpoint(path)
    assert "'layers.0.mlp.up_proj.weight' (blk.0.ffn_up.weight) is I32" in str(e.value)


# ---- texts ------------------------------------------------------------------------------

def _spec(workdir: Path, text: str) -> Path:
    _llama(workdir)
    spec = workdir / "s.yaml"
    spec.write_text(f"study: inspect\nmodel: m\nseq_len: [8]\nsequences: 2\ntext: [{text}]\n",
                    encoding="utf-8")
    return spec


@pytest.mark.parametrize("case", ["dev-zero", "link-to-dev-zero", "fifo", "folder"])
def test_a_text_that_is_not_a_regular_file_is_refused_at_once(sdpa, workdir: Path, case: str):
    if case == "dev-zero":
        target = "/dev/zero"
    elif case == "link-to-dev-zero":
        os.symlink("/dev/zero", workdir / "z.txt")
        target = "z.txt"
    elif case == "fifo":
        os.mkfifo(workdir / "f.txt")
        target = "f.txt"
    else:
        (workdir / "d.txt").mkdir()
        target = "d.txt"
    spec = _spec(workdir, target)
    t = time.perf_counter()
    got = sdpa("inspect", str(spec), "--out", "o")
    assert time.perf_counter() - t < 20
    assert got.code == 2 and len(got.err.strip().splitlines()) == 1, got.err
    assert "not a regular file" in got.err or "Is a directory" in got.err, got.err
    assert not (workdir / "o").exists()


@pytest.mark.slow  # ≥ 1 s; moved out of the quick tier (its 75 s budget)
def test_only_the_tokens_used_are_read_and_tokenised(tmp_path: Path):
    """A 10⁷-character text: 2 × 8 tokens need a window of a few kB, not the whole text; the
    tokens are those of the whole text."""
    from sdpa_cli.studies.inspect.text import text_tokens

    fx.write_tokenizer(tmp_path, None)
    tok = load_tokenizer(tmp_path / "tokenizer.json")
    words = fx.text(2_700_000, seed=4)  # about 10⁷ characters
    path = tmp_path / "big.txt"
    path.write_text(words, encoding="utf-8")
    seen: list[int] = []
    body = tok.body
    object.__setattr__(tok, "body", lambda text: seen.append(len(text)) or body(text))
    got = text_tokens(tok, [path], 16)
    assert len(words) > 9_000_000 and sum(seen) < 100_000, seen
    assert got == body(words[:2000])[:16]


def test_a_cut_never_changes_a_token(tmp_path: Path):
    """Windows cut inside long runs of words, spaces and newlines give the whole text's tokens."""
    from sdpa_cli.studies.inspect.text import text_tokens

    fx.write_tokenizer(tmp_path, None)
    tok = load_tokenizer(tmp_path / "tokenizer.json")
    rng = np.random.default_rng(7)
    pieces = [f"w{rng.integers(40)}" + " " * int(rng.integers(1, 4)) +
              ("\n" if rng.random() < 0.1 else "") for _ in range(40_000)]
    path = tmp_path / "t.txt"
    path.write_text("".join(pieces), encoding="utf-8")
    whole = tok.body(path.read_text(encoding="utf-8"))
    for need in (5, 3000, 20_000):
        assert text_tokens(tok, [path], need) == whole[:need]


# ---- caches -----------------------------------------------------------------------------

def _hub(workdir: Path, monkeypatch: pytest.MonkeyPatch, ref: bytes | None) -> Path:
    repo = workdir / "hub" / "models--org--tiny"
    snap = repo / "snapshots" / "abc"
    _llama(workdir)
    (repo / "snapshots").mkdir(parents=True)
    os.rename(workdir / "m", snap)
    (repo / "refs").mkdir()
    if ref is not None:
        (repo / "refs" / "main").write_bytes(ref)
    monkeypatch.setenv("HF_HUB_CACHE", str(workdir / "hub"))
    return repo


@pytest.mark.parametrize(("ref", "says"), [
    (b"../../../etc", "refs/main holds '../../../etc', not a revision name"),
    (b"a" * 5000, "refs/main is 5000 bytes; sdpa reads at most 1024")])
def test_a_tampered_cache_ref_is_refused(sdpa, workdir: Path, monkeypatch, ref, says):
    _hub(workdir, monkeypatch, ref)
    (workdir / "t.txt").write_text(fx.text(400), encoding="utf-8")
    got = sdpa("inspect", "org/tiny", "--text", "t.txt", "--seq-len", "8", "--sequences", "2",
               "--out", "o")
    assert got.code == 2 and says in got.err and len(got.err.strip().splitlines()) == 1, got.err


def test_a_cache_of_symlinks_is_read(sdpa, workdir: Path, monkeypatch):
    """The Hugging Face cache stores snapshot files as links to blobs: they are read."""
    repo = _hub(workdir, monkeypatch, b"abc")
    snap = repo / "snapshots" / "abc"
    (repo / "blobs").mkdir()
    for f in ("config.json", "tokenizer.json", "model.safetensors"):
        os.rename(snap / f, repo / "blobs" / f)
        os.symlink(repo / "blobs" / f, snap / f)
    (workdir / "t.txt").write_text(fx.text(400), encoding="utf-8")
    got = sdpa("inspect", "org/tiny", "--text", "t.txt", "--seq-len", "8", "--sequences", "2",
               "--out", "o", "--no-plots")
    assert got.code == 0, got.err


def _ollama(workdir: Path, monkeypatch, layer: dict | str) -> Path:
    store = workdir / "ollama"
    man = store / "manifests" / "registry.ollama.ai" / "library" / "tiny" / "latest"
    man.parent.mkdir(parents=True)
    man.write_text(layer if isinstance(layer, str) else json.dumps({"layers": [layer]}))
    monkeypatch.setenv("OLLAMA_MODELS", str(store))
    (workdir / "t.txt").write_text(fx.text(400), encoding="utf-8")
    return store


def test_an_ollama_name_reads_its_blob(sdpa, workdir: Path, monkeypatch):
    import hashlib

    blob = fx.llama_gguf(workdir / "x.gguf")
    digest = hashlib.sha256(blob.read_bytes()).hexdigest()
    store = _ollama(workdir, monkeypatch, {"mediaType": "application/vnd.ollama.image.model",
                                           "digest": f"sha256:{digest}"})
    (store / "blobs").mkdir()
    os.rename(blob, store / "blobs" / f"sha256-{digest}")
    got = sdpa("inspect", "tiny", "--text", "t.txt", "--seq-len", "8", "--sequences", "2",
               "--out", "o", "--no-plots", "--format", "json")
    assert got.code == 0, got.err
    assert len(got.json()["rows"]) == 2 * 4 * 2


@pytest.mark.parametrize(("layer", "says"), [
    ({"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:../../etc/passwd"},
     "is not sha256:HEX"),
    ({"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:" + "0" * 64},
     "which is not in"),
    ("{" * 100_000, "corrupt Ollama manifest: it nests more than"),
    ({"mediaType": "application/vnd.ollama.image.license", "digest": "x"}, "no layer of type")])
def test_a_tampered_ollama_manifest_is_refused(sdpa, workdir: Path, monkeypatch, layer, says):
    _ollama(workdir, monkeypatch, layer)
    got = sdpa("inspect", "tiny", "--text", "t.txt", "--seq-len", "8", "--sequences", "2",
               "--out", "o")
    assert got.code == 2 and says in got.err and len(got.err.strip().splitlines()) == 1, got.err


@pytest.mark.parametrize("case", ["tokenizer-dev-zero", "tokenizer-huge"])
def test_a_tokenizer_that_is_not_a_small_regular_file_is_refused(sdpa, workdir: Path, case):
    folder = _llama(workdir)
    (folder / "tokenizer.json").unlink()
    if case == "tokenizer-dev-zero":
        os.symlink("/dev/zero", folder / "tokenizer.json")
        says = "tokenizer.json is not a regular file"
    else:
        with (folder / "tokenizer.json").open("wb") as f:
            f.truncate(200 * 1024**2)  # sparse: nothing is written
        says = "sdpa reads at most"
    (workdir / "t.txt").write_text(fx.text(400), encoding="utf-8")
    got = sdpa("inspect", "m", "--text", "t.txt", "--seq-len", "8", "--sequences", "2",
               "--out", "o")
    assert got.code == 2 and says in got.err and len(got.err.strip().splitlines()) == 1, got.err
