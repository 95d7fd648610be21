"""Study: gradient norms through one attention layer at initialisation, versus d_k, per rule."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from sdpa_cli.framework.audit import selector_problem
from sdpa_cli.framework.common import assemble, own_se, percent, row_lookup
from sdpa_cli.framework.common import canonical as _canonical
from sdpa_cli.framework.common import finite as _finite
from sdpa_cli.framework.common import zscore as _z
from sdpa_cli.framework.context import SERIAL, RunContext
from sdpa_cli.framework.gradrows import WeightGrads, spread
from sdpa_cli.framework.result import (
    PART,
    Check,
    Column,
    Figure,
    Result,
    Table,
    as_row,
    internal,
    row_fields,
)
from sdpa_cli.framework.wording import move
from sdpa_cli.numerics.attention_grad import FROZEN_BELOW, rule_params
from sdpa_cli.numerics.blocks import fold_blocks
from sdpa_cli.numerics.rng import block_generator
from sdpa_cli.spec.common import Documented
from sdpa_cli.studies.gradients.grad_trials import TrialValues, draw, score_moments, trial_values
from sdpa_cli.studies.gradients.spec import GradientsSpec
from sdpa_cli.studies.gradients.theory import slope_checks, slope_rows, theory_lines

GRADS = ("wq", "wk", "wv", "x")  # ∂L/∂W_Q, ∂L/∂W_K, ∂L/∂W_V, ∂L/∂X


@dataclass(frozen=True)
class GradientRow:
    """One (d_k, rule) row; every grad_* is the Frobenius norm of that gradient per trial."""

    dim: int
    scaling: str
    factor: float | None  # the rule's multiplier on q·k (q̃·k̃ for normalising rules)
    trials: int
    grads: WeightGrads = field(metadata=PART)
    grad_x_mean: float | None
    grad_x_se: float | None
    grad_x_median: float | None
    frozen_share: float  # share of score rows with softmax ‖J‖_F < 1e-3, all trials
    frozen_share_se: float  # se over trials (each trial's share is one draw)
    # share of query rows whose part of ∂L/∂W_Q is below 1% of the ÷√d_k median row part
    starved_share: float
    starved_share_se: float
    score_std: float | None  # std of the unmasked scores after the rule, pooled
    theory_score_std: float | None  # exact, for rules without normalisation or cap
    score_ms: float | None  # mean of s² (unmasked scores), averaged over trials
    theory_score_ms: float | None
    score_ms_z: float | None  # (score_ms − theory)/se
    note: str
    nonfinite: tuple[str, ...] = internal(())  # gradients with a non-finite norm: the check fails


FIELDS = row_fields(GradientRow)
Row = Mapping[str, Any]  # a GradientRow or SlopeRow as its table holds it

COLUMNS = (
    *Column.rule_keys(),
    Column("score_std", "score sd", priority=1),
    Column("frozen_share", "frozen rows", "pct", priority=1),
    Column("starved_share", "starved rows", "pct", priority=2),
    Column("grad_wq_mean", "‖∂W_Q‖ mean", priority=0),
    Column("grad_wq_median", "‖∂W_Q‖ median", priority=0),
    Column("grad_wq_se", "se", "e", priority=3),
    Column("grad_wk_mean", "‖∂W_K‖ mean", priority=2),
    Column("grad_wv_mean", "‖∂W_V‖ mean", priority=2),
    Column("grad_x_mean", "‖∂X‖ mean", priority=2),
    Column("score_ms_z", "score z", "f2", priority=4),
)
SLOPE_COLUMNS = (
    Column("scaling", "scaling", "text", priority=0),
    Column("gradient", "gradient", "text", priority=0),
    Column("slope", "slope (mean)", "f2", priority=0),
    Column("slope_se", "se", "f2", priority=0),
    Column("end_slope", "last-step slope", "f2", priority=1),
    Column("end_slope_se", "se", "f2", priority=1),
    Column("median_slope", "slope (median)", "f2", priority=2),
    Column("theory_slope", "theory", "f2", priority=0),
    Column("theory_basis", "basis", "text", priority=3),
)


def plan_rows(spec: GradientsSpec) -> list[dict[str, Any]]:
    """The (dim, scaling) key of every row the run will produce, without running it."""
    return [{"dim": d, "scaling": s.label} for d in spec.dims for s in spec.scalings]


def documented_problem(spec: GradientsSpec, entry: Documented) -> str | None:
    return selector_problem(plan_rows(spec), _canonical(entry), FIELDS)


def _values_at(spec: GradientsSpec, i: int, d: int, ctx: RunContext) -> list[TrialValues]:
    """Every trial at d_k = d, in fixed blocks seeded (seed, spawn_key=(i, block))."""
    layer = spec.layer(d)
    size = layer.block_trials()
    blocks = -(-spec.trials // size)
    rules = list(spec.scalings)

    def work(b: int) -> list[TrialValues]:
        rng = block_generator(spec.entropy, (i, b))
        count = min(size, spec.trials - b * size)
        with np.errstate(under="ignore"):
            return trial_values(draw(rng, layer, count), layer, rules)

    def fold(acc: list[list[TrialValues]], part: list[TrialValues]) -> list[list[TrialValues]]:
        acc.append(part)
        return acc

    start: list[list[TrialValues]] = []
    parts = fold_blocks(blocks, work, fold, start, ctx.workers, ctx.executor,
                        ctx.tick)
    return [TrialValues.join([p[r] for p in parts]) for r in range(len(rules))]


def run(spec: GradientsSpec, ctx: RunContext = SERIAL) -> Result:
    k = spec.se_tolerance
    typed: list[GradientRow] = []
    checks: list[Check] = []
    for i, d in enumerate(spec.dims):
        for j, (rule, values) in enumerate(zip(spec.scalings, _values_at(spec, i, d, ctx),
                                               strict=True)):
            row = _row(spec, d, rule, values)
            typed.append(row)
            checks.append(replace(_check(row, k), fields=(f"scalings[{j}]", f"dims[{i}]")))
    rows = [as_row(r) for r in typed]
    typed_slopes = slope_rows(spec, rows)
    unchecked: list[str] = []
    checks.extend(slope_checks(spec, rows, typed_slopes, k, unchecked))
    slopes = [as_row(r) for r in typed_slopes]
    result = assemble(
        spec, study="gradients", title="Gradients through one attention layer versus d_k",
        table=Table("gradients", "Gradient norms at initialisation by d_k and rule", COLUMNS,
                    tuple(rows)),
        tables=[Table("slopes", "Log-log slopes of the gradient norms versus d_k",
                      SLOPE_COLUMNS, tuple(slopes))] if slopes else [],  # one d_k: no slope
        checks=checks, lookup=row_lookup(rows, _se), theory=theory_lines(spec),
        notes=_notes(spec), figures=_figures(spec, rows, slopes) if ctx.figures else [],
        findings=findings(spec, rows, slopes), expect=expect(spec),
    )
    return dataclasses.replace(result, unchecked=tuple(unchecked))


def _row(spec: GradientsSpec, d: int, rule: Any, v: TrialValues) -> GradientRow:
    layer = spec.layer(d)
    params = rule_params(rule, d, layer.n)
    n = v.wq.size
    ms = float(v.score_ms.mean())
    ms_se = float(v.score_ms.std(ddof=1) / math.sqrt(n))
    mean = float(v.score_mean.mean())
    exact = params.norm is None and params.cap is None
    t_mean, t_ms = score_moments(layer, params.factor) if exact else (math.nan, math.nan)
    bad = [g for g in GRADS if not np.all(np.isfinite(getattr(v, g)))]
    note = f"non-finite gradients in {', '.join(bad)}" if bad else ""
    x_mean, x_se, x_median = spread(v.x)
    return GradientRow(
        dim=d, scaling=rule.label, factor=_finite(params.factor), trials=n,
        grads=WeightGrads.of(v.wq, v.wk, v.wv),
        grad_x_mean=x_mean, grad_x_se=x_se, grad_x_median=x_median,
        frozen_share=float(v.frozen.mean()),
        frozen_share_se=float(v.frozen.std(ddof=1) / math.sqrt(n)),
        starved_share=float(v.starved.mean()),
        starved_share_se=float(v.starved.std(ddof=1) / math.sqrt(n)),
        score_std=_finite(math.sqrt(max(ms - mean * mean, 0.0))),
        theory_score_std=_finite(math.sqrt(t_ms - t_mean * t_mean)) if exact else None,
        score_ms=_finite(ms),
        theory_score_ms=_finite(t_ms) if exact else None,
        score_ms_z=_finite(_z(ms, t_ms, ms_se)) if exact else None,
        note=note, nonfinite=tuple(bad),
    )


def _check(row: GradientRow, k: float) -> Check:
    name = f"d_k={row.dim} {row.scaling}"
    if row.nonfinite:
        return Check(name, False, row.note)
    z = row.score_ms_z
    if row.theory_score_ms is None:
        return Check(name, True, "gradients finite; no closed form for this rule's scores "
                     "(reported only)")
    if z is None:
        return Check(name, False, "score second moment or its theory not finite")
    return Check(name, abs(z) <= k, f"gradients finite; E[s²] z = {z:+.2f} against the exact "
                 f"value (pass: within ±{k:g})")


def _se(row: Row, name: str) -> float | None:
    """A gradient norm's mean has its se beside it (grad_wq_mean → grad_wq_se)."""
    return own_se(row, name.removesuffix("_mean")) if name.endswith("_mean") else \
        own_se(row, name)


def findings(spec: GradientsSpec, rows: Sequence[Row], slopes: Sequence[Row]
             ) -> tuple[str, ...]:
    """One plain sentence per rule, from the rows alone: how ‖∂L/∂W_Q‖ and the frozen
    share move between the smallest and the largest d_k."""
    out = []
    lo, hi = min(spec.dims), max(spec.dims)
    for rule in spec.scalings:
        mine = [r for r in rows if r["scaling"] == rule.label]
        first = next(r for r in mine if r["dim"] == lo)
        last = next(r for r in mine if r["dim"] == hi)
        if lo == hi or not first["grad_wq_mean"] or last["grad_wq_mean"] is None:
            continue
        ratio = last["grad_wq_mean"] / first["grad_wq_mean"]
        # one materiality bar for every study (framework.wording)
        m = move(first["grad_wq_mean"], last["grad_wq_mean"], first.get("grad_wq_se"),
                 last.get("grad_wq_se"))
        trend = ("vanishes" if ratio < 1e-6 else "grows" if m.word == "rises" else
                 "shrinks" if m.word == "falls" else
                 f"is nearly level ({m.percent})" if m.significant else "stays about the same")
        slope = next((s for s in slopes if s["scaling"] == rule.label
                      and s["gradient"] == "W_Q"), None)
        fit = (f", log-log slope {slope['slope']:.2f} ± {slope['slope_se']:.2f}"
               if slope and slope["slope"] is not None and slope["slope_se"] is not None
               else "")
        out.append(
            f"{rule.label}: the gradient on W_Q {trend} from d_k = {lo} to {hi} (mean "
            f"{_g(first['grad_wq_mean'])} → {_g(last['grad_wq_mean'])}{fit}; median "
            f"{_g(first['grad_wq_median'])} → {_g(last['grad_wq_median'])}); frozen rows "
            f"{percent(first['frozen_share'])} → {percent(last['frozen_share'])}.")
    raw = [r for r in rows if r["scaling"] == "none"]
    if lo != hi and raw and raw[0]["grad_wq_mean"] and raw[-1]["grad_wq_mean"] is not None:
        out.append(_vanish_sentence(spec, rows, lo, hi))
    return tuple(out)


def _like_with_like(spec: GradientsSpec, rows: Sequence[Row], d: int) -> float | None:
    """The unscaled mean ‖∂L/∂W_Q‖ against ÷√d_k's at d_k = d, each divided by its rule's own
    factor on q·k (1 and 1/√d_k): raw, the unscaled gradient is √d_k larger by construction."""
    at = {r["scaling"]: r for r in rows if r["dim"] == d}
    rules = {s.label: s for s in spec.scalings}
    if "none" not in at or "sqrt" not in at or not at["sqrt"]["grad_wq_mean"]:
        return None
    g_none, g_sqrt = at["none"]["grad_wq_mean"], at["sqrt"]["grad_wq_mean"]
    if g_none is None:
        return None
    return float((g_none / rules["none"].factor(d)) / (g_sqrt / rules["sqrt"].factor(d)))


def _vanish_sentence(spec: GradientsSpec, rows: Sequence[Row], lo: int, hi: int) -> str:
    """The documents' vanishing-gradient claim, like with like: the total with each
    rule's factor divided out, and the query rows that saturation starves; no verdict word of
    its own beyond what these two say."""
    raw = [r for r in rows if r["scaling"] == "none"]
    frozen = raw[-1]["frozen_share"]
    starved = raw[-1].get("starved_share")
    a, b = _like_with_like(spec, rows, lo), _like_with_like(spec, rows, hi)
    head = "The documents' claim that unscaled scores make the gradients vanish as d_k grows: "
    parts = []
    if a is not None and b is not None:
        parts.append(f"like with like (each rule's gradient on W_Q divided by its factor, 1 "
                     f"and 1/√d_k), the unscaled mean is {_g(a)}× the ÷√d_k one at d_k = {lo} "
                     f"and {_g(b)}× at d_k = {hi}")
    if starved is not None:
        parts.append(f"at d_k = {hi}, {starved:.0%} of the query rows get less than 1% of the "
                     f"÷√d_k median row gradient ({frozen:.0%} of the score rows frozen)")
    vanished = b is not None and b < 1e-6
    rows_gone = starved is not None and starved >= 0.5
    if vanished:
        verdict = "it holds: the total vanishes"
    elif rows_gone:
        verdict = ("it holds for the starved rows, not for the total, which the other rows "
                   "carry")
    elif starved is not None and starved >= 0.01:
        verdict = "it holds for a minority of rows only"
    else:
        verdict = "it does not hold here"
    return head + "; ".join(parts) + f": {verdict}."


def expect(spec: GradientsSpec) -> tuple[str, ...]:
    """What the documents claim and what theory predicts, in plain words."""
    lines = ["The documents: unscaled scores saturate softmax as d_k grows, so the gradients "
             "on the weights vanish; dividing by √d_k prevents it."]
    if spec.alignment:
        lines.append("With aligned keys a token's score with itself has mean a·d_k, so even "
                     "÷√d_k leaves it growing like √d_k; ÷d_k keeps it bounded.")
    elif spec.d_v is None:
        lines.append("With independent weights, ÷√d_k keeps the score law fixed, so every "
                     "gradient grows like √d_k (d_v = d_k columns); ÷d_k keeps ‖∂L/∂W_Q‖ flat.")
    else:
        lines.append("With independent weights and a fixed d_v, ÷√d_k keeps every gradient at "
                     "its size; ÷d_k shrinks ‖∂L/∂W_Q‖ like 1/√d_k.")
    return tuple(lines)


def _notes(spec: GradientsSpec) -> tuple[str, ...]:
    notes = []
    if spec.causal:
        notes.append("Causal mask: the first query sees one key, so its row is always frozen "
                     f"(‖J‖_F = 0); that alone is 1/{spec.keys} of the rows.")
    notes.append(f"Frozen row: softmax Jacobian ‖diag(p) − ppᵀ‖_F < {FROZEN_BELOW:g}.")
    return tuple(notes)


def _g(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def _figures(spec: GradientsSpec, rows: Sequence[Row], slopes: Sequence[Row]
             ) -> tuple[Figure, ...]:
    series = []
    for rule in spec.scalings:
        mine = sorted((r for r in rows if r["scaling"] == rule.label), key=lambda r: r["dim"])
        entry: dict[str, Any] = {"scaling": rule.label, "dims": [r["dim"] for r in mine],
                                 "frozen": [r["frozen_share"] for r in mine],
                                 "frozen_se": [r["frozen_share_se"] for r in mine]}
        for g in GRADS:
            entry[g] = {"mean": [r[f"grad_{g}_mean"] for r in mine],
                        "se": [r[f"grad_{g}_se"] for r in mine],
                        "median": [r[f"grad_{g}_median"] for r in mine]}
        entry["slopes"] = {s["gradient"]: s["slope"] for s in slopes
                           if s["scaling"] == rule.label}
        series.append(entry)
    what = f"a = {spec.alignment:g}" + (", causal" if spec.causal else "")
    sizes = f"d_model = {spec.d_model}, n = {spec.keys}, {spec.trials} trials, {what}"
    return (
        Figure("gradient_norms", "gradients.norms",
               "Gradient norms versus d_k (mean ± 2 se, median dashed)",
               {"series": series, "sizes": sizes}),
        Figure("frozen_share", "gradients.frozen", "Share of frozen score rows versus d_k",
               {"series": series, "sizes": sizes, "below": FROZEN_BELOW}),
    )
