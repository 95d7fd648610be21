"""Per-head row statistics of attention under any scaling rule, from a layer's q and k."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.numerics.attention_grad import FROZEN_BELOW
from sdpa_cli.numerics.scaling import Scaling, prepare
from sdpa_cli.studies.inspect.models.common import softmax_rows

# The bars on ‖J‖_F a reader could fairly choose instead of FROZEN_BELOW (1e-3): a uniform row
# of 128 keys has 0.088, so 1e-2 is still 9× below it. A frozen share is reported
# at both ends, and a verdict on it that flips between them is fragile.
FROZEN_RANGE = (1e-4, 1e-2)

F64 = NDArray[np.float64]
Mask = NDArray[np.bool_]  # (n, n): True where query i sees key j


@dataclass(frozen=True)
class OwnRule:
    """A model's own rule on q·k: × scale, then scale-free soft-capping C·tanh(s/C) when
    `cap` is set (Gemma 2). `name` is how the output names it ("÷√64", "QK-norm, then ÷√256");
    the q and k handed in are already what the dot product sees (after any QK-norm)."""

    scale: float
    cap: float | None = None
    name: str = ""


@dataclass(frozen=True)
class HeadStats:
    """One value per query head (arrays of length heads); pooled over every sequence.

    score_std / score_mean: population moments of the unmasked scores after the rule;
    score_std_raw: the same for q·k; score_max: the largest |score| after the rule;
    max_weight, jacobian: means over query rows;
    entropy_ratio, frozen_share (‖diag(p) − ppᵀ‖_F below FROZEN_BELOW): means over the rows
    that see more than one key (a row that sees one key is one-hot whatever the scores);
    first_token_share: mean weight on position 0 over the rows that see it (Gu et al. 2024's
    α_0); sink_other: the largest such mean on one later position that at least half the rows
    see, per sequence, averaged over sequences; prev_token: TransformerLens's previous-token
    score (weight on key i − 1, summed, ÷ rows); counts: a histogram of the unmasked scores
    after the rule (heads × bins) when edges were given."""

    score_std: F64
    score_mean: F64
    score_std_raw: F64
    max_weight: F64
    entropy_ratio: F64
    frozen_share: F64
    first_token_share: F64
    jacobian: F64
    counts: NDArray[np.int64] | None
    sink_other: F64
    prev_token: F64
    score_max: F64
    frozen_low: F64  # frozen_share with the bar at FROZEN_RANGE[0] (stricter)
    frozen_high: F64  # and at FROZEN_RANGE[1] (looser)


def causal_mask(n: int) -> Mask:
    out: Mask = np.tril(np.ones((n, n), dtype=bool))
    return out


def own_rule_name(scale: float, cap: float | None = None, qk_norm: bool = False) -> str:
    """A model's rule as a reader writes it: ÷√64, QK-norm, then ÷√256, soft-cap 50 after
    ÷√256; ×0.0884 when 1/scale² is not a whole number."""
    square = 1.0 / (scale * scale) if scale > 0 else math.inf
    whole = round(square) if math.isfinite(square) else 0
    if whole >= 1 and abs(square - whole) <= 1e-6 * square:
        core = "unscaled" if whole == 1 else f"÷√{whole}"
    else:
        core = f"×{scale:.4g}"
    if qk_norm:
        core = f"QK-norm, then {core}"
    if cap is not None:
        core = f"soft-cap {cap:g} after {core}"
    return core


def head_scores(q: NDArray[Any], k: NDArray[Any], rule: Scaling | OwnRule | float,
                mask: Mask | None) -> F64:
    """Scores (…, n, n) of one head's q, k (…, n, d) under a rule, or under the model's own
    (an OwnRule, or its multiplier as a number). A logn rule uses each row's own count of
    visible keys."""
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
    own = rule if isinstance(rule, OwnRule) else OwnRule(float(rule))
    out: F64 = np.matmul(q, np.swapaxes(k, -1, -2)) * own.scale
    if own.cap is not None:
        out = own.cap * np.tanh(out / own.cap)
    return out


def histogram(x: F64, edges: F64) -> NDArray[np.int64]:
    """np.histogram(np.clip(x, edges[0], edges[-1]), bins=edges)[0], without its sort of x:
    bin i holds edges[i] ≤ x < edges[i + 1], the last one also x = edges[-1] (a quarter of a
    SmolLM2 run's statistics went to sorting the scores)."""
    bins = len(edges) - 1
    idx = np.searchsorted(edges, np.clip(x, edges[0], edges[-1]), side="right") - 1
    np.minimum(idx, bins - 1, out=idx)
    out: NDArray[np.int64] = np.bincount(idx, minlength=bins).astype(np.int64)
    return out


def attention_stats(q: NDArray[Any], k: NDArray[Any], rule: Scaling | OwnRule | float,
                    mask: Mask | None = None, edges: F64 | None = None) -> HeadStats:
    """Row statistics per head of q, k shaped (sequences, heads, n, d) under `rule` (a
    Scaling, or the model's own: an OwnRule or its multiplier on q·k); mask (n, n) or None.

    One (sequence, head) at a time, so memory is a few n × n arrays whatever the number of
    sequences; the pooled moments are combined exactly (Chan et al.'s pairwise update)."""
    seqs, count, n, _ = q.shape
    visible = mask if mask is not None else np.ones((n, n), dtype=bool)
    seen = visible.sum(axis=1)
    wide = seen > 1  # rows that see one key have no entropy to compare and are one-hot
    log_seen = np.log(np.maximum(seen, 2))
    seen_by = visible.sum(axis=0)  # rows that see each key
    first_rows = int(seen_by[0])
    # later positions at least half the rows see: a mean over fewer rows says little
    later = (np.arange(n) >= 1) & (2 * seen_by >= n)
    below = np.arange(1, n)  # row i's previous token is key i − 1
    names = ("max_weight", "entropy_ratio", "frozen_share", "first_token_share", "jacobian",
             "sink_other", "prev_token", "frozen_low", "frozen_high")
    sums = {name: np.zeros(count) for name in names}
    top = np.zeros(count)
    moments = np.zeros((2, count, 3))  # (after the rule, raw) × head × (count, mean, M2)
    counts = np.zeros((count, len(edges) - 1), dtype=np.int64) if edges is not None else None
    for i in range(seqs):
        for h in range(count):
            qh, kh = q[i, h], k[i, h]
            raw = head_scores(qh, kh, 1.0, None)
            s = head_scores(qh, kh, rule, mask)
            kept = s[visible]
            top[h] = max(top[h], float(np.abs(kept).max()))
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
            sums["frozen_share"][h] += (jac[wide] < FROZEN_BELOW).sum()
            sums["frozen_low"][h] += (jac[wide] < FROZEN_RANGE[0]).sum()
            sums["frozen_high"][h] += (jac[wide] < FROZEN_RANGE[1]).sum()
            sums["first_token_share"][h] += p[:, 0].sum()
            sums["jacobian"][h] += jac.sum()
            if later.any():
                sums["sink_other"][h] += float((p.sum(axis=0)[later] / seen_by[later]).max())
            sums["prev_token"][h] += p[below, below - 1].sum()
            if counts is not None and edges is not None:
                counts[h] += histogram(kept, edges)
    rows = seqs * n
    wide_rows = seqs * int(wide.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = sums["entropy_ratio"] / wide_rows if wide_rows else np.full(count, math.nan)
        frozen, low, high = (sums[k] / wide_rows if wide_rows else np.full(count, math.nan)
                             for k in ("frozen_share", "frozen_low", "frozen_high"))
    return HeadStats(
        score_std=np.sqrt(moments[0, :, 2] / moments[0, :, 0]), score_mean=moments[0, :, 1],
        score_std_raw=np.sqrt(moments[1, :, 2] / moments[1, :, 0]),
        max_weight=sums["max_weight"] / rows, entropy_ratio=ratio, frozen_share=frozen,
        first_token_share=sums["first_token_share"] / (seqs * first_rows),
        jacobian=sums["jacobian"] / rows, counts=counts,
        sink_other=sums["sink_other"] / seqs if later.any() else np.zeros(count),
        prev_token=sums["prev_token"] / rows, score_max=top, frozen_low=low,
        frozen_high=high)


def pattern_score(q: NDArray[Any], k: NDArray[Any], rule: Scaling | OwnRule | float,
                  mask: Mask | None, pattern: NDArray[np.bool_]) -> tuple[F64, float]:
    """TransformerLens's detection score ("mul") per head: the attention on the pattern's
    (query, key) pairs ÷ all the attention (the number of rows), per sequence, then averaged
    over sequences; pattern is (sequences, n, n). Also its ceiling: the share of rows with at
    least one pattern key, the most any head can score."""
    seqs, count, n, _ = q.shape
    out = np.zeros(count)
    for i in range(seqs):
        for h in range(count):
            p = softmax_rows(head_scores(q[i, h], k[i, h], rule, mask), mask)
            out[h] += float(p[pattern[i]].sum()) / n
    ceiling = float(pattern.any(axis=-1).mean())
    return out / seqs, ceiling


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
