"""Study: softmax weights as the scores grow: largest weight, entropy and saturation."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from sdpa_cli.framework.common import divisor_label, finite, law_of
from sdpa_cli.framework.context import SERIAL, RunContext
from sdpa_cli.framework.result import Check, Column, Figure, Result, as_row
from sdpa_cli.numerics.sampling import PairLaw
from sdpa_cli.numerics.scaling import Scaling, prepare
from sdpa_cli.numerics.softmax import entropy, softmax
from sdpa_cli.spec.common import Documented
from sdpa_cli.studies.saturation import gauss_slopes, score_run, vector_grid
from sdpa_cli.studies.saturation import score_cells as shared
from sdpa_cli.studies.saturation import score_draws as draws
from sdpa_cli.studies.saturation import score_rows as sat
from sdpa_cli.studies.saturation.keys import rem_participation, rem_threshold
from sdpa_cli.studies.saturation.saturation_rows import (
    SWEEP_FIELDS,
    SWEEP_STATS,
    Freezing,
    RuleKey,
    SweepExplicitRow,
    SweepGaussianRow,
    SweepStats,
    SweepVectorRow,
    stats_of,
)
from sdpa_cli.studies.saturation.spec import SoftmaxSweepSpec

EXPLICIT_COLUMNS = (
    Column("scale", "scale"),
    Column("probs", "weights", "list"),
    Column("max_prob", "max weight"),
    Column("entropy", "entropy (nats)"),
    Column("effective_keys", "e^entropy"),
)
EXPLICIT_RULE_COLUMNS = (Column("scaling", "scaling", "text"), *EXPLICIT_COLUMNS)
VECTOR_COLUMNS = (
    Column("dim", "d", "int"),
    Column("keys", "n", "int"),
    Column("scaling", "scaling", "text"),
    Column("implied_score_std", "implied s"),
    Column("mean_max_prob", "mean max weight"),
    Column("mean_entropy", "mean entropy"),
    Column("saturated_fraction", "saturated", "pct"),
    Column("score_var_z", "score z", "f2"),
)
GAUSSIAN_COLUMNS = (
    Column("keys", "n", "int"),
    Column("score_std", "s"),
    Column("s_over_freezing", "s/√(2 ln n)", "f2"),
    Column("mean_max_prob", "mean max weight"),
    Column("mean_entropy", "mean entropy"),
    Column("entropy_small_s", "ln n − (n−1)s²/2n"),
    Column("mean_participation", "mean Σp²"),
    Column("rem_participation", "REM 1 − s_c/s"),
    Column("saturated_fraction", "saturated", "pct"),
)

SLOPE_QUANTITIES = ("score_std", "self_score_mean", "one_minus_max", "entropy_deficit")
FIELDS = SWEEP_FIELDS  # by score source


# One bar per key and multiplier, twice: 2000 keys × 60 multipliers took 285 s and 2.6 GB to
# draw, for a picture nobody can read; beyond this the figure is left out with a note.
WEIGHTS_FIGURE_MAX_BARS = 2000


def documented_problem(spec: SoftmaxSweepSpec, entry: Documented) -> str | None:
    return shared.documented_problem(spec, entry, FIELDS.__getitem__)


def run(spec: SoftmaxSweepSpec, ctx: RunContext = SERIAL) -> Result:
    return score_run.run(spec, ctx, study="softmax-sweep", table="softmax", jacobian=False,
                         leading_title="Leading key among n − 1 ties, versus n (exact)",
                         explicit=_explicit, vectors=_vectors, gaussian=_gaussian)


# --- source 1 -----------------------------------------------------------------------------


def _explicit(spec: SoftmaxSweepSpec, ctx: RunContext) -> score_run.Part:
    explicit = _explicit_rows(spec)
    rows = [as_row(r) for r in explicit]
    part = score_run.Part(rows, EXPLICIT_RULE_COLUMNS if spec.uses_rules else EXPLICIT_COLUMNS,
                          "Softmax of explicit scores as they are scaled")
    bars = len(spec.scores or []) * len(rows)
    if ctx.figures and bars <= WEIGHTS_FIGURE_MAX_BARS:  # --no-plots: no copy made
        part.figures.append(_weights_figure(spec, explicit))
    elif ctx.figures:
        part.notes.append(f"No weights figure: {len(spec.scores or [])} keys × {len(rows)} "
                          f"multipliers would be {bars} bars (it draws at most "
                          f"{WEIGHTS_FIGURE_MAX_BARS}); the table has every weight.")
    return part


def _explicit_rows(spec: SoftmaxSweepSpec) -> list[SweepExplicitRow]:
    rows = []
    for first, zz, c, _ in shared.explicit_softmax(spec):
        h = float(entropy(zz, c))
        rows.append(SweepExplicitRow(**first, entropy=h, effective_keys=math.exp(h)))
    return rows


def _label(row: SweepExplicitRow, rules: Mapping[str, Scaling], dim: int | None) -> str:
    rule = rules.get(row.key.scaling) if isinstance(row.key, RuleKey) else None
    if rule is not None:
        return divisor_label(rule, dim)
    return f"×{row.key.scale:g}"


def _weights_figure(spec: SoftmaxSweepSpec, rows: list[SweepExplicitRow]) -> Figure:
    rules = {s.label: s for s in spec.scalings}
    groups = [{
        "label": _label(r, rules, spec.dim),
        "probs": r.probs,
        "entropy": r.entropy,
        "max_prob": r.max_prob,
        # 1 − max weight as the sum of the others: exact even when max weight rounds to 1
        "others": float(np.sort(r.probs)[:-1].sum()),
    } for r in rows]
    return Figure(
        "weights_by_scale", "saturation.weights_by_scale",
        "Weight of each key as the scores are scaled",
        {"groups": groups, "scores": list(spec.scores or []), "n": len(spec.scores or []),
         "dim": spec.dim, "by": "scaling" if spec.uses_rules else "multiplier"},
        caption="Compare the bars across scales: the larger the scale, the more of the "
                "weight the top-scoring key takes.",
    )


# --- source 2 -----------------------------------------------------------------------------


def _vectors(spec: SoftmaxSweepSpec, ctx: RunContext) -> score_run.Part:
    vector, checks, figures, notes = _vector_run(spec, ctx)
    part = score_run.vectors_part(spec, [as_row(r) for r in vector],
                                  _vector_columns(spec, vector), "Softmax saturation",
                                  checks=checks, figures=figures,
                                  d_quantities=SLOPE_QUANTITIES, jacobian=False)
    part.notes += notes
    return part


def _vector_run(spec: SoftmaxSweepSpec, ctx: RunContext
                ) -> tuple[list[SweepVectorRow], list[Check], list[Figure], list[str]]:
    law, unit = law_of(spec)
    rows: list[SweepVectorRow] = []
    checks: list[Check] = []
    picture = None
    dims, keys = spec.dim_list, spec.key_list
    want_picture = ctx.figures and len(dims) == 1 and len(keys) == 1 and \
        keys[0] <= shared.PICTURE_MAX_KEYS  # --no-plots: no first trial kept for a picture
    for g in vector_grid.draw_grid(spec, ctx, law, unit, threshold=spec.threshold,
                                   jacobian=False, keep_first=want_picture):
        cell_rows = []
        for scaling, measured in zip(spec.scalings, g.cell.measured, strict=True):
            parts = shared.vector_parts(spec, law, unit, g.dim, g.keys, scaling, g.cell)
            cell_rows.append(_vector_row(parts, measured, spec.threshold,
                                         shared.limit_max_prob(spec, law, scaling, g.keys)))
        add = None
        if g.additive is not None:
            add = _vector_row(shared.additive_parts(spec, law, g.dim, g.keys, g.additive),
                              g.additive.measured[0], spec.threshold, None)
        rows.extend(cell_rows + ([add] if add else []))
        checks.extend(vector_grid.grid_checks(spec, g, [r.scores for r in cell_rows],
                                              add.scores if add else None))
        if want_picture:
            picture = _picture(spec, law, unit, g.dim, g.keys, g.cell)
    # A curve over d_k needs at least two d_k; one d_k is the attention picture's case.
    figures = [_vs_dim_figure(spec, rows)] if len(dims) > 1 else []
    if picture is not None:
        figures.append(picture)
    notes = []
    if spec.mask == "causal":
        notes.append("causal mask: query i sees i + 1 keys, so its entropy is at most ln(i+1) "
                     "and the first query always puts weight 1 on its only key; the "
                     "ln n − s²/2 line does not apply.")
    return rows, checks, figures, notes


def _vector_row(parts: shared.CellParts, measured: draws.Measured, threshold: float | None,
                limit: float | None) -> SweepVectorRow:
    spread = measured.stats.get("row_score_var")
    return SweepVectorRow(head=parts.head, stats=stats_of(SweepStats, measured, SWEEP_STATS),
                          threshold=threshold, limit_max_prob=limit, freezing=parts.freezing,
                          scores=parts.scores,
                          max_abs_score=finite(measured.largest.get("max_abs_score", math.nan)),
                          row_score_var=finite(spread[0]) if spread else None,
                          row_score_var_se=finite(spread[1]) if spread else None)


def _vector_columns(spec: SoftmaxSweepSpec, rows: list[SweepVectorRow]) -> tuple:
    """The handful of columns for the terminal; the aligned-keys story adds two."""
    extra = []
    if spec.correlation != 0:
        extra.append(Column("implied_self_score_mean", "self score"))
    if any(r.limit_max_prob is not None for r in rows):
        extra.append(Column("limit_max_prob", "d→∞ max weight"))
    return (*VECTOR_COLUMNS[:5], *extra, *VECTOR_COLUMNS[5:])


def _vs_dim_figure(spec: SoftmaxSweepSpec, rows: list[SweepVectorRow]) -> Figure:
    curves = shared.vs_dim_curves(spec, rows, lambda pts: {
        "mean_max_prob": [r.stats.mean_max_prob for r in pts],
        "mean_max_prob_se": [r.stats.mean_max_prob_se for r in pts],
        "mean_entropy": [r.stats.mean_entropy for r in pts],
        "mean_entropy_se": [r.stats.mean_entropy_se for r in pts],
        "implied_score_std": [r.head.implied_score_std for r in pts],
        "limit_max_prob": pts[0].limit_max_prob if pts else None,
        "implied_self_score_mean": [r.head.implied_self_score_mean for r in pts]
        if spec.correlation != 0 else None})
    return Figure(
        "saturation_vs_dim", "saturation.vs_dim",
        "Max weight, entropy and implied score spread versus d_k",
        {"curves": curves, "keys": spec.key_list,
         "ln_n": {n: math.log(n) for n in spec.key_list},
         "freezing": {n: sat.freezing_std(n) for n in spec.key_list},
         "trials": spec.trials, "mask": spec.mask, "correlation": spec.correlation,
         "distribution": spec.distribution, "se_k": 2.0},
    )


def _picture(spec: SoftmaxSweepSpec, law: PairLaw, unit: float, d: int, n: int,
             cell: draws.Cell) -> Figure | None:
    """The first sequence's score matrices, weights and entropy per query, one row per rule;
    every number drawn is computed here."""
    first = cell.first
    if first is None:
        return None
    panels = []
    for scaling in spec.scalings:
        v = draws.variant(scaling, d, unit, n)
        base = _picture_base(first, v)
        if base is None:
            continue
        c = v.scale
        if v.cap is not None:
            base, c = draws.capped(base, c, v.cap), 1.0
        with np.errstate(over="ignore"):  # beyond float64 becomes inf, drawn as blank
            scores = base * c
        if spec.mask == "causal":
            scores = sat.causal(scores)
        logp_scale = draws.clamp(c)
        src = sat.causal(base) if spec.mask == "causal" else base
        weights = softmax(src, logp_scale)
        ent = entropy(src, logp_scale)
        # sd of c·base as |c|·sd(base): squaring scores near 1e300 would overflow.
        finite_base = base[np.isfinite(base)]
        panels.append({
            "scaling": scaling.label, "formula": scaling.formula,
            "scores": np.where(np.isfinite(scores), scores, np.nan).tolist(),
            "score_std": float(abs(c) * finite_base.std()) if finite_base.size else 0.0,
            "weights": weights.tolist(),
            "entropy": ent.tolist(),
            "mean_entropy": float(ent.mean()),
            "max_weight": float(weights.max()),
        })
    data = {"dim": d, "keys": n, "ln_n": math.log(n), "panels": panels, "mask": spec.mask}
    if "q" in first:
        data["q"] = first["q"].tolist()
        data["k"] = first["k"].tolist()
    return Figure("attention_picture", "saturation.attention_picture",
                  f"First sampled sequence: d_k = {d}, {n} positions", data)


def _picture_base(first: Mapping[str, np.ndarray], v: draws.Variant) -> np.ndarray | None:
    """The first sequence's raw scores, cosines or mean-removed cosines for variant v."""
    if v.cosine or v.source == "cos":
        return first.get("cos")
    if v.source == "centred":
        if "q" not in first:
            return None
        q, k = (prepare(first[x], Scaling.parse("qknorm")) for x in ("q", "k"))
        cos: np.ndarray = np.clip(q @ k.T / q.shape[1], -1.0, 1.0)  # |q̂|² = d
        return cos
    return first["raw"]


# --- source 3 -----------------------------------------------------------------------------


def _gaussian(spec: SoftmaxSweepSpec, ctx: RunContext) -> score_run.Part:
    gaussian, checks, figures = _gaussian_run(spec, ctx)
    rows = [as_row(r) for r in gaussian]
    tables, more_checks = gauss_slopes.slope_tables(spec, rows, jacobian=False)
    return score_run.Part(rows, GAUSSIAN_COLUMNS, "Softmax of n iid N(0, s²) scores versus s",
                          checks + more_checks, figures, tables=tables)


def _gaussian_run(spec: SoftmaxSweepSpec, ctx: RunContext
                  ) -> tuple[list[SweepGaussianRow], list[Check], list[Figure]]:
    rows: list[SweepGaussianRow] = []
    checks: list[Check] = []
    stds = list(spec.score_stds or [])
    cells = draws.run_cells([draws.gaussian_job(spec, n, (j,), threshold=spec.threshold,
                                                jacobian=False)
                             for j, n in enumerate(spec.key_list)], ctx)
    for n, cell in zip(spec.key_list, cells, strict=True):
        for s, measured in zip(stds, cell.measured, strict=True):
            stats = stats_of(SweepStats, measured, SWEEP_STATS)
            # the random-energy model's large-n E[Σp²], and how far this finite n is from it
            rem = rem_participation(n, s)
            rows.append(SweepGaussianRow(
                keys=n, score_std=s, trials=cell.trials, stats=stats,
                threshold=spec.threshold, freezing=Freezing.at(n, s, True),
                rem_participation=rem, rem_gap=finite(stats.mean_participation - rem)
                if stats.mean_participation is not None else None))  # Σp² ∈ [1/n, 1]: never
        checks.append(shared.gaussian_check(n, stds, cell, spec.se_tolerance))
    return rows, checks, [_vs_std_figure(spec, rows), _rem_figure(spec, rows)]


def _rem_figure(spec: SoftmaxSweepSpec, rows: list[SweepGaussianRow]) -> Figure:
    curves = []
    for n in spec.key_list:
        pts = [r for r in rows if r.keys == n]
        curves.append({"keys": n, "threshold": rem_threshold(n),
                       "score_std": [r.score_std for r in pts],
                       "mean_participation": [r.stats.mean_participation for r in pts],
                       "mean_participation_se": [r.stats.mean_participation_se for r in pts],
                       "rem_participation": [r.rem_participation for r in pts]})
    return Figure("rem_participation", "rules.rem_participation",
                  "Σp² of random scores against the random-energy-model limit",
                  {"curves": curves, "trials": spec.trials, "se_k": 2.0})


def _vs_std_figure(spec: SoftmaxSweepSpec, rows: list[SweepGaussianRow]) -> Figure:
    grid = np.geomspace(min(spec.score_stds or [1]) / 1.2, max(spec.score_stds or [1]) * 1.2,
                        200)
    curves = shared.vs_std_curves(spec, rows, lambda n, pts: {
        "mean_max_prob": [r.stats.mean_max_prob for r in pts],
        "mean_max_prob_se": [r.stats.mean_max_prob_se for r in pts],
        "mean_entropy": [r.stats.mean_entropy for r in pts],
        "mean_entropy_se": [r.stats.mean_entropy_se for r in pts],
        "freezing": sat.freezing_std(n),
        "ln_n": math.log(n),
        "grid": grid.tolist(),
        "small_s": [sat.entropy_small_s(n, float(s)) for s in grid]})
    return Figure("saturation_vs_std", "saturation.vs_std",
                  "Max weight and entropy of n iid N(0, s²) scores versus s",
                  {"curves": curves, "trials": spec.trials, "se_k": 2.0})
