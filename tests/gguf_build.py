"""Tiny GGUF files for the attack corpora: any metadata of any type, tensors changed or patched."""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import inspect_fixtures as fx
import numpy as np

Change = Callable[[np.ndarray], np.ndarray]
# K-quant blocks of 256 values: (bytes, where the f16 scale d lies)
ZERO_BLOCKS = {"Q4_K": (144, 0), "Q5_K": (176, 0), "Q6_K": (210, 208)}
WIDTH, HEADS, KV, HEAD_DIM, LAYERS, FFN = 16, 4, 2, 6, 2, 24


class Typed:
    """A metadata value written with an explicit GGUF type (sub: an array's item type)."""

    def __init__(self, kind: str, value: Any, sub: str | None = None) -> None:
        self.kind, self.value, self.sub = kind, value, sub


def spm_tokens(extra: Sequence[str] = ()) -> list[str]:
    """A SentencePiece vocabulary: <unk>, <s>, </s>, the 256 byte tokens, ▁ and a few pieces
    of the tiny text ("w12 w3 …"), then `extra`."""
    pieces = ["▁", "w", "▁w", *"0123456789", "▁w1", "▁w2", "▁w3"]
    return ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), *pieces, *extra]


def spm(extra: Sequence[str] = (), **over: Any) -> dict[str, Any]:
    """tokenizer.ggml.* of a SentencePiece vocabulary (scores fall with the id; byte tokens of
    type 6, specials 3), BOS 1 added; `over` changes or (None) removes keys."""
    tokens = spm_tokens(extra)
    types = [2, 3, 3, *[6] * 256, *[1] * (len(tokens) - 259)]
    keys: dict[str, Any] = {
        "tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.scores": Typed("ARRAY", [-float(i) for i in range(len(tokens))],
                                       "FLOAT32"),
        "tokenizer.ggml.token_type": Typed("ARRAY", types, "INT32"),
        "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.unknown_token_id": 0, "tokenizer.ggml.add_bos_token": True}
    keys.update(over)
    return keys


def bpe(**over: Any) -> dict[str, Any]:
    """tokenizer.ggml.* of a byte-level BPE vocabulary of 256 tokens and no merges, BOS 1."""
    tokens = fx.byte_tokens()
    keys: dict[str, Any] = {
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "gpt-2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": Typed("ARRAY", [1] * len(tokens), "INT32"),
        "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.add_bos_token": True}
    keys.update(over)
    return keys


def _kind(name: str) -> Any:
    from gguf import GGUFValueType

    return GGUFValueType[name]


def _add(w: Any, key: str, value: Any) -> None:
    if isinstance(value, Typed):
        w.add_key_value(key, value.value, _kind(value.kind),
                        _kind(value.sub) if value.sub else None)
    elif isinstance(value, bool):
        w.add_bool(key, value)
    elif isinstance(value, int):
        w.add_key_value(key, value, _kind("UINT32" if 0 <= value < 1 << 32 else "INT64"))
    elif isinstance(value, float):
        w.add_float32(key, value)
    elif isinstance(value, str):
        w.add_string(key, value)
    elif isinstance(value, list) and value and isinstance(value[0], str):
        w.add_key_value(key, value, _kind("ARRAY"), _kind("STRING"))
    else:
        w.add_array(key, value)


def tensors(seed: int = 0, width: int = WIDTH, rows: int = 256, layers: int = LAYERS,
            ffn: int = FFN) -> dict[str, np.ndarray]:
    return fx.llama_gguf_tensors(np.random.default_rng(seed), rows=rows, width=width,
                                 layers=layers, heads=HEADS, kv=KV, head_dim=HEAD_DIM, ffn=ffn)


def gguf(path: Path, *, meta: dict[str, Any] | None = None,
         tokenizer: dict[str, Any] | None = None, change: dict[str, Change] | None = None,
         quant: dict[str, str] | None = None, width: int = WIDTH, rows: int | None = None,
         arch: str = "llama", f16: Sequence[str] = ()) -> Path:
    """A tiny Llama-layout GGUF: `meta` changes or (None) removes metadata keys; `tokenizer`
    gives the tokenizer.ggml.* keys (default: bpe()); `change` maps tensor names to a function
    of the array; `quant` quantises tensors (name → ggml type name); `f16` stores as F16."""
    import gguf as g

    keys = tokenizer if tokenizer is not None else bpe()
    tokens = keys.get("tokenizer.ggml.tokens")
    vocab = len(tokens) if isinstance(tokens, list) else 256
    t = tensors(width=width, rows=rows if rows is not None else vocab)
    for name, fn in (change or {}).items():
        t[name] = fn(np.array(t[name], dtype=np.float32))
    w = g.GGUFWriter(str(path), arch)
    values: dict[str, Any] = {
        f"{arch}.block_count": LAYERS, f"{arch}.context_length": 64,
        f"{arch}.embedding_length": width, f"{arch}.feed_forward_length": FFN,
        f"{arch}.attention.head_count": HEADS, f"{arch}.attention.head_count_kv": KV,
        f"{arch}.rope.dimension_count": HEAD_DIM, f"{arch}.rope.freq_base": 10000.0,
        f"{arch}.attention.key_length": HEAD_DIM,
        f"{arch}.attention.layer_norm_rms_epsilon": 1e-6, **keys}
    values.update(meta or {})
    if "general.architecture" in values:  # written by the writer itself; replace it
        w.kv_data[0].pop("general.architecture", None)
    for key, value in values.items():
        if value is not None:
            _add(w, key, value)
    for name, a in t.items():
        a = np.ascontiguousarray(a, dtype=np.float32)
        kind = (quant or {}).get(name)
        if kind in ZERO_BLOCKS:  # no quantiser in gguf-py: blocks of zeros, scale 1
            q = g.GGMLQuantizationType[kind]
            size, scale_at = ZERO_BLOCKS[kind]
            block = bytearray(size)
            block[scale_at:scale_at + 2] = struct.pack("<e", 1.0)
            raw = np.frombuffer(bytes(block) * (a.size // 256), dtype=np.uint8)
            w.add_tensor(name, raw.reshape(a.shape[0], -1), raw_dtype=q)
        elif kind is not None:
            q = g.GGMLQuantizationType[kind]
            w.add_tensor(name, g.quants.quantize(a, q), raw_dtype=q)
        elif name in f16:
            with np.errstate(over="ignore"):  # a value past F16's range is stored as inf
                w.add_tensor(name, a.astype(np.float16))
        else:
            w.add_tensor(name, a)
    path.parent.mkdir(parents=True, exist_ok=True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def patch_tensor(path: Path, name: str, at: int, data: bytes) -> None:
    """Overwrite bytes of one tensor's data, `at` bytes from its start (sdpa's own parser finds
    it: the file is otherwise well formed)."""
    from sdpa_cli.studies.inspect.gguf_file import read_header

    start = read_header(path).tensors[name].start
    with path.open("r+b") as f:
        f.seek(start + at)
        f.write(data)


F16_NAN = struct.pack("<e", float("nan"))
