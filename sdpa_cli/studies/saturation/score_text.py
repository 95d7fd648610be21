"""The plain-words expectations and exact theory lines of the two saturation studies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sdpa_cli.framework.common import assemble, row_lookup
from sdpa_cli.framework.context import RunContext
from sdpa_cli.framework.result import Check, Column, Figure, Result, Table
from sdpa_cli.studies.saturation import derived, score_findings
from sdpa_cli.studies.saturation.rule_tables import LEADING_THEORY, rule_lines
from sdpa_cli.studies.saturation.spec import BATCHES, SaturationFields


def expect_lines(spec: SaturationFields, *, jacobian: bool) -> tuple[str, ...]:
    """What theory predicts, in plain words (the exact forms are the theory lines, shown
    under --explain and in table.md)."""
    first = {
        "explicit": "Softmax turns scores into weights that sum to 1; multiplying the scores "
                    "by more pushes the weight onto the largest score.",
        "vectors": "Raw q·k spreads more as d_k grows (like √d_k), so softmax puts nearly all "
                   "the weight on one key; dividing by √d_k keeps the spread, and the "
                   "weights, as they were.",
        "gaussian": "With n random scores of spread s, the weights stay spread out while s is "
                    "small; past about √(2 ln n) they freeze onto a few keys, and onto one "
                    "only as s grows well beyond it.",
        "leading": "A key that leads n − 1 tied keys by a fixed margin fades as n grows, "
                   "unless the scores are multiplied by a factor that grows like ln n.",
    }[spec.score_source]
    lines = [first]
    if spec.score_source == "vectors" and len(spec.key_list) >= 2:
        lines.append("At a fixed spread, more keys share the weight: the largest weight fades "
                     "towards 1/n unless the spread grows with n (logn multiplies the scores "
                     "by S·ln n, which outgrows √(2 ln n) and freezes the rows instead).")
    if jacobian:
        lines.append("The gradient through softmax (its Jacobian) vanishes only towards "
                     "one-hot weights; towards uniform weights ‖J‖_F levels off at √(n−1)/n, "
                     "not zero, and it is largest in between.")
    return tuple(lines)


def theory_lines(spec: SaturationFields, *, jacobian: bool) -> tuple[str, ...]:
    source = spec.score_source
    if source == "leading":
        return LEADING_THEORY
    lines = []
    if jacobian:
        lines.append("J = diag(p) − ppᵀ is symmetric positive semi-definite with rows summing "
                     "to 0; trace = 1 − Σp²; ‖J‖_F is computed in O(n) per row without 1 − p "
                     "cancellation, λ_max from the secular equation.")
    if source == "explicit":
        lines.append("softmax(c·z)_i = e^{c·z_i}/Σ_j e^{c·z_j}; entropy in nats with 0·log 0 = "
                     "0; effective keys = e^entropy (n for uniform weights, 1 for one-hot).")
        if jacobian:
            lines.append("Near one-hot with runner-up weight ε: J ≈ ε[[1, −1], [−1, 1]] on "
                         "those two keys, so max|J| ≈ ε, ‖J‖_F ≈ 2ε and λ_max ≈ 2ε.")
        return tuple(lines)
    lines.append("n iid N(0, s²) scores: E[entropy] = ln n − (n−1)s²/(2n) + O(s⁴) for small s "
                 "(≈ ln n − s²/2; entropy_small_s, given for s ≤ s_c/2); weights freeze "
                 "towards one-hot once s passes s_c = √(2 ln n), where the largest score "
                 "pulls away from the rest.")
    if jacobian:
        lines.append("‖J‖_F → √(n−1)/n as s → 0 (uniform weights: small for large n, not "
                     "zero at fixed n) and → 0 as s → ∞ (one-hot): it peaks between and falls "
                     "on both sides, vanishing only on the one-hot side.")
    if source == "vectors":
        lines.append("Each rule's implied score spread at d is factor·√Var(q·k) for an "
                     "independent query-key pair, Var(q·k) = d·[(σ²+μ²)² − μ⁴] (exact moments "
                     "for every law; cosine: √Var(cos)/τ = 1/(τ√d) for isotropic laws).")
        if spec.correlation != 0:
            lines.append("A query and its own key (corr ρ per component) have mean score "
                         "factor·d·(μ² + ρσ²): it grows like d while the off-diagonal spread "
                         "grows like √d, so ÷d (not ÷√d) keeps the pattern fixed as d grows.")
        if any(s.cosine or s.power == 1.0 for s in spec.scalings) and spec.mask == "none":
            lines.append("Under ÷d and cosine scaling every score converges as d → ∞, the own "
                         "key's to a gap g above the others (g = ρσ² for ÷d, ρ/((1+m²)τ) for "
                         "cosine): the mean largest weight tends to e^max(g,0)/(e^g + n − 1) "
                         "(limit_max_prob; 1/n when g = 0).")
        lines.append("Rows of one sequence share queries and keys, so each trial contributes "
                     "its average over the n query rows and se = sd(trial averages)/√trials; "
                     "the score law is checked at two fixed positions per trial (exact se of "
                     "a sample variance, exact fourth moment).")
        if len(spec.key_list) >= 2:
            lines.append("Versus n at fixed d (slopes_vs_n, for ≥ 3 key counts): the score "
                         "law of every rule but logn does not depend on n (slope 0, checked "
                         "against the fit through the exact values); logn's spread S·ln n·σ "
                         "has local slope 1/ln n (no power law; that fit is checked too). For "
                         "n iid scores of fixed spread s, once n > e^(s²/2): largest weight ≈ "
                         "e^(s√(2 ln n) − s²/2)/n (slope −1 + s/√(2 ln n) → −1), entropy ≈ "
                         "ln n − s²/2 (entropy ÷ ln n → slope 0), ‖J‖_F ≈ e^(s²/2)/√n (→ −½); "
                         "these limits come slowly and are printed, not checked.")
        lines.extend(rule_lines(spec))
    else:
        lines.append("Each trial is one row of n iid scores: se = sd/√trials. Every s reuses "
                     "the same standard normal draws (common random numbers).")
        if not jacobian:
            lines.append("Random-energy model: above s_c = √(2 ln n) the largest weights of n "
                         "iid N(0, s²) scores condense; as n → ∞ E[Σp²] → 1 − s_c/s there "
                         "(Poisson–Dirichlet with parameter s_c/s) and → 0 below. "
                         "rem_participation is that limit; rem_gap = measured − limit shows "
                         "the slow (≈ ln ln n/√ln n) finite-n correction.")
    if jacobian:
        lines.append(f"median ‖J‖_F: mean of the medians of {BATCHES} fixed batches of trials; "
                     f"se = sd(batch medians)/√{BATCHES} (batch means).")
    return tuple(lines)


def assembled(spec: SaturationFields, ctx: RunContext, *, study: str, table: str, title: str,
              columns: tuple[Column, ...], rows: Sequence[Mapping[str, Any]],
              checks: list[Check], notes: list[str], figures: list[Figure],
              tables: list[Table], jacobian: bool, peaks: Sequence[Mapping[str, Any]] = ()
              ) -> Result:
    """A saturation study's Result: its table, its theory and expectations, the sentences
    after the table, and its columns' derivations (softmax-sweep's or jacobian's)."""
    return assemble(spec, study=study, title=title,
                    table=Table(table, title, columns, tuple(rows)), checks=checks,
                    lookup=row_lookup(rows),
                    theory=theory_lines(spec, jacobian=jacobian),
                    expect=expect_lines(spec, jacobian=jacobian),
                    findings=score_findings.findings(spec.score_source, rows, jacobian=jacobian,
                                                     peaks=peaks),
                    notes=notes, figures=figures if ctx.figures else [], tables=tables,
                    derived=derived.JACOBIAN if jacobian else derived.SWEEP)
