"""The Monte Carlo engine for q·k: block-seeded draws, per-block summaries, ordered merge."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdpa_cli.numerics.blocks import fold_blocks
from sdpa_cli.numerics.moments import Histogram, Moments, Reservoir
from sdpa_cli.numerics.rng import block_generator
from sdpa_cli.numerics.sampling import (
    PairLaw,
    direct_block,
    exact_block,
    plan_blocks,
)

FINE_BINS = 8192  # histogram resolution; figures merge whole fine bins
SAMPLE_CAP = 100_000  # raw values kept per stream; quantiles beyond it come from the histogram


@dataclass(frozen=True)
class Summary:
    """Everything kept about one stream of values: moments, histogram, the first values."""

    moments: Moments
    histogram: Histogram
    sample: Reservoir

    @classmethod
    def empty(cls, lo: float, hi: float, cap: int) -> Summary:
        return cls(Moments(), Histogram.empty(lo, hi, FINE_BINS), Reservoir.empty(cap))

    def add(self, x: np.ndarray) -> Summary:
        return Summary(
            self.moments.merge(Moments.of(x)),
            self.histogram.merge(self.histogram.of(x)),
            self.sample.merge(x),
        )

    @property
    def complete(self) -> bool:
        """True when every value is in the sample, so quantiles can be exact."""
        return self.sample.values.size == self.moments.n

    def quantile(self, q: float) -> float:
        if self.complete:
            return float(np.quantile(self.sample.values, q))
        return self.histogram.quantile(q, self.moments.min, self.moments.max)


@dataclass(frozen=True)
class DotStats:
    """The summaries of q·k (and of cos(q, k) when asked) for one dimension."""

    dot: Summary
    cosine: Summary | None
    degenerate: int  # pairs with a zero vector, whose cosine is undefined


def simulate_dots(
    law: PairLaw,
    d: int,
    pairs: int,
    *,
    entropy: int,
    key: tuple[int, ...],
    method: str = "direct",
    workers: int = 1,
    dot_range: tuple[float, float],
    cosine: bool = False,
    sample_cap: int = SAMPLE_CAP,
) -> DotStats:
    """Draw `pairs` dot products in standardized units and summarise them.

    Block b uses SeedSequence(entropy, spawn_key=key + (b,)); the block layout depends only
    on d and the method, so the result depends only on (law, d, pairs, entropy, key).
    """
    plan = plan_blocks(d, pairs, method)
    want_cos = cosine and method == "direct"

    def work(b: int) -> tuple[np.ndarray, np.ndarray | None, int]:
        # Every block draws its full planned rows, even the last, and keeps what is needed:
        # then a run of N pairs is exactly the first N pairs of a longer run.
        rng = block_generator(entropy, (*key, b))
        keep = plan.rows_in(b)
        if method == "exact":
            return exact_block(rng, law, plan.rows, d)[:keep], None, 0
        dot, cos, degenerate = direct_block(rng, law, plan.rows, d, plan.cols, want_cos,
                                            keep=keep)
        return dot, cos, degenerate

    def fold(acc: DotStats, part: tuple[np.ndarray, np.ndarray | None, int]) -> DotStats:
        dot, cos, degenerate = part
        return DotStats(
            acc.dot.add(dot),
            acc.cosine.add(cos) if acc.cosine is not None and cos is not None else acc.cosine,
            acc.degenerate + degenerate,
        )

    start = DotStats(
        Summary.empty(*dot_range, sample_cap),
        Summary.empty(-1.0, 1.0 + 1e-12, sample_cap) if want_cos else None,
        0,
    )
    return fold_blocks(plan.blocks, work, fold, start, workers)
