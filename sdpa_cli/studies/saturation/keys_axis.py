"""The number of keys n as a sweep axis of random q, k: versus-n figure and slopes versus n."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from sdpa_cli.framework.common import finite
from sdpa_cli.framework.result import Check, Column, Figure, Table, as_row
from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.studies.saturation import rule_tables as rtab
from sdpa_cli.studies.saturation import score_rows as sat
from sdpa_cli.studies.saturation.rule_tables import headline
from sdpa_cli.studies.saturation.saturation_rows import KeySlopeRow
from sdpa_cli.studies.saturation.spec import SaturationFields

SLOPE_COLUMNS = rtab.slope_columns(Column("dim", "d", "int"), "n")
SWEEP_QUANTITIES = ("score_std", "self_score_mean", "max_prob", "entropy_ratio")
JACOBIAN_QUANTITIES = (*SWEEP_QUANTITIES, "mean_frobenius")
FIGURE_MAX_DIMS = 4  # one row of panels per d_k


def table_title(what: str, spec: SaturationFields) -> str:
    """The main table's title from the axes the sweep really has."""
    dims, keys = spec.dim_list, spec.key_list
    if len(dims) > 1 and len(keys) > 1:
        return f"{what} versus d_k and the number of keys n, by scaling rule"
    if len(keys) > 1:
        return f"{what} versus the number of keys n at d_k = {dims[0]}, by scaling rule"
    if len(dims) > 1:
        return f"{what} versus d_k, by scaling rule"
    return f"{what} at d_k = {dims[0]}, n = {keys[0]}, by scaling rule"


def _rules(spec: SaturationFields) -> list[tuple[str, str, Scaling | None]]:
    out: list[tuple[str, str, Scaling | None]] = [(s.label, s.formula, s)
                                                  for s in spec.scalings]
    if spec.additive:
        out.append((f"additive:{spec.additive}", "vᵀtanh(W₁q + W₂k)", None))
    return out


def _value(r: Mapping[str, Any], name: str) -> tuple[float | None, float | None,
                                                     float | None]:
    """(value, se, exact theory value) of a quantity in one row."""
    if name == "max_prob":
        return r["mean_max_prob"], r["mean_max_prob_se"], None
    if name == "entropy_ratio":
        h, se, ln_n = r["mean_entropy"], r["mean_entropy_se"], r["ln_n"]
        return (h / ln_n if h is not None else None, se / ln_n if se is not None else None,
                None)
    return headline(r, name)


def _theory(spec: SaturationFields, rule: Scaling | None, name: str,
            s: float | None) -> tuple[float | None, str]:
    """The n → ∞ slope at fixed d, and its basis (or why none is known)."""
    grows = rule is not None and rule.log_n is not None
    if name in ("score_std", "self_score_mean"):
        if grows:
            return None, ("S·ln n·√Var(q·k): local slope 1/ln n, no power law (the fit "
                          "through the exact values is checked)")
        return 0.0, "the score law does not depend on n"
    if grows:
        return None, "none known: logn's spread S·ln n·σ outgrows √(2 ln n), rows freeze"
    if spec.correlation != 0 or spec.mask != "none" or spec.mean != 0 or s is None:
        return None, "none known: the rows are not centred independent scores"
    # n iid scores of fixed spread s: once n > e^{s²/2} (s < √(2 ln n)) the rows unfreeze and
    # Σe^{s_i} ≈ n·e^{s²/2}: p_max ≈ e^{s√(2 ln n) − s²/2}/n, H ≈ ln n − s²/2, ‖J‖²_F ≈ Σp²
    # ≈ e^{s²}/n; the corrections fall like s/√(2 ln n), so the limits come slowly.
    onset = f"n > e^(s²/2) = {math.exp(min(s * s / 2, 700.0)):.3g} (s = {s:.3g})"
    slope = {"max_prob": -1.0, "entropy_ratio": 0.0, "mean_frobenius": -0.5}[name]
    form = {"max_prob": "p_max ≈ e^(s√(2 ln n) − s²/2)/n",
            "entropy_ratio": "H ≈ ln n − s²/2",
            "mean_frobenius": "‖J‖_F ≈ e^(s²/2)/√n"}[name]
    return slope, f"fixed s, n → ∞: {form}; approached slowly, once {onset}"


def slope_table(spec: SaturationFields, rows: Sequence[Mapping[str, Any]],
                quantities: Sequence[str], k: float) -> tuple[list[KeySlopeRow], list[Check]]:
    """Log-log slope of each headline quantity against n, per d and rule, through the same
    machinery as the slopes versus d (slopes.fit_slope); the check compares the
    same fit through exact theory values at the same n, where the theory is exact (the
    score spread); the n → ∞ slope is printed beside it with its basis."""
    out: list[KeySlopeRow] = []
    checks: list[Check] = []
    for d in spec.dim_list:
        for label, _, rule in _rules(spec):
            pts = sorted((r for r in rows if r["dim"] == d and r["scaling"] == label),
                         key=lambda r: r["keys"])
            for name in quantities:
                if name == "self_score_mean" and spec.correlation == 0:
                    continue
                measured = rtab.fit_with_theory([r["keys"] for r in pts],
                                                [_value(r, name) for r in pts], k)
                if measured is None:
                    continue
                fit, finite_th, agrees = measured
                asym, basis = _theory(spec, rule, name, pts[0].get("implied_score_std"))
                out.append(KeySlopeRow(
                    dim=d, scaling=label, quantity=name, slope=finite(fit.slope),
                    slope_se=finite(fit.se), method=fit.method, theory_slope=asym,
                    finite_n_theory_slope=finite(finite_th) if finite_th is not None else None,
                    agrees=agrees, theory_basis=basis))
                check = rtab.slope_vs_n_check(f"d={d} {label} {name}", measured, k, "theory")
                checks += [check] if check else []
    return out, checks


def vs_keys_figure(spec: SaturationFields, rows: Sequence[Mapping[str, Any]], *,
                   jacobian: bool) -> Figure:
    """Largest weight, entropy ÷ ln n and ‖J‖_F (jacobian) or the score spread (softmax-sweep)
    versus n, one line per rule, one row of panels per d_k."""
    panels = []
    for d in spec.dim_list[:FIGURE_MAX_DIMS]:
        curves = []
        for label, formula, _ in _rules(spec):
            pts = sorted((r for r in rows if r["dim"] == d and r["scaling"] == label),
                         key=lambda r: r["keys"])
            curve: dict[str, Any] = {
                "scaling": label, "formula": formula, "keys": [r["keys"] for r in pts],
                "max_prob": [r["mean_max_prob"] for r in pts],
                "max_prob_se": [r["mean_max_prob_se"] for r in pts],
                "entropy_ratio": [_value(r, "entropy_ratio")[0] for r in pts],
                "entropy_ratio_se": [_value(r, "entropy_ratio")[1] for r in pts],
                "score_std": [r["implied_score_std"] for r in pts]}
            if jacobian:
                curve["frobenius"] = [r["mean_frobenius"] for r in pts]
                curve["frobenius_se"] = [r["mean_frobenius_se"] for r in pts]
            curves.append(curve)
        panels.append({"dim": d, "curves": curves})
    keys = spec.key_list
    return Figure(
        "saturation_vs_keys", "rules.vs_keys",
        "Largest weight, entropy ÷ ln n and " + ("‖J‖_F" if jacobian else "score spread")
        + " versus the number of keys n",
        {"panels": panels, "keys": keys, "jacobian": jacobian, "trials": spec.trials,
         "freezing": {n: sat.freezing_std(n) for n in keys},
         "uniform_frobenius": {n: sat.uniform_frobenius(n) for n in keys},
         "se_k": 2.0, "left_out": max(0, len(spec.dim_list) - FIGURE_MAX_DIMS)})


def coordinate_checks(spec: SaturationFields, rows: Sequence[Mapping[str, Any]], *,
                      d_quantities: Sequence[str], d_columns: tuple[Column, ...],
                      jacobian: bool, se_tolerance: float
                      ) -> tuple[list[Table], list[Check], list[Figure]]:
    """The slope tables of a random-vector sweep, with their checks: versus d_k (≥ 3 values)
    and versus n (≥ 3 key counts); and the versus-n figure (≥ 2 key counts)."""
    tables: list[Table] = []
    checks: list[Check] = []
    figures: list[Figure] = []
    if len(spec.dim_list) >= 3:
        slopes, slope_checks = rtab.slope_table(spec, rows, d_quantities, se_tolerance)
        tables.append(Table("slopes", "Coordinate check: log-log slopes versus d_k",
                            d_columns, tuple(as_row(r) for r in slopes)))
        checks.extend(slope_checks)
    if len(spec.key_list) >= 3:
        by_n, n_checks = slope_table(spec, rows, JACOBIAN_QUANTITIES if jacobian
                                     else SWEEP_QUANTITIES, se_tolerance)
        tables.append(Table("slopes_vs_n", "Coordinate check: log-log slopes versus n",
                            SLOPE_COLUMNS, tuple(as_row(r) for r in by_n)))
        checks.extend(n_checks)
    if len(spec.key_list) >= 2:
        figures.append(vs_keys_figure(spec, rows, jacobian=jacobian))
    return tables, checks, figures
