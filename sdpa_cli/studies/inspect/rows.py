"""Row types of the inspect study: one per (weights, n, layer, head, rule), one per layer."""

from __future__ import annotations

from dataclasses import dataclass

from sdpa_cli.framework.result import Column, row_fields


@dataclass(frozen=True)
class HeadRow:
    """One query head under one rule. The field names are a contract."""

    weights: str  # trained, or init (the family's initialisation)
    seq_len: int  # n
    layer: int  # 0-based
    head: int  # 0-based query head
    scaling: str  # model (the model's own rule) or the rule applied in its place;
    # pre-norm:RULE for a QK-norm model's q and k before the norm
    rule: str  # that rule as applied: the model's own by name ("QK-norm, then ÷√256"), or ÷√64
    score_std: float  # population std of the unmasked scores after the rule, all sequences
    score_std_raw: float  # the same for q·k before any scaling
    max_weight: float  # mean over query rows of the largest weight
    entropy_ratio: float | None  # mean over rows of H ÷ ln(keys seen); one-key rows left out
    frozen_share: float  # rows with ‖diag(p) − ppᵀ‖_F < 1e-3; one-key rows left out
    frozen_share_low: float  # the same with the bar at 1e-4 (the fair range's strict end)
    frozen_share_high: float  # and at 1e-2 (its loose end, still 9× below a uniform row's)
    first_token_share: float  # mean weight on position 0 over the rows that see it (Gu's α_0)
    score_mean: float  # mean of the unmasked scores after the rule
    jacobian_mean: float  # mean over rows of ‖diag(p) − ppᵀ‖_F
    sink_other: float  # the largest such mean on one later position (seen by ≥ half the rows)
    prev_token: float  # TransformerLens's previous-token score: weight on key i − 1 ÷ rows
    induction: float | None  # its induction score on repeated random tokens (None: not run)
    head_type: str  # sink, sink-later, previous-token, induction (joined by +), or other
    qk_spectral: float | None  # ‖W_Q W_Kᵀ‖₂/√d_k, norm gain and biases folded in (offset 0)
    score_max: float  # the largest |score| measured under this rule
    logit_bound: float | None  # the largest |score| the weights allow under this rule
    entropy_bound: float | None  # the entropy_ratio floor that bound implies (weights only)
    # What the softmax sees: a row's scores up to a constant. Medians over the rows that see
    # two keys or more (text sequences), of each row's population std over the keys it sees:
    score_std_within_raw: float | None  # of q·k (after any QK-norm, before the scale)
    score_std_within: float | None  # of the scores after the rule
    between_share: float | None  # of q·k's pooled variance, the part between rows' means
    top_gap: float | None  # median over those rows of the two largest scores' gap (rule)
    q_norm: float  # RMS over positions of ‖q‖ (the vectors this row's q·k dots)
    k_norm: float  # and of ‖k‖: q·k = ‖q‖ ‖k‖ cos θ
    cos_std: float  # std of cos θ over every visible (query, key) pair
    # Sinks as Gu et al. 2024 measure them: α_0 (first_token_share) per text sequence
    sink_rate: float  # share of sequences where α_0 > 0.3 (thresholded, then averaged)
    first_token_std: float  # std of α_0 across sequences
    sink_value_norm: float | None  # mean ‖v‖ at position 0 (the value the sink hands on)
    value_norm: float | None  # mean ‖v‖ at the later positions, for comparison


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
    sinks: int  # heads whose mean weight on the first token exceeds 0.3 (Gu et al. 2024)
    score_std_within_raw_median: float | None  # what the softmax sees, beside the pooled


@dataclass(frozen=True)
class ResidualRow:
    """One layer's largest residual activation (Sun et al. 2024's massive activations): the
    residual stream after the layer, text sequences; a decoder's last layer is after its
    final norm."""

    weights: str
    seq_len: int
    layer: int
    largest: float  # max |activation|
    median_abs: float  # median |activation|, for scale
    sequence: int  # where the largest sits: sequence, position, channel, and its token
    position: int
    channel: int
    token: str


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
    Column("score_std_within_raw_median", "row sd", "f2", priority=2),
    Column("max_weight_median", "max w", "f3", priority=0),
    Column("entropy_ratio_median", "H/ln n", "f3", priority=2),
    Column("frozen_share_median", "frozen", "f3", priority=0),
    Column("saturated", "sat.", "int", priority=1),
    Column("first_token_median", "first", "f3", priority=2),
    Column("sinks", "sinks", "int", priority=1),
)


@dataclass(frozen=True)
class SummaryRow:
    """One (weights, n, rule) over every head: what the terminal shows."""

    weights: str
    seq_len: int
    scaling: str
    heads: int
    saturated: int  # frozen share > ½
    sinks: int  # first token > 0.3
    sinks_later: int  # a later position > 0.3
    previous_token: int  # head types (a head may be of several)
    induction: int
    score_std_raw_median: float
    entropy_ratio_median: float | None
    entropy_bound_median: float | None
    score_std_within_raw_median: float | None  # within rows: what the softmax sees
    sink_rate: float  # Gu et al.'s: heads with α_0 > 0.3 per sequence, then the mean


SUMMARY_COLUMNS = (
    Column("weights", "weights", "text", priority=1),
    Column("seq_len", "n", "int", priority=0),
    Column("scaling", "rule", "text", priority=0),
    Column("heads", "heads", "int", priority=1),
    Column("saturated", "sat.", "int", priority=0),
    Column("sinks", "sink", "int", priority=0),
    Column("sinks_later", "later", "int", priority=1),
    Column("previous_token", "prev", "int", priority=0),
    Column("induction", "ind.", "int", priority=0),
    Column("score_std_raw_median", "raw sd", "f2", priority=0),
    Column("score_std_within_raw_median", "row sd", "f2", priority=1),
    Column("sink_rate", "sink rate", "f3", priority=1),
    Column("entropy_ratio_median", "H/ln n", "f3", priority=1),
    Column("entropy_bound_median", "floor", "f3", priority=1),
)

RESIDUAL_COLUMNS = (
    Column("weights", "weights", "text"),
    Column("seq_len", "n", "int"),
    Column("layer", "layer", "int"),
    Column("largest", "largest |h|", "g"),
    Column("median_abs", "median |h|", "g"),
    Column("sequence", "sequence", "int"),
    Column("position", "position", "int"),
    Column("channel", "channel", "int"),
    Column("token", "token", "text"),
)


@dataclass(frozen=True)
class InterventionRow:
    """The model's next-token loss with its attention scale changed (or unchanged)."""

    layer: int | str  # the one layer changed; "all" (every layer), or "none" (as trained)
    factor: float | None  # the multiplier on that scale (unscaling: 1/scale); None: per layer
    loss: float  # mean next-token cross-entropy (nats) over the text's predicted positions
    loss_increase: float  # loss − the unchanged model's loss (nats)
    perplexity_ratio: float  # exp(loss_increase): the perplexity against the unchanged one's
    kl: float  # mean KL(unchanged ‖ changed) of the next-token distributions (nats)


INTERVENTION_COLUMNS = (
    Column("layer", "layer", "text", priority=0),
    Column("factor", "× scale", "g", priority=0),
    Column("loss", "loss", "f3", priority=0),
    Column("loss_increase", "Δloss", "f3", priority=0),
    Column("perplexity_ratio", "ppl ×", "g", priority=1),
    Column("kl", "KL", "g", priority=0),
)
