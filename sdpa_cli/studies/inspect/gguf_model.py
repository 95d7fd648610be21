"""A GGUF checkpoint as sdpa's families see it: config from metadata, and tensors read under
Hugging Face names with llama.cpp's conversions undone, both as each family's table declares."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.studies.inspect.gguf_file import GGUFHeader, bad, dequantize, dequantize_rows
from sdpa_cli.studies.inspect.gguf_meta import Metadata
from sdpa_cli.studies.inspect.models.tensormap import Table

# GGUF architecture → Hugging Face model_type (the family sdpa runs)
ARCHITECTURES = {"llama": "llama", "mistral": "mistral", "qwen2": "qwen2", "qwen3": "qwen3",
                 "olmo2": "olmo2", "gemma2": "gemma2", "gemma3": "gemma3_text"}
LLAMA = ("llama", "mistral")  # a window in the metadata makes a Mistral
GEMMA = ("gemma2", "gemma3")
# llama.cpp's Gemma sizes that scale by 1/√(width/heads) instead of 1/√head_dim (27B)
GEMMA_27B_LAYERS = {"gemma2": 46, "gemma3": 62}
GEMMA_PATTERN = {"gemma2": 2, "gemma3": 6}
GEMMA3_LOCAL_THETA = 10000.0  # llama.cpp's fixed base for Gemma 3's sliding layers
ACTIVATION = {"gemma2": "gelu_pytorch_tanh", "gemma3": "gelu_pytorch_tanh"}


def _get(meta: Mapping[str, Any], key: str, path: Path, kind: type | tuple[type, ...],
         default: Any = None) -> Any:
    """An integer (`kind` int: at least 0, at least 1 for a context length) or a finite
    number, checked where it is read (gguf_meta.Metadata)."""
    m = Metadata(meta, path)
    if key not in meta:
        if default is None:
            raise m.refuse(key, f"GGUF metadata has no {key}")
        return default
    if kind is int:
        value = m.integer(key)
        low = 1 if key.endswith(".context_length") else 0
        if value < low:
            raise m.refuse(key, f"GGUF metadata {key} is {value}, expected a whole number "
                           f"≥ {low}")
        return value
    return m.number(key)


def config(header: GGUFHeader) -> dict[str, Any]:
    """The Hugging Face config the metadata describes (what llama.cpp itself reads)."""
    meta, path = header.metadata, header.path
    arch = Metadata(meta, path).string("general.architecture", None)
    if arch not in ARCHITECTURES:
        raise bad(path, f"GGUF architecture {arch!r} is not supported; supported: "
                  f"{', '.join(ARCHITECTURES)}", "general.architecture")
    a = str(arch)

    def get(key: str, kind: type | tuple[type, ...] = int, default: Any = None) -> Any:
        return _get(meta, f"{a}.{key}", path, kind, default)

    width, count = get("embedding_length"), get("attention.head_count")
    layers = get("block_count")
    kv = get("attention.head_count_kv", int, count)
    dim = get("attention.key_length", int, width // count if count else 0)
    number = (int, float)
    out: dict[str, Any] = {
        "model_type": ARCHITECTURES[a], "hidden_size": width, "num_attention_heads": count,
        "num_key_value_heads": kv, "num_hidden_layers": layers, "head_dim": dim,
        "intermediate_size": get("feed_forward_length"),
        "max_position_embeddings": get("context_length", int, 2048),
        "rms_norm_eps": float(get("attention.layer_norm_rms_epsilon", number, 1e-6)),
        "rope_theta": float(get("rope.freq_base", number, 10000.0)),
        "hidden_act": ACTIVATION.get(a, "silu"), "hidden_activation": ACTIVATION.get(a)}
    rot = get("rope.dimension_count", int, dim)
    if rot != dim and count > 0:  # (no heads: the family's check names that)
        raise bad(path, f"{a}.rope.dimension_count {rot} is not the head size {dim} (partial "
                  "rotation is not supported)", f"{a}.rope.dimension_count")
    kind = Metadata(meta, path).string(f"{a}.rope.scaling.type", None)
    if kind is not None and kind != "none":
        out["rope_scaling"] = {"rope_type": kind,
                               "factor": float(get("rope.scaling.factor", number, 1.0))}
    if a in GEMMA:
        out["sliding_window"] = get("attention.sliding_window", int, 4096)
        pattern = meta.get(f"{a}.attention.sliding_window_pattern", GEMMA_PATTERN[a])
        if isinstance(pattern, np.ndarray):  # one flag per layer: True for sliding
            if pattern.shape != (layers,) or pattern.dtype.kind not in "biu":
                raise bad(path, f"{a}.attention.sliding_window_pattern has {pattern.size} "
                          f"{pattern.dtype.name} values for {layers} layers (one flag each)",
                          f"{a}.attention.sliding_window_pattern")
            out["layer_types"] = ["sliding_attention" if s else "full_attention"
                                  for s in pattern]
        else:
            out["sliding_window_pattern"] = _get(
                meta, f"{a}.attention.sliding_window_pattern", path, int, GEMMA_PATTERN[a])
        # llama.cpp's rule (gemma_pytorch's config): the 27B scales by width/heads
        big = layers == GEMMA_27B_LAYERS[a] and count > 0
        out["query_pre_attn_scalar"] = width // count if big else dim
        if a == "gemma2":
            out["attn_logit_softcapping"] = float(get("attn_logit_softcapping", number, 50.0))
            out["final_logit_softcapping"] = float(get("final_logit_softcapping", number, 30.0))
        else:
            out["rope_local_base_freq"] = GEMMA3_LOCAL_THETA
    if a in LLAMA:  # Mistral's window, where the file states one
        window = get("attention.sliding_window", int, 0)
        if window:
            out["sliding_window"] = window
            out["model_type"] = "mistral"
    return out


def unpermute(w: NDArray[Any], heads: int) -> NDArray[Any]:
    """Undo convert_hf_to_gguf's permute of q/k rows: within each head, llama.cpp stores the
    rotation pairs interleaved (0, d/2, 1, d/2+1, …); transformers keeps the halves apart."""
    rows = w.shape[0]
    half = rows // heads // 2
    return w.reshape(heads, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


class GGUFWeights:
    """The GGUF checkpoint as a Reader of Hugging Face names: the family's table names each
    tensor's llama.cpp name and the conversions to undo; one tensor at a time, dequantised."""

    def __init__(self, header: GGUFHeader, table: Table) -> None:
        self.header = header
        self.sources = {s.name: s for s in table.gguf().values()}

    def __call__(self, name: str) -> NDArray[Any]:
        s = self.sources[name]  # KeyError: not in the table (an optional tensor: absent)
        t = self.header.tensors[str(s.gguf)]  # KeyError: absent (optional biases)
        w = dequantize(t, self.header.path)
        if s.permute:
            w = unpermute(w, s.permute)
        if s.offset:
            w = w - s.offset  # stored as offset + w; the family adds the offset itself
        return w

    def rows(self, name: str, ids: NDArray[np.integer[Any]]) -> NDArray[Any]:
        """Embedding rows `ids` (any shape) → ids.shape + (width,), reading only those rows."""
        s = self.sources[name]
        t = self.header.tensors[str(s.gguf)]
        unique, inverse = np.unique(ids, return_inverse=True)
        values = dequantize_rows(t, self.header.path, unique)
        if s.offset:
            values = values - s.offset
        out: NDArray[Any] = values[inverse.reshape(-1)].reshape(*ids.shape, t.shape[1])
        return out

    def close(self) -> None:
        pass


def parameters(header: GGUFHeader) -> int:
    return sum(math.prod(t.shape) for t in header.tensors.values())
