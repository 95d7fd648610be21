"""Slopes versus the number of keys n for n iid N(0, s²) scores (the Gaussian source), per s."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from sdpa_cli.framework.common import finite
from sdpa_cli.framework.result import Check, Column, Table, as_row, row_fields
from sdpa_cli.studies.saturation import rule_tables as rtab
from sdpa_cli.studies.saturation.keys import iid_softmax_moments, rem_participation, rem_threshold
from sdpa_cli.studies.saturation.saturation_rows import GaussSlopeRow
from sdpa_cli.studies.saturation.spec import SaturationFields

HEADERS = {"score_std": ("s", "g"), "quantity": ("quantity", "text"),
           "slope": ("slope vs n", "g"), "slope_se": ("se", "g"),
           "exact_slope": ("exact (these n)", "g"), "rem_slope": ("REM limit (these n)", "g"),
           "theory_slope": ("n → ∞", "g"), "agrees": ("within k·se", "text")}
# every printed field of the row, in its order (method and theory_basis: files only)
COLUMNS = tuple(Column(f, *HEADERS[f]) for f in row_fields(GaussSlopeRow) if f in HEADERS)
SWEEP_QUANTITIES = ("max_prob", "entropy_ratio", "participation")
JACOBIAN_QUANTITIES = ("max_prob", "entropy_ratio", "mean_frobenius")

# fixed s, n → ∞ (n ≫ e^{s²}): the rows unfreeze and Σe^{s g} ≈ n e^{s²/2}
LIMITS = {
    "max_prob": (-1.0, "p_max ≈ e^(s√(2 ln n) − s²/2)/n: local slope −1 + s/√(2 ln n) → −1"),
    "entropy_ratio": (0.0, "H ≈ ln n − s²/2, so H/ln n → 1"),
    "participation": (-1.0, "Σp² ≈ e^(s²)/n (annealed; needs n ≫ e^(2s²))"),
    "mean_frobenius": (-0.5, "‖J‖_F ≈ √Σp² ≈ e^(s²/2)/√n"),
}


def _point(r: Mapping[str, Any], name: str, exact: tuple[float, float] | None
           ) -> rtab.Point:
    """(value, se, exact value) of a quantity in one Gaussian-source row."""
    ln_n = math.log(r["keys"])
    if name == "max_prob":
        return r["mean_max_prob"], r["mean_max_prob_se"], None
    if name == "entropy_ratio":
        h, se = r["mean_entropy"], r["mean_entropy_se"]
        return (h / ln_n if h is not None else None, se / ln_n if se is not None else None,
                exact[1] / ln_n if exact is not None else None)
    if name == "participation":
        return (r["mean_participation"], r["mean_participation_se"],
                exact[0] if exact is not None else None)
    return r[name], r[f"{name}_se"], None


def _rem_slope(keys: list[int], s: float, pts: Sequence[rtab.Point], k: float
               ) -> float | None:
    """The same fit as the measured one (its weights) through the REM limit 1 − √(2 ln n)/s,
    when s is above the threshold at every n (the limit is 0 below it)."""
    if any(s <= rem_threshold(n) for n in keys):
        return None
    limit = [(p[0], p[1], rem_participation(n, s)) for n, p in zip(keys, pts, strict=True)]
    fitted = rtab.fit_with_theory([float(n) for n in keys], limit, k)
    return fitted[1] if fitted is not None else None


def _basis(name: str, s: float, keys: list[int], exact: bool) -> str:
    lo, hi = rem_threshold(keys[0]), rem_threshold(keys[-1])
    regime = ("frozen at every n (s > √(2 ln n))" if s > hi else
              "unfrozen at every n (s < √(2 ln n))" if s < lo else
              "crosses the threshold √(2 ln n) within the sweep")
    text = f"n → ∞ at fixed s: {LIMITS[name][1]}; here {regime}"
    if exact:
        text += ("; checked: the same fit through E[·] by 1-D quadrature (Laplace transform "
                 "of Z, numerics.keys.iid_softmax_moments), exact at these n")
    if name == "participation":
        text += ("; REM limit 1 − √(2 ln n)/s applies only as n → ∞ with s/√(2 ln n) fixed, "
                 "so its slope is printed, not checked" if s > hi else
                 "; REM limit not applicable (s below the threshold at some n)")
    return text


def slope_rows(keys: list[int], stds: list[float], rows: Sequence[Mapping[str, Any]],
               quantities: Sequence[str], k: float
               ) -> tuple[list[GaussSlopeRow], list[Check]]:
    """Log-log slopes against n per s, each checked against the same fit through the exact
    values where they are known (entropy ÷ ln n, Σp²) and printed with the n → ∞ slope."""
    out: list[GaussSlopeRow] = []
    checks: list[Check] = []
    need_exact = any(q in ("entropy_ratio", "participation") for q in quantities)
    for s in stds:
        pts_rows = sorted((r for r in rows if r["score_std"] == s), key=lambda r: r["keys"])
        ns = [int(r["keys"]) for r in pts_rows]
        exact = [iid_softmax_moments(n, s) for n in ns] if need_exact else [None] * len(ns)
        for name in quantities:
            pts = [_point(r, name, e) for r, e in zip(pts_rows, exact, strict=True)]
            measured = rtab.fit_with_theory([float(n) for n in ns], pts, k)
            if measured is None:
                continue
            fit, exact_slope, agrees = measured
            rem = _rem_slope(ns, s, pts, k) if name == "participation" else None
            out.append(GaussSlopeRow(
                score_std=s, quantity=name, slope=finite(fit.slope), slope_se=finite(fit.se),
                method=fit.method,
                exact_slope=finite(exact_slope) if exact_slope is not None else None,
                rem_slope=finite(rem) if rem is not None else None,
                theory_slope=LIMITS[name][0], agrees=agrees,
                theory_basis=_basis(name, s, ns, exact_slope is not None)))
            check = rtab.slope_vs_n_check(f"s={s:g} {name}", measured, k, "exact")
            checks += [check] if check else []
    return out, checks


def slope_tables(spec: SaturationFields, rows: Sequence[Mapping[str, Any]], *,
                 jacobian: bool) -> tuple[list[Table], list[Check]]:
    """`slopes_vs_n` for a Gaussian-source run with ≥ 3 key counts (else nothing)."""
    if len(spec.key_list) < 3:
        return [], []
    found, checks = slope_rows(spec.key_list, list(spec.score_stds or []), rows,
                               JACOBIAN_QUANTITIES if jacobian else SWEEP_QUANTITIES,
                               spec.se_tolerance)
    return [Table("slopes_vs_n", "Coordinate check: log-log slopes versus n, per score std s",
                  COLUMNS, tuple(as_row(r) for r in found))], checks
