"""An independent float64 reference for the inspect statistics (tests/test_inspect_stats.py):
one (sequence, head) at a time, every n × n array whole, each statistic by its definition
(‖diag(p) − ppᵀ‖_F from the matrix itself, entropy from p log p, the pooled moments from
the pooled scores, the within-row ones row by row)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sdpa_cli.numerics.attention_grad import FROZEN_BELOW
from sdpa_cli.numerics.scaling import Scaling, prepare
from sdpa_cli.studies.inspect.models.stats import FROZEN_RANGE, OwnRule


def scores(q: np.ndarray, k: np.ndarray, rule: Any, mask: np.ndarray | None) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    n = q.shape[-2]
    if isinstance(rule, Scaling):
        raw = prepare(q, rule) @ prepare(k, rule).T
        seen = mask.sum(axis=1) if mask is not None else np.full(n, k.shape[-2])
        factor = (rule.log_n * np.log(seen)[:, None] if rule.log_n is not None
                  else rule.factor(q.shape[-1]))
        s = raw * factor
        if rule.cap is not None:
            s = rule.cap * np.tanh(s / rule.cap)
        return s
    own = rule if isinstance(rule, OwnRule) else OwnRule(float(rule))
    s = (q @ k.T) * own.scale
    return own.cap * np.tanh(s / own.cap) if own.cap is not None else s


def softmax(s: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def stats(q: np.ndarray, k: np.ndarray, rule: Any, mask: np.ndarray | None = None
          ) -> dict[str, np.ndarray]:
    """Per head (arrays of length heads), every field of HeadStats but counts."""
    seqs, count, n, _ = q.shape
    vis = mask if mask is not None else np.ones((n, n), dtype=bool)
    seen = vis.sum(axis=1)
    wide = seen > 1
    seen_by = vis.sum(axis=0)
    later = (np.arange(n) >= 1) & (2 * seen_by >= n)
    out: dict[str, list[float]] = {}
    for h in range(count):
        kept, kept_raw, within, within_raw, gaps, cos = [], [], [], [], [], []
        row_means, row_m2 = [], []
        mw, ent, jac, frz, lo_, hi_, first, prev, other, by_seq, top = ([] for _ in range(11))
        for i in range(seqs):
            qh, kh = np.asarray(q[i, h], np.float64), np.asarray(k[i, h], np.float64)
            raw = qh @ kh.T
            s = scores(qh, kh, rule, mask)
            kept.append(s[vis])
            kept_raw.append(raw[vis])
            qn, kn = np.linalg.norm(qh, axis=1), np.linalg.norm(kh, axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                c = np.where(np.outer(qn, kn) > 0, raw / np.outer(qn, kn), 0.0)
            cos.append(c[vis])
            for r in range(n):
                v, w = raw[r][vis[r]], s[r][vis[r]]
                row_means.append((v.size, v.mean()))
                row_m2.append(((v - v.mean()) ** 2).sum())
                if v.size > 1:
                    within_raw.append(v.std())
                    within.append(w.std())
                    a, b = np.sort(w)[-2:]
                    gaps.append(b - a)
            top.append(np.abs(s[vis]).max())
            p = softmax(s, mask)
            with np.errstate(divide="ignore", invalid="ignore"):
                plogp = np.where(p > 0, p * np.log(p), 0.0)
            entropy = -plogp.sum(axis=-1)
            # the definition, a sum of squares: no cancellation near one-hot rows
            j = np.array([np.linalg.norm(np.diag(pr) - np.outer(pr, pr)) for pr in p])
            mw += list(p.max(axis=-1))
            ent += list(entropy[wide] / np.log(seen[wide]))
            jac += list(j)
            frz += list(j[wide] < FROZEN_BELOW)
            lo_ += list(j[wide] < FROZEN_RANGE[0])
            hi_ += list(j[wide] < FROZEN_RANGE[1])
            first += list(p[:, 0])
            by_seq.append(p[:, 0].sum() / seen_by[0])
            prev += list(p[np.arange(1, n), np.arange(n - 1)])
            if later.any():
                other.append((p.sum(axis=0)[later] / seen_by[later]).max())
        pooled_raw = np.concatenate(kept_raw)
        cs = np.concatenate(cos)
        row = dict(
            score_std=np.concatenate(kept).std(), score_mean=np.concatenate(kept).mean(),
            score_std_raw=pooled_raw.std(), max_weight=np.mean(mw),
            entropy_ratio=np.mean(ent) if ent else math.nan, frozen_share=np.mean(frz),
            frozen_low=np.mean(lo_), frozen_high=np.mean(hi_),
            first_token_share=np.sum(first) / (seqs * seen_by[0]), jacobian=np.mean(jac),
            sink_other=np.mean(other) if other else 0.0, prev_token=np.sum(prev) / (seqs * n),
            score_max=max(top), score_std_within=np.median(within),
            score_std_within_raw=np.median(within_raw), top_gap=np.median(gaps),
            between_share=1 - np.sum(row_m2) / (pooled_raw.var() * pooled_raw.size),
            cos_std=cs.std(),
            q_norm=math.sqrt(np.mean(np.sum(np.asarray(q[:, h], np.float64) ** 2, axis=-1))),
            k_norm=math.sqrt(np.mean(np.sum(np.asarray(k[:, h], np.float64) ** 2, axis=-1))))
        for key, value in row.items():
            out.setdefault(key, []).append(float(value))
        out.setdefault("first_by_seq", []).append(by_seq)  # type: ignore[arg-type]
    return {key: np.asarray(v) for key, v in out.items()}
