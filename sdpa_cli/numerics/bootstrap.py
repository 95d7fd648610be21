"""The median of a sample and its percentile-bootstrap interval, for heavy-tailed trials."""

from __future__ import annotations

import numpy as np

RESAMPLES = 2000
LEVEL = 0.95


def median_interval(x: np.ndarray, seed: int, level: float = LEVEL,
                    resamples: int = RESAMPLES) -> tuple[float, float, float]:
    """(median, lower, upper): the percentile bootstrap's `level` interval for the median of
    x, the resamples drawn from a generator of `seed` (the same interval every run). A mean
    of heavy-tailed trials moves with each extreme draw, and its standard error with it; the
    median and this interval do not rest on the tail. Non-finite entries are dropped."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, x.size, size=(resamples, x.size))
    medians = np.median(x[picks], axis=1)
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(medians, [tail, 1.0 - tail])
    return float(np.median(x)), float(lo), float(hi)
