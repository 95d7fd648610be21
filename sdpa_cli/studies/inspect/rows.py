"""Row types of the inspect study: one per (weights, n, layer, head, rule), one per layer."""

from __future__ import annotations

from dataclasses import dataclass

from sdpa_cli.framework.result import Column, row_fields


@dataclass(frozen=True)
class HeadRow:
    """One query head under one rule. The field names are a contract (issue 21)."""

    weights: str  # trained, or init (the family's initialisation)
    seq_len: int  # n
    layer: int  # 0-based
    head: int  # 0-based query head
    scaling: str  # model (the model's own rule) or the rule applied in its place
    score_std: float  # population std of the unmasked scores after the rule, all sequences
    score_std_raw: float  # the same for q·k before any scaling
    max_weight: float  # mean over query rows of the largest weight
    entropy_ratio: float | None  # mean over rows of H ÷ ln(keys seen); one-key rows left out
    frozen_share: float  # rows with ‖diag(p) − ppᵀ‖_F < 1e-3
    first_token_share: float  # mean weight on position 0
    score_mean: float  # mean of the unmasked scores after the rule
    jacobian_mean: float  # mean over rows of ‖diag(p) − ppᵀ‖_F


@dataclass(frozen=True)
class LayerRow:
    """Medians and ranges over the heads of one layer, for the terminal."""

    weights: str
    seq_len: int
    layer: int
    scaling: str
    heads: int
    score_std_median: float
    score_std_min: float
    score_std_max: float
    score_std_raw_median: float
    max_weight_median: float
    entropy_ratio_median: float | None
    frozen_share_median: float
    saturated: int  # heads with frozen_share > ½
    first_token_median: float


FIELDS = row_fields(HeadRow)

HEAD_COLUMNS = tuple(Column(f, f, "text" if f in ("weights", "scaling") else
                            "int" if f in ("seq_len", "layer", "head") else
                            "pct" if f.endswith("_share") else "g")
                     for f in FIELDS)
LAYER_COLUMNS = (
    Column("weights", "weights", "text", priority=1),
    Column("seq_len", "n", "int", priority=0),
    Column("layer", "layer", "int", priority=0),
    Column("scaling", "rule", "text", priority=0),
    Column("score_std_median", "sd med", "f2", priority=0),
    Column("score_std_min", "sd min", "f2", priority=1),
    Column("score_std_max", "sd max", "f2", priority=1),
    Column("score_std_raw_median", "raw sd", "f2", priority=2),
    Column("max_weight_median", "max w", "f3", priority=0),
    Column("entropy_ratio_median", "H/ln n", "f3", priority=2),
    Column("frozen_share_median", "frozen", "f3", priority=0),
    Column("saturated", "sat.", "int", priority=1),
    Column("first_token_median", "first", "f3", priority=2),
)
