"""Figure data of the variance study: histograms by d and the variance-versus-d curves."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from sdpa_cli.framework.audit import split_quantity
from sdpa_cli.framework.common import divisor_label
from sdpa_cli.framework.result import Figure
from sdpa_cli.numerics import theory
from sdpa_cli.numerics.sampling import PairLaw
from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.studies.variance.engine import DotStats, Summary
from sdpa_cli.studies.variance.spec import VarianceSpec

if TYPE_CHECKING:  # annotations only: variance imports this module
    from sdpa_cli.studies.variance.rows import VarianceRow


HIST_MAX_DIMS = 12  # histograms drawn in the distribution figure (the table has every d)


def figures(
    spec: VarianceSpec, law: PairLaw, unit: float,
    per_dim: list[tuple[int, theory.DotMoments, DotStats]], rows: list[VarianceRow],
) -> tuple[Figure, ...]:
    linear = [s for s in spec.scalings if not s.cosine]
    scaled = next((s for s in linear if s.label == "sqrt"), None) or next(
        (s for s in linear if s.label != "none"), None
    )
    panels = []
    # Overlaid histograms stop being readable, and take minutes to draw, long before the
    # guard's row limit: draw at most HIST_MAX_DIMS of them, evenly spread, and say so.
    shown = per_dim
    if len(per_dim) > HIST_MAX_DIMS:
        picks = np.unique(np.linspace(0, len(per_dim) - 1, HIST_MAX_DIMS).round().astype(int))
        shown = [per_dim[i] for i in picks]
    for scaling in ([Scaling.parse("none")] + ([scaled] if scaled else [])):
        series = []
        for d, _mom, stats in shown:
            c = scaling.factor(d) * unit
            series.append(_histogram_series(d, stats.dot, law, c, stats.shift, stats.scale,
                                            spec.bins))
        panels.append({"scaling": scaling.label, "formula": scaling.formula, "series": series})
    hist = Figure(
        "histograms", "variance.histograms",
        "Distribution of q·k by dimension" + (f", raw and {scaled.formula}" if scaled else ""),
        {"panels": panels, "distribution": spec.distribution, "pairs": spec.pairs},
        caption="Compare the widths across d: raw q·k spreads out as d grows"
                + (f"; see what {scaled.formula} does to that spread." if scaled else ".")
                + (f" Histograms of {len(shown)} of the {len(per_dim)} dimensions, evenly "
                   "spread; the table has them all." if len(shown) < len(per_dim) else ""),
    )
    curves = []
    d_lo, d_hi = min(spec.dim_list), max(spec.dim_list)
    grid = np.unique(np.geomspace(max(1.0, d_lo / 1.5), d_hi * 1.5, 200).round(6))
    for scaling in spec.scalings:
        pts = [r for r in rows if r.scaling == scaling.label]
        curve = None
        if not scaling.cosine or theory.cosine_moments(law.kind, 2, law.m, law.rho) is not None:
            curve = [
                _theory_variance(law, unit, scaling, float(d)) for d in grid
            ]
        curves.append({
            "scaling": scaling.label,
            "formula": scaling.formula,
            "label": _rule_label(spec, scaling),
            "dims": [r.dim for r in pts],
            "variance": [r.variance for r in pts],
            "ci_low": [r.ci_low for r in pts],
            "ci_high": [r.ci_high for r in pts],
            "theory_variance": [r.theory_variance for r in pts],
            "p025": [r.p025 for r in pts],
            "p975": [r.p975 for r in pts],
            "grid": grid.tolist(),
            "theory": curve,
        })
    # A spec whose documented numbers are standard deviations is drawn as sd (and the
    # range holding 95% of the scores); one dimension compares the rules side by side.
    about_std = any(split_quantity(e.quantity)[0] in ("std", "theory_std")
                    for e in spec.documented)
    what = "sd(q·k)" if about_std else "Var(q·k)"
    title = (f"{what} at d = {spec.dim_list[0]} under each rule" if len(spec.dim_list) == 1
             else f"{what} versus d") + f" (points ± {spec.se_tolerance:g} se)"
    vvd = Figure(
        "variance_vs_dim", "variance.vs_dim", title,
        {"curves": curves, "quantity": "std" if about_std else "variance",
         "se_k": spec.se_tolerance},
        caption=f"Points are measurements with bars of ± {spec.se_tolerance:g} se (the "
                "check's own tolerance, se_tolerance), lines the closed form each should sit "
                "on: a point whose bar misses its line is a failed check.",
    )
    return hist, vvd


def _rule_label(spec: VarianceSpec, scaling: Scaling) -> str:
    """÷√64 (d_k), ÷√512 (d_model) at one dimension; the rule's formula over many."""
    if len(spec.dim_list) != 1:
        return "raw q·k" if scaling.label == "none" else scaling.formula
    d = spec.dim_list[0]
    label = divisor_label(scaling, d)
    if label == "unscaled":
        return "raw q·k"
    for name, width in (("d_k", d), ("d_model", spec.d_model)):
        if width is not None and label == f"÷√{width}":
            return f"{label} ({name})"
    return label


def _theory_variance(law: PairLaw, unit: float, scaling: Scaling, d: float) -> float | None:
    """Theory variance at a possibly non-integer d, for the smooth line in the figure."""
    if scaling.cosine:
        factor = scaling.factor(d)
        return (1.0 / d) * factor * factor
    if law.kind == "sphere":
        var = 1.0 / d
    else:
        var = d * theory.term_moments(law.kind, law.m, law.rho)[1]
    c = scaling.factor(d) * unit
    value = var * c * c
    return value if math.isfinite(value) and value > 0 else None


def _histogram_series(d: int, summary: Summary, law: PairLaw, c: float, shift: float,
                      scale: float, bins: int) -> dict[str, Any]:
    """Histogram (as a density) and the theoretical density of c·(q·k) for one d.

    The summary holds (q·k − shift)/scale; a value v maps back to c·(shift + scale·v). At
    extreme parameters (a spread far below the float resolution of the mean, or values
    beyond float64) the mapped bins collapse or overflow: the series is then left empty
    and the figure says so instead of drawing nonsense.
    """
    m = summary.moments
    edges, counts = summary.histogram.coarsen(bins, m.min, m.max)
    total = summary.histogram.total
    with np.errstate(over="ignore", invalid="ignore"):
        phys = c * (shift + scale * edges)
    empty = {"dim": d, "edges": [], "density": [], "x": [], "theory": [],
             "theory_kind": "none", "range": [0.0, 0.0]}
    if not total or not np.all(np.isfinite(phys)):  # before np.diff: inf − inf warns
        return empty
    widths = np.diff(phys)
    if not np.all(widths > 0):
        return empty
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        density = counts / (total * widths)  # σ = 1e-160: widths of 1e-320, density past inf
    if not np.all(np.isfinite(density)):
        return empty
    x = np.linspace(edges[0], edges[-1], 400)
    std_x = shift + scale * x  # q·k in standardized units
    std_x = std_x[std_x != 0.0] if law.kind == "normal" and d == 1 else std_x  # log pole at 0
    f, kind = theory.dot_density(std_x, law.kind, d, law.m, law.rho)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        f_phys = f / c
    if not np.all(np.isfinite(f_phys)):
        return empty
    return {
        "dim": d,
        "edges": phys.tolist(),
        "density": density.tolist(),
        "x": (c * std_x).tolist(),
        "theory": f_phys.tolist(),
        "theory_kind": kind,
        "range": [float(phys[0]), float(phys[-1])],
    }
