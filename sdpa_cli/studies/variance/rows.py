"""The variance study's rows: one per (dimension, scaling rule), and the table's columns."""

from __future__ import annotations

from dataclasses import dataclass

from sdpa_cli.framework.result import Column, internal, row_fields

COLUMNS = (
    *Column.rule_keys("d"),
    Column("mean", "mean", priority=3),
    Column("variance", "variance", priority=0),
    Column("theory_variance", "theory", priority=0),
    Column("se", "se", priority=1),
    Column("z", "z", "f2", priority=0),
    Column("ratio", "var/theory", priority=2),
    Column("kurtosis", "kurtosis", priority=4),
    Column("theory_kurtosis", "theory kurt.", priority=4),
)


@dataclass(frozen=True)
class VarianceRow:
    """One (dimension, scaling rule) row; its fields are the CSV columns and JSON keys."""

    dim: int
    scaling: str
    factor: float | None  # the rule's own 1/(T·d^p), without σ²
    pairs: int
    mean: float | None
    mean_se: float | None
    variance: float | None
    std: float | None
    theory_mean: float | None
    theory_variance: float | None
    theory_std: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    z: float | None
    mean_z: float | None
    ratio: float | None
    min: float | None
    max: float | None
    kurtosis: float | None
    theory_kurtosis: float | None
    p025: float | None
    median: float | None
    p975: float | None
    se_basis: str
    note: str
    closed_form: bool = internal(True)  # False: nothing to check against (reported only)


FIELDS = row_fields(VarianceRow)


HALF_COLUMNS = (
    *Column.rule_keys("d"),
    Column("largest_dot", "max |q·k|", priority=1),
    Column("overflow_after", "inf: factor after", priority=0),
    Column("overflow_split", "inf: split", priority=0),
    Column("error_after", "max rel. err after", "e", priority=2),
    Column("error_split", "max rel. err split", "e", priority=2),
)


@dataclass(frozen=True)
class HalfRow:
    """One (dimension, rule) in float16: q·k formed, then times the rule's factor (after),
    against q and k each times √factor first (split, 001's balanced scaling); the share of
    pairs that overflow to ±inf, and the largest relative error of the finite scores
    against float64."""

    dim: int
    scaling: str
    pairs: int
    largest_dot: float | None  # float64 max |q·k| over the pairs (float16 holds 65504)
    overflow_after: float
    overflow_split: float
    error_after: float | None  # None: no pair came out finite
    error_split: float | None


HALF_FIELDS = row_fields(HalfRow)
