"""Next-token cross-entropy and KL over a vocabulary read in blocks of rows (online log-sum-exp)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.studies.inspect.models.common import Array

F64 = NDArray[np.float64]
# (start, stop) → rows start…stop−1 of the LM head, (stop − start, width)
HeadRows = Callable[[int, int], Array]
BLOCK_BYTES = 32 << 20  # a block's logits (positions × rows, float64) stay about this size


@dataclass(frozen=True)
class Tokenwise:
    """Per predicted position: the unchanged model's cross-entropy (nats) and, per changed
    model, its cross-entropy and KL(unchanged ‖ changed)."""

    loss: F64  # (positions,)
    changed_loss: tuple[F64, ...]
    kl: tuple[F64, ...]


def predicting(hidden: Array, ids: NDArray[np.integer[Any]]) -> tuple[Array, NDArray[np.int64]]:
    """The final hidden states that predict a next token (every position but the last of
    each sequence), flattened to (positions, width), and the tokens they predict."""
    s, n, width = hidden.shape
    h = np.ascontiguousarray(hidden[:, :-1]).reshape(s * (n - 1), width)
    return h, np.asarray(ids[:, 1:], dtype=np.int64).reshape(-1)


class _LogSumExp:
    """log Σ_v exp(z_v) over blocks of v, kept as a running maximum m and Σ exp(z − m)."""

    def __init__(self, rows: int) -> None:
        self.m = np.full(rows, -np.inf)
        self.s = np.zeros(rows)

    def add(self, z: F64) -> F64:
        """Take in a block; returns the factor exp(m_old − m_new) that rescaled the sum (so
        other sums kept against this maximum can be rescaled alike)."""
        top = np.maximum(self.m, z.max(axis=1))
        shrink: F64 = np.exp(self.m - top)
        self.s *= shrink
        self.s += np.exp(z - top[:, None]).sum(axis=1)
        self.m = top
        return shrink

    def value(self) -> F64:
        out: F64 = self.m + np.log(self.s)
        return out


def next_token(base: Array, changed: Sequence[Array], targets: NDArray[np.int64],
               head: HeadRows, vocab: int, cap: float | None = None,
               block: int | None = None) -> Tokenwise:
    """Cross-entropy of `targets` under softmax(h·Wᵀ) for the unchanged final hidden states
    `base` (positions, width) and each of `changed`, and KL(unchanged ‖ changed) per
    position, in one pass over the LM head W read `block` rows at a time (never the whole
    vocab × width matrix, nor a whole row of logits). Logits are h·Wᵀ in the hidden states'
    dtype, then C·tanh(z/C) with a final soft-cap C (Gemma 2), summed in float64.

    KL(p‖q) = Σ_v p_v (z_v − z'_v) − lse(z) + lse(z'): the first sum is kept against the
    unchanged model's running maximum, like its log-sum-exp."""
    positions = base.shape[0]
    if block is None:
        block = max(256, min(vocab, BLOCK_BYTES // (8 * max(positions, 1))))
    rows = np.arange(positions)
    p = _LogSumExp(positions)
    qs = [_LogSumExp(positions) for _ in changed]
    mixed = [np.zeros(positions) for _ in changed]  # Σ exp(z − m) (z − z'), m: p's maximum
    hit = np.zeros(positions)
    hits = [np.zeros(positions) for _ in changed]
    for start in range(0, vocab, block):
        stop = min(vocab, start + block)
        w = np.asarray(head(start, stop), dtype=base.dtype)
        inside = (targets >= start) & (targets < stop)
        at = targets[inside] - start
        z = _logits(base, w, cap)
        hit[inside] = z[rows[inside], at]
        shrink = p.add(z)
        weight = np.exp(z - p.m[:, None])
        for k, h in enumerate(changed):
            z2 = _logits(h, w, cap)
            hits[k][inside] = z2[rows[inside], at]
            qs[k].add(z2)
            mixed[k] *= shrink
            z2 -= z  # in place: z' − z
            mixed[k] -= np.einsum("ij,ij->i", weight, z2)
    lse = p.value()
    return Tokenwise(loss=lse - hit,
                     changed_loss=tuple(q.value() - t for q, t in zip(qs, hits, strict=True)),
                     kl=tuple(a / p.s - lse + q.value()
                              for a, q in zip(mixed, qs, strict=True)))


def _logits(h: Array, w: Array, cap: float | None) -> F64:
    z: F64 = np.asarray(h @ w.T, dtype=np.float64)
    if cap is not None:
        z = cap * np.tanh(z / cap)
    return z


def perplexity_ratio(loss: float, base: float) -> float:
    """exp(loss − base): how many times the unchanged model's perplexity a changed one has."""
    return math.exp(min(loss - base, 700.0))
