"""A GGUF checkpoint as sdpa's families see it: config from metadata, Hugging Face tensor names,
llama.cpp's conversions undone (q/k row order, Gemma's norm + 1), and the tokenizer rebuilt."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.studies.inspect.gguf_file import GGUFHeader, bad, dequantize, dequantize_rows
from sdpa_cli.studies.inspect.gguf_meta import Metadata

# GGUF architecture → Hugging Face model_type (the family sdpa runs)
ARCHITECTURES = {"llama": "llama", "mistral": "mistral", "qwen2": "qwen2", "qwen3": "qwen3",
                 "olmo2": "olmo2", "gemma2": "gemma2", "gemma3": "gemma3_text"}
# llama.cpp stores Llama's q and k rows interleaved for its rotation (convert_hf_to_gguf's
# permute); these architectures rotate halves as transformers does and are stored as is.
PERMUTED = ("llama", "mistral")
GEMMA = ("gemma2", "gemma3")  # norms stored as 1 + w
# llama.cpp's Gemma sizes that scale by 1/√(width/heads) instead of 1/√head_dim (27B)
GEMMA_27B_LAYERS = {"gemma2": 46, "gemma3": 62}
GEMMA_PATTERN = {"gemma2": 2, "gemma3": 6}
GEMMA3_LOCAL_THETA = 10000.0  # llama.cpp's fixed base for Gemma 3's sliding layers
ACTIVATION = {"gemma2": "gelu_pytorch_tanh", "gemma3": "gelu_pytorch_tanh"}

_LAYER = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj",
          "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
          "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm",
          "attn_k_norm": "self_attn.k_norm", "ffn_gate": "mlp.gate_proj",
          "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
          "post_attention_norm": "post_attention_layernorm",
          "post_ffw_norm": "post_feedforward_layernorm"}


def hf_name(gguf: str, arch: str) -> str | None:
    """llama.cpp's tensor name → the family's (prefix-free) Hugging Face name; None if unused."""
    if gguf == "token_embd.weight":
        return "embed_tokens.weight"
    if gguf == "output_norm.weight":
        return "norm.weight"
    m = re.fullmatch(r"blk\.(\d+)\.([a-z_]+)\.(weight|bias)", gguf)
    if not m:
        return None
    i, part, kind = m.groups()
    if part == "ffn_norm":  # before the MLP: Llama's second norm, Gemma's pre-MLP one
        part_hf = "pre_feedforward_layernorm" if arch in GEMMA else "post_attention_layernorm"
    elif part in _LAYER:
        part_hf = _LAYER[part]
    else:
        return None
    return f"layers.{int(i)}.{part_hf}.{kind}"


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
        else:
            out["rope_local_base_freq"] = GEMMA3_LOCAL_THETA
    if a in PERMUTED:  # Mistral's window, where the file states one
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
    """The GGUF checkpoint as a Reader: Hugging Face name → float array, one tensor at a time,
    dequantised by gguf, with llama.cpp's conversions undone."""

    def __init__(self, header: GGUFHeader, cfg: Mapping[str, Any]) -> None:
        self.header = header
        self.arch = str(header.metadata["general.architecture"])
        self.cfg = cfg
        self.names = {hf: g for g in header.tensors
                      if (hf := hf_name(g, self.arch)) is not None}

    def __call__(self, name: str) -> NDArray[Any]:
        t = self.header.tensors[self.names[name]]  # KeyError: absent (optional biases)
        w = dequantize(t, self.header.path)
        if self.arch in PERMUTED and re.search(r"self_attn\.[qk]_proj\.", name):
            heads = self.cfg["num_attention_heads"] if ".q_proj." in name else \
                self.cfg["num_key_value_heads"]
            w = unpermute(w, int(heads))
        if self.arch in GEMMA and name.endswith("norm.weight"):
            w = w - 1.0  # stored as 1 + w; the family adds the 1 itself
        return w

    def rows(self, name: str, ids: NDArray[np.integer[Any]]) -> NDArray[Any]:
        """Embedding rows `ids` (any shape) → ids.shape + (width,), reading only those rows."""
        t = self.header.tensors[self.names[name]]
        unique, inverse = np.unique(ids, return_inverse=True)
        values = dequantize_rows(t, self.header.path, unique)
        if self.arch in GEMMA and name.endswith("norm.weight"):
            values = values - 1.0
        out: NDArray[Any] = values[inverse.reshape(-1)].reshape(*ids.shape, t.shape[1])
        return out

    def close(self) -> None:
        pass


def shapes(header: GGUFHeader) -> dict[str, tuple[str, tuple[int, ...], int]]:
    """Hugging Face name → (dtype, shape, bytes) of every tensor sdpa would read."""
    arch = str(header.metadata.get("general.architecture"))
    out = {}
    for g, t in header.tensors.items():
        hf = hf_name(g, arch)
        if hf is not None:
            out[hf] = (t.dtype, t.shape, t.nbytes)
    return out


def parameters(header: GGUFHeader) -> int:
    return sum(math.prod(t.shape) for t in header.tensors.values())
