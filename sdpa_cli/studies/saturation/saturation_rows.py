"""The typed rows of softmax-sweep and jacobian: the column groups they share, one row per kind."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from sdpa_cli.framework.common import finite
from sdpa_cli.framework.result import PART, internal, row_fields
from sdpa_cli.studies.saturation import score_rows as sat
from sdpa_cli.studies.saturation.score_draws import Measured

# --- column groups ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ScaleKey:
    """Source-1 row key for a plain multiplier of the explicit scores."""

    scale: float


@dataclass(frozen=True)
class RuleKey:
    """Source-1 row key when the factor comes from a rule at `dim` (None: a d-free rule)."""

    scaling: str
    dim: int | None
    scale: float


@dataclass(frozen=True)
class CellHead:
    """Which source-2 cell and rule a row measures, and the score spread the rule implies."""

    dim: int
    keys: int
    scaling: str
    factor: float | None  # the rule's own 1/(T·d^p) (or 1/τ for cosine), as in variance
    trials: int
    implied_score_std: float | None
    implied_self_score_mean: float | None


@dataclass(frozen=True)
class Freezing:
    """Where a score spread s stands against the freezing point s_c = √(2 ln n)."""

    ln_n: float
    freezing_std: float
    s_over_freezing: float | None
    entropy_small_s: float | None  # second-order expansion, only where s ≤ s_c/2 and iid

    @classmethod
    def at(cls, n: int, s: float | None, small_s_applies: bool) -> Freezing:
        sc = sat.freezing_std(n)
        return cls(
            ln_n=math.log(n), freezing_std=sc,
            s_over_freezing=finite(s / sc) if s is not None else None,
            entropy_small_s=finite(sat.entropy_small_s(n, s))
            if (s is not None and small_s_applies and s <= sc / 2) else None,
        )


@dataclass(frozen=True)
class ScoreLaw:
    """The measured score law at two fixed positions, beside its theory where one exists."""

    score_var: float | None
    theory_score_var: float | None
    score_var_se: float | None
    score_var_z: float | None
    self_score_mean: float | None
    self_score_mean_se: float | None
    theory_self_score_mean: float | None
    self_score_mean_z: float | None
    # False: the theory is an approximation (softcap takes q·k/√d as Gaussian), reported
    # beside the measurement and not checked
    theory_exact: bool = internal(True)


@dataclass(frozen=True)
class SweepStats:
    """softmax-sweep's per-trial statistics: mean over trials and its se."""

    mean_max_prob: float | None
    mean_max_prob_se: float | None
    mean_entropy: float | None
    mean_entropy_se: float | None
    saturated_fraction: float | None
    saturated_fraction_se: float | None
    mean_participation: float | None
    mean_participation_se: float | None


@dataclass(frozen=True)
class JacobianStats:
    """jacobian's per-trial statistics: mean over trials and its se."""

    mean_frobenius: float | None
    mean_frobenius_se: float | None
    mean_max_abs_jacobian: float | None
    mean_max_abs_jacobian_se: float | None
    mean_entropy: float | None
    mean_entropy_se: float | None
    mean_max_prob: float | None
    mean_max_prob_se: float | None


Stats = TypeVar("Stats", SweepStats, JacobianStats)

# row field → Measured.stats key, in the stats group's order
SWEEP_STATS = {"mean_max_prob": "max_prob", "mean_entropy": "entropy",
               "saturated_fraction": "saturated", "mean_participation": "participation"}
JACOBIAN_STATS = {"mean_frobenius": "frobenius", "mean_max_abs_jacobian": "max_abs",
                  "mean_entropy": "entropy", "mean_max_prob": "max_prob"}


def stats_of(kind: type[Stats], measured: Measured, names: Mapping[str, str]) -> Stats:
    """The stats group `kind` from a cell's measurements (names: row field → stat)."""
    values: dict[str, float | None] = {}
    for name, stat in names.items():
        mean, se = measured.stats[stat]
        values[name] = finite(mean)
        values[f"{name}_se"] = finite(se)
    return kind(**values)


# --- softmax-sweep rows ------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepExplicitRow:
    key: ScaleKey | RuleKey = field(metadata=PART)
    temperature: float | None
    scores: list[float | None]  # the softmax input: multiplier × score (or capped)
    probs: list[float]
    max_prob: float
    entropy: float
    effective_keys: float  # e^entropy


@dataclass(frozen=True)
class SweepVectorRow:
    """One (d, n, rule) row of random sequences, or the additive score source's row."""

    head: CellHead = field(metadata=PART)
    stats: SweepStats = field(metadata=PART)
    threshold: float | None
    limit_max_prob: float | None  # d → ∞ limit of the largest weight (÷d, cosine; no mask)
    freezing: Freezing = field(metadata=PART)
    scores: ScoreLaw = field(metadata=PART)
    # the softmax inputs as the rows see them: the largest |input| over every score of every
    # trial, and the variance of a row's inputs (its own key's included), mean over trials
    max_abs_score: float | None = None
    row_score_var: float | None = None
    row_score_var_se: float | None = None


@dataclass(frozen=True)
class SweepGaussianRow:
    keys: int
    score_std: float
    trials: int
    stats: SweepStats = field(metadata=PART)
    threshold: float | None
    freezing: Freezing = field(metadata=PART)
    rem_participation: float | None  # the random-energy model's large-n E[Σp²]
    rem_gap: float | None  # measured − that limit: the finite-n correction


# --- jacobian rows ------------------------------------------------------------------------------


@dataclass(frozen=True)
class JacobianExplicitRow:
    key: ScaleKey | RuleKey = field(metadata=PART)
    temperature: float | None
    scores: list[float | None]
    probs: list[float]
    max_prob: float
    max_abs_jacobian: float
    frobenius: float
    spectral: float
    trace: float
    entropy: float


@dataclass(frozen=True)
class JacobianVectorRow:
    head: CellHead = field(metadata=PART)
    stats: JacobianStats = field(metadata=PART)
    freezing: Freezing = field(metadata=PART)
    scores: ScoreLaw = field(metadata=PART)
    median_frobenius: float | None  # mean of batch medians
    median_frobenius_se: float | None
    frobenius_uniform: float  # √(n−1)/n: ‖J‖_F at uniform weights


@dataclass(frozen=True)
class JacobianGaussianRow:
    keys: int
    score_std: float
    trials: int
    stats: JacobianStats = field(metadata=PART)
    freezing: Freezing = field(metadata=PART)
    median_frobenius: float | None
    median_frobenius_se: float | None
    frobenius_uniform: float


@dataclass(frozen=True)
class PeakRow:
    """Where the mean ‖J‖_F of n iid N(0, s²) scores peaks in s."""

    keys: int
    s_star: float
    s_star_se: float | None
    grid_s_star: float  # the parabola through the grid maximum, before refinement
    sqrt_2_ln_n: float
    ratio: float
    peak_mean_frobenius: float
    fitted_peak: float
    frobenius_uniform: float
    at_edge: bool


# --- rows of both studies (rule_tables) ----------------------------------------------------------


@dataclass(frozen=True)
class LeadingRow:
    """softmax of (g, 0, …, 0): one key leading n − 1 ties (exact)."""

    keys: int
    scaling: str
    dim: int | None
    margin: float
    gap: float | None
    max_prob: float
    entropy: float
    entropy_ratio: float
    frobenius: float
    ln_n: float


@dataclass(frozen=True)
class SlopeRow:
    """Log-log slope of one headline quantity against d, per n and rule."""

    keys: int
    scaling: str
    quantity: str
    slope: float | None
    slope_se: float | None
    method: str
    theory_slope: float | None  # d → ∞
    finite_d_theory_slope: float | None  # the same fit through exact theory values
    agrees: bool | None


@dataclass(frozen=True)
class KeySlopeRow:
    """Log-log slope of one headline quantity against the number of keys n, per d and rule."""

    dim: int
    scaling: str
    quantity: str
    slope: float | None
    slope_se: float | None
    method: str
    theory_slope: float | None  # n → ∞ at fixed d, where known
    finite_n_theory_slope: float | None  # the same fit through exact theory values
    agrees: bool | None
    theory_basis: str  # where the n → ∞ slope comes from, or why none is known


SWEEP_FIELDS = {
    "leading": row_fields(LeadingRow), "explicit": row_fields(SweepExplicitRow),
    "vectors": row_fields(SweepVectorRow), "gaussian": row_fields(SweepGaussianRow),
}
JACOBIAN_FIELDS = {
    "leading": row_fields(LeadingRow), "explicit": row_fields(JacobianExplicitRow),
    "vectors": row_fields(JacobianVectorRow), "gaussian": row_fields(JacobianGaussianRow),
}


@dataclass(frozen=True)
class GaussSlopeRow:
    """Log-log slope against n of one headline quantity of n iid N(0, s²) scores, per s."""

    score_std: float
    quantity: str
    slope: float | None
    slope_se: float | None
    method: str
    exact_slope: float | None  # the same fit through exact values at the same n
    rem_slope: float | None  # the same fit through the REM limit 1 − √(2 ln n)/s, if frozen
    theory_slope: float | None  # fixed s, n → ∞
    agrees: bool | None  # exact_slope within k se of the fit
    theory_basis: str


# The row types each study's tables hold (its declaration names them).
SWEEP_ROWS = (SweepExplicitRow, SweepVectorRow, SweepGaussianRow, LeadingRow, SlopeRow,
              KeySlopeRow, GaussSlopeRow)
JACOBIAN_ROWS = (JacobianExplicitRow, JacobianVectorRow, JacobianGaussianRow, PeakRow,
                 LeadingRow, SlopeRow, KeySlopeRow, GaussSlopeRow)
