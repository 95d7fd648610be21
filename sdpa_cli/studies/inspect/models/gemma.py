"""Gemma 2 and Gemma 3: (1 + w) RMSNorms around attention and MLP, embeddings × √width,
÷√query_pre_attn_scalar, alternating sliding-window layers; Gemma 2 soft-caps the scores,
Gemma 3 normalises each head's q and k and gives sliding layers their own RoPE base."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.studies.inspect.models import decoder, llama
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
from sdpa_cli.studies.inspect.models.decoder import Plan

shape = llama.shape
GLOBAL_THETA, LOCAL_THETA = 1_000_000.0, 10_000.0  # Gemma 3's defaults


def _kinds(config: Mapping[str, Any], layers: int, pattern: int) -> list[str]:
    """Each layer's kind: `layer_types` when given, else every `pattern`-th layer global."""
    kinds = config.get("layer_types")
    if kinds is None:
        every = integer(config, "sliding_window_pattern", pattern)
        return ["sliding_attention" if (i + 1) % every else "full_attention"
                for i in range(layers)]
    if not isinstance(kinds, list) or len(kinds) != layers or \
            any(k not in llama.LAYER_TYPES for k in kinds):
        raise ConfigError(f"layer_types must list {layers} of {', '.join(llama.LAYER_TYPES)}",
                          "layer_types")
    return list(kinds)


def _common(config: Mapping[str, Any], pattern: int) -> dict[str, Any]:
    layers, _, _, _ = shape(config)
    kinds = _kinds(config, layers, pattern)
    window = integer(config, "sliding_window") if "sliding_attention" in kinds else None
    scalar = real(config, "query_pre_attn_scalar", 256.0)
    return dict(layout="sandwich", norm_offset=1.0,
                embed_scale=math.sqrt(integer(config, "hidden_size")),
                act=choice(config, "hidden_activation", "gelu_pytorch_tanh", sorted(ACTIVATIONS)),
                scale=1.0 / math.sqrt(scalar), kinds=kinds,
                windows=tuple(window if k == "sliding_attention" else None for k in kinds),
                scalar=scalar)


def gemma2_plan(config: Mapping[str, Any]) -> Plan:
    c = _common(config, 2)
    # absent: transformers' default; null: no cap
    cap = (real(config, "attn_logit_softcapping", 50.0)
           if config.get("attn_logit_softcapping", 50.0) is not None else None)
    root = decoder.sqrt_rule(c["scalar"])
    rule = root if cap is None else f"soft-cap {cap:g} after {root}"
    return llama.base_plan(config, layout=c["layout"], norm_offset=1.0,
                           embed_scale=c["embed_scale"], act=c["act"], scale=c["scale"],
                           windows=c["windows"], cap=cap, rule=rule)


def _gemma3_rope(config: Mapping[str, Any], kind: str, dim: int) -> NDArray[np.float64]:
    params = config.get("rope_parameters")
    if isinstance(params, Mapping) and kind in params:  # transformers ≥ 5: one per layer type
        sub = params[kind]
        if not isinstance(sub, Mapping):
            raise ConfigError(f"rope_parameters.{kind} must be an object", "rope_parameters")
        return llama.rope_frequencies({"rope_parameters": sub}, dim)
    if kind == "sliding_attention":  # older configs: a local base, never rescaled
        return llama.rope_frequencies(
            {"rope_theta": real(config, "rope_local_base_freq", LOCAL_THETA)}, dim)
    return llama.rope_frequencies(config, dim, GLOBAL_THETA)


def gemma3_plan(config: Mapping[str, Any]) -> Plan:
    c = _common(config, 6)
    dim = shape(config)[3]
    freqs = {k: _gemma3_rope(config, k, dim) for k in set(c["kinds"])}
    cap = config.get("attn_logit_softcapping")
    cap = None if cap is None else real(config, "attn_logit_softcapping")
    rule = f"QK-norm, then {decoder.sqrt_rule(c['scalar'])}" + (
        f", soft-cap {cap:g}" if cap is not None else "")
    return llama.base_plan(config, layout=c["layout"], norm_offset=1.0, qk_norm="head",
                           embed_scale=c["embed_scale"], act=c["act"], scale=c["scale"],
                           windows=c["windows"], cap=cap, rule=rule,
                           inv=tuple(freqs[k] for k in c["kinds"]))


def gemma2_forward(config: Mapping[str, Any], read: Reader, ids: NDArray[np.integer[Any]],
                   dtype: type = np.float32, resume: Resume | None = None
                   ) -> Iterator[LayerOut]:
    return decoder.forward(gemma2_plan(config), read, ids, dtype, resume)


def gemma3_forward(config: Mapping[str, Any], read: Reader, ids: NDArray[np.integer[Any]],
                   dtype: type = np.float32, resume: Resume | None = None
                   ) -> Iterator[LayerOut]:
    return decoder.forward(gemma3_plan(config), read, ids, dtype, resume)
