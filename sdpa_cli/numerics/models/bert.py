"""BERT (Post-LN encoder): embeddings, then per layer q, k, v, attention, MLP, LayerNorms."""

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
    layer_norm,
    merge,
    need,
    weight,
)

FIELDS = ("hidden_size", "num_attention_heads", "num_hidden_layers")


def shape(config: Mapping[str, Any]) -> tuple[int, int, int]:
    """(layers, heads, head_dim) from a BERT config."""
    width, count, layers = (int(need(config, f)) for f in FIELDS)
    if count <= 0 or width % count:
        raise ConfigError(f"hidden_size {width} is not a multiple of num_attention_heads {count}")
    kind = config.get("position_embedding_type", "absolute")
    if kind != "absolute":  # relative_key(_query) adds terms to q·k that we do not compute
        raise ConfigError(f"position_embedding_type {kind!r} is not supported (absolute only)")
    return layers, count, width // count


def forward(config: Mapping[str, Any], read: Reader, ids: NDArray[np.integer[Any]],
            dtype: type = np.float32) -> Iterator[LayerOut]:
    """Layer by layer (a generator, so one layer's weights are held at a time). Encoder: no
    mask, token type 0, positions 0…n−1."""
    layers, count, dim = shape(config)
    eps = float(config.get("layer_norm_eps", 1e-12))
    act = activation(str(config.get("hidden_act", "gelu")))

    def w(name: str) -> Array:
        return weight(read, name, dtype)

    n = ids.shape[1]
    x = w("embeddings.word_embeddings.weight")[ids]
    x = x + w("embeddings.position_embeddings.weight")[:n]
    x = x + w("embeddings.token_type_embeddings.weight")[0]
    x = layer_norm(x, w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"), eps)
    scale = 1.0 / math.sqrt(dim)
    for i in range(layers):
        p = f"encoder.layer.{i}."

        def lin(name: str, h: Array, p: str = p) -> Array:
            out: Array = h @ w(f"{p}{name}.weight").T + w(f"{p}{name}.bias")
            return out

        q = heads(lin("attention.self.query", x), count, dim)
        k = heads(lin("attention.self.key", x), count, dim)
        v = heads(lin("attention.self.value", x), count, dim)
        a = lin("attention.output.dense", merge(attend(q, k, v, scale, causal=False)))
        x = layer_norm(a + x, w(f"{p}attention.output.LayerNorm.weight"),
                       w(f"{p}attention.output.LayerNorm.bias"), eps)
        m = lin("output.dense", act(lin("intermediate.dense", x)))
        x = layer_norm(m + x, w(f"{p}output.LayerNorm.weight"), w(f"{p}output.LayerNorm.bias"),
                       eps)
        yield LayerOut(q=q, k=k, scale=scale, causal=False, hidden=x)
