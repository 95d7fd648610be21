"""Mergeable accumulators: central moments up to the fourth, fixed-bin histograms, a sample."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Moments:
    """Count, mean, central sums M2..M4 and extremes of a stream of numbers.

    Blocks are summarised exactly (two passes over the block) and merged with Pébay's
    pairwise formulas, which stay accurate when the mean is large next to the spread.
    """

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0  # Σ (x − mean)²
    m3: float = 0.0  # Σ (x − mean)³
    m4: float = 0.0  # Σ (x − mean)⁴
    min: float = math.inf
    max: float = -math.inf

    @classmethod
    def of(cls, x: np.ndarray) -> Moments:
        """Summarise one block of values (two passes: mean, then central sums)."""
        n = int(x.size)
        if n == 0:
            return cls()
        mean = float(x.sum()) / n
        dev = x - mean
        sq = dev * dev
        return cls(
            n=n,
            mean=mean,
            m2=float(sq.sum()),
            m3=float(np.einsum("i,i->", sq, dev)),  # einsum, not BLAS: no BLAS threads
            m4=float(np.einsum("i,i->", sq, sq)),  # beside the block threads
            min=float(x.min()),
            max=float(x.max()),
        )

    def merge(self, other: Moments) -> Moments:
        """The summary of both streams, self first (the order fixes the rounding)."""
        if other.n == 0:
            return self
        if self.n == 0:
            return other
        na, nb = float(self.n), float(other.n)
        n = na + nb
        delta = other.mean - self.mean
        d_n = delta / n
        m2 = self.m2 + other.m2 + delta * d_n * na * nb
        m3 = (
            self.m3
            + other.m3
            + d_n * d_n * delta * na * nb * (na - nb)
            + 3.0 * d_n * (na * other.m2 - nb * self.m2)
        )
        m4 = (
            self.m4
            + other.m4
            + d_n**3 * delta * na * nb * (na * na - na * nb + nb * nb)
            + 6.0 * d_n * d_n * (na * na * other.m2 + nb * nb * self.m2)
            + 4.0 * d_n * (na * other.m3 - nb * self.m3)
        )
        return Moments(
            n=self.n + other.n,
            mean=self.mean + d_n * nb,
            m2=m2,
            m3=m3,
            m4=m4,
            min=min(self.min, other.min),
            max=max(self.max, other.max),
        )

    @property
    def variance(self) -> float:
        """Unbiased sample variance, M2/(n − 1)."""
        return self.m2 / (self.n - 1) if self.n > 1 else math.nan

    @property
    def central4(self) -> float:
        """The sample fourth central moment M4/n."""
        return self.m4 / self.n if self.n else math.nan

    @property
    def kurtosis(self) -> float:
        """Sample kurtosis (not excess): n·M4/M2²; 3 for a normal law."""
        if self.n == 0 or self.m2 <= 0.0:
            return math.nan
        return self.n * self.m4 / (self.m2 * self.m2)


@dataclass(frozen=True)
class Histogram:
    """Counts in `bins` equal bins over [lo, hi), plus what fell below and above."""

    lo: float
    hi: float
    counts: np.ndarray
    under: int = 0
    over: int = 0

    @classmethod
    def empty(cls, lo: float, hi: float, bins: int) -> Histogram:
        return cls(lo, hi, np.zeros(bins, dtype=np.int64))

    @property
    def edges(self) -> np.ndarray:
        return np.linspace(self.lo, self.hi, self.counts.size + 1)

    @property
    def total(self) -> int:
        return int(self.counts.sum()) + self.under + self.over

    def of(self, x: np.ndarray) -> Histogram:
        """A histogram with the same bins holding just the values of x."""
        counts, under, over = bin_counts(x, self.lo, self.hi, self.counts.size)
        return Histogram(self.lo, self.hi, counts, under, over)

    def merge(self, other: Histogram) -> Histogram:
        return Histogram(
            self.lo, self.hi, self.counts + other.counts, self.under + other.under,
            self.over + other.over,
        )

    def quantile(self, q: float, lowest: float, highest: float) -> float:
        """Quantile by linear interpolation inside the bin that holds it.

        `lowest` and `highest` (the exact extremes) stand for the mass outside [lo, hi).
        """
        total = self.total
        if total == 0:
            return math.nan
        target = q * total
        if target <= self.under:
            return lowest
        cum = np.cumsum(self.counts) + self.under
        i = int(np.searchsorted(cum, target, side="left"))
        if i >= self.counts.size:
            return highest
        before = cum[i - 1] if i > 0 else self.under
        width = (self.hi - self.lo) / self.counts.size
        inside = (target - before) / self.counts[i] if self.counts[i] else 0.0
        return float(self.lo + (i + inside) * width)

    def coarsen(self, bins: int, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
        """Merge whole fine bins into about `bins` bins spanning [lo, hi]: (edges, counts).

        Only whole fine bins are merged, so every count is exact; no value is re-binned.
        """
        fine = self.counts.size
        width = (self.hi - self.lo) / fine
        first = max(0, math.floor((lo - self.lo) / width))
        last = min(fine, math.ceil((hi - self.lo) / width))
        if last <= first:
            first, last = 0, fine
        group = max(1, math.ceil((last - first) / bins))
        last = min(fine, first + group * math.ceil((last - first) / group))
        span = self.counts[first:last]
        pad = (-span.size) % group
        if pad:
            span = np.concatenate([span, np.zeros(pad, dtype=span.dtype)])
        counts = span.reshape(-1, group).sum(axis=1)
        edges = self.lo + width * (first + group * np.arange(counts.size + 1))
        return edges, counts


def bin_counts(x: np.ndarray, lo: float, hi: float, bins: int) -> tuple[np.ndarray, int, int]:
    """Counts of x in `bins` equal bins over [lo, hi), and how many fell below and above."""
    pos = (x - lo) * (bins / (hi - lo))
    inside = (pos >= 0.0) & (pos < bins)
    under = int(np.count_nonzero(pos < 0.0))
    idx = pos[inside].astype(np.int64)
    counts = np.bincount(idx, minlength=bins)
    return counts, under, int(x.size - under - idx.size)


@dataclass(frozen=True)
class Reservoir:
    """The first `cap` values of a stream, in stream order (not a random subsample)."""

    cap: int
    values: np.ndarray

    @classmethod
    def empty(cls, cap: int) -> Reservoir:
        return cls(cap, np.empty(0))

    def merge(self, x: np.ndarray) -> Reservoir:
        room = self.cap - self.values.size
        if room <= 0:
            return self
        return Reservoir(self.cap, np.concatenate([self.values, x[:room]]))

    @property
    def full(self) -> bool:
        return self.values.size >= self.cap
