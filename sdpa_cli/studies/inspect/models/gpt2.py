"""GPT-2 (Pre-LN decoder): learned positions, a fused c_attn, Conv1D weights stored (in, out)."""

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


def _field(config: Mapping[str, Any], *names: str) -> int:
    """The first of `names` the config has, as a checked integer."""
    for name in names:
        if config.get(name) is not None:
            return integer(config, name)
    return integer(config, names[0])  # ConfigError naming the first


def shape(config: Mapping[str, Any]) -> tuple[int, int, int]:
    """(layers, heads, head_dim) from a GPT-2 config (n_embd / hidden_size, n_head, n_layer)."""
    width = _field(config, "n_embd", "hidden_size")
    count = _field(config, "n_head", "num_attention_heads")
    layers = _field(config, "n_layer", "num_hidden_layers")
    if width % count:
        raise ConfigError(f"n_embd {width} is not a multiple of n_head {count}", "n_embd")
    return layers, count, width // count


def stack(config: Mapping[str, Any]) -> lnstack.Stack:
    """Every config field the forward reads, checked (ConfigError naming the field)."""
    layers, count, dim = shape(config)
    _field(config, "n_positions", "n_ctx", "max_position_embeddings")
    for flag in ("scale_attn_weights", "scale_attn_by_inverse_layer_idx"):
        if not isinstance(config.get(flag, False), bool):
            raise ConfigError(f"{flag} must be true or false, not {config[flag]!r}", flag)
    return lnstack.Stack(
        layers, count, dim, real(config, "layer_norm_epsilon", 1e-5),
        choice(config, "activation_function", "gelu_new", sorted(ACTIVATIONS)), post=False,
        causal=True, scales=tuple(layer_scale(config, i, dim) for i in range(layers)),
        rules=tuple(rule_name(config, i, dim) for i in range(layers)), final_norm=True)


def table(config: Mapping[str, Any], vocab: int) -> Table:
    """Where each tensor the forward reads is stored: Conv1D weights (in, out), transposed;
    q, k and v are thirds of the fused c_attn."""
    s = stack(config)
    w = _field(config, "n_embd", "hidden_size")
    f = integer(config, "n_inner") if config.get("n_inner") is not None else 4 * w
    out = [rename("embed.weight", "wte.weight", (vocab, w)),
           rename("position.weight", "wpe.weight",
                  (_field(config, "n_positions", "n_ctx", "max_position_embeddings"), w))]
    for i in range(s.layers):
        p, h = f"layers.{i}.", f"h.{i}."
        out += lnstack.both(p + "attn_norm", h + "ln_1", (w,))
        for j, part in enumerate(("attn.q", "attn.k", "attn.v")):
            out += lnstack.both(p + part, h + "attn.c_attn", (w, 3 * w), True,
                                (j * w, (j + 1) * w))
        for target, source, size in (("attn.o", "attn.c_proj", (w, w)),
                                     ("mlp_norm", "ln_2", (w,)), ("mlp.up", "mlp.c_fc", (w, f)),
                                     ("mlp.down", "mlp.c_proj", (f, w))):
            out += lnstack.both(p + target, h + source, size, len(size) == 2)
    out += lnstack.both("final_norm", "ln_f", (w,))
    return Table(tuple(out), "embed.weight", tuple(lnstack.qk(s, i) for i in range(s.layers)))


def layer_scale(config: Mapping[str, Any], i: int, dim: int) -> float:
    """GPT-2's own rule: ÷√d unless scale_attn_weights is false, and ÷(i+1) more in layer i
    when scale_attn_by_inverse_layer_idx is set."""
    s = 1.0 / math.sqrt(dim) if config.get("scale_attn_weights", True) else 1.0
    return s / (i + 1) if config.get("scale_attn_by_inverse_layer_idx", False) else s


def rule_name(config: Mapping[str, Any], i: int, dim: int) -> str:
    parts = [f"÷√{dim}"] if config.get("scale_attn_weights", True) else []
    if config.get("scale_attn_by_inverse_layer_idx", False):
        parts.append(f"÷{i + 1}")
    return " ".join(parts) or "none"
