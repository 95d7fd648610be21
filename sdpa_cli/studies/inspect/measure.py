"""One layer's rows: every rule on the vectors the layer hands over (q, k; before a QK-norm
too), with sinks, head types and the weight-only bounds beside the row statistics."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.framework.common import divisor_label, finite
from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.studies.inspect.heads import SINK, head_type
from sdpa_cli.studies.inspect.models import stats
from sdpa_cli.studies.inspect.models.common import Array, LayerOut, Reader
from sdpa_cli.studies.inspect.models.headtypes import induction_pattern
from sdpa_cli.studies.inspect.models.qkbound import (
    Spectra,
    entropy_bound,
    layer_maps,
    logit_bound,
    row_sigma,
    spectra,
)
from sdpa_cli.studies.inspect.models.stats import F64, HeadStats, OwnRule, own_rule_name
from sdpa_cli.studies.inspect.models.tensormap import QK
from sdpa_cli.studies.inspect.rows import HeadRow

PRE = "pre-norm:"  # the scaling label's prefix for a QK-norm model's q and k before the norm
EDGES = np.linspace(-10.0, 10.0, 101)  # pooled scaled scores, against N(0, 1)


@dataclass(frozen=True)
class Layer:
    """What the rows of one layer are measured on."""

    kind: str  # trained or init
    n: int
    index: int
    out: LayerOut
    texts: int  # the first `texts` sequences of the batch are text, the rest repeated tokens
    repeated: NDArray[np.int64] | None  # the repeated random-token ids (None: no induction)


def own_rule(lo: LayerOut) -> OwnRule:
    return OwnRule(lo.scale, lo.cap, lo.rule or own_rule_name(lo.scale, lo.cap))


def vectors(lo: LayerOut) -> Iterator[tuple[str, Array, Array]]:
    """(label prefix, q, k): what the dot product sees, then q and k before a QK-norm."""
    yield "", lo.q, lo.k
    if lo.q_pre is not None and lo.k_pre is not None:
        yield PRE, lo.q_pre, lo.k_pre


def layer_spectra(qk: QK | None, read: Reader) -> dict[str, Spectra]:
    """The weight-only norms of one layer as its table declares them, keyed by label prefix
    ("" and PRE); none for a family that declares no bound."""
    if qk is None:
        return {}
    maps = layer_maps(qk, read)
    return {prefix: spectra(maps[key]) for key, prefix in (("q,k", ""), ("pre-norm", PRE))
            if key in maps}


def measure_layer(at: Layer, rules: list[tuple[str, Scaling | None]], bounds: dict[str, Spectra],
                  hist: Callable[[NDArray[np.int64]], None] | None,
                  pool: Executor | None = None, parts: int = 1) -> list[HeadRow]:
    """Every (vectors, rule) row of one layer: each (vectors) pair's scores made once for
    all the rules. `hist` receives the pooled histogram of the model's own rule on q, k;
    `parts` groups of heads run on `pool`."""
    lo, n = at.out, at.n
    mask = lo.mask(n)
    seen = mask.sum(axis=1) if mask is not None else np.full(n, n)
    own = own_rule(lo)
    dim = lo.q.shape[-1]
    pattern = induction_pattern(at.repeated) if at.repeated is not None else None
    ceiling = stats.ceiling(pattern) if pattern is not None else 0.0
    values = value_norms(lo, at.texts)
    out: list[HeadRow] = []
    for prefix, q, k in vectors(lo):
        sp = bounds.get(prefix)
        sigma = row_sigma(sp, n) if sp is not None else None
        applied: list[Scaling | OwnRule] = [
            rule if rule is not None else (
                own if not prefix else OwnRule(lo.scale, lo.cap, "pre-norm q·k, " +
                                               own_rule_name(lo.scale, lo.cap)))
            for _, rule in rules]
        mine = next(i for i, (_, rule) in enumerate(rules) if rule is None)
        got, ind = stats.layer_stats(
            q[:at.texts], k[:at.texts], applied, mask, EDGES,
            mine if not prefix and hist is not None else None,
            (q[at.texts:], k[at.texts:], pattern) if pattern is not None else None,
            pool, parts)
        for i, ((label, rule), rule_applied, st) in enumerate(zip(rules, applied, got,
                                                                   strict=True)):
            name = (rule_applied.name if isinstance(rule_applied, OwnRule)
                    else divisor_label(rule_applied, dim))
            if prefix and rule is not None:
                name = "pre-norm q·k, " + name
            if st.counts is not None and hist is not None:
                hist(st.counts)
            bound = (logit_bound(sigma, sp, rule_applied, dim, seen)
                     if sigma is not None and sp is not None else None)
            floor = entropy_bound(bound, seen) if bound is not None else None
            out += [_row(at, prefix + label, name, st, h, ind[i] if ind is not None else None,
                         ceiling, sp, bound, floor, values) for h in range(q.shape[1])]
    return out


def value_norms(lo: LayerOut, texts: int) -> tuple[F64, F64] | None:
    """Per query head, the mean ‖v‖ at position 0 and at the later positions (text)."""
    if lo.v is None:
        return None
    norm = np.sqrt(np.einsum("shnd,shnd->hsn", lo.v[:texts], lo.v[:texts], dtype=np.float64))
    return norm[:, :, 0].mean(axis=1), norm[:, :, 1:].mean(axis=(1, 2))


def _row(at: Layer, label: str, name: str, st: HeadStats, h: int, ind: Any, ceiling: float,
         sp: Spectra | None, bound: Any, floor: Any, values: tuple[F64, F64] | None
         ) -> HeadRow:
    n = at.n
    induction = float(ind[h]) if ind is not None else None
    first, later, prev = (float(st.first_token_share[h]), float(st.sink_other[h]),
                          float(st.prev_token[h]))
    dim = at.out.q.shape[-1]
    return HeadRow(
        weights=at.kind, seq_len=n, layer=at.index, head=h, scaling=label, rule=name,
        score_std=float(st.score_std[h]), score_std_raw=float(st.score_std_raw[h]),
        max_weight=float(st.max_weight[h]), entropy_ratio=finite(st.entropy_ratio[h]),
        frozen_share=float(st.frozen_share[h]), frozen_share_low=float(st.frozen_low[h]),
        frozen_share_high=float(st.frozen_high[h]), first_token_share=first,
        score_mean=float(st.score_mean[h]), jacobian_mean=float(st.jacobian[h]),
        sink_other=later, prev_token=prev, induction=induction,
        head_type=head_type(first, later, prev, (n - 1) / n, induction, ceiling),
        qk_spectral=float(sp.at_zero[h]) / math.sqrt(dim) if sp is not None else None,
        score_max=float(st.score_max[h]),
        logit_bound=float(bound[h].max()) if bound is not None else None,
        entropy_bound=finite(floor[h]) if floor is not None else None,
        score_std_within_raw=finite(st.score_std_within_raw[h]),
        score_std_within=finite(st.score_std_within[h]),
        between_share=finite(st.between_share[h]), top_gap=finite(st.top_gap[h]),
        q_norm=float(st.q_norm[h]), k_norm=float(st.k_norm[h]), cos_std=float(st.cos_std[h]),
        sink_rate=float(np.mean(st.first_by_seq[h] > SINK)),
        first_token_std=float(np.std(st.first_by_seq[h])),
        sink_value_norm=float(values[0][h]) if values is not None else None,
        value_norm=float(values[1][h]) if values is not None else None)
