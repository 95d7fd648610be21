"""One RoPE decoder forward for every family that differs only in norms, QK-norm, caps and windows.

A family module (llama, qwen3, olmo2, gemma, phi3) reads its config into a Plan, checking
every field it uses; `table` declares from the Plan every tensor the forward will read, its
shape and its GGUF name, so a loader can check a checkpoint before anything is loaded;
`forward` then runs the Plan.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

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
    matmul_t,
    merge,
    optional,
    rms_norm,
    rows,
    weight,
)
from sdpa_cli.studies.inspect.models.tensormap import QK, Table, same


@dataclass(frozen=True)
class Plan:
    """Everything a decoder forward uses, read and checked from a config.

    layout: "pre" (Llama, Qwen: norm before attention and MLP), "sandwich" (Gemma: also a
    norm after each), "post" (OLMo 2: a norm after each, none before). qk_norm: "head"
    (RMSNorm of each head's q and k: Qwen3, Gemma 3), "proj" (of the whole projection:
    OLMo 2) or None. inv: RoPE inverse frequencies per layer; windows: sliding window per
    layer (None: full attention). norm_offset: 1 for Gemma's (1 + w) norms."""

    layers: int
    heads: int
    kv: int
    dim: int
    width: int
    ffn: int | None  # None: read from the checkpoint (Llama configs may omit it)
    eps: float
    act: str
    inv: tuple[NDArray[np.float64], ...]
    scale: float
    cap: float | None
    windows: tuple[int | None, ...]
    layout: Literal["pre", "sandwich", "post"] = "pre"
    qk_norm: Literal["head", "proj"] | None = None
    norm_offset: float = 0.0
    embed_scale: float | None = None
    rule: str = ""
    biases: bool = True  # biases read when the checkpoint has them (q/k/v, o, MLP)


# each layout's norms: (name, llama.cpp's name)
NORMS = {"pre": (("input_layernorm", "attn_norm"), ("post_attention_layernorm", "ffn_norm")),
         "sandwich": (("input_layernorm", "attn_norm"),
                      ("post_attention_layernorm", "post_attention_norm"),
                      ("pre_feedforward_layernorm", "ffn_norm"),
                      ("post_feedforward_layernorm", "post_ffw_norm")),
         "post": (("post_attention_layernorm", "post_attention_norm"),
                  ("post_feedforward_layernorm", "post_ffw_norm"))}
LINEAR = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
          "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
          "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def table(plan: Plan, vocab: int, permuted: bool = False) -> Table:
    """Every tensor the forward reads, with its shape (an MLP width of −1: any) and its
    llama.cpp name. permuted: llama.cpp stores q's and k's rows interleaved per head (Llama,
    Mistral: convert_hf_to_gguf's permute); Gemma's GGUF norms are stored as 1 + w."""
    w, h, kv, d, f = plan.width, plan.heads, plan.kv, plan.dim, plan.ffn or -1
    off = plan.norm_offset
    out = [same("embed_tokens.weight", (vocab, w), "token_embd.weight")]
    bounds = []
    for i in range(plan.layers):
        p, g = f"layers.{i}.", f"blk.{i}."
        norms = dict(NORMS[plan.layout])
        if "input_layernorm" in norms:
            out.append(same(f"{p}input_layernorm.weight", (w,), f"{g}attn_norm.weight",
                            offset=off))
        for part, out_, in_ in (("self_attn.q_proj", h * d, w), ("self_attn.k_proj", kv * d, w),
                                 ("self_attn.v_proj", kv * d, w), ("self_attn.o_proj", w, h * d),
                                 ("mlp.gate_proj", f, w), ("mlp.up_proj", f, w),
                                 ("mlp.down_proj", w, f)):
            turn = {"self_attn.q_proj": h, "self_attn.k_proj": kv}.get(part, 0) if permuted else 0
            gname = f"{g}{LINEAR[part]}"
            out.append(same(f"{p}{part}.weight", (out_, in_), f"{gname}.weight", permute=turn))
            if plan.biases:
                out.append(same(f"{p}{part}.bias", (out_,), f"{gname}.bias", False, permute=turn))
            if part == "self_attn.v_proj" and plan.qk_norm is not None:
                size = (d, d) if plan.qk_norm == "head" else (h * d, kv * d)
                out += [same(f"{p}self_attn.{x}_norm.weight", (n,), f"{g}attn_{x}_norm.weight",
                             offset=off) for x, n in zip("qk", size, strict=True)]
        out += [same(f"{p}{name}.weight", (w,), f"{g}{gg}.weight", offset=off)
                for name, gg in norms.items() if name != "input_layernorm"]
        bounds.append(QK(f"{p}self_attn.q_proj", f"{p}self_attn.k_proj", h, kv, d,
                         f"{p}input_layernorm" if "input_layernorm" in norms else None,
                         offset=off, qk_norm=plan.qk_norm, q_norm=f"{p}self_attn.q_norm",
                         k_norm=f"{p}self_attn.k_norm", rotary=True, biases=plan.biases))
    out.append(same("norm.weight", (w,), "output_norm.weight", offset=off))
    out.append(same("lm_head.weight", (vocab, w), "output.weight", False))
    return Table(tuple(out), "embed_tokens.weight", tuple(bounds), head="lm_head.weight")


def rope(x: Array, inv: NDArray[np.float64], offset: int = 0) -> Array:
    """Rotate (…, n, d) by position (offset…offset+n−1), halves convention: pair (i, i + d/2)."""
    n, d = x.shape[-2], x.shape[-1]
    angles = np.outer(np.arange(offset, offset + n, dtype=np.float64), inv)
    cos = np.cos(angles).astype(x.dtype)
    sin = np.sin(angles).astype(x.dtype)
    half = d // 2
    a, b = x[..., :half], x[..., half:]
    out: Array = np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    return out


def forward(plan: Plan, read: Reader, ids: NDArray[np.integer[Any]],
            dtype: type = np.float32, resume: Resume | None = None) -> Iterator[LayerOut]:
    """Layer by layer (a generator: one layer's weights held at a time); causal mask, each
    layer's window; the last layer's hidden state is after the final norm. `resume` changes
    layers' scales and may start at a later layer from its input residual."""
    act = activation(plan.act)
    group = plan.heads // plan.kv
    off = plan.norm_offset

    def w(name: str) -> Array:
        return weight(read, name, dtype)

    def lin(name: str, h: Array) -> Array:
        out: Array = matmul_t(h, w(f"{name}.weight"))
        b = optional(read, f"{name}.bias", dtype) if plan.biases else None
        if b is not None:  # Qwen2's q/k/v; Llama's attention_bias and mlp_bias
            out += b
        return out

    def norm(h: Array, name: str) -> Array:
        return rms_norm(h, w(name), plan.eps, off)

    change = resume or Resume()
    start = change.begin(plan.layers)
    if change.residual is not None:
        x = change.residual
    else:
        x = rows(read, "embed_tokens.weight", ids, dtype)
        if plan.embed_scale is not None:  # Gemma: × √width, rounded to the weights' dtype
            x = x * np.asarray(plan.embed_scale, dtype=dtype)
    for i in range(start, plan.layers):
        p = f"layers.{i}."
        a = x if plan.layout == "post" else norm(x, p + "input_layernorm.weight")
        qp = lin(p + "self_attn.q_proj", a)
        kp = lin(p + "self_attn.k_proj", a)
        v = heads(lin(p + "self_attn.v_proj", a), plan.kv, plan.dim)
        q_pre = k_pre = None
        if plan.qk_norm == "proj":  # OLMo 2: over the whole projection, before the heads
            q_pre, k_pre = heads(qp, plan.heads, plan.dim), heads(kp, plan.kv, plan.dim)
            q = heads(norm(qp, p + "self_attn.q_norm.weight"), plan.heads, plan.dim)
            k = heads(norm(kp, p + "self_attn.k_norm.weight"), plan.kv, plan.dim)
        else:
            q, k = heads(qp, plan.heads, plan.dim), heads(kp, plan.kv, plan.dim)
            if plan.qk_norm == "head":  # Qwen3, Gemma 3: each head's vector on its own
                q_pre, k_pre = q, k
                q = norm(q, p + "self_attn.q_norm.weight")
                k = norm(k, p + "self_attn.k_norm.weight")
        inv = plan.inv[i]
        q, k = rope(q, inv), rope(k, inv)
        if q_pre is not None and k_pre is not None:
            q_pre, k_pre = rope(q_pre, inv), rope(k_pre, inv)
            k_pre = np.repeat(k_pre, group, axis=1)
        # GQA: query head h reads key/value head h // group
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        window = plan.windows[i]
        scale = plan.scale * change.factors.get(i, 1.0)
        o = lin(p + "self_attn.o_proj", merge(attend(q, k, v, scale, True, window, plan.cap)))
        if plan.layout == "pre":
            x = x + o
            m = norm(x, p + "post_attention_layernorm.weight")
        elif plan.layout == "sandwich":
            x = x + norm(o, p + "post_attention_layernorm.weight")
            m = norm(x, p + "pre_feedforward_layernorm.weight")
        else:
            x = x + norm(o, p + "post_attention_layernorm.weight")
            m = x
        gated = act(lin(p + "mlp.gate_proj", m)) * lin(p + "mlp.up_proj", m)
        f = lin(p + "mlp.down_proj", gated)
        x = x + (f if plan.layout == "pre" else norm(f, p + "post_feedforward_layernorm.weight"))
        hidden = norm(x, "norm.weight") if i == plan.layers - 1 else x
        yield LayerOut(q=q, k=k, scale=scale, causal=True, hidden=hidden, v=v,
                       window=window, cap=plan.cap, q_pre=q_pre, k_pre=k_pre, rule=plan.rule)


def sqrt_rule(scalar: float) -> str:
    """'÷√64' for a multiplier 1/√64 (an integer under the root when it is one)."""
    return f"÷√{int(scalar)}" if float(scalar).is_integer() else f"÷√{scalar:g}"


def inverse_sqrt(scalar: float) -> float:
    return 1.0 / math.sqrt(scalar)
