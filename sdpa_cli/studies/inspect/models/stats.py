"""Per-head row statistics of attention under any scaling rule, from a layer's q and k."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.numerics.attention_grad import FROZEN_BELOW
from sdpa_cli.numerics.order import median
from sdpa_cli.numerics.scaling import Scaling, prepare
from sdpa_cli.studies.inspect.models import rowstats

# The bars on ‖J‖_F a reader could fairly choose instead of FROZEN_BELOW (1e-3): a uniform row
# of 128 keys has 0.088, so 1e-2 is still 9× below it. A frozen share is reported
# at both ends, and a verdict on it that flips between them is fragile.
FROZEN_RANGE = (1e-4, 1e-2)

F64 = NDArray[np.float64]
# How far a statistic measured on float32 q and k in float32 may sit from the same measured
# in float64 (tests/test_inspect_stats.py): ("rel", r) relative, ("abs", a) absolute
# (score_mean: × max(1, score_std)), ("rows", m) by at most m rows whose ‖J‖_F lies within
# float32's rounding of a bar. The float32 forward's own q and k carry about 1e-7 relative
# error, so float64 statistics of them would not be closer to the model than this.
TOLERANCE: dict[str, tuple[str, float]] = {
    **{f: ("rel", 1e-5) for f in ("score_std", "score_std_raw", "score_max",
                                  "score_std_within", "score_std_within_raw", "cos_std")},
    **{f: ("rel", 1e-6) for f in ("q_norm", "k_norm")},
    **{f: ("abs", 1e-5) for f in ("score_mean", "max_weight", "entropy_ratio",
                                  "first_token_share", "first_by_seq", "jacobian",
                                  "sink_other", "prev_token", "between_share")},
    "top_gap": ("abs", 1e-4),
    **{f: ("rows", 2) for f in ("frozen_share", "frozen_low", "frozen_high")},
}
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
    score_std_within(_raw): the median over rows that see at least two keys of the std of
    the row's scores after the rule (of q·k): what the softmax sees, row constants aside;
    between_share: the share of q·k's pooled variance that lies between rows' means;
    top_gap: the median over those rows of the gap between the two largest scores (rule);
    q_norm, k_norm: the RMS over positions of ‖q‖ and ‖k‖; cos_std: the std of cos θ over
    the visible pairs (q·k = ‖q‖‖k‖cos θ);
    max_weight, jacobian: means over query rows;
    entropy_ratio, frozen_share (‖diag(p) − ppᵀ‖_F below FROZEN_BELOW): means over the rows
    that see more than one key (a row that sees one key is one-hot whatever the scores);
    first_token_share: mean weight on position 0 over the rows that see it (Gu et al. 2024's
    α_0), first_by_seq: the same per sequence (heads × sequences);
    sink_other: the largest such mean on one later position that at least half the rows
    see, per sequence, averaged over sequences; prev_token: TransformerLens's previous-token
    score (weight on key i − 1, summed, ÷ rows); counts: a histogram of the unmasked scores
    after the rule (heads summed) when edges were given."""

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
    score_std_within: F64
    score_std_within_raw: F64
    between_share: F64
    top_gap: F64
    q_norm: F64
    k_norm: F64
    cos_std: F64
    first_by_seq: F64


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


def histogram(x: NDArray[Any], edges: F64) -> NDArray[np.int64]:
    """np.histogram(np.clip(x, edges[0], edges[-1]), bins=edges)[0], without its sort of x:
    bin i holds edges[i] ≤ x < edges[i + 1], the last one also x = edges[-1] (exact at the
    edges; the statistics' own histogram, rowstats.counts, bins by arithmetic)."""
    bins = len(edges) - 1
    idx = np.searchsorted(edges, np.clip(x, edges[0], edges[-1]), side="right") - 1
    np.minimum(idx, bins - 1, out=idx)
    out: NDArray[np.int64] = np.bincount(idx, minlength=bins).astype(np.int64)
    return out


Rule = Scaling | OwnRule | float


def _map(rule: Rule, d: int, source: int, hist: bool) -> rowstats.Map:
    if isinstance(rule, Scaling):
        return rowstats.Map(rule.factor(d) if rule.log_n is None else 0.0, rule.log_n,
                            rule.cap, source, hist)
    own = rule if isinstance(rule, OwnRule) else OwnRule(float(rule))
    return rowstats.Map(own.scale, None, own.cap, source, hist)


def _pairs(x: NDArray[Any], dtype: Any) -> NDArray[Any]:
    """(sequences, heads, n, d) → ((sequence, head) pairs, n, d), contiguous."""
    out: NDArray[Any] = np.ascontiguousarray(x, dtype=dtype).reshape(-1, *x.shape[-2:])
    return out


def _task(q: NDArray[Any], k: NDArray[Any], rules: Sequence[Rule], mask: Mask | None,
          edges: F64 | None, hist_rule: int | None, patterned: tuple[NDArray[Any], ...] = (),
          pattern: NDArray[np.bool_] | None = None) -> rowstats.Task:
    """Sources and maps: a normalising rule (cosine, qknorm) dots its own prepared q and k."""
    dtype = q.dtype if q.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    sources = [(_pairs(q, dtype), _pairs(k, dtype))]
    pats = [tuple(_pairs(x, dtype) for x in patterned)] if patterned else []
    maps = []
    for i, rule in enumerate(rules):
        src = 0
        if isinstance(rule, Scaling) and (rule.cosine or rule.norm is not None):
            src = len(sources)
            sources.append((_pairs(prepare(q, rule), dtype), _pairs(prepare(k, rule), dtype)))
            if pats:
                pats.append(tuple(_pairs(prepare(x, rule), dtype) for x in patterned))
        maps.append(_map(rule, q.shape[-1], src, i == hist_rule))
    return rowstats.Task(sources, maps, mask, q.shape[1],
                         edges if hist_rule is not None else None,
                         [(p[0], p[1]) for p in pats], pattern)


def layer_stats(q: NDArray[Any], k: NDArray[Any], rules: Sequence[Rule],
                mask: Mask | None = None, edges: F64 | None = None,
                hist_rule: int | None = None, induction: tuple[NDArray[Any], NDArray[Any],
                                                               NDArray[np.bool_]] | None = None,
                pool: Executor | None = None, parts: int = 1
                ) -> tuple[list[HeadStats], F64 | None]:
    """Row statistics per head of q, k shaped (sequences, heads, n, d) under each rule (a
    Scaling, or the model's own: an OwnRule or its multiplier on q·k); mask (n, n) or None;
    the histogram of rule `hist_rule`'s scores in `edges`. induction: (q, k, pattern) of the
    repeated sequences, whose TransformerLens score per rule and head comes back beside.
    Scores are made once per block of rows and shared by every rule; float32 q and k are
    measured in float32 (their own precision), the per-row numbers kept in float64. `parts`
    runs of (sequence, head) pairs go to `pool` (the numbers do not depend on the runs)."""
    task = _task(q, k, rules, mask, edges, hist_rule, induction[:2] if induction else (),
                 induction[2] if induction else None)
    seqs, heads, n, _ = q.shape
    shape = (seqs * heads, n)
    out = rowstats.Out(
        [rowstats.Source.empty(shape, i == 0) for i in range(len(task.sources))],
        [rowstats.Rows.empty(shape, m.cap is not None) for m in task.maps],
        np.zeros((len(rules), induction[0].shape[0] * heads)) if induction else None)
    jobs: list[Any] = [(rowstats.run_group, g) for g in rowstats.groups(seqs * heads, n, parts)]
    if induction is not None and out.induction is not None:
        pairs = induction[0].shape[0] * heads
        jobs += [(rowstats.induction, g) for g in rowstats.groups(pairs, n, parts)]
    acc = out.induction

    def job(item: Any) -> NDArray[np.int64] | None:
        f, g = item
        got: NDArray[np.int64] | None = (f(task, g, out) if f is rowstats.run_group
                                         else f(task, g, acc))
        return got

    hists = list(pool.map(job, jobs)) if pool is not None and len(jobs) > 1 else \
        [job(j) for j in jobs]
    hist = None
    for h in hists:
        if h is not None:
            hist = h if hist is None else hist + h
    seen_by = mask.sum(axis=0) if mask is not None else np.full(n, n)
    q_norm, k_norm = _rms_norm(q), _rms_norm(k)
    by_head = [_heads_first(x, seqs, heads) for x in out.sources]
    stats = [dataclasses.replace(summary(task.maps[i], by_head, _heads_first(out.rules[i], seqs,
                                                                              heads), seen_by,
                                         hist if i == hist_rule else None),
                                 q_norm=q_norm, k_norm=k_norm) for i in range(len(rules))]
    ind = None
    if induction is not None and out.induction is not None:
        ind = out.induction.reshape(len(rules), -1, heads).mean(axis=1)
    return stats, ind


def _heads_first(x: Any, seqs: int, heads: int) -> Any:
    """A Source or Rows whose (pairs, n) arrays read as (heads, sequences, n)."""
    def view(a: Any) -> Any:
        if isinstance(a, np.ndarray):
            return a.reshape(seqs, heads, -1).transpose(1, 0, 2)
        if isinstance(a, tuple):
            return tuple(view(b) for b in a)
        return a

    return dataclasses.replace(x, **{f.name: view(getattr(x, f.name))
                                     for f in dataclasses.fields(x)})


def attention_stats(q: NDArray[Any], k: NDArray[Any], rule: Rule, mask: Mask | None = None,
                    edges: F64 | None = None) -> HeadStats:
    """layer_stats of one rule (its histogram when edges are given)."""
    got, _ = layer_stats(q, k, [rule], mask, edges, 0 if edges is not None else None)
    return got[0]


def pattern_score(q: NDArray[Any], k: NDArray[Any], rule: Rule, mask: Mask | None,
                  pattern: NDArray[np.bool_]) -> tuple[F64, float]:
    """TransformerLens's detection score ("mul") per head: the attention on the pattern's
    (query, key) pairs ÷ all the attention (the number of rows), per sequence, then averaged
    over sequences; pattern is (sequences, n, n). Also its ceiling: the share of rows with at
    least one pattern key, the most any head can score."""
    seqs, heads = q.shape[:2]
    task = _task(q[:0], k[:0], [rule], mask, None, None, (q, k), pattern)
    acc = np.zeros((1, seqs * heads))
    rowstats.induction(task, slice(0, seqs * heads), acc)
    return acc.reshape(seqs, heads).mean(axis=0), ceiling(pattern)


def ceiling(pattern: NDArray[np.bool_]) -> float:
    """The share of rows with at least one pattern key: the most a head can score."""
    return float(pattern.any(axis=-1).mean())


def summary(m: rowstats.Map, sources: Sequence[rowstats.Source], rows: rowstats.Rows,
            seen_by: NDArray[Any], hist: NDArray[np.int64] | None) -> HeadStats:
    """Per-head numbers from the per-row ones (heads × sequences × n each)."""
    raw, src = sources[0], sources[m.source]
    heads, seqs, n = raw.count.shape
    count = raw.count
    wide = count > 1  # rows that see one key have no entropy to compare and are one-hot
    nwide = wide.sum(axis=(1, 2))
    factor = m.log_n * np.log(count) if m.log_n is not None else m.factor
    if rows.moments is not None:
        mean, m2 = rows.moments[1], rows.moments[2]
    else:  # a map x ↦ f·x: row means × f, squared deviations × f²
        mean, m2 = src.mean * factor, src.m2 * factor * factor
    std, avg = _pooled(count, mean, m2)
    std_raw, _ = _pooled(count, raw.mean, raw.m2)
    with np.errstate(invalid="ignore", divide="ignore"):
        between = 1.0 - raw.m2.sum(axis=(1, 2)) / (std_raw ** 2 * count.sum(axis=(1, 2)))
        hi = _apply(m, src.top1, count)
        gap = hi - _apply(m, src.top2, count)
        top = np.maximum(np.abs(hi), np.abs(_apply(m, src.low, count))).max(axis=(1, 2))
        ratio = np.where(wide, rows.entropy / np.log(np.maximum(count, 2)), 0.0)
        frozen = [np.where(wide, rows.jacobian < bar, False).sum(axis=(1, 2)) / nwide
                  for bar in (FROZEN_BELOW, *FROZEN_RANGE)]
        first_rows = float(seen_by[0])
        by_seq = rows.first.sum(axis=2) / first_rows
        later = (np.arange(n) >= 1) & (2 * seen_by >= n)
        other = ((rows.column[:, :, later] / seen_by[later]).max(axis=2).mean(axis=1)
                 if later.any() else np.zeros(heads))
        total = count.sum(axis=(1, 2))
        cos_mean = raw.cos1.sum(axis=(1, 2)) / total if raw.cos1 is not None else None
        cos_std = (np.sqrt(np.maximum(raw.cos2.sum(axis=(1, 2)) / total - cos_mean ** 2, 0.0))
                   if raw.cos2 is not None and cos_mean is not None else np.full(heads, np.nan))
    return HeadStats(
        score_std=std, score_mean=avg, score_std_raw=std_raw,
        max_weight=rows.inv_z.mean(axis=(1, 2)),
        entropy_ratio=ratio.sum(axis=(1, 2)) / nwide, frozen_share=frozen[0],
        first_token_share=by_seq.mean(axis=1), jacobian=rows.jacobian.mean(axis=(1, 2)),
        counts=hist, sink_other=other, prev_token=rows.prev.sum(axis=(1, 2)) / (seqs * n),
        score_max=top, frozen_low=frozen[1], frozen_high=frozen[2],
        score_std_within=_median_rows(np.sqrt(np.maximum(m2, 0.0) / count), wide),
        score_std_within_raw=_median_rows(np.sqrt(np.maximum(raw.m2, 0.0) / count), wide),
        between_share=between, top_gap=_median_rows(gap, wide),
        q_norm=np.full(heads, np.nan), k_norm=np.full(heads, np.nan), cos_std=cos_std,
        first_by_seq=by_seq)


def _rms_norm(x: NDArray[Any]) -> F64:
    """Per head, the RMS over sequences and positions of the vectors' lengths."""
    out: F64 = np.sqrt(np.einsum("shnd,shnd->h", x, x, dtype=np.float64)
                       / (x.shape[0] * x.shape[2]))
    return out


def _apply(m: rowstats.Map, x: F64, count: F64) -> F64:
    """The rule's map of per-row raw values (monotone: the largest stays the largest)."""
    f = m.log_n * np.log(count) if m.log_n is not None else m.factor
    s: F64 = x * f
    if m.cap is not None:
        s = m.cap * np.tanh(s / m.cap)
    return s


def _median_rows(x: F64, wide: NDArray[np.bool_]) -> F64:
    out = np.full(x.shape[0], np.nan)
    for h in range(x.shape[0]):
        v = x[h][wide[h]]
        if v.size:
            out[h] = median(v)
    return out


def _pooled(count: F64, mean: F64, m2: F64) -> tuple[F64, F64]:
    """Population std and mean per head from per-row (count, mean, M2): the rows' own
    squared deviations plus their means' deviations from the head's mean (exact)."""
    total = count.sum(axis=(1, 2))
    avg = (count * mean).sum(axis=(1, 2)) / total
    dev = mean - avg[:, None, None]
    m2_all = m2.sum(axis=(1, 2)) + (count * dev * dev).sum(axis=(1, 2))
    std: F64 = np.sqrt(np.maximum(m2_all, 0.0) / total)
    return std, avg
