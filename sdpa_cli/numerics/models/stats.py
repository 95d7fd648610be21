"""Per-head row statistics of attention under any scaling rule, from a layer's q and k."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.numerics.attention_grad import FROZEN_BELOW
from sdpa_cli.numerics.models.common import softmax_rows
from sdpa_cli.numerics.scaling import Scaling, prepare

F64 = NDArray[np.float64]
Mask = NDArray[np.bool_]  # (n, n): True where query i sees key j


@dataclass(frozen=True)
class HeadStats:
    """One value per query head (arrays of length heads); pooled over every sequence.

    score_std / score_mean: population moments of the unmasked scores after the rule;
    score_std_raw: the same for q·k; max_weight, entropy_ratio, first_token_share,
    jacobian: means over query rows (entropy ratio leaves out rows that see one key);
    frozen_share: share of rows with ‖diag(p) − ppᵀ‖_F below FROZEN_BELOW; counts: a
    histogram of the unmasked scores after the rule (heads × bins) when edges were given."""

    score_std: F64
    score_mean: F64
    score_std_raw: F64
    max_weight: F64
    entropy_ratio: F64
    frozen_share: F64
    first_token_share: F64
    jacobian: F64
    counts: NDArray[np.int64] | None


def causal_mask(n: int) -> Mask:
    out: Mask = np.tril(np.ones((n, n), dtype=bool))
    return out


def head_scores(q: NDArray[Any], k: NDArray[Any], rule: Scaling | float, mask: Mask | None
                ) -> F64:
    """Scores (…, n, n) of one head's q, k (…, n, d) under a rule, or under the model's own
    multiplier when `rule` is a number. A logn rule uses each row's own count of visible keys."""
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    if isinstance(rule, Scaling):
        raw = np.matmul(prepare(q, rule), np.swapaxes(prepare(k, rule), -1, -2))
        n = q.shape[-2]
        seen = mask.sum(axis=1) if mask is not None else np.full(n, k.shape[-2])
        factor: float | F64 = (rule.log_n * np.log(seen)[:, None] if rule.log_n is not None
                               else rule.factor(q.shape[-1]))
        s: F64 = raw * factor
        if rule.cap is not None:
            s = rule.cap * np.tanh(s / rule.cap)
        return s
    out: F64 = np.matmul(q, np.swapaxes(k, -1, -2)) * float(rule)
    return out


def attention_stats(q: NDArray[Any], k: NDArray[Any], rule: Scaling | float,
                    mask: Mask | None = None, edges: F64 | None = None) -> HeadStats:
    """Row statistics per head of q, k shaped (sequences, heads, n, d) under `rule` (a
    Scaling, or the model's own multiplier on q·k as a number); mask (n, n) or None.

    One (sequence, head) at a time, so memory is a few n × n arrays whatever the number of
    sequences; the pooled moments are combined exactly (Chan et al.'s pairwise update)."""
    seqs, count, n, _ = q.shape
    visible = mask if mask is not None else np.ones((n, n), dtype=bool)
    seen = visible.sum(axis=1)
    wide = seen > 1  # rows that see one key have no entropy to compare
    log_seen = np.log(np.maximum(seen, 2))
    names = ("max_weight", "entropy_ratio", "frozen_share", "first_token_share", "jacobian")
    sums = {name: np.zeros(count) for name in names}
    moments = np.zeros((2, count, 3))  # (after the rule, raw) × head × (count, mean, M2)
    counts = np.zeros((count, len(edges) - 1), dtype=np.int64) if edges is not None else None
    for i in range(seqs):
        for h in range(count):
            qh, kh = q[i, h], k[i, h]
            raw = head_scores(qh, kh, 1.0, None)
            s = head_scores(qh, kh, rule, mask)
            kept = s[visible]
            _pool(moments[0, h], kept)
            _pool(moments[1, h], raw[visible])
            p = softmax_rows(s, mask)
            with np.errstate(divide="ignore", invalid="ignore"):
                plogp = np.where(p > 0, p * np.log(p), 0.0)
            entropy = -plogp.sum(axis=-1)
            sq = np.einsum("ij,ij->i", p, p)
            cube = np.einsum("ij,ij,ij->i", p, p, p)
            jac = np.sqrt(np.maximum(sq - 2 * cube + sq * sq, 0.0))
            sums["max_weight"][h] += p.max(axis=-1).sum()
            sums["entropy_ratio"][h] += (entropy[wide] / log_seen[wide]).sum()
            sums["frozen_share"][h] += (jac < FROZEN_BELOW).sum()
            sums["first_token_share"][h] += p[:, 0].sum()
            sums["jacobian"][h] += jac.sum()
            if counts is not None and edges is not None:
                counts[h] += np.histogram(np.clip(kept, edges[0], edges[-1]), bins=edges)[0]
    rows = seqs * n
    wide_rows = seqs * int(wide.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = sums["entropy_ratio"] / wide_rows if wide_rows else np.full(count, math.nan)
    return HeadStats(
        score_std=np.sqrt(moments[0, :, 2] / moments[0, :, 0]), score_mean=moments[0, :, 1],
        score_std_raw=np.sqrt(moments[1, :, 2] / moments[1, :, 0]),
        max_weight=sums["max_weight"] / rows, entropy_ratio=ratio,
        frozen_share=sums["frozen_share"] / rows,
        first_token_share=sums["first_token_share"] / rows,
        jacobian=sums["jacobian"] / rows, counts=counts)


def _pool(acc: F64, x: F64) -> None:
    """Fold a sample into (count, mean, M2) in place: exact pooled mean and variance."""
    m = float(x.size)
    if m == 0:
        return
    mean = float(x.mean())
    m2 = float(((x - mean) ** 2).sum())
    n = acc[0]
    total = n + m
    delta = mean - acc[1]
    acc[1] += delta * m / total
    acc[2] += m2 + delta * delta * n * m / total
    acc[0] = total
