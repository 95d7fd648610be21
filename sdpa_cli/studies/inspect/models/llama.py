"""Llama, Mistral and Qwen2: RMSNorm, RoPE, grouped-query attention, optional q/k/v biases."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.studies.inspect.models import decoder
from sdpa_cli.studies.inspect.models.common import (
    ACTIVATIONS,
    ConfigError,
    LayerOut,
    Reader,
    Resume,
    choice,
    integer,
    real,
)
from sdpa_cli.studies.inspect.models.decoder import Plan, rope  # noqa: F401  (rope: the tests' import)

ROPE_TYPES = ("default", "linear", "llama3")
LAYER_TYPES = ("full_attention", "sliding_attention")


def shape(config: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """(layers, query heads, key heads, head_dim); head_dim may be given explicitly."""
    width = integer(config, "hidden_size")
    count = integer(config, "num_attention_heads")
    layers = integer(config, "num_hidden_layers")
    kv = integer(config, "num_key_value_heads", count)
    if count % kv:
        raise ConfigError(f"num_attention_heads {count} is not a multiple of "
                          f"num_key_value_heads {kv}", "num_key_value_heads")
    if config.get("head_dim") is None:
        if width % count:
            raise ConfigError(f"hidden_size {width} is not a multiple of num_attention_heads "
                              f"{count}, and there is no head_dim", "hidden_size")
        dim = width // count
    else:
        dim = integer(config, "head_dim")
    if dim % 2:
        raise ConfigError(f"head_dim {dim} is odd: RoPE rotates pairs", "head_dim")
    return layers, count, kv, dim


def rope_frequencies(config: Mapping[str, Any], dim: int,
                     default_theta: float = 10000.0) -> NDArray[np.float64]:
    """RoPE's inverse frequencies θ^(−2i/d), with rope_theta at the top level or in
    rope_parameters, and the 'linear' and 'llama3' rescalings. Every field is checked."""
    params = config.get("rope_parameters") or {}
    if not isinstance(params, Mapping):
        raise ConfigError(f"rope_parameters must be an object, not {params!r}",
                          "rope_parameters")
    theta = real(config, "rope_theta", None) if config.get("rope_theta") is not None else \
        real(params, "rope_theta", default_theta)
    inv = 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    scaling = config.get("rope_scaling") or (params if "rope_type" in params else {})
    if not isinstance(scaling, Mapping):
        raise ConfigError(f"rope_scaling must be an object, not {scaling!r}", "rope_scaling")
    # transformers 5 reads the factor from rope_parameters, older versions from the top level
    for where, fields in (("", config), ("rope_parameters.", params)):
        if real(fields, "partial_rotary_factor", 1.0) != 1.0:
            raise ConfigError(f"{where}partial_rotary_factor other than 1 is not supported",
                              f"{where}partial_rotary_factor")
    kind = scaling.get("rope_type", scaling.get("type", "default")) if scaling else "default"
    if kind not in ROPE_TYPES:
        raise ConfigError(f"rope type {kind!r} is not supported; known: "
                          f"{', '.join(ROPE_TYPES)}", "rope_scaling")
    if kind == "default":
        return inv
    factor = real(scaling, "factor", 1.0)
    if kind == "linear":
        out: NDArray[np.float64] = inv / factor
        return out
    low, high = real(scaling, "low_freq_factor"), real(scaling, "high_freq_factor")
    old = real(scaling, "original_max_position_embeddings")
    if high <= low:
        raise ConfigError(f"high_freq_factor {high} is not above low_freq_factor {low}",
                          "rope_scaling")
    wavelen = 2 * math.pi / inv
    scaled = np.where(wavelen > old / low, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= old / high) & (wavelen <= old / low)
    out = np.where(medium, blended, scaled)
    return out


def windows(config: Mapping[str, Any], layers: int) -> tuple[int | None, ...]:
    """Each layer's sliding window (None: full attention): `layer_types` when given; else
    Mistral's `sliding_window` on every layer; else Qwen's use_sliding_window from
    max_window_layers on."""
    kinds = config.get("layer_types")
    kind = config.get("model_type")
    if kinds is None and kind == "mistral":
        kinds = ["sliding_attention"] * layers if config.get("sliding_window") else None
    if kinds is None and config.get("use_sliding_window") is True:
        start = integer(config, "max_window_layers", 0, low=0)
        kinds = ["sliding_attention" if i >= start else "full_attention" for i in range(layers)]
    if kinds is None:
        return (None,) * layers
    if not isinstance(kinds, list) or len(kinds) != layers or \
            any(k not in LAYER_TYPES for k in kinds):
        raise ConfigError(f"layer_types must list {layers} of {', '.join(LAYER_TYPES)}",
                          "layer_types")
    if "sliding_attention" not in kinds:
        return (None,) * layers
    window = integer(config, "sliding_window")
    return tuple(window if k == "sliding_attention" else None for k in kinds)


def base_plan(config: Mapping[str, Any], **changes: Any) -> Plan:
    """The Llama plan of a config (every field the forward uses, checked); families change
    what differs."""
    layers, count, kv, dim = shape(config)
    inv = rope_frequencies(config, dim)
    values: dict[str, Any] = dict(
        layers=layers, heads=count, kv=kv, dim=dim, width=integer(config, "hidden_size"),
        ffn=integer(config, "intermediate_size") if config.get("intermediate_size") is not None
        else None,
        eps=real(config, "rms_norm_eps", 1e-6),
        act=choice(config, "hidden_act", "silu", sorted(ACTIVATIONS)),
        inv=(inv,) * layers, scale=1.0 / math.sqrt(dim), cap=None,
        windows=windows(config, layers), rule=decoder.sqrt_rule(dim))
    values.update(changes)
    return Plan(**values)


def plan(config: Mapping[str, Any]) -> Plan:
    return base_plan(config)


def forward(config: Mapping[str, Any], read: Reader, ids: NDArray[np.integer[Any]],
            dtype: type = np.float32, resume: Resume | None = None) -> Iterator[LayerOut]:
    """Layer by layer; causal mask (and Mistral's window); the last layer's hidden state is
    after the final norm."""
    return decoder.forward(plan(config), read, ids, dtype, resume)
