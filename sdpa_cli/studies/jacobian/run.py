"""Study: the softmax Jacobian J = diag(p) − ppᵀ as the scores grow: vanishing gradients."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sdpa_cli.framework.common import finite, law_of
from sdpa_cli.framework.context import SERIAL, RunContext
from sdpa_cli.framework.result import Check, Column, Figure, Result, Table, as_row
from sdpa_cli.numerics.softmax import entropy, jacobian, jacobian_norms
from sdpa_cli.spec.common import Documented
from sdpa_cli.studies.jacobian import peaks as peaks_of
from sdpa_cli.studies.saturation import gauss_slopes, score_run, vector_grid
from sdpa_cli.studies.saturation import score_cells as shared
from sdpa_cli.studies.saturation import score_draws as draws
from sdpa_cli.studies.saturation import score_rows as sat
from sdpa_cli.studies.saturation.saturation_rows import (
    JACOBIAN_FIELDS,
    JACOBIAN_STATS,
    Freezing,
    JacobianExplicitRow,
    JacobianGaussianRow,
    JacobianStats,
    JacobianVectorRow,
    PeakRow,
    RuleKey,
    stats_of,
)
from sdpa_cli.studies.saturation.spec import JacobianSpec

EXPLICIT_COLUMNS = (
    Column("scale", "scale"),
    Column("max_prob", "max weight"),
    Column("max_abs_jacobian", "max |J_ij|"),
    Column("frobenius", "‖J‖_F"),
    Column("spectral", "λ_max(J)"),
    Column("trace", "trace J"),
)
EXPLICIT_RULE_COLUMNS = (Column("scaling", "scaling", "text"), *EXPLICIT_COLUMNS)
# The Monte Carlo summaries both random sources show, after their own columns
MEAN_COLUMNS = (
    Column("mean_frobenius", "mean ‖J‖_F"),
    Column("mean_frobenius_se", "se"),
    Column("median_frobenius", "median ‖J‖_F"),
    Column("mean_max_abs_jacobian", "mean max|J|"),
    Column("mean_entropy", "mean entropy"),
)
VECTOR_COLUMNS = (
    Column("dim", "d", "int"),
    Column("keys", "n", "int"),
    Column("scaling", "scaling", "text"),
    Column("implied_score_std", "implied s"),
    *MEAN_COLUMNS,
)
GAUSSIAN_COLUMNS = (
    Column("keys", "n", "int"),
    Column("score_std", "s"),
    Column("s_over_freezing", "s/√(2 ln n)", "f2"),
    *MEAN_COLUMNS,
)
PEAK_COLUMNS = (
    Column("keys", "n", "int"),
    Column("s_star", "s*"),
    Column("s_star_se", "se"),
    Column("sqrt_2_ln_n", "√(2 ln n)"),
    Column("ratio", "s*/√(2 ln n)", "f2"),
    Column("peak_mean_frobenius", "peak mean ‖J‖_F"),
    Column("frobenius_uniform", "√(n−1)/n"),
    Column("at_edge", "at grid edge"),
)

SLOPE_QUANTITIES = ("score_std", "self_score_mean", "mean_frobenius")
FIELDS = JACOBIAN_FIELDS  # by score source

SMALL_MATRIX = 12  # J itself is drawn (and kept in the figure data) up to this many keys


def documented_problem(spec: JacobianSpec, entry: Documented) -> str | None:
    return shared.documented_problem(spec, entry, FIELDS.__getitem__)


def run(spec: JacobianSpec, ctx: RunContext = SERIAL) -> Result:
    return score_run.run(
        spec, ctx, study="jacobian", table="jacobian", jacobian=True,
        leading_title="Softmax Jacobian with one key leading n − 1 ties, versus n (exact)",
        explicit=_explicit, vectors=_vectors, gaussian=_gaussian)


# --- source 1 -----------------------------------------------------------------------------


def _explicit(spec: JacobianSpec, ctx: RunContext) -> score_run.Part:
    explicit = _explicit_rows(spec)
    return score_run.Part([as_row(r) for r in explicit],
                          EXPLICIT_RULE_COLUMNS if spec.uses_rules else EXPLICIT_COLUMNS,
                          "Softmax Jacobian of explicit scores as they are scaled",
                          figures=[_vs_scale_figure(spec, explicit)] if ctx.figures else [])


def _explicit_rows(spec: JacobianSpec) -> list[JacobianExplicitRow]:
    rows = []
    for first, zz, c, p in shared.explicit_softmax(spec):
        norms = jacobian_norms(p)
        rows.append(JacobianExplicitRow(
            **first,
            max_abs_jacobian=float(norms["max_abs"]),
            frobenius=float(norms["frobenius"]),
            spectral=float(sat.jacobian_spectral(p)[0]),
            trace=float(norms["trace"]),
            entropy=float(entropy(zz, c)),
        ))
    return rows


def _vs_scale_figure(spec: JacobianSpec, rows: list[JacobianExplicitRow]) -> Figure:
    formulas = {s.label: s.formula for s in spec.scalings}
    n = len(spec.scores or [])
    points = []
    for r in rows:
        formula = formulas.get(r.key.scaling) if isinstance(r.key, RuleKey) else None
        label = formula or f"×{r.key.scale:g}"
        point: dict[str, Any] = {
            "label": label, "scale": r.key.scale, "max_prob": r.max_prob,
            "max_abs_jacobian": r.max_abs_jacobian, "frobenius": r.frobenius,
            "spectral": r.spectral}
        if n <= SMALL_MATRIX:
            point["matrix"] = jacobian(np.asarray(r.probs)).tolist()
        points.append(point)
    return Figure("jacobian_vs_scale", "saturation.jacobian_vs_scale",
                  "Size of the softmax Jacobian as the scores are scaled",
                  {"points": points, "n": n, "scores": list(spec.scores or [])},
                  caption="Follow ‖J‖_F as the scores are scaled up: once one weight takes "
                          "nearly everything, it falls towards zero, and the gradient with it.")


# --- source 2 -----------------------------------------------------------------------------


def _vectors(spec: JacobianSpec, ctx: RunContext) -> score_run.Part:
    vector, checks, figures = _vector_run(spec, ctx)
    part = score_run.vectors_part(spec, [as_row(r) for r in vector], VECTOR_COLUMNS,
                                  "Softmax Jacobian", checks=checks, figures=figures,
                                  d_quantities=SLOPE_QUANTITIES, jacobian=True)
    if spec.mask == "causal":
        part.notes.append("causal mask: the first query has one key, so its J is exactly 0.")
    return part


def _vector_run(spec: JacobianSpec, ctx: RunContext
                ) -> tuple[list[JacobianVectorRow], list[Check], list[Figure]]:
    law, unit = law_of(spec)
    rows: list[JacobianVectorRow] = []
    checks: list[Check] = []
    for g in vector_grid.draw_grid(spec, ctx, law, unit, threshold=None, jacobian=True,
                                   keep_first=False):
        cell_rows = [
            _vector_row(shared.vector_parts(spec, law, unit, g.dim, g.keys, scaling, g.cell),
                        measured, g.keys)
            for scaling, measured in zip(spec.scalings, g.cell.measured, strict=True)]
        add = None
        if g.additive is not None:
            add = _vector_row(shared.additive_parts(spec, law, g.dim, g.keys, g.additive),
                              g.additive.measured[0], g.keys)
        rows.extend(cell_rows + ([add] if add else []))
        checks.extend(vector_grid.grid_checks(spec, g, [r.scores for r in cell_rows],
                                              add.scores if add else None))
    figures = [_vs_dim_figure(spec, rows)] if len(spec.dim_list) > 1 else []
    return rows, checks, figures


def _vector_row(parts: shared.CellParts, measured: draws.Measured, n: int
                ) -> JacobianVectorRow:
    med, med_se = _median(measured)
    return JacobianVectorRow(
        head=parts.head, stats=stats_of(JacobianStats, measured, JACOBIAN_STATS),
        freezing=parts.freezing, scores=parts.scores, median_frobenius=med,
        median_frobenius_se=med_se, frobenius_uniform=sat.uniform_frobenius(n))


def _median(measured: draws.Measured) -> tuple[float | None, float | None]:
    assert measured.median_frobenius is not None
    med, se = measured.median_frobenius
    return finite(med), finite(se)


def _vs_dim_figure(spec: JacobianSpec, rows: list[JacobianVectorRow]) -> Figure:
    curves = shared.vs_dim_curves(spec, rows, lambda pts: {
        "mean_frobenius": [r.stats.mean_frobenius for r in pts],
        "mean_frobenius_se": [r.stats.mean_frobenius_se for r in pts],
        "median_frobenius": [r.median_frobenius for r in pts]})
    return Figure("jacobian_vs_dim", "saturation.jacobian_vs_dim",
                  "Mean ‖J‖_F of each attention row versus d_k",
                  {"curves": curves,
                   "uniform": {n: sat.uniform_frobenius(n) for n in spec.key_list},
                   "trials": spec.trials, "se_k": 2.0})


# --- source 3 -----------------------------------------------------------------------------


def _gaussian(spec: JacobianSpec, ctx: RunContext) -> score_run.Part:
    gaussian, checks, peaks = _gaussian_run(spec, ctx)
    rows = [as_row(r) for r in gaussian]
    found_peaks = [as_row(p) for p in peaks]
    tables = [Table("peaks", "Where the mean ‖J‖_F peaks, per n", PEAK_COLUMNS,
                    tuple(found_peaks))]
    more_tables, more_checks = gauss_slopes.slope_tables(spec, rows, jacobian=True)
    figures = [_vs_std_figure(spec, gaussian, peaks)]
    if len(spec.key_list) >= 2 and len(spec.score_stds or []) >= 3:
        figures.append(_phase_figure(spec, gaussian, peaks))
    return score_run.Part(rows, GAUSSIAN_COLUMNS,
                          "Softmax Jacobian of n iid N(0, s²) scores versus s",
                          checks + more_checks, figures,
                          peaks_of.peak_notes(peaks, min(spec.score_stds or [0.0])),
                          tables + more_tables, found_peaks)


def _gaussian_run(spec: JacobianSpec, ctx: RunContext
                  ) -> tuple[list[JacobianGaussianRow], list[Check], list[PeakRow]]:
    rows: list[JacobianGaussianRow] = []
    checks: list[Check] = []
    peaks: list[PeakRow] = []
    brackets: list[tuple[float, float] | None] = []
    stds = list(spec.score_stds or [])
    cells = draws.run_cells([draws.gaussian_job(spec, n, (j,), threshold=None, jacobian=True)
                             for j, n in enumerate(spec.key_list)], ctx)
    for n, cell in zip(spec.key_list, cells, strict=True):
        cell_rows = []
        for s, measured in zip(stds, cell.measured, strict=True):
            med, med_se = _median(measured)
            cell_rows.append(JacobianGaussianRow(
                keys=n, score_std=s, trials=cell.trials,
                stats=stats_of(JacobianStats, measured, JACOBIAN_STATS),
                freezing=Freezing.at(n, s, True), median_frobenius=med,
                median_frobenius_se=med_se, frobenius_uniform=sat.uniform_frobenius(n)))
        rows.extend(cell_rows)
        checks.append(shared.gaussian_check(n, stds, cell, spec.se_tolerance))
        peaks.append(peaks_of.grid_peak(n, cell_rows))
        brackets.append(peaks_of.bracket(spec, cell_rows))
    return rows, checks, peaks_of.refined(spec, peaks, brackets, ctx)


def _vs_std_figure(spec: JacobianSpec, rows: list[JacobianGaussianRow],
                   peaks: list[PeakRow]) -> Figure:
    peak_of = dict(zip(spec.key_list, peaks, strict=True))
    curves = shared.vs_std_curves(spec, rows, lambda n, pts: {
        "mean_frobenius": [r.stats.mean_frobenius for r in pts],
        "mean_frobenius_se": [r.stats.mean_frobenius_se for r in pts],
        "median_frobenius": [r.median_frobenius for r in pts],
        "uniform": sat.uniform_frobenius(n),
        "freezing": sat.freezing_std(n),
        "s_star": peak_of[n].s_star, "peak": peak_of[n].fitted_peak,
        "at_edge": peak_of[n].at_edge})
    return Figure("frobenius_vs_std", "saturation.frobenius_vs_std",
                  "Mean ‖J‖_F of softmax of n iid N(0, s²) scores versus s",
                  {"curves": curves, "trials": spec.trials, "se_k": 2.0},
                  caption="‖J‖_F levels off at √(n−1)/n towards uniform weights (small s), "
                          "falls to 0 towards one-hot weights (large s), and peaks in between.")


def _phase_figure(spec: JacobianSpec, rows: list[JacobianGaussianRow],
                  peaks: list[PeakRow]) -> Figure:
    stds = sorted(spec.score_stds or [])
    keys = sorted(spec.key_list)
    by = {(r.keys, r.score_std): r for r in rows}
    entropy_ratio = [[_ratio(by[(n, s)].stats.mean_entropy, math.log(n)) for s in stds]
                     for n in keys]
    peak_of = {p.keys: p for p in peaks}
    frob_ratio = [[_ratio(by[(n, s)].stats.mean_frobenius, peak_of[n].peak_mean_frobenius)
                   for s in stds] for n in keys]
    grid = np.geomspace(keys[0], keys[-1], 200)
    return Figure(
        "phase_diagram", "saturation.phase_diagram",
        "Softmax of n iid N(0, s²) scores: where weights freeze and gradients vanish",
        {
            "score_stds": stds, "keys": keys,
            "entropy_ratio": entropy_ratio, "frobenius_ratio": frob_ratio,
            "freezing_curve": {"keys": grid.tolist(),
                               "s": [sat.freezing_std(float(n)) for n in grid]},
            "s_star": [{"keys": p.keys, "s": p.s_star, "at_edge": p.at_edge}
                       for p in peaks],
            "marks": [{"label": "scaled (÷√d): s = 1", "s": 1.0}] + [
                {"label": f"unscaled, d = {d}: s = √{d} = {math.sqrt(d):.3g}",
                 "s": math.sqrt(d)} for d in spec.mark_dims
            ],
            "trials": spec.trials,
        },
    )


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b
