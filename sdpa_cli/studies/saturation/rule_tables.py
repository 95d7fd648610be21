"""Issue-15 tables of the saturation studies: the exact leading-key family, slopes, rule lines."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from sdpa_cli.framework.common import finite
from sdpa_cli.framework.result import Check, Column, Figure, row_fields
from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.studies.saturation.additive import INIT as ADDITIVE_INIT
from sdpa_cli.studies.saturation.keys import leading_key
from sdpa_cli.studies.saturation.saturation_rows import LeadingRow, SlopeRow
from sdpa_cli.studies.saturation.slopes import Slope, fit_slope, theory_slope
from sdpa_cli.studies.saturation.spec import SaturationFields


def slope_columns(fixed: Column, over: str) -> tuple[Column, ...]:
    """The columns of a table of slopes versus `over` (d or n) at each `fixed` n or d."""
    return (fixed, Column("scaling", "scaling", "text"), Column("quantity", "quantity", "text"),
            Column("slope", f"slope vs {over}"), Column("slope_se", "se"),
            Column(f"finite_{over}_theory_slope", f"theory (these {over})"),
            Column("theory_slope", f"theory ({over} → ∞)"),
            Column("agrees", "within k·se", "text"))


# --- source 4: the leading-key family (exact) ----------------------------------------------

# The slope and leading-key tables of softmax-sweep and jacobian (same columns in both).
SLOPE_COLUMNS = slope_columns(Column("keys", "n", "int"), "d")
LEADING_COLUMNS = (
    Column("keys", "n", "int"),
    Column("scaling", "scaling", "text"),
    Column("gap", "score gap"),
    Column("max_prob", "max weight"),
    Column("entropy", "entropy"),
    Column("entropy_ratio", "entropy/ln n", "f2"),
    Column("frobenius", "‖J‖_F"),
)
LEADING_FIELDS = row_fields(LeadingRow)


def leading_rows(spec: SaturationFields) -> list[LeadingRow]:
    """softmax of (g, 0, …, 0) for every n and rule, exactly (keys.leading_key)."""
    assert spec.margin is not None
    d = spec.dim if spec.dim is not None else 1
    rows = []
    for rule in spec.scalings:
        lk = leading_key(spec.key_list, spec.margin, rule, d)
        for i, n in enumerate(spec.key_list):
            rows.append(LeadingRow(
                keys=n, scaling=rule.label, dim=spec.dim, margin=spec.margin,
                gap=finite(float(lk.gap[i])), max_prob=float(lk.max_prob[i]),
                entropy=float(lk.entropy[i]), entropy_ratio=float(lk.entropy_ratio[i]),
                frobenius=float(lk.frobenius[i]), ln_n=math.log(n),
            ))
    return rows


def leading_figure(spec: SaturationFields, rows: list[LeadingRow]) -> Figure:
    curves = []
    for rule in spec.scalings:
        pts = [r for r in rows if r.scaling == rule.label]
        curves.append({"scaling": rule.label, "formula": rule.formula,
                       "keys": [r.keys for r in pts], "max_prob": [r.max_prob for r in pts],
                       "entropy_ratio": [r.entropy_ratio for r in pts],
                       "frobenius": [r.frobenius for r in pts]})
    return Figure("leading_keys", "rules.leading_keys",
                  f"One key leading n − 1 tied keys by {spec.margin:g}: exact, versus n",
                  {"curves": curves, "margin": spec.margin, "dim": spec.dim})


LEADING_THEORY = (
    "Leading-key family: scores (g, 0, …, 0) with n − 1 ties, g = the rule's factor × margin. "
    "With a = ln(n−1) − g: largest weight = 1/(1 + e^a), entropy = softplus(a) + g·σ(a), "
    "‖J‖²_F = p₁²(1−p₁)² + (n−1)p₀²(1−p₀)² + 2(n−1)p₁²p₀² + (n−1)(n−2)p₀⁴, computed without "
    "cancellation (exact; no draws). At fixed g the leader fades once n ≫ e^g; logn:S makes "
    "g = S·ln n·margin, so for S·margin > 1 the largest weight tends to 1, at = 1 to ½.",
)


# --- coordinate-check slopes over d -------------------------------------------------------

SLOPE_FIELDS = row_fields(SlopeRow)


def headline(r: Mapping[str, Any], name: str
             ) -> tuple[float | None, float | None, float | None]:
    """(value, se, exact theory value) of a headline quantity in one source-2 row."""
    if name == "score_std":
        var, se, th = r["score_var"], r["score_var_se"], r["theory_score_var"]
        if not var or var <= 0:
            return None, None, None
        exact = th if r.get("score_var_z") is not None else None
        return (math.sqrt(var), se / (2 * math.sqrt(var)) if se else None,
                math.sqrt(exact) if exact else None)
    if name == "self_score_mean":
        th = r["theory_self_score_mean"] if r.get("self_score_mean_z") is not None else None
        return r["self_score_mean"], r.get("self_score_mean_se"), th
    if name == "one_minus_max":
        return 1.0 - r["mean_max_prob"], r["mean_max_prob_se"], None
    if name == "entropy_deficit":
        return r["ln_n"] - r["mean_entropy"], r["mean_entropy_se"], None
    return r.get(name), r.get(f"{name}_se"), None


Point = tuple[float | None, float | None, float | None]  # (value, se, exact theory value)


def fit_with_theory(x: list[float], points: Sequence[Point], k: float
                    ) -> tuple[Slope, float | None, bool | None] | None:
    """The log-log fit of the values against x (weighted when every point has an se), the
    same fit through the exact theory values when every point has one, and whether the two
    agree within k se; None when no slope can be fitted."""
    y = [v[0] if v[0] is not None else math.nan for v in points]
    se = [v[1] if v[1] is not None else math.nan for v in points]
    use_se = all(e and e > 0 and math.isfinite(e) for e in se)
    try:
        fit = fit_slope(x, y, se if use_se else None)
    except ValueError:
        return None
    finite_th = None
    if all(v[2] is not None and v[2] > 0 for v in points):
        th = [float(v[2]) for v in points]  # type: ignore[arg-type]
        # the same weights as the measured fit, so both slopes average alike
        th_se = [t * e / m for t, e, m in zip(th, se, y, strict=True)] if use_se else None
        finite_th = fit_slope(x, th, th_se).slope
    return fit, finite_th, (fit.agrees(finite_th, k) if finite_th is not None else None)


def slope_vs_n_check(name: str, measured: tuple[Slope, float | None, bool | None], k: float,
                     exact: str) -> Check | None:
    """The check of a slope versus n (fit_with_theory's `measured`) against the same fit
    through the `exact` values, named `name` (None where there are no exact values)."""
    fit, through_exact, agrees = measured
    if agrees is None:
        return None
    return Check(f"{name} slope vs n", bool(agrees),
                 f"slope {fit.slope:+.4f} ± {fit.se:.2g} vs {exact} {through_exact:+.4f} at "
                 f"these n; pass: within {k:g} se", fields=("keys",))


def slope_table(spec: SaturationFields, rows: Sequence[Mapping[str, Any]],
                quantities: Sequence[str], k: float) -> tuple[list[SlopeRow], list[Check]]:
    """Log-log slope of each headline quantity against d, per n and rule, with its se; the
    check compares the finite-d theory slope (the same fit through exact theory values at
    the same d) where the theory is exact, and reports the large-d slope beside it."""
    out: list[SlopeRow] = []
    checks: list[Check] = []
    rules: list[tuple[str, Scaling | None]] = [(r.label, r) for r in spec.scalings]
    if spec.additive:
        rules.append((f"additive:{spec.additive}", None))
    for n in spec.key_list:
        for label, rule in rules:
            pts = sorted((r for r in rows if r["keys"] == n and r["scaling"] == label),
                         key=lambda r: r["dim"])
            for name in quantities:
                if name == "self_score_mean" and spec.correlation == 0:
                    continue
                measured = fit_with_theory([r["dim"] for r in pts],
                                           [headline(r, name) for r in pts], k)
                if measured is None:
                    continue
                fit, finite_th, agrees = measured
                coupling = "aligned" if name == "self_score_mean" else "independent"
                quantity = {"self_score_mean": "score_std",
                            "mean_frobenius": "frobenius"}.get(name, name)
                # additive scores: Var(e) tends to a constant, so their law is d-free
                asym = theory_slope(rule, quantity, coupling) if rule is not None else 0.0
                if name not in ("score_std", "self_score_mean") and (
                        spec.correlation != 0 or spec.mask != "none" or spec.mean != 0):
                    asym = None  # the table's weight slopes assume centred independent rows
                out.append(SlopeRow(
                    keys=n, scaling=label, quantity=name, slope=finite(fit.slope),
                    slope_se=finite(fit.se), method=fit.method, theory_slope=asym,
                    finite_d_theory_slope=finite(finite_th) if finite_th is not None else None,
                    agrees=agrees))
                if agrees is not None:
                    checks.append(Check(  # a slope across the dims listed
                        f"n={n} {label} {name} slope", bool(agrees),
                        f"slope {fit.slope:+.4f} ± {fit.se:.2g} vs theory {finite_th:+.4f} at "
                        f"these d (large-d {asym:+g}); pass: within {k:g} se"
                        if asym is not None else
                        f"slope {fit.slope:+.4f} ± {fit.se:.2g} vs theory {finite_th:+.4f}",
                        fields=("dims",)))
    return out, checks


def rule_lines(spec: SaturationFields) -> list[str]:
    """Theory lines for the rules beyond ÷T·d^p and cosine that the spec uses."""
    lines = []
    if any(s.norm is not None for s in spec.scalings):
        lines.append("qknorm: q̂·k̂/√d with |q̂|² = d. RMSNorm gives √d·cos(q, k), Var = 1 for "
                     "centred isotropic q, k (cosine:τ has 1/(dτ²): √d·τ apart in std); "
                     "LayerNorm removes the coordinate mean, leaving a (d−1)-dim isotropic "
                     "law: Var = d/(d−1). Correlated Gaussian pairs: cos is the sample "
                     "correlation of d (or d−1) pairs, moments by ₂F₁ (Hotelling).")
    if any(s.cap is not None for s in spec.scalings):
        lines.append("softcap:C: C·tanh(s/C) of s = q·k/√d; theory treats s as Gaussian with "
                     "its exact mean and variance and integrates tanh² by quadrature (exact "
                     "for Gaussian s; q·k/√d is Gaussian only as d → ∞).")
    if any(s.log_n is not None for s in spec.scalings):
        lines.append("logn:S multiplies q·k by S·ln n (n = keys), so the score spread at n "
                     "keys is S·ln n·√Var(q·k): it grows with n as the largest of n scores "
                     "does (√(2 ln n)), which keeps the top weight from fading.")
    if spec.additive:
        lines.append(f"additive:{spec.additive}: e = vᵀtanh(W₁q + W₂k), {ADDITIVE_INIT}; "
                     "keys independent of the query. Given R = |q|² + |k|² each coordinate "
                     "of W₁q + W₂k is N(0, R/d), so Var(e) = E_R[E tanh²(√(R/d)Z)] (exact for "
                     "Gaussian q, k, any h), rising to E[tanh²(√2 Z)] ≈ 0.520 as d → ∞: "
                     "no 1/√d is needed. Within a row the scores share q: no closed form is "
                     "given for their covariance.")
    if any(s.power == 1.0 and s.temperature != 1.0 for s in spec.scalings):
        lines.append("μP (mup = 8/d, linear:C = C/d): score std C·σ²/√d for independent q, k "
                     "(8/d equals 1/√d at d = 64); for aligned q, k the score tends to C·ρσ².")
    return lines
