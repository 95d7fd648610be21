"""What the two saturation studies share: score sources, Monte Carlo cells, checks and audit."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from sdpa_cli.framework.audit import selector_problem
from sdpa_cli.framework.common import canonical, finite
from sdpa_cli.framework.common import zscore as _z
from sdpa_cli.framework.result import Check, as_row
from sdpa_cli.numerics import theory
from sdpa_cli.numerics.sampling import PairLaw
from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.numerics.softmax import softmax
from sdpa_cli.spec.common import Documented
from sdpa_cli.studies.saturation import rule_theory as rt
from sdpa_cli.studies.saturation.additive import additive_score_var
from sdpa_cli.studies.saturation.saturation_rows import (
    CellHead,
    Freezing,
    RuleKey,
    ScaleKey,
    ScoreLaw,
)
from sdpa_cli.studies.saturation.score_draws import Cell, capped, clamp
from sdpa_cli.studies.saturation.spec import SaturationFields

# The attention picture is drawn for one (d, n) cell with at most this many positions.
PICTURE_MAX_KEYS = 64


# --- source 1: explicit scores ---------------------------------------------------------------


@dataclass(frozen=True)
class Multiplier:
    """One row of source 1: the factor the explicit scores are multiplied by (then capped)."""

    scale: float
    scaling: str | None = None  # rule label when the factor comes from dim + scalings
    formula: str | None = None
    cap: float | None = None  # softcap:C: C·tanh(scale·z/C)


def multipliers(spec: SaturationFields) -> list[Multiplier]:
    """Rules (at dim, or d-free rules without it; logn's n is the number of scores) or the
    plain multipliers `scales`."""
    if spec.uses_rules:
        d = spec.dim if spec.dim is not None else 1
        n = len(spec.scores or [])
        return [Multiplier(s.factor(d, n), s.label, s.formula, s.cap) for s in spec.scalings]
    return [Multiplier(float(c)) for c in spec.scale_list]


def explicit_input(z: np.ndarray, m: Multiplier) -> tuple[np.ndarray, float]:
    """(scores, scale) to hand to softmax for multiplier m: capped scores come pre-scaled."""
    if m.cap is not None:
        return capped(z, m.scale, m.cap), 1.0
    return z, clamp(m.scale)


def explicit_key(spec: SaturationFields, m: Multiplier) -> ScaleKey | RuleKey:
    """The row key of a source-1 row: scale, or scaling and dim when the rules are used."""
    if m.scaling is not None:
        return RuleKey(scaling=m.scaling, dim=spec.dim, scale=m.scale)
    return ScaleKey(scale=m.scale)


def explicit_softmax(spec: SaturationFields
                     ) -> Iterator[tuple[dict[str, Any], np.ndarray, float, np.ndarray]]:
    """Per multiplier of a source-1 spec: the fields every source-1 row starts with (key,
    temperature, scaled scores, weights, largest weight), then the scores and scale softmax
    was given and the weights it gave."""
    z = np.asarray(spec.scores, dtype=float)
    for m in multipliers(spec):
        zz, c = explicit_input(z, m)
        p = softmax(zz, c)
        yield ({"key": explicit_key(spec, m), "temperature": finite(1.0 / m.scale),
                # Python floats: inf, no warning
                "scores": [finite(float(c) * float(v)) for v in zz],
                "probs": p.tolist(), "max_prob": float(p.max())}, zz, c, p)


def vs_std_curves(spec: SaturationFields, rows: Sequence[Any],
                  columns: Callable[[int, list[Any]], dict[str, Any]]) -> list[dict[str, Any]]:
    """One curve per n over the score spread s for a figure's data: its n and s, then what
    `columns` takes from its n and rows (each study its own statistics)."""
    curves = []
    for n in spec.key_list:
        pts = [r for r in rows if r.keys == n]
        curves.append({"keys": n, "score_std": [r.score_std for r in pts], **columns(n, pts)})
    return curves


def curve_labels(spec: SaturationFields) -> list[tuple[str, str]]:
    """(row label, formula) of every curve over d: the rules, then the additive source."""
    out = [(s.label, s.formula) for s in spec.scalings]
    if spec.additive:
        out.append((f"additive:{spec.additive}", "vᵀtanh(W₁q + W₂k)"))
    return out


def vs_dim_curves(spec: SaturationFields, rows: Sequence[Any],
                  columns: Callable[[list[Any]], dict[str, Any]]) -> list[dict[str, Any]]:
    """One curve per (n, rule) over d_k for a figure's data: its n, rule, formula and d_k,
    then what `columns` takes from its rows (each study its own statistics)."""
    curves = []
    for n in spec.key_list:
        for label, formula in curve_labels(spec):
            pts = [r for r in rows if r.head.keys == n and r.head.scaling == label]
            curves.append({"keys": n, "scaling": label, "formula": formula,
                           "dims": [r.head.dim for r in pts], **columns(pts)})
    return curves


@dataclass(frozen=True)
class CellParts:
    """The column groups every source-2 row has, whatever its study puts between them."""

    head: CellHead
    freezing: Freezing
    scores: ScoreLaw


def additive_parts(spec: SaturationFields, law: PairLaw, d: int, n: int, cell: Cell
                   ) -> CellParts:
    """The additive score source's row, beside the rules' rows of the same (d, n)."""
    probe = cell.probes["additive"]
    t = probe.n
    var = probe.variance
    theory_var = additive_score_var(d) if law.kind == "normal" and law.m == 0 else None
    se = math.sqrt(max(0.0, probe.m4 / t - var * var) / t) if t > 1 else math.nan
    implied = finite(math.sqrt(theory_var if theory_var else var))
    head = CellHead(dim=d, keys=n, scaling=f"additive:{spec.additive}", factor=None,
                    trials=cell.trials, implied_score_std=implied, implied_self_score_mean=None)
    scores = ScoreLaw(
        score_var=finite(var), theory_score_var=finite(theory_var) if theory_var else None,
        score_var_se=finite(se),
        score_var_z=finite(_z(var, theory_var, se)) if theory_var else None,
        self_score_mean=None, self_score_mean_se=None, theory_self_score_mean=None,
        self_score_mean_z=None)
    return CellParts(head, Freezing.at(n, implied, False), scores)


# --- theory beside source-2 rows --------------------------------------------------------------


@dataclass(frozen=True)
class ScoreTheory:
    """The score law a rule implies at d: off-diagonal (independent pair) and self scores."""

    pair: theory.DotMoments | None  # raw q·k (or cos) of an independent pair, standardized
    self_pair: theory.DotMoments | None  # of a query with its own (correlated) key
    factor: float  # raw → softmax input


def score_theory(law: PairLaw, d: int, scaling: Scaling, unit: float, n: int | None = None
                 ) -> ScoreTheory:
    if scaling.cosine:
        pair = theory.cosine_moments(law.kind, d, law.m, 0.0)
        self_pair = theory.cosine_moments(law.kind, d, law.m, law.rho)
        return ScoreTheory(pair, self_pair, scaling.factor(d))
    if law.kind == "sphere":
        mom = theory.dot_moments("sphere", d)
        return ScoreTheory(mom, mom, scaling.factor(d))
    return ScoreTheory(theory.dot_moments(law.kind, d, law.m, 0.0),
                       theory.dot_moments(law.kind, d, law.m, law.rho),
                       scaling.factor(d, n) * unit)


def cosine_self_limit(law: PairLaw) -> float:
    """cos(q, k) of a query and its own key as d → ∞: (m² + ρ)/(1 + m²) (concentration)."""
    if law.kind == "sphere":
        return 0.0
    return (law.m * law.m + law.rho) / (1.0 + law.m * law.m)


# (implied score spread, implied self-score mean, the measured score law beside its theory)
Implied = tuple[float | None, float | None, ScoreLaw]


def score_fields(law: PairLaw, d: int, scaling: Scaling, unit: float, cell: Cell,
                 correlated: bool, n: int | None = None) -> Implied:
    """Implied spread of the scores, and the measured score law at two fixed positions."""
    if scaling.norm is not None or scaling.cap is not None:
        return rule_score_fields(law, d, scaling, unit, cell, correlated)
    th = score_theory(law, d, scaling, unit, n)
    c = th.factor
    off = cell.probes["offdiag_cos" if scaling.cosine else "offdiag"]
    diag = cell.probes["diag_cos" if scaling.cosine else "diag"]
    t = off.n
    var = off.variance
    implied_self = None
    if correlated:
        if th.self_pair is not None:
            implied_self = finite(c * th.self_pair.mean)
        elif scaling.cosine:
            implied_self = finite(c * cosine_self_limit(law))
    theory_var = var_se = var_z = theory_self = self_z = None
    if th.pair is not None:
        se = th.pair.variance_se(t)
        theory_var = finite(c * c * th.pair.variance)
        var_se = finite(c * c * se)
        var_z = finite(_z(var, th.pair.variance, se))
    if th.self_pair is not None:
        theory_self = finite(c * th.self_pair.mean)
        se_mean = math.sqrt(th.self_pair.variance / t)
        self_z = finite(_z(diag.mean, th.self_pair.mean, se_mean))
    scores = ScoreLaw(
        score_var=finite(c * c * var), theory_score_var=theory_var, score_var_se=var_se,
        score_var_z=var_z, self_score_mean=finite(c * diag.mean),
        self_score_mean_se=finite(abs(c) * math.sqrt(diag.variance / t)) if t > 1 else None,
        theory_self_score_mean=theory_self, self_score_mean_z=self_z)
    return (finite(c * math.sqrt(th.pair.variance)) if th.pair else None, implied_self,
            scores)


def rule_theory_moments(law: PairLaw, d: int, scaling: Scaling, unit: float, rho: float
                        ) -> tuple[float, float] | None:
    """(mean, variance) of a qknorm or softcap score under the law, when a closed form
    exists: qknorm for Gaussian (any mean, LayerNorm) or centred Gaussian / sphere vectors;
    softcap takes q·k·factor as Gaussian with its exact mean and variance (an approximation
    that becomes exact as d grows, so it is reported beside the measurement, not checked)."""
    if scaling.norm is not None:
        isotropic = law.kind == "sphere" or (law.kind == "normal" and
                                             (scaling.norm == "layer" or law.m == 0))
        if not isotropic or (law.kind == "sphere" and rho):
            return None
        return rt.qknorm_moments(d, scaling.norm, rho)
    assert scaling.cap is not None
    kind = "sphere" if law.kind == "sphere" else law.kind
    mom = theory.dot_moments(kind, d, law.m, rho) if kind != "sphere" else \
        theory.dot_moments("sphere", d)
    c = scaling.factor(d) * (1.0 if kind == "sphere" else unit)
    return rt.softcap_moments(abs(c) * math.sqrt(mom.variance), scaling.cap, c * mom.mean)


def rule_score_fields(law: PairLaw, d: int, scaling: Scaling, unit: float, cell: Cell,
                      correlated: bool) -> Implied:
    """score_fields for rules whose scores are not a multiple of q·k (qknorm, softcap): the
    final scores are probed, and z uses the measured fourth moment for the se."""
    off = cell.probes[f"{scaling.label}@offdiag"]
    diag = cell.probes[f"{scaling.label}@diag"]
    t = off.n
    pair = rule_theory_moments(law, d, scaling, unit, 0.0)
    self_pair = rule_theory_moments(law, d, scaling, unit, law.rho) if correlated else None
    exact = scaling.norm is not None
    var = off.variance
    se = math.sqrt(max(0.0, off.m4 / t - var * var) / t) if t > 1 else math.nan
    scores = ScoreLaw(
        score_var=finite(var), theory_score_var=finite(pair[1]) if pair else None,
        score_var_se=finite(se),
        score_var_z=finite(_z(var, pair[1], se)) if pair and exact else None,
        self_score_mean=finite(diag.mean),
        self_score_mean_se=finite(math.sqrt(diag.variance / t)) if t > 1 else None,
        theory_self_score_mean=finite(self_pair[0]) if self_pair else None,
        self_score_mean_z=finite(_z(diag.mean, self_pair[0], math.sqrt(diag.variance / t)))
        if self_pair and exact else None,
        theory_exact=exact)
    return (finite(math.sqrt(pair[1] if pair else var)),
            finite(self_pair[0]) if self_pair else None, scores)


def score_check(name: str, law: ScoreLaw, k: float) -> Check:
    """The score law at fixed positions against theory: |z| ≤ k for variance and mean."""
    z, mz = law.score_var_z, law.self_score_mean_z
    if law.theory_score_var is not None and not law.theory_exact:  # softcap's theory
        return Check(name, True, "softcap: theory takes q·k/√d as Gaussian, exact only as "
                                 "d → ∞ (reported beside the measurement, not checked)")
    if law.theory_score_var is None:
        return Check(name, True, "no closed form for this law under cosine scaling "
                                 "(reported only)")
    if z is None or (law.theory_self_score_mean is not None and mz is None):
        return Check(name, False, "measurement or theory not finite")
    parts = [f"off-diagonal score variance z = {z:+.2f}"]
    passed = abs(z) <= k
    if mz is not None:
        parts.append(f"self-score mean z = {mz:+.2f}")
        passed = passed and abs(mz) <= k
    return Check(name, passed, ", ".join(parts) + f" (pass: within ±{k:g})")


def gaussian_check(n: int, s_values: Sequence[float], cell: Cell, k: float) -> Check:
    """The standard normal draws behind every s of a cell have unit variance."""
    z = cell.probes["score"]
    t = z.n
    mom = theory.DotMoments(0.0, 1.0, 3.0)  # N(0, 1): variance 1, fourth moment 3
    se = mom.variance_se(t)
    zz = _z(z.variance, 1.0, se)
    zm = _z(z.mean, 0.0, math.sqrt(1.0 / t))
    return Check(
        f"n={n} scores", abs(zz) <= k and abs(zm) <= k,
        f"first score of each row: variance z = {zz:+.2f}, mean z = {zm:+.2f} (pass: within "
        f"±{k:g}); every s = {', '.join(f'{s:g}' for s in s_values)} scales these draws",
        fields=("score_stds",),
    )


def limit_max_prob(spec: SaturationFields, law: PairLaw, scaling: Scaling, n: int
                   ) -> float | None:
    """The d → ∞ limit of the mean largest weight under ÷d or cosine scaling (no mask).

    Both rules divide by something of order d, so by the law of large numbers every score
    converges: a query's own key to (μ² + ρσ²) (÷d) or (m² + ρ)/((1 + m²)τ) (cosine), the
    other keys to μ² or m²/((1 + m²)τ). Softmax sees only the gap g, so each row tends to
    weight e^g/(e^g + n − 1) on its own key and 1/(e^g + n − 1) on the others.
    """
    if spec.mask != "none" or not (scaling.cosine or (scaling.power == 1.0)):
        return None
    if law.kind == "sphere":
        gap = 0.0
    elif scaling.cosine:
        gap = law.rho / ((1.0 + law.m * law.m) * scaling.temperature)
    else:
        gap = spec.correlation * spec.std**2 / scaling.temperature
    # e^max(g,0)/(e^g + n − 1), written so that neither exponential can overflow.
    if gap >= 0:
        return 1.0 / (1.0 + (n - 1) * math.exp(-gap))
    return 1.0 / (math.exp(gap) + n - 1)


def iid_small_s(spec: SaturationFields, scaling: Scaling) -> bool:
    """Do the rows hold (nearly) iid centred scores, so that ln n − (n−1)s²/(2n) applies?"""
    centred = spec.distribution == "sphere" or (spec.mean == 0 and spec.correlation == 0)
    return centred and spec.mask == "none" and (not scaling.cosine or
                                               spec.distribution in ("normal", "sphere"))


# --- row keys, documented entries and the audit ---------------------------------------------


def plan_keys(spec: SaturationFields) -> list[dict[str, Any]]:
    """The key of every row the run will produce, without running it."""
    source = spec.score_source
    if source == "explicit":
        return [as_row(explicit_key(spec, m)) for m in multipliers(spec)]
    if source == "vectors":
        labels = [s.label for s in spec.scalings] + (
            [f"additive:{spec.additive}"] if spec.additive else [])
        return [{"dim": d, "keys": n, "scaling": label}
                for d in spec.dim_list for n in spec.key_list for label in labels]
    if source == "leading":
        return [{"keys": n, "scaling": s.label} for s in spec.scalings for n in spec.key_list]
    return [{"keys": n, "score_std": s} for n in spec.key_list for s in spec.score_stds or []]


def documented_problem(spec: SaturationFields, entry: Documented,
                       fields: Callable[[str], Sequence[str]]) -> str | None:
    return selector_problem(plan_keys(spec), canonical(entry), fields(spec.score_source))


# --- rows and checks shared by softmax-sweep and jacobian --------------------------------


def vector_parts(spec: Any, law: PairLaw, unit: float, d: int, n: int, scaling: Scaling,
                 cell: Cell) -> CellParts:
    """The column groups of one source-2 row; its study adds its statistics between them."""
    implied, implied_self, scores = score_fields(law, d, scaling, unit, cell,
                                                 spec.correlation != 0, n)
    head = CellHead(dim=d, keys=n, scaling=scaling.label, factor=finite(scaling.factor(d, n)),
                    trials=cell.trials, implied_score_std=implied,
                    implied_self_score_mean=implied_self)
    return CellParts(head, Freezing.at(n, implied, iid_small_s(spec, scaling)), scores)


def cell_checks(spec: SaturationFields, d: int, n: int, laws: Sequence[ScoreLaw],
                k: float) -> list[Check]:
    """One check of the score law per cell for the raw scores (every linear rule rescales
    the same draws, so their z is the same number) and one for the cosines."""
    out = []
    seen = set()
    for j, (scaling, law) in enumerate(zip(spec.scalings, laws, strict=True)):
        own = scaling.norm is not None or scaling.cap is not None
        kind = scaling.label if own else ("cosine" if scaling.cosine else "raw")
        if kind in seen:
            continue
        seen.add(kind)
        what = scaling.label if own else ("cos(q, k)" if scaling.cosine else "q·k")
        # a rule with a law of its own is about that rule; q·k and cos(q, k) are about the
        # distribution the draws come from
        out.append(replace(score_check(f"d={d} n={n} {what}", law, k),
                           fields=(f"scalings[{j}]",) if own else ("distribution", "dims")))
    return out
