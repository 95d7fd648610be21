"""BERT (Post-LN encoder): embeddings, then per layer q, k, v, attention, MLP, LayerNorms."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from sdpa_cli.studies.inspect.models import lnstack
from sdpa_cli.studies.inspect.models.common import (
    ACTIVATIONS,
    ConfigError,
    choice,
    integer,
    real,
)
from sdpa_cli.studies.inspect.models.tensormap import Table, rename


def shape(config: Mapping[str, Any]) -> tuple[int, int, int]:
    """(layers, heads, head_dim) from a BERT config."""
    width = integer(config, "hidden_size")
    count = integer(config, "num_attention_heads")
    layers = integer(config, "num_hidden_layers")
    if width % count:
        raise ConfigError(f"hidden_size {width} is not a multiple of num_attention_heads "
                          f"{count}", "hidden_size")
    # relative_key(_query) adds terms to q·k that we do not compute
    choice(config, "position_embedding_type", "absolute", ("absolute",))
    return layers, count, width // count


def stack(config: Mapping[str, Any]) -> lnstack.Stack:
    """Every config field the forward reads, checked (ConfigError naming the field)."""
    layers, count, dim = shape(config)
    integer(config, "max_position_embeddings")
    return lnstack.Stack(layers, count, dim, real(config, "layer_norm_eps", 1e-12),
                         choice(config, "hidden_act", "gelu", sorted(ACTIVATIONS)), post=True,
                         causal=False, scales=(1.0 / math.sqrt(dim),) * layers,
                         rules=(f"÷√{dim}",) * layers, token_type=True, embed_norm=True)


def table(config: Mapping[str, Any], vocab: int) -> Table:
    """Where each tensor the forward reads is stored (−1: any size)."""
    s = stack(config)
    w = integer(config, "hidden_size")
    f = integer(config, "intermediate_size") if config.get("intermediate_size") else -1
    e = "embeddings."
    out = [rename("embed.weight", f"{e}word_embeddings.weight", (vocab, w)),
           rename("position.weight", f"{e}position_embeddings.weight",
                  (integer(config, "max_position_embeddings"), w)),
           rename("token_type.weight", f"{e}token_type_embeddings.weight", (-1, w)),
           *lnstack.both("embed_norm", f"{e}LayerNorm", (w,))]
    for i in range(s.layers):
        p, q = f"layers.{i}.", f"encoder.layer.{i}."
        for target, source, size in (
                ("attn.q", "attention.self.query", (w, w)),
                ("attn.k", "attention.self.key", (w, w)),
                ("attn.v", "attention.self.value", (w, w)),
                ("attn.o", "attention.output.dense", (w, w)),
                ("attn_norm", "attention.output.LayerNorm", (w,)),
                ("mlp.up", "intermediate.dense", (f, w)), ("mlp.down", "output.dense", (w, f)),
                ("mlp_norm", "output.LayerNorm", (w,))):
            out += lnstack.both(p + target, q + source, size)
    return Table(tuple(out), "embed.weight", tuple(lnstack.qk(s, i) for i in range(s.layers)))
