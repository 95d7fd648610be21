"""One LayerNorm transformer forward for BERT (Post-LN encoder) and GPT-2 (Pre-LN decoder)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.studies.inspect.models.common import (
    Array,
    LayerOut,
    Reader,
    Resume,
    activation,
    attend,
    heads,
    layer_norm,
    matmul_t,
    merge,
    rows,
    weight,
)
from sdpa_cli.studies.inspect.models.tensormap import QK, Source, Target


@dataclass(frozen=True)
class Stack:
    """Everything the forward uses, read and checked from a config by the family.

    post: a LayerNorm after each residual add (BERT), else one before each block (GPT-2);
    token_type: add token type 0's embedding; embed_norm: a LayerNorm of the embeddings;
    final_norm: one after the last layer. scales, rules: the model's own rule per layer."""

    layers: int
    heads: int
    dim: int
    eps: float
    act: str
    post: bool
    causal: bool
    scales: tuple[float, ...]
    rules: tuple[str, ...]
    token_type: bool = False
    embed_norm: bool = False
    final_norm: bool = False


# The names the forward reads (each family's table says where each is stored): per layer
# "layers.{i}." + these, each with .weight and .bias.
LINEARS = ("attn.q", "attn.k", "attn.v", "attn.o", "mlp.up", "mlp.down")
NORMS = ("attn_norm", "mlp_norm")


def qk(stack: Stack, i: int) -> QK:
    """Layer i's q and k read the output of a LayerNorm: Pre-LN, this layer's first; Post-LN,
    the one that ended the layer before (the embeddings' for layer 0)."""
    if stack.post:
        norm = "embed_norm" if i == 0 else f"layers.{i - 1}.mlp_norm"
    else:
        norm = f"layers.{i}.attn_norm"
    return QK(f"layers.{i}.attn.q", f"layers.{i}.attn.k", stack.heads, stack.heads, stack.dim,
              norm, centred=True)


def both(target: str, source: str, shape: tuple[int, ...], transpose: bool = False,
         rows: tuple[int, int] | None = None, bias_shape: tuple[int, ...] | None = None
         ) -> list[Target]:
    """A target's .weight and .bias from a stored tensor's (the bias sliced like the rows)."""
    return [Target(f"{target}.weight", Source(f"{source}.weight", shape), rows, transpose),
            Target(f"{target}.bias", Source(f"{source}.bias", bias_shape or
                                            (shape[-1 if transpose else 0],)), rows)]


def forward(stack: Stack, read: Reader, ids: NDArray[np.integer[Any]],
            dtype: type = np.float32, resume: Resume | None = None) -> Iterator[LayerOut]:
    """Layer by layer (a generator: one layer's weights held at a time); positions 0…n−1.
    `resume` as in decoder.forward."""
    act = activation(stack.act)

    def w(name: str) -> Array:
        return weight(read, name, dtype)

    def lin(name: str, h: Array) -> Array:
        out: Array = matmul_t(h, w(f"{name}.weight"))
        out += w(f"{name}.bias")
        return out

    def norm(name: str, h: Array) -> Array:
        return layer_norm(h, w(f"{name}.weight"), w(f"{name}.bias"), stack.eps)

    n = ids.shape[1]
    change = resume or Resume()
    start = change.begin(stack.layers)
    if change.residual is not None:
        x = change.residual
    else:
        x = rows(read, "embed.weight", ids, dtype)
        x = x + w("position.weight")[:n]
        if stack.token_type:
            x = x + w("token_type.weight")[0]
        if stack.embed_norm:
            x = norm("embed_norm", x)
    for i in range(start, stack.layers):
        p = f"layers.{i}."
        a = x if stack.post else norm(p + "attn_norm", x)
        q, k, v = (heads(lin(p + name, a), stack.heads, stack.dim)
                   for name in ("attn.q", "attn.k", "attn.v"))
        scale = stack.scales[i] * change.factors.get(i, 1.0)
        o = lin(p + "attn.o", merge(attend(q, k, v, scale, stack.causal)))
        if stack.post:
            x = norm(p + "attn_norm", o + x)
            m = lin(p + "mlp.down", act(lin(p + "mlp.up", x)))
            x = norm(p + "mlp_norm", m + x)
        else:
            x = x + o
            x = x + lin(p + "mlp.down", act(lin(p + "mlp.up", norm(p + "mlp_norm", x))))
        hidden = norm("final_norm", x) if stack.final_norm and i == stack.layers - 1 else x
        yield LayerOut(q=q, k=k, scale=scale, causal=stack.causal, hidden=hidden,
                       v=v, rule=stack.rules[i])
