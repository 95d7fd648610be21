"""Llama, Mistral and Qwen2: RMSNorm, RoPE, grouped-query attention, optional q/k/v biases."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.numerics.models.common import (
    Array,
    ConfigError,
    LayerOut,
    Reader,
    activation,
    attend,
    heads,
    merge,
    need,
    optional,
    rms_norm,
    weight,
)

FIELDS = ("hidden_size", "num_attention_heads", "num_hidden_layers")


def shape(config: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """(layers, query heads, key heads, head_dim); head_dim may be given explicitly."""
    width, count, layers = (int(need(config, f)) for f in FIELDS)
    kv = int(config.get("num_key_value_heads") or count)
    if kv <= 0 or count % kv:
        raise ConfigError(f"num_attention_heads {count} is not a multiple of "
                          f"num_key_value_heads {kv}")
    dim = config.get("head_dim")
    if dim is None:
        if width % count:
            raise ConfigError(f"hidden_size {width} is not a multiple of num_attention_heads "
                              f"{count}, and there is no head_dim")
        dim = width // count
    if int(dim) % 2:
        raise ConfigError(f"head_dim {dim} is odd: RoPE rotates pairs")
    return layers, count, kv, int(dim)


def rope_frequencies(config: Mapping[str, Any], dim: int) -> NDArray[np.float64]:
    """RoPE's inverse frequencies θ^(−2i/d), with rope_theta at the top level or in
    rope_parameters, and the 'linear' and 'llama3' rescalings."""
    params = config.get("rope_parameters") or {}
    theta = float(config.get("rope_theta") or params.get("rope_theta") or 10000.0)
    inv = 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    scaling = config.get("rope_scaling") or (params if "rope_type" in params else {})
    kind = scaling.get("rope_type", scaling.get("type", "default")) if scaling else "default"
    if float(config.get("partial_rotary_factor", 1.0)) != 1.0:
        raise ConfigError("partial_rotary_factor other than 1 is not supported")
    if kind == "default":
        return inv
    factor = float(scaling.get("factor", 1.0))
    if kind == "linear":
        out: NDArray[np.float64] = inv / factor
        return out
    if kind == "llama3":
        low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
        old = float(scaling["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv
        scaled = np.where(wavelen > old / low, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        blended = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= old / high) & (wavelen <= old / low)
        out = np.where(medium, blended, scaled)
        return out
    raise ConfigError(f"rope scaling {kind!r} is not supported (default, linear, llama3)")


def rope(x: Array, inv: NDArray[np.float64], offset: int = 0) -> Array:
    """Rotate (…, n, d) by position (offset…offset+n−1), halves convention: pair (i, i + d/2)."""
    n, d = x.shape[-2], x.shape[-1]
    angles = np.outer(np.arange(offset, offset + n, dtype=np.float64), inv)
    cos = np.cos(np.concatenate([angles, angles], axis=-1)).astype(x.dtype)
    sin = np.sin(np.concatenate([angles, angles], axis=-1)).astype(x.dtype)
    half = d // 2
    turned = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    out: Array = x * cos + turned * sin
    return out


def forward(config: Mapping[str, Any], read: Reader, ids: NDArray[np.integer[Any]],
            dtype: type = np.float32) -> Iterator[LayerOut]:
    """Layer by layer; causal mask; the last layer's hidden state is after the final norm."""
    layers, count, kv, dim = shape(config)
    eps = float(config.get("rms_norm_eps", 1e-6))
    act = activation(str(config.get("hidden_act", "silu")))
    inv = rope_frequencies(config, dim)
    group = count // kv

    def w(name: str) -> Array:
        return weight(read, name, dtype)

    def lin(name: str, h: Array) -> Array:
        out: Array = h @ w(f"{name}.weight").T
        bias = optional(read, f"{name}.bias", dtype)
        return out if bias is None else out + bias

    x = w("embed_tokens.weight")[ids]
    scale = 1.0 / math.sqrt(dim)
    for i in range(layers):
        p = f"layers.{i}."
        a = rms_norm(x, w(p + "input_layernorm.weight"), eps)
        q = rope(heads(lin(p + "self_attn.q_proj", a), count, dim), inv)
        k = rope(heads(lin(p + "self_attn.k_proj", a), kv, dim), inv)
        v = heads(lin(p + "self_attn.v_proj", a), kv, dim)
        # GQA: query head h reads key/value head h // group
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        x = x + lin(p + "self_attn.o_proj", merge(attend(q, k, v, scale, causal=True)))
        m = rms_norm(x, w(p + "post_attention_layernorm.weight"), eps)
        gated = act(lin(p + "mlp.gate_proj", m)) * lin(p + "mlp.up_proj", m)
        x = x + lin(p + "mlp.down_proj", gated)
        hidden = rms_norm(x, w("norm.weight"), eps) if i == layers - 1 else x
        yield LayerOut(q=q, k=k, scale=scale, causal=True, hidden=hidden)
