"""Sinks and head types per head, the repeated random tokens induction is measured on, and
the weight-only bounds, as the inspect rows carry them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.numerics.rng import block_generator
from sdpa_cli.studies.inspect.models.headtypes import repeated_tokens
from sdpa_cli.studies.inspect.spec import InspectSpec
from sdpa_cli.studies.inspect.text import Tokenizer

SINK = 0.3  # Gu et al. 2024: a head whose mean weight on a position exceeds 0.3 sinks there
# A head is of a type when, in the rows where its pattern has a key, more than this share of
# its attention lands there: the same bar as a sink's (TransformerLens's score ÷ its ceiling).
TYPE_SHARE = 0.3
INDUCTION_STREAM = 8  # spawn key of the repeated random tokens (--random-tokens uses 7)
DEFAULT_SEED = 0  # the draw's seed when the spec gives none: the tokens are the same each run


def head_type(first: float, later: float, prev: float, prev_ceiling: float,
              induction: float | None, induction_ceiling: float) -> str:
    """Every type a head shows, joined by "+" ("induction+sink"), or "other"."""
    kinds = []
    if induction is not None and induction_ceiling > 0 and \
            induction / induction_ceiling > TYPE_SHARE:
        kinds.append("induction")
    if prev_ceiling > 0 and prev / prev_ceiling > TYPE_SHARE:
        kinds.append("previous-token")
    if first > SINK:
        kinds.append("sink")
    if later > SINK:
        kinds.append("sink-later")
    return "+".join(kinds) or "other"


def has_type(row: Mapping[str, Any], kind: str) -> bool:
    return kind in str(row.get("head_type", "")).split("+")


def candidates(tok: Tokenizer, rows: int) -> NDArray[np.int64]:
    """Token ids to draw from: the vocabulary the embedding holds, less the tokenizer's
    special tokens (BOS, EOS, padding: a repeated sequence of ordinary tokens)."""
    vocab = min(tok.vocab, rows)
    special = tok.special_ids() | set(tok.prefix) | set(tok.suffix)
    out: NDArray[np.int64] = np.array([i for i in range(vocab) if i not in special],
                                      dtype=np.int64)
    return out


@dataclass(frozen=True)
class Induction:
    ids: dict[int, NDArray[np.int64]]  # seq_len → (sequences, seq_len)
    seed: int
    described: str


def induction_tokens(spec: InspectSpec, tok: Tokenizer, rows: int) -> Induction | None:
    """The repeated random-token sequences, one set per length, seeded (the run's seed, or
    DEFAULT_SEED) from their own stream; None when the spec asks for none."""
    if spec.induction_sequences == 0:
        return None
    seed = spec.seed if spec.seed is not None else DEFAULT_SEED
    pool = candidates(tok, rows)
    out = {}
    for n in spec.seq_len:
        rng = block_generator(seed, (INDUCTION_STREAM, n))
        out[n] = repeated_tokens(rng, pool, tok.prefix, tok.suffix, n, spec.induction_sequences)
    return Induction(out, seed, f"{spec.induction_sequences} sequences per length of "
                     f"random tokens repeated once (seed {seed}, {len(pool)} ordinary tokens)")
