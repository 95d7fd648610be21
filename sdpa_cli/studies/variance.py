"""Study: the variance of q·k versus dimension, raw and under each scaling rule."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from sdpa_cli.numerics import theory
from sdpa_cli.numerics.engine import DotStats, Summary, simulate_dots
from sdpa_cli.numerics.sampling import PairLaw
from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.spec.common import Documented
from sdpa_cli.spec.variance import VarianceSpec
from sdpa_cli.studies.audit import (
    audit_check,
    find_rows,
    pick,
    run_audit,
    selector_problem,
    split_quantity,
)
from sdpa_cli.studies.result import Check, Column, Figure, Result, Table

COLUMNS = (
    Column("dim", "d", "int"),
    Column("scaling", "scaling", "text"),
    Column("mean", "mean"),
    Column("variance", "variance"),
    Column("theory_variance", "theory"),
    Column("se", "se"),
    Column("z", "z", "f2"),
    Column("ratio", "var/theory"),
    Column("kurtosis", "kurtosis"),
    Column("theory_kurtosis", "theory kurt."),
)

FIELDS = (
    "dim", "scaling", "factor", "pairs", "mean", "mean_se", "variance", "std", "theory_mean",
    "theory_variance", "theory_std", "se", "ci_low", "ci_high", "z", "mean_z", "ratio", "min",
    "max", "kurtosis", "theory_kurtosis", "p025", "median", "p975", "se_basis", "note",
)


def plan_rows(spec: VarianceSpec) -> list[dict[str, Any]]:
    """The (dim, scaling) key of every row the run will produce, without running it."""
    return [{"dim": d, "scaling": s.label} for d in spec.dims for s in spec.scalings]


def documented_problem(spec: VarianceSpec, entry: Documented) -> str | None:
    return selector_problem(plan_rows(spec), _canonical(entry), FIELDS)


def _canonical(entry: Documented) -> Documented:
    """A copy whose `row: scaling:` uses the canonical label (e.g. 'temperature:8')."""
    label = entry.row.get("scaling")
    if isinstance(label, str):
        try:
            row = {**entry.row, "scaling": Scaling.parse(label).label}
        except ValueError:
            return entry
        return entry.model_copy(update={"row": row})
    return entry


def law_of(spec: VarianceSpec) -> tuple[PairLaw, float]:
    """The standardized pair law and the unit σ² that maps its q·k to physical units."""
    if spec.distribution == "sphere":
        return PairLaw("sphere"), 1.0
    return PairLaw(spec.distribution, spec.mean / spec.std, spec.correlation), spec.std**2


def run(spec: VarianceSpec, *, workers: int = 1) -> Result:
    law, unit = law_of(spec)
    k = spec.se_tolerance
    want_cosine = any(s.cosine for s in spec.scalings)
    rows: list[dict[str, Any]] = []
    checks: list[Check] = []
    per_dim: list[tuple[int, theory.DotMoments, DotStats]] = []
    for i, d in enumerate(spec.dims):
        mom = theory.dot_moments(law.kind, d, law.m, law.rho)
        stats = simulate_dots(
            law, d, spec.pairs, entropy=spec.seed, key=(i,), method=spec.method,
            workers=workers, dot_range=_range(law, mom), cosine=want_cosine,
        )
        per_dim.append((d, mom, stats))
        for scaling in spec.scalings:
            row = _row(d, scaling, law, unit, mom, stats, k)
            rows.append(row)
            checks.append(_check(row, k))
    audit = run_audit(spec.documented, _lookup(rows), k, spec.document)
    check = audit_check(audit)
    if check:
        checks.append(check)
    notes = _notes(spec, per_dim)
    return Result(
        study="variance",
        name=spec.name or "variance",
        title=spec.title or "Dot-product variance versus dimension",
        source=spec.source,
        description=spec.description,
        spec=spec.model_dump(mode="json"),
        table=Table("variance", "q·k by dimension and scaling", COLUMNS, tuple(rows)),
        checks=tuple(checks),
        audit=audit,
        theory=_theory_lines(spec, law),
        notes=notes,
        figures=_figures(spec, law, unit, per_dim, rows),
    )


def _range(law: PairLaw, mom: theory.DotMoments) -> tuple[float, float]:
    """Histogram range in standardized units: ±16 theoretical sd (the whole of [−1, 1] for
    unit vectors). Values outside are still counted, as under/overflow."""
    if law.kind == "sphere":
        return -1.0, 1.0 + 1e-12
    sd = math.sqrt(mom.variance)
    if sd == 0.0:
        return mom.mean - 1.0, mom.mean + 1.0
    return mom.mean - 16.0 * sd, mom.mean + 16.0 * sd


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _z(measured: float, expected: float, se: float) -> float:
    if se > 0:
        return (measured - expected) / se
    return 0.0 if measured == expected else math.copysign(math.inf, measured - expected)


def _row(
    d: int, scaling: Scaling, law: PairLaw, unit: float, mom: theory.DotMoments,
    stats: DotStats, k: float,
) -> dict[str, Any]:
    """One table row. Statistics are computed in standardized units (so z, ratio and
    kurtosis never overflow) and only then multiplied into physical units."""
    if scaling.cosine:
        summary = stats.cosine
        assert summary is not None
        c = scaling.factor(d)  # cos(q, k) does not depend on σ
        exact = theory.cosine_moments(law.kind, d, law.m, law.rho)
    else:
        summary = stats.dot
        c = scaling.factor(d) * unit
        exact = mom
    m = summary.moments
    n = m.n
    note = ""
    if exact is not None:
        se_std = theory.variance_se(exact.variance, exact.mu4, n)
        se_basis = "exact fourth moment"
        z = _z(m.variance, exact.variance, se_std)
        mean_z = _z(m.mean, exact.mean, math.sqrt(exact.variance / n))
        theory_mean, theory_var = exact.mean, exact.variance
        theory_kurt: float | None = exact.kurtosis if exact.variance > 0 else None
        ratio = m.variance / exact.variance if exact.variance > 0 else None
    else:
        se_std = theory.variance_se(m.variance, m.central4, n)
        se_basis = "fourth moment estimated from the sample"
        z = mean_z = math.nan
        theory_mean = theory_var = math.nan
        theory_kurt = ratio = None
        note = "no closed form for this law under cosine scaling; se from the sample"
    if scaling.cosine and stats.degenerate:
        note = (note + "; " if note else "") + (
            f"{stats.degenerate} pairs had a zero vector; their cosine counts as 0"
        )
    variance = c * c * m.variance
    se = c * c * se_std
    if not math.isfinite(variance) or (variance == 0.0 and m.variance > 0.0):
        note = (note + "; " if note else "") + "variance outside float64 range in these units"
    return {
        "dim": d,
        "scaling": scaling.label,
        "factor": _finite(c),
        "pairs": n,
        "mean": _finite(c * m.mean),
        "mean_se": _finite(abs(c) * math.sqrt(m.variance / n)),
        "variance": _finite(variance),
        "std": _finite(abs(c) * math.sqrt(m.variance)),
        "theory_mean": _finite(c * theory_mean),
        "theory_variance": _finite(c * c * theory_var),
        "theory_std": _finite(abs(c) * math.sqrt(theory_var)),
        "se": _finite(se),
        "ci_low": _finite(variance - k * se),
        "ci_high": _finite(variance + k * se),
        "z": _finite(z),
        "mean_z": _finite(mean_z),
        "ratio": _finite(ratio) if ratio is not None else None,
        "min": _finite(c * m.min),
        "max": _finite(c * m.max),
        "kurtosis": _finite(m.kurtosis),
        "theory_kurtosis": theory_kurt,
        "p025": _finite(c * summary.quantile(0.025)),
        "median": _finite(c * summary.quantile(0.5)),
        "p975": _finite(c * summary.quantile(0.975)),
        "se_basis": se_basis,
        "note": note,
    }


def _check(row: Mapping[str, Any], k: float) -> Check:
    name = f"d={row['dim']} {row['scaling']}"
    z, mean_z = row["z"], row["mean_z"]
    if row["theory_variance"] is None and row["note"].startswith("no closed form"):
        return Check(name, True, "no closed form to check against (reported only)")
    if z is None or mean_z is None:
        return Check(name, False, "measurement or theory not finite")
    passed = abs(z) <= k and abs(mean_z) <= k
    return Check(
        name, passed,
        f"variance z = {z:+.2f}, mean z = {mean_z:+.2f} (pass: both within ±{k:g})",
    )


def _lookup(rows: list[dict[str, Any]]):
    def lookup(entry: Documented, quantity: str) -> tuple[float | None, float | None]:
        found = find_rows(rows, _canonical(entry).row)
        if len(found) != 1:
            return None, None
        row = found[0]
        name, idx = split_quantity(quantity)
        value = pick(row.get(name), idx)
        se = {"variance": row["se"], "mean": row["mean_se"]}.get(name)
        if name == "std" and row["se"] is not None and row["std"]:
            se = row["se"] / (2.0 * row["std"])  # delta method
        return (float(value) if isinstance(value, int | float) else None), se

    return lookup


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


# --- figure data -----------------------------------------------------------------------------


def _figures(
    spec: VarianceSpec, law: PairLaw, unit: float,
    per_dim: list[tuple[int, theory.DotMoments, DotStats]], rows: list[dict[str, Any]],
) -> tuple[Figure, ...]:
    linear = [s for s in spec.scalings if not s.cosine]
    scaled = next((s for s in linear if s.label == "sqrt"), None) or next(
        (s for s in linear if s.label != "none"), None
    )
    panels = []
    for scaling in ([Scaling.parse("none")] + ([scaled] if scaled else [])):
        series = []
        for d, _mom, stats in per_dim:
            c = scaling.factor(d) * unit
            series.append(_histogram_series(d, stats.dot, law, c, spec.bins))
        panels.append({"scaling": scaling.label, "formula": scaling.formula, "series": series})
    hist = Figure(
        "histograms", "variance.histograms",
        "Distribution of q·k by dimension" + (f", raw and {scaled.formula}" if scaled else ""),
        {"panels": panels, "distribution": spec.distribution, "pairs": spec.pairs},
    )
    curves = []
    d_lo, d_hi = min(spec.dims), max(spec.dims)
    grid = np.unique(np.geomspace(max(1.0, d_lo / 1.5), d_hi * 1.5, 200).round(6))
    for scaling in spec.scalings:
        pts = [r for r in rows if r["scaling"] == scaling.label]
        curve = None
        if not scaling.cosine or theory.cosine_moments(law.kind, 2, law.m, law.rho) is not None:
            curve = [
                _theory_variance(law, unit, scaling, float(d)) for d in grid
            ]
        curves.append({
            "scaling": scaling.label,
            "formula": scaling.formula,
            "dims": [r["dim"] for r in pts],
            "variance": [r["variance"] for r in pts],
            "ci_low": [r["ci_low"] for r in pts],
            "ci_high": [r["ci_high"] for r in pts],
            "grid": grid.tolist(),
            "theory": curve,
        })
    vvd = Figure(
        "variance_vs_dim", "variance.vs_dim",
        f"Var(q·k) versus d (points ± {spec.se_tolerance:g} se; lines: theory)",
        {"curves": curves},
    )
    return hist, vvd


def _theory_variance(law: PairLaw, unit: float, scaling: Scaling, d: float) -> float | None:
    """Theory variance at a possibly non-integer d, for the smooth line in the figure."""
    if scaling.cosine:
        return (1.0 / d) * scaling.factor(d) ** 2
    if law.kind == "sphere":
        var = 1.0 / d
    else:
        var = d * theory.term_moments(law.kind, law.m, law.rho)[1]
    value = var * (scaling.factor(d) * unit) ** 2
    return value if math.isfinite(value) and value > 0 else None


def _histogram_series(d: int, summary: Summary, law: PairLaw, c: float, bins: int
                      ) -> dict[str, Any]:
    """Histogram (as a density) and the theoretical density of c·(q·k) for one d."""
    m = summary.moments
    edges, counts = summary.histogram.coarsen(bins, m.min, m.max)
    widths = np.diff(edges)
    total = summary.histogram.total
    density = counts / (total * widths) if total else counts * 0.0
    x = np.linspace(edges[0], edges[-1], 400)
    x = x[x != 0.0] if law.kind == "normal" and d == 1 else x  # log singularity at 0
    f, kind = theory.dot_density(x, law.kind, d, law.m, law.rho)
    lo, hi = sorted((edges[0] * c, edges[-1] * c))
    return {
        "dim": d,
        "edges": (edges * c).tolist() if c > 0 else (edges[::-1] * c).tolist(),
        "density": (density / abs(c)).tolist() if c > 0 else (density[::-1] / abs(c)).tolist(),
        "x": (x * c).tolist(),
        "theory": (f / abs(c)).tolist(),
        "theory_kind": kind,
        "range": [lo, hi],
    }
