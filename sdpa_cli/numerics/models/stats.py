"""Per-head row statistics of attention under any scaling rule, from a layer's q and k."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.numerics.attention_grad import FROZEN_BELOW
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


def softmax_rows(s: F64, mask: Mask | None) -> F64:
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    out: F64 = e / e.sum(axis=-1, keepdims=True)
    return out


def attention_stats(q: NDArray[Any], k: NDArray[Any], rule: Scaling | float,
                    mask: Mask | None = None, edges: F64 | None = None) -> HeadStats:
    """Row statistics per head of q, k shaped (sequences, heads, n, d) under `rule` (a
    Scaling, or the model's own multiplier on q·k as a number); mask (n, n) or None."""
    _, count, n, _ = q.shape
    visible = mask if mask is not None else np.ones((n, n), dtype=bool)
    seen = visible.sum(axis=1)
    wide = seen > 1  # rows that see one key have no entropy to compare
    log_seen = np.log(np.maximum(seen, 2))
    cols: dict[str, list[float]] = {name: [] for name in (
        "score_std", "score_mean", "score_std_raw", "max_weight", "entropy_ratio",
        "frozen_share", "first_token_share", "jacobian")}
    counts = []
    for h in range(count):
        qh, kh = q[:, h], k[:, h]
        raw = head_scores(qh, kh, 1.0, None)[:, visible]
        s = head_scores(qh, kh, rule, mask)
        kept = s[:, visible]
        p = softmax_rows(s, mask)
        with np.errstate(divide="ignore", invalid="ignore"):
            plogp = np.where(p > 0, p * np.log(p), 0.0)
        entropy = -plogp.sum(axis=-1)
        sq = np.einsum("...j,...j->...", p, p)
        cube = np.einsum("...j,...j,...j->...", p, p, p)
        jac = np.sqrt(np.maximum(sq - 2 * cube + sq * sq, 0.0))
        cols["score_std"].append(float(kept.std()))
        cols["score_mean"].append(float(kept.mean()))
        cols["score_std_raw"].append(float(raw.std()))
        cols["max_weight"].append(float(p.max(axis=-1).mean()))
        cols["entropy_ratio"].append(float((entropy[:, wide] / log_seen[wide]).mean())
                                     if wide.any() else math.nan)
        cols["frozen_share"].append(float((jac < FROZEN_BELOW).mean()))
        cols["first_token_share"].append(float(p[..., 0].mean()))
        cols["jacobian"].append(float(jac.mean()))
        if edges is not None:
            counts.append(np.histogram(np.clip(kept, edges[0], edges[-1]), bins=edges)[0])
    arrays = {name: np.array(v, dtype=np.float64) for name, v in cols.items()}
    return HeadStats(**arrays, counts=np.array(counts, dtype=np.int64) if counts else None)
