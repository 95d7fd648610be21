"""Study: the variance of q·k versus dimension, raw and under each scaling rule."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sdpa_cli.framework.audit import (
    selector_problem,
)
from sdpa_cli.framework.common import assemble, law_of, plain, row_lookup
from sdpa_cli.framework.common import canonical as _canonical
from sdpa_cli.framework.common import finite as _finite
from sdpa_cli.framework.common import zscore as _z
from sdpa_cli.framework.context import SERIAL, RunContext
from sdpa_cli.framework.result import (
    Check,
    Result,
    Table,
    as_row,
)
from sdpa_cli.numerics import theory
from sdpa_cli.numerics.sampling import PairLaw
from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.spec.common import Documented
from sdpa_cli.studies.variance import derived, half
from sdpa_cli.studies.variance import figure_data as variance_figures
from sdpa_cli.studies.variance.engine import DotStats, simulate_dots
from sdpa_cli.studies.variance.rows import (
    COLUMNS,
    FIELDS,
    HALF_COLUMNS,
    HALF_FIELDS,
    VarianceRow,
)
from sdpa_cli.studies.variance.spec import VarianceSpec


def plan_rows(spec: VarianceSpec) -> list[dict[str, Any]]:
    """The (dim, scaling) key of every row the run will produce, without running it."""
    return [{"dim": d, "scaling": s.label} for d in spec.dim_list for s in spec.scalings]


def documented_problem(spec: VarianceSpec, entry: Documented) -> str | None:
    if entry.part == "float16":
        if not spec.float16:
            return "part float16 needs float16: true"
        return selector_problem(plan_rows(spec), _canonical(entry), HALF_FIELDS)
    return selector_problem(plan_rows(spec), _canonical(entry), FIELDS)


def centred_mean(law: PairLaw, d: int) -> float:
    """E[q·k − d·m²] = d·ρ (0 for unit vectors): the engine's values are centred this way."""
    return 0.0 if law.kind == "sphere" else d * law.rho


def run(spec: VarianceSpec, ctx: RunContext = SERIAL) -> Result:
    law, unit = law_of(spec)
    k = spec.se_tolerance
    want_cosine = any(s.cosine for s in spec.scalings)
    typed: list[VarianceRow] = []
    checks: list[Check] = []
    per_dim: list[tuple[int, theory.DotMoments, DotStats]] = []
    for i, d in enumerate(spec.dim_list):
        mom = theory.dot_moments(law.kind, d, law.m, law.rho)
        scale = _scale(law, mom)
        lo, hi = _range(law, d, mom)
        stats = simulate_dots(
            law, d, spec.pairs, entropy=spec.entropy, key=(i,), method=spec.method,
            workers=ctx.workers, executor=ctx.executor, dot_range=(lo / scale, hi / scale),
            cosine=want_cosine, scale=scale, tick=ctx.tick,
        )
        per_dim.append((d, mom, stats))
        for j, scaling in enumerate(spec.scalings):
            row = _row(d, scaling, law, unit, mom, stats, k)
            typed.append(row)
            checks.append(replace(_check(row, k), fields=(f"scalings[{j}]", f"dims[{i}]")))
    rows = [as_row(r) for r in typed]
    halves = [as_row(half.half_row(law, spec.std, d, s, spec.pairs, spec.entropy, i))
              for i, d in enumerate(spec.dim_list) for s in spec.scalings] if spec.float16 else []
    main, in_half = row_lookup(rows, _se), row_lookup(halves)

    def lookup(entry: Documented, quantity: str) -> tuple[float | None, float | None]:
        return (in_half if entry.part == "float16" else main)(entry, quantity)

    return assemble(
        spec, study="variance", title="Dot-product variance versus dimension",
        table=Table("variance", "q·k by dimension and scaling", COLUMNS, tuple(rows)),
        tables=[Table("float16", "q·k in float16: the rule's factor after the product, or "
                      "split over q and k", HALF_COLUMNS, tuple(halves))] if halves else [],
        checks=checks, lookup=lookup, theory=_theory_lines(spec, law),
        notes=_notes(spec, per_dim),
        # --no-plots: no figure data at all (its histograms and densities cost per dim)
        figures=variance_figures.figures(spec, law, unit, per_dim, typed) if ctx.figures else (),
        findings=findings(typed), expect=_expect(spec, law), derived=derived.DERIVED,
    )


def _scale(law: PairLaw, mom: theory.DotMoments) -> float:
    """The engine's unit: the theoretical sd of q·k, so its summaries never overflow."""
    sd = math.sqrt(mom.variance)
    return sd if law.kind != "sphere" and 0.0 < sd < math.inf else 1.0


def _range(law: PairLaw, d: int, mom: theory.DotMoments) -> tuple[float, float]:
    """Histogram range of q·k − d·m² in standardized units: ±16 theoretical sd around its
    mean (the whole of [−1, 1] for unit vectors). Values outside still count everywhere
    but in the figure, as under/overflow."""
    if law.kind == "sphere":
        return -1.0, 1.0 + 1e-12
    centre = centred_mean(law, d)
    sd = math.sqrt(mom.variance)
    if sd == 0.0:
        return centre - 1.0, centre + 1.0
    return centre - 16.0 * sd, centre + 16.0 * sd


def _row(
    d: int, scaling: Scaling, law: PairLaw, unit: float, mom: theory.DotMoments,
    stats: DotStats, k: float,
) -> VarianceRow:
    """One table row.

    The engine's values v are in units where the spread is about 1: a physical value is
    c·(shift + s·v). z, the variance ratio and the kurtosis are computed in those units,
    so they stay finite whenever their true values are; physical numbers that float64
    cannot hold (Var = d·σ⁴ at σ = 1e150) become null with a note instead of inf or 0.
    """
    if scaling.cosine:
        summary = stats.cosine
        assert summary is not None
        c = scaling.factor(d)  # cos(q, k) does not depend on σ
        exact = theory.cosine_moments(law.kind, d, law.m, law.rho)
        shift, s, centre = 0.0, 1.0, 0.0 if exact is None else exact.mean
    else:
        summary = stats.dot
        c = scaling.factor(d) * unit
        exact = mom
        shift, s, centre = stats.shift, stats.scale, centred_mean(law, d)
    m = summary.moments
    n = m.n
    g = c * s  # physical units per engine unit
    note = ""
    if exact is not None:
        var_v = exact.variance / s / s
        theory_var_phys = g * g * var_v
        se_v = exact.variance_se(n) / s / s
        se_basis = "exact kurtosis of q·k"
        z = _z(m.variance, var_v, se_v)
        mean_z = _z(m.mean, centre / s, math.sqrt(var_v / n))
        theory_mean, theory_var = exact.mean, exact.variance
        theory_kurt: float | None = exact.kurtosis if exact.variance > 0 else None
        ratio = m.variance / var_v if var_v > 0 else None
    else:
        se_v = theory.variance_se(m.variance, m.central4, n)
        se_basis = "fourth moment estimated from the sample"
        z = mean_z = math.nan
        theory_mean = theory_var = theory_var_phys = math.nan
        theory_kurt = ratio = None
        note = "no closed form for this law under cosine scaling; se from the sample"
    if scaling.cosine and stats.degenerate:
        note = (note + "; " if note else "") + (
            f"{stats.degenerate} pairs had a zero vector; their cosine counts as 0"
        )
    variance = g * g * m.variance
    if not math.isfinite(variance) or (variance == 0.0 and m.variance > 0.0):
        note = (note + "; " if note else "") + (
            "the variance in these units is beyond float64 (reported as null); z, ratio "
            "and kurtosis are exact"
        )
        variance = math.nan
    se = g * g * se_v

    def phys(v: float) -> float | None:
        inner = shift + s * v
        if c * inner == 0.0 and inner != 0.0:  # below float64's smallest (σ = 1e-300)
            return None  # null like a value beyond float64, never a false 0
        return _finite(c * inner)

    return VarianceRow(
        dim=d,
        scaling=scaling.label,
        factor=_finite(scaling.factor(d)),  # the rule's own 1/(T·d^p), without σ²
        pairs=n,
        mean=phys(m.mean),
        mean_se=_finite(abs(g) * math.sqrt(m.variance / n)),
        variance=_finite(variance),
        std=_finite(abs(g) * math.sqrt(m.variance)) if math.isfinite(variance) else None,
        theory_mean=_finite(c * theory_mean),
        theory_variance=_finite(theory_var_phys)
        if theory_var_phys > 0 or theory_var == 0 else None,
        theory_std=_finite(math.sqrt(theory_var_phys))
        if theory_var_phys > 0 or theory_var == 0 else None,
        se=_finite(se) if math.isfinite(variance) else None,
        ci_low=_finite(variance - k * se),
        ci_high=_finite(variance + k * se),
        z=_finite(z),
        mean_z=_finite(mean_z),
        ratio=_finite(ratio) if ratio is not None else None,
        min=phys(m.min),
        max=phys(m.max),
        kurtosis=_finite(m.kurtosis),
        theory_kurtosis=theory_kurt,
        p025=phys(summary.quantile(0.025)),
        median=phys(summary.quantile(0.5)),
        p975=phys(summary.quantile(0.975)),
        se_basis=se_basis,
        note=note,
        closed_form=exact is not None,
    )


def _check(row: VarianceRow, k: float) -> Check:
    name = f"d={row.dim} {row.scaling}"
    z, mean_z = row.z, row.mean_z
    if not row.closed_form:
        return Check(name, True, "no closed form to check against (reported only)")
    if z is None or mean_z is None:
        return Check(name, False, "measurement or theory not finite")
    passed = abs(z) <= k and abs(mean_z) <= k
    return Check(
        name, passed,
        f"variance z = {z:+.2f}, mean z = {mean_z:+.2f} (pass: both within ±{k:g})",
    )


def _se(row: Mapping[str, Any], name: str) -> float | None:
    """The variance's se is the row's `se`; the std's follows by the delta method."""
    if name == "std" and row["se"] is not None and row["std"]:
        return float(row["se"]) / (2.0 * float(row["std"]))
    se = {"variance": row["se"], "mean": row["mean_se"]}.get(name)
    return None if se is None else float(se)


def findings(rows: list[VarianceRow]) -> tuple[str, ...]:
    """How each rule's measured variance moves with d, in words, from the rows alone."""
    out = []
    for label in dict.fromkeys(r.scaling for r in rows):
        pts = [r for r in rows if r.scaling == label and r.variance]
        if len(pts) < 2 or pts[0].dim == pts[-1].dim:
            continue
        first, last = pts[0], pts[-1]
        assert first.variance is not None and last.variance is not None
        slope = math.log(last.variance / first.variance) / math.log(last.dim / first.dim)
        trend = ("grows like d" if slope > 0.75 else "grows like √d" if slope > 0.25
                 else "stays flat" if slope > -0.25 else "shrinks like 1/√d" if slope > -0.75
                 else "shrinks like 1/d")
        name = "raw q·k" if label == "none" else Scaling.parse(label).formula
        out.append(f"{name}: the variance {trend} ({plain(first.variance)} at d = "
                   f"{first.dim} → {plain(last.variance)} at d = {last.dim}).")
    return tuple(out)



def _expect(spec: VarianceSpec, law: PairLaw) -> tuple[str, ...]:
    """The theory in plain words; the exact forms stay in `theory` (--explain, table.md)."""
    if law.kind == "sphere":
        first = "For random unit vectors the dot product has variance 1/d."
    elif spec.mean == 0 and spec.correlation == 0:
        first = ("Each of the d products q_i·k_i adds its own variance σ⁴, so Var(q·k) = d·σ⁴: "
                 "it grows in step with d.")
    else:
        first = "Var(q·k) grows in step with d (exact form: --explain)."
    if law.kind == "sphere":  # the iid story (one product's variance) does not apply
        return (first, "Dividing by c divides the variance by c²: ×√d (power:-0.5) holds it "
                "at 1, ÷√d makes it fall like 1/d², ÷d like 1/d³.")
    return (first, "Dividing by c divides the variance by c²: ÷√d holds it at the variance of "
            "one product, ÷d makes it fall like 1/d.")


def _theory_lines(spec: VarianceSpec, law: PairLaw) -> tuple[str, ...]:
    k = spec.se_tolerance
    lines = []
    if law.kind == "sphere":
        lines.append("u, v independent uniform unit vectors: E[u·v] = 0, Var(u·v) = 1/d, "
                     "E[(u·v)⁴] = 3/(d(d+2)).")
    else:
        law_text = (f"iid {spec.distribution} components, mean μ = {spec.mean:g}, "
                    f"std σ = {spec.std:g}, corr(q_i, k_i) = {spec.correlation:g}")
        if spec.mean == 0 and spec.correlation == 0:
            lines.append(f"q, k with {law_text}: E[q·k] = 0, Var(q·k) = d·σ⁴.")
        elif spec.correlation == 0:
            lines.append(f"q, k with {law_text}: E[q·k] = d·μ², "
                         "Var(q·k) = d·[(σ²+μ²)² − μ⁴].")
        else:
            lines.append(f"q, k with {law_text}: E[q·k] = d·(μ² + ρσ²); Var(q·k) and E[(q·k)⁴] "
                         "from the exact moments of one term q_i·k_i, times d.")
        if spec.distribution == "normal" and spec.mean == 0 and spec.correlation == 0:
            lines.append("Gaussian q·k has the law of √(χ²_d)·Z (variance-gamma density), "
                         "kurtosis 3 + 6/d, E[(q·k − mean)⁴] = 3d² + 6d (σ = 1).")
    lines.append("Scaling by c multiplies the variance by c²: ÷√d gives a variance that "
                 "does not grow with d; ÷d makes it shrink as 1/d.")
    lines.append("se of a sample variance of N draws: √((μ₄ − σ⁴(N−3)/(N−1))/N), with the exact "
                 f"μ₄ where known; a row passes when theory lies within ±{k:g} se.")
    if spec.method == "exact":
        lines.append("method exact: Gaussian q·k = ½((1+ρ)χ'²_d(λ) − (1−ρ)χ²_d), unit-vector "
                     "u·v = 2·Beta((d−1)/2, (d−1)/2) − 1; cost per pair independent of d.")
    return tuple(lines)


def _notes(spec: VarianceSpec, per_dim: list[tuple[int, theory.DotMoments, DotStats]]
           ) -> tuple[str, ...]:
    notes = []
    for d, _mom, stats in per_dim:
        h = stats.dot.histogram
        if h.under or h.over:
            notes.append(f"d={d}: {h.under + h.over} values fell outside the histogram range "
                         "(±16 theoretical sd); they count in every statistic but not in "
                         "the figure.")
        if not stats.dot.complete:
            notes.append(f"d={d}: quantiles come from an {h.counts.size}-bin histogram (only "
                         f"the first {stats.dot.sample.cap} values are kept).")
    return tuple(notes)
