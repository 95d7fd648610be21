"""A stack of attention blocks (Post-LN or Pre-LN, optional MLP): forward, hand-written backward."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sdpa_cli.numerics import attention_grad
from sdpa_cli.numerics.attention_grad import Cache, weight_grad
from sdpa_cli.numerics.scaling import Scaling

LN_EPS = 1e-5  # the LayerNorm: √(population variance + 1e-5), no learned parameters
NORMS = ("post", "pre")


@dataclass(frozen=True)
class Block:
    """One block's weights, (d_model, ·) or batched per trial (T, d_model, ·). W1 and W2 are
    None when the block has no MLP."""

    WQ: np.ndarray
    WK: np.ndarray
    WV: np.ndarray  # (d_model, d_model): one head whose value width is d_model
    W1: np.ndarray | None = None  # (d_model, 4·d_model)
    W2: np.ndarray | None = None  # (4·d_model, d_model)


@dataclass(frozen=True)
class BlockCache:
    """What one block's backward reads, and what the study reports of it."""

    attn: Cache  # the attention's cache (its X is h for Post-LN, LN(h) for Pre-LN)
    ln1: tuple[np.ndarray, np.ndarray]  # (LN output, 1/σ): after attention (post), of h (pre)
    mlp_in: np.ndarray | None  # the MLP's input: LN output (post h1, pre LN(h1))
    z: np.ndarray | None  # h·W1 before the ReLU
    ln2: tuple[np.ndarray, np.ndarray] | None  # the LN after the MLP (post) or before it (pre)
    out: np.ndarray  # h after this block (Pre-LN: the residual stream, before any final LN)


def layer_norm(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(LN(x), 1/√(var + eps)) along the last axis, population variance."""
    c = x - x.mean(axis=-1, keepdims=True)
    inv = 1.0 / np.sqrt(np.mean(c * c, axis=-1, keepdims=True) + LN_EPS)
    return c * inv, inv


def layer_norm_back(dy: np.ndarray, y: np.ndarray, inv: np.ndarray) -> np.ndarray:
    """∂L/∂x for y = LN(x): (dy − mean(dy) − y·mean(dy∘y))/σ."""
    out: np.ndarray = inv * (dy - dy.mean(axis=-1, keepdims=True)
                             - y * np.mean(dy * y, axis=-1, keepdims=True))
    return out


def forward(x: np.ndarray, blocks: Sequence[Block], rule: Scaling, norm: str, *,
            causal: bool = False) -> list[BlockCache]:
    """Every block's cache, from the input x (…, n, d_model); the last cache's `out` is h_L.
    The output the loss reads is `output(caches, norm)` (Pre-LN adds the final LN)."""
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
    h = np.asarray(x, dtype=float)
    caches = []
    for b in blocks:
        mlp = b.W1 is not None and b.W2 is not None
        if norm == "post":
            att, cache = attention_grad.forward(h, b.WQ, b.WK, b.WV, rule, causal=causal)
            ln1 = layer_norm(h + att)
            h = ln1[0]
            mlp_in = z = ln2 = None
            if mlp:
                mlp_in, z = h, h @ b.W1
                ln2 = layer_norm(h + np.maximum(z, 0.0) @ b.W2)
                h = ln2[0]
        else:
            ln1 = layer_norm(h)
            att, cache = attention_grad.forward(ln1[0], b.WQ, b.WK, b.WV, rule, causal=causal)
            h = h + att
            mlp_in = z = ln2 = None
            if mlp:
                ln2 = layer_norm(h)
                mlp_in, z = ln2[0], ln2[0] @ b.W1
                h = h + np.maximum(z, 0.0) @ b.W2
        caches.append(BlockCache(cache, ln1, mlp_in, z, ln2, h))
    return caches


LNState = tuple[np.ndarray, np.ndarray]  # (LN output, 1/σ)


def output(caches: Sequence[BlockCache], norm: str) -> tuple[np.ndarray, LNState | None]:
    """(the model's output, the final LN's (y, 1/σ) for Pre-LN, else None)."""
    h = caches[-1].out
    if norm == "pre":
        final = layer_norm(h)
        return final[0], final
    return h, None


@dataclass(frozen=True)
class BlockGrads:
    dWQ: np.ndarray
    dWK: np.ndarray
    dWV: np.ndarray
    dW1: np.ndarray | None
    dW2: np.ndarray | None


def backward(caches: Sequence[BlockCache], blocks: Sequence[Block], d_out: np.ndarray,
             norm: str, *, final: LNState | None = None, input_grad: bool = False
             ) -> tuple[list[BlockGrads], np.ndarray | None]:
    """Gradients of every block's weights (first block first) for ∂L/∂output = d_out, and
    ∂L/∂x when input_grad. `final` is output()'s second value (Pre-LN's final LN)."""
    dh = np.asarray(d_out, dtype=float)
    if norm == "pre":
        if final is None:
            raise ValueError("Pre-LN's backward needs the final LN from output()")
        dh = layer_norm_back(dh, *final)
    grads: list[BlockGrads] = []
    for i in range(len(caches) - 1, -1, -1):
        c, b = caches[i], blocks[i]
        dW1 = dW2 = None
        need_dx = input_grad or i > 0
        if norm == "post":
            if c.ln2 is not None and c.z is not None and c.mlp_in is not None:
                du = layer_norm_back(dh, *c.ln2)
                dW1, dW2, dmlp = _mlp_back(c.mlp_in, c.z, b, du)
                dh = du + dmlp
            du = layer_norm_back(dh, *c.ln1)
            g = attention_grad.backward(c.attn, du, input_grad=need_dx)
            dh = du + g.dX if g.dX is not None else du
        else:
            if c.ln2 is not None and c.z is not None and c.mlp_in is not None:
                dW1, dW2, dmlp = _mlp_back(c.mlp_in, c.z, b, dh)
                dh = dh + layer_norm_back(dmlp, *c.ln2)
            g = attention_grad.backward(c.attn, dh, input_grad=need_dx)
            if g.dX is not None:
                dh = dh + layer_norm_back(g.dX, *c.ln1)
        grads.append(BlockGrads(g.dWQ, g.dWK, g.dWV, dW1, dW2))
    grads.reverse()
    return grads, (dh if input_grad else None)


def _mlp_back(x: np.ndarray, z: np.ndarray, b: Block, dy: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(∂W1, ∂W2, ∂x) for y = ReLU(x·W1)·W2 given ∂L/∂y."""
    assert b.W1 is not None and b.W2 is not None
    r = np.maximum(z, 0.0)
    dW2 = weight_grad(r, dy, b.W2.shape)
    dz = dy @ np.swapaxes(b.W2, -1, -2)
    dz *= z > 0
    dW1 = weight_grad(x, dz, b.W1.shape)
    return dW1, dW2, dz @ np.swapaxes(b.W1, -1, -2)


def token_cosine(h: np.ndarray) -> np.ndarray:
    """Mean off-diagonal cosine similarity between the rows of h (…, n, d): one per item.
    Σ_{i≠j} cos_ij = |Σ_i ĥ_i|² − n, so no n × n matrix is formed."""
    n = h.shape[-2]
    norms = np.sqrt(np.sum(h * h, axis=-1, keepdims=True))
    unit = h / np.where(norms > 0, norms, 1.0)
    s = unit.sum(axis=-2)
    diag = np.sum(unit * unit, axis=(-1, -2))  # n, less any zero rows
    out: np.ndarray = (np.sum(s * s, axis=-1) - diag) / (n * (n - 1))
    return out
