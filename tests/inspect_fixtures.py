"""Tiny checkpoints for the inspect tests, written with safetensors.numpy (no torch); the
BERT one and the tokenizer are the study's own (sdpa_cli/studies/inspect/tiny.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from sdpa_cli.studies.inspect.tiny import WORDS, bert, save_checkpoint, text, write_tokenizer

__all__ = ["WORDS", "bert", "gpt2", "llama", "text", "write_tokenizer"]


def gpt2(folder: Path, seed: int = 0, width: int = 16, heads: int = 2, layers: int = 2,
         vocab: int = 44, positions: int = 64) -> Path:
    rng = np.random.default_rng(seed)
    t: dict[str, np.ndarray] = {"wte.weight": rng.normal(0, 1, (vocab, width)),
                                "wpe.weight": rng.normal(0, 1, (positions, width))}

    def conv(name: str, inp: int, out: int) -> None:  # Conv1D: (in, out)
        t[f"{name}.weight"] = rng.normal(0, 0.3, (inp, out))
        t[f"{name}.bias"] = rng.normal(0, 0.1, out)

    def ln(name: str) -> None:
        t[f"{name}.weight"] = 1 + rng.normal(0, 0.1, width)
        t[f"{name}.bias"] = rng.normal(0, 0.1, width)

    for i in range(layers):
        p = f"h.{i}."
        ln(p + "ln_1")
        conv(p + "attn.c_attn", width, 3 * width)
        conv(p + "attn.c_proj", width, width)
        ln(p + "ln_2")
        conv(p + "mlp.c_fc", width, 4 * width)
        conv(p + "mlp.c_proj", 4 * width, width)
    ln("ln_f")
    config = {"model_type": "gpt2", "n_embd": width, "n_head": heads, "n_layer": layers,
              "n_positions": positions, "vocab_size": vocab, "initializer_range": 0.02}
    return save_checkpoint(folder, config, t)


def llama(folder: Path, seed: int = 0, width: int = 16, heads: int = 4, kv: int = 2,
          head_dim: int = 6, layers: int = 2, vocab: int = 44, positions: int = 64,
          bias: bool = True, model_type: str = "llama",
          rope: dict[str, Any] | None = None, lm_head: bool = False) -> Path:
    rng = np.random.default_rng(seed)
    t: dict[str, np.ndarray] = {"model.embed_tokens.weight": rng.normal(0, 1, (vocab, width))}

    def lin(name: str, out: int, inp: int, with_bias: bool = False) -> None:
        t[f"model.{name}.weight"] = rng.normal(0, 0.4, (out, inp))
        if with_bias:
            t[f"model.{name}.bias"] = rng.normal(0, 0.2, out)

    for i in range(layers):
        p = f"layers.{i}."
        t[f"model.{p}input_layernorm.weight"] = 1 + rng.normal(0, 0.1, width)
        lin(p + "self_attn.q_proj", heads * head_dim, width, bias)
        lin(p + "self_attn.k_proj", kv * head_dim, width, bias)
        lin(p + "self_attn.v_proj", kv * head_dim, width, bias)
        lin(p + "self_attn.o_proj", width, heads * head_dim)
        t[f"model.{p}post_attention_layernorm.weight"] = 1 + rng.normal(0, 0.1, width)
        lin(p + "mlp.gate_proj", 24, width)
        lin(p + "mlp.up_proj", 24, width)
        lin(p + "mlp.down_proj", width, 24)
    t["model.norm.weight"] = 1 + rng.normal(0, 0.1, width)
    if lm_head:  # untied, stored without the model. prefix as transformers saves it
        t["lm_head.weight"] = rng.normal(0, 1, (vocab, width))
    config: dict[str, Any] = {
        "model_type": model_type, "hidden_size": width, "num_attention_heads": heads,
        "num_key_value_heads": kv, "head_dim": head_dim, "num_hidden_layers": layers,
        "intermediate_size": 24, "max_position_embeddings": positions, "vocab_size": vocab,
        "rms_norm_eps": 1e-6, "hidden_act": "silu", "initializer_range": 0.02,
        **(rope or {"rope_theta": 10000.0})}
    return save_checkpoint(folder, config, t)


# Known-answer heads: a GPT-2 whose weights make layer 0 head 0 a previous-token
# head, head 1 a sink on position 0, head 2 nothing (q = k = 0: uniform); and layer 1 head 0
# an induction head built on layer 0 head 0's output, heads 1 and 2 nothing.
KNOWN = {(0, 0): "previous-token", (0, 1): "sink", (0, 2): "other",
         (1, 0): "induction", (1, 1): "other", (1, 2): "other"}


def gpt2_heads(folder: Path, positions: int = 48, vocab: int = 44, amplitude: float = 6.0
               ) -> Path:
    """The residual stream is one-hot codes in three blocks of 48: position, token, and the
    previous token (written by layer 0 head 0); every x holds exactly two (then three) ones,
    so ln_1 (gain 1, shift 0) maps the codes to the same shape in every row. Head h of layer
    l reads its q, k and v from columns h·48 … h·48 + 47 of c_attn's three blocks."""
    block, heads = 48, 3
    width = 3 * block
    pos, tok, prev = 0, block, 2 * block  # where each code lives in the residual stream
    assert positions <= block and vocab <= block
    t: dict[str, np.ndarray] = {"wte.weight": np.zeros((vocab, width)),
                                "wpe.weight": np.zeros((positions, width))}
    t["wte.weight"][np.arange(vocab), tok + np.arange(vocab)] = 1.0
    t["wpe.weight"][np.arange(positions), pos + np.arange(positions)] = 1.0
    a = amplitude
    for layer in range(2):
        w = np.zeros((width, 3 * width))  # Conv1D (in, out): x·w = [q | k | v]
        bias = np.zeros(3 * width)
        q, k, v = 0, width, 2 * width
        if layer == 0:
            # head 0: query at position i looks for the code of position i − 1
            for i in range(1, positions):
                w[pos + i, q + (i - 1)] = a
            w[pos + np.arange(positions), k + np.arange(positions)] = a
            # ... and its value carries the key's token, written to the previous-token block
            w[tok + np.arange(vocab), v + np.arange(vocab)] = 1.0
            # head 1: every query is the same (bias); only position 0's key matches it
            bias[q + block] = a
            w[pos, k + block] = a * 8
        else:
            # head 0: query i holds its token, key j the token before it (layer 0's output)
            w[tok + np.arange(vocab), q + np.arange(vocab)] = a
            w[prev + np.arange(vocab), k + np.arange(vocab)] = a
        proj = np.zeros((width, width))
        if layer == 0:  # head 0's output (its value: the previous token) → the prev block
            proj[np.arange(vocab), prev + np.arange(vocab)] = 1.0
        p = f"h.{layer}."
        t[p + "ln_1.weight"], t[p + "ln_1.bias"] = np.ones(width), np.zeros(width)
        t[p + "attn.c_attn.weight"], t[p + "attn.c_attn.bias"] = w, bias
        t[p + "attn.c_proj.weight"], t[p + "attn.c_proj.bias"] = proj, np.zeros(width)
        t[p + "ln_2.weight"], t[p + "ln_2.bias"] = np.ones(width), np.zeros(width)
        t[p + "mlp.c_fc.weight"] = np.zeros((width, 4 * width))
        t[p + "mlp.c_fc.bias"] = np.zeros(4 * width)
        t[p + "mlp.c_proj.weight"] = np.zeros((4 * width, width))
        t[p + "mlp.c_proj.bias"] = np.zeros(width)
    t["ln_f.weight"], t["ln_f.bias"] = np.ones(width), np.zeros(width)
    config = {"model_type": "gpt2", "n_embd": width, "n_head": heads, "n_layer": 2,
              "n_positions": positions, "vocab_size": vocab, "initializer_range": 0.02}
    return save_checkpoint(folder, config, t)
def byte_tokens() -> list[str]:
    """GPT-2's printable spelling of the 256 bytes: a byte-level vocabulary any text fits."""
    from sdpa_cli.studies.inspect.gguf_tokenizer import _bytes_to_unicode

    spelling = _bytes_to_unicode()
    return [spelling[b] for b in range(256)]


def llama_gguf_tensors(rng: np.random.Generator, *, rows: int, width: int, layers: int,
                       heads: int, kv: int, head_dim: int, ffn: int) -> dict[str, np.ndarray]:
    """Random Llama-layout weights under llama.cpp's GGUF names (embedding of `rows` tokens)."""
    t = {"token_embd.weight": rng.normal(0, 1, (rows, width)),
         "output_norm.weight": 1 + rng.normal(0, 0.1, width)}
    for i in range(layers):
        p = f"blk.{i}."
        t[p + "attn_norm.weight"] = 1 + rng.normal(0, 0.1, width)
        t[p + "attn_q.weight"] = rng.normal(0, 0.4, (heads * head_dim, width))
        t[p + "attn_k.weight"] = rng.normal(0, 0.4, (kv * head_dim, width))
        t[p + "attn_v.weight"] = rng.normal(0, 0.4, (kv * head_dim, width))
        t[p + "attn_output.weight"] = rng.normal(0, 0.4, (width, heads * head_dim))
        t[p + "ffn_norm.weight"] = 1 + rng.normal(0, 0.1, width)
        t[p + "ffn_gate.weight"] = rng.normal(0, 0.4, (ffn, width))
        t[p + "ffn_up.weight"] = rng.normal(0, 0.4, (ffn, width))
        t[p + "ffn_down.weight"] = rng.normal(0, 0.4, (width, ffn))
    return t


def llama_gguf(path: Path, seed: int = 0, width: int = 16, heads: int = 4, kv: int = 2,
               head_dim: int = 6, layers: int = 2, arch: str = "llama",
               meta: dict[str, Any] | None = None, drop: tuple[str, ...] = (),
               shapes: dict[str, tuple[int, ...]] | None = None,
               quant: Any = None) -> Path:
    """A tiny random Llama-layout GGUF (byte-level BPE vocabulary of 256 tokens, BOS 1) written
    with the gguf package; `meta` overrides metadata (None removes a key), `drop` leaves
    tensors out, `shapes` writes tensors of other shapes, `quant` quantises the matrices."""
    import gguf

    rng = np.random.default_rng(seed)
    vocab = 256
    f = 32 if quant is not None else 24
    t = llama_gguf_tensors(rng, rows=vocab, width=width, layers=layers, heads=heads, kv=kv,
                           head_dim=head_dim, ffn=f)
    for name, shape in (shapes or {}).items():
        t[name] = rng.normal(0, 0.4, shape)
    w = gguf.GGUFWriter(str(path), arch)
    values: dict[str, Any] = {
        f"{arch}.block_count": layers, f"{arch}.context_length": 64,
        f"{arch}.embedding_length": width, f"{arch}.feed_forward_length": f,
        f"{arch}.attention.head_count": heads, f"{arch}.attention.head_count_kv": kv,
        f"{arch}.rope.dimension_count": head_dim, f"{arch}.rope.freq_base": 10000.0,
        f"{arch}.attention.key_length": head_dim,
        f"{arch}.attention.layer_norm_rms_epsilon": 1e-6, "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "gpt-2", "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.add_bos_token": True}
    values.update(meta or {})
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        else:
            w.add_string(key, value)
    w.add_token_list(byte_tokens())
    w.add_token_types([1] * vocab)
    w.add_token_merges([])
    for name, a in t.items():
        if name in drop:
            continue
        a = np.ascontiguousarray(a, dtype=np.float32)
        if quant is not None and a.ndim == 2:
            w.add_tensor(name, gguf.quants.quantize(a, quant), raw_dtype=quant)
        else:
            w.add_tensor(name, a)
    path.parent.mkdir(parents=True, exist_ok=True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def raw_gguf(path: Path, kv: list[tuple[str, int, bytes]], tensors: list[tuple[str, list[int],
             int, int]] = (), data: bytes = b"", version: int = 3, counts: tuple[int, int] |
             None = None) -> Path:
    """GGUF bytes by hand, for headers the gguf package would never write: kv entries
    (key, value type, packed value), tensor infos (name, ne, ggml type, offset), data after
    32-byte alignment; `counts` overrides the (tensor, kv) counts written."""
    import struct

    def string(s: str) -> bytes:
        b = s.encode()
        return struct.pack("<Q", len(b)) + b

    n_t, n_kv = counts or (len(tensors), len(kv))
    out = b"GGUF" + struct.pack("<IQQ", version, n_t, n_kv)
    for key, kind, value in kv:
        out += string(key) + struct.pack("<I", kind) + value
    for name, ne, kind, offset in tensors:
        out += string(name) + struct.pack("<I", len(ne)) + b"".join(
            struct.pack("<Q", n) for n in ne) + struct.pack("<IQ", kind, offset)
    out += b"\0" * (-len(out) % 32) + data
    path.write_bytes(out)
    return path
