"""The depth study's rows: one per block of a stack, and one summary per stack."""

from __future__ import annotations

from dataclasses import dataclass, field

from sdpa_cli.framework.gradrows import WeightGrads
from sdpa_cli.framework.result import PART, row_fields


@dataclass(frozen=True)
class DepthRow:
    """One (dim, scaling, norm, layers, layer) row: block `layer` (0 = nearest the input) of
    a stack of `layers` blocks. grad_* are the Frobenius norms of that block's weight
    gradients, one per trial, summarised."""

    dim: int
    scaling: str
    norm: str
    mlp: bool
    layers: int
    layer: int
    grads: WeightGrads = field(metadata=PART)
    frozen_share: float  # share of the block's score rows with softmax ‖J‖_F < 1e-3
    frozen_share_se: float
    # The gradient that passes the block's softmax, like with like across rules: mean
    # ‖∂L/∂W_Q‖ ÷ (c · mean ‖∂L/∂W_V‖), c the rule's factor on q·k. W_Q's gradient carries c
    # and the softmax Jacobian; W_V's sees the same gradient arriving at the block, neither.
    softmax_pass: float | None
    softmax_pass_se: float | None  # delta method over the paired trials
    # The same per trial, ‖∂L/∂W_Q‖ ÷ (c·‖∂L/∂W_V‖): its median and 95% bootstrap interval
    # (an unscaled block's gradients are heavy-tailed: the means move with one draw).
    softmax_pass_median: float | None
    softmax_pass_lo: float | None
    softmax_pass_hi: float | None
    token_cosine: float | None  # mean off-diagonal cosine between the rows of h after it
    token_cosine_se: float | None


@dataclass(frozen=True)
class StackRow:
    """One (dim, scaling, norm, layers) stack: how much of ‖∂L/∂W_Q‖ reaches the last block
    relative to the first, and how alike the tokens end up."""

    dim: int
    scaling: str
    norm: str
    layers: int
    wq_ratio: float | None  # mean ‖∂L/∂W_Q‖ at the last block ÷ at the first
    wq_ratio_se: float | None  # delta method over the paired trials
    median_ratio: float | None  # the same for the medians (no se)
    # mean ‖∂L/∂W_V‖ at the last block ÷ at the first: how much of the gradient arriving at
    # the top reaches the first block (W_V's gradient carries no factor of the rule)
    wv_ratio: float | None
    wv_ratio_se: float | None
    # per trial ‖∂L/∂W_V‖ last ÷ first: its median and 95% bootstrap interval
    wv_ratio_median: float | None
    wv_ratio_lo: float | None
    wv_ratio_hi: float | None
    first_frozen: float  # frozen share of the first block
    last_cosine: float | None  # token_cosine after the last block
    last_cosine_se: float | None
    collapse_depth: int | None  # first block (1-based count) whose token_cosine ≥ 0.9


FIELDS = row_fields(DepthRow)
STACK_FIELDS = row_fields(StackRow)
