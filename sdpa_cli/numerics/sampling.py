"""Draw query/key components and their dot products, a block at a time, into reusable buffers."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np

# Elements per query (or key) buffer in one draw: 2 MiB of float64 (the q|k buffer is twice
# that). Measured with tests/bench.py: 2^16
# left the engine 1.10× the bare fill rate and 1.74× faster on two threads (per-block work
# that holds the GIL); 2^18 gives 1.04× and 1.93×. Changing it changes which numbers a seed
# gives, so it is part of the output format.
CHUNK = 1 << 18


@dataclass(frozen=True)
class PairLaw:
    """The law of (q_i, k_i) in standardized units: mean m = μ/σ, unit variance, corr ρ."""

    kind: str  # normal | uniform | rademacher | sphere
    m: float = 0.0
    rho: float = 0.0


@dataclass(frozen=True)
class BlockPlan:
    """How `total` draws split into logical blocks; a fixed function of d and the method."""

    total: int
    rows: int  # pairs per block
    cols: int  # coordinates drawn at once (< d only when d > CHUNK)

    @property
    def blocks(self) -> int:
        return -(-self.total // self.rows)

    def rows_in(self, block: int) -> int:
        return min(self.rows, self.total - block * self.rows)


def plan_blocks(d: int, total: int, method: str) -> BlockPlan:
    if method == "exact":
        return BlockPlan(total, CHUNK, 1)
    if d >= CHUNK:
        return BlockPlan(total, 1, CHUNK)
    return BlockPlan(total, max(1, CHUNK // d), d)


class _Workspace(threading.local):
    """Per-thread 64-byte-aligned buffers: the same alignment every run, so SIMD sums in
    einsum round the same way and results are bit-identical across runs and threads."""

    def __init__(self) -> None:
        self.qk = aligned(2 * CHUNK)  # row r holds q_r then k_r
        self.mask = aligned(CHUNK)


def aligned(n: int) -> np.ndarray:
    """A float64 buffer starting on a 64-byte boundary (the same alignment every run)."""
    raw = np.empty(n + 8)
    offset = (-raw.ctypes.data % 64) // 8
    return raw[offset : offset + n]


_WORK = _Workspace()


def fill_components(rng: np.random.Generator, kind: str, out: np.ndarray) -> None:
    """Standardized (mean 0, variance 1) components of the given law, in place."""
    if kind in ("normal", "sphere"):
        rng.standard_normal(out=out)
    elif kind == "uniform":
        rng.random(out=out)
        out *= 2.0 * math.sqrt(3.0)
        out -= math.sqrt(3.0)
    elif kind == "rademacher":
        rng.random(out=out)
        out -= 0.5
        np.copysign(1.0, out, out=out)
    else:
        raise ValueError(f"unknown law {kind!r}")


def fill_pairs(
    rng: np.random.Generator, law: PairLaw, q: np.ndarray, k: np.ndarray, mask: np.ndarray
) -> None:
    """Queries and keys with the law's marginals, correlation and mean, in place."""
    fill_components(rng, law.kind, q)
    fill_components(rng, law.kind, k)
    _correlate(rng, law, q, k, mask)
    if law.m:
        q += law.m
        k += law.m


def _correlate(rng: np.random.Generator, law: PairLaw, q: np.ndarray, k: np.ndarray,
               mask: np.ndarray) -> None:
    """Give k its correlation with q (standardized, zero-mean components), in place."""
    if not law.rho:
        return
    if law.kind == "normal":
        k *= math.sqrt(1.0 - law.rho * law.rho)
        k += law.rho * q
        return
    # Copy (or mirror) the query coordinate with probability |ρ|: keeps the marginal.
    rng.random(out=mask)
    take = mask < abs(law.rho)
    if law.rho > 0:
        np.copyto(k, q, where=take)
    else:
        np.negative(q, out=k, where=take)


def fill_pair_rows(
    rng: np.random.Generator, law: PairLaw, qk: np.ndarray, mask: np.ndarray,
    side: np.random.Generator | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Fill rows [x_r | y_r] of `qk` (shape rows × 2w) with the zero-mean parts of q and k.

    Drawing row by row in one buffer makes the first N rows of a block the same whatever
    the block's length. Coin flips for the non-Gaussian correlation come from `side`, a
    second stream, for the same reason. The mean m is not added here: see direct_block.
    """
    width = qk.shape[1] // 2
    fill_components(rng, law.kind, qk)
    q, k = qk[:, :width], qk[:, width:]
    _correlate(side or rng, law, q, k, mask)
    return q, k


def dot_shift(law: PairLaw, d: int) -> float:
    """The constant d·m² that direct_block and exact_block leave out of q·k."""
    return 0.0 if law.kind == "sphere" else d * law.m * law.m


def direct_block(
    rng: np.random.Generator, law: PairLaw, rows: int, d: int, cols: int, cosine: bool,
    side: np.random.Generator | None = None,
) -> tuple[np.ndarray, np.ndarray | None, int]:
    """q·k − d·m² for `rows` pairs of d-dimensional vectors, cos(q, k) when asked, and the
    number of pairs holding a zero vector (whose cosine is undefined and set to 0).

    With q = m + x and k = m + y, q·k − d·m² = x·y + m(Σx + Σy): computing it this way
    keeps every digit of the spread even when the mean dwarfs it (m = 1e150 would otherwise
    round x away entirely). For the sphere law the first array is u·v itself.
    """
    work = _WORK
    m = 0.0 if law.kind == "sphere" else law.m
    dot = np.zeros(rows)
    sums = np.zeros(rows) if m else None
    norms = cosine or law.kind == "sphere"
    nq = np.zeros(rows) if norms else None
    nk = np.zeros(rows) if norms else None
    sq = np.zeros(rows) if norms and m else None
    sk = np.zeros(rows) if norms and m else None
    for start in range(0, d, cols):
        width = min(cols, d - start)
        size = rows * width
        qk = work.qk[: 2 * size].reshape(rows, 2 * width)
        q, k = fill_pair_rows(rng, law, qk, work.mask[:size].reshape(rows, width), side)
        dot += np.einsum("ij,ij->i", q, k)
        if m:
            sums += qk.sum(axis=1)  # Σx + Σy over this chunk
        if norms:
            nq += np.einsum("ij,ij->i", q, q)
            nk += np.einsum("ij,ij->i", k, k)
            if m:
                sq += q.sum(axis=1)
                sk += k.sum(axis=1)
    if m:
        assert sums is not None
        dot += m * sums
    if not norms:
        return dot, None, 0
    assert nq is not None and nk is not None
    if m:  # |m + x|² = |x|² + 2mΣx + d·m²
        assert sq is not None and sk is not None
        nq += 2.0 * m * sq + d * m * m
        nk += 2.0 * m * sk + d * m * m
    denom = np.sqrt(nq) * np.sqrt(nk)  # √(nq·nk) would overflow where each norm does not
    # A zero vector (possible for shifted Rademacher components) has no direction.
    defined = denom > 0
    full = dot + d * m * m if m else dot
    cos = np.divide(full, denom, out=np.zeros(rows), where=defined)
    np.clip(cos, -1.0, 1.0, out=cos)
    degenerate = rows - int(np.count_nonzero(defined))
    if law.kind == "sphere":
        return cos, (cos if cosine else None), degenerate
    return dot, cos, degenerate


def exact_block(rng: np.random.Generator, law: PairLaw, rows: int, d: int,
                side: np.random.Generator | None = None) -> np.ndarray:
    """q·k − d·m² drawn from its exact law at O(1) cost per pair, whatever d.

    Gaussian: with u = q + k and v = q − k (independent), q·k = (|u|² − |v|²)/4 =
    ½((1+ρ)·A − (1−ρ)·B), A ~ χ'²_d(λ = 2dm²/(1+ρ)), B ~ χ²_d. Writing A = (√λ + Z)² + C
    and B = Z'² + C' (C, C' ~ χ²_{d−1}) and using ½(1+ρ)λ = d·m² gives the centred value
    ½(1+ρ)(2√λ·Z + Z² + C) − ½(1−ρ)B exactly, without the huge constant.
    Sphere: u·v is distributed as 2·Beta((d−1)/2, (d−1)/2) − 1 (±1 with equal odds if d = 1).
    Normals come in (Z, Z') rows from `rng` and (C, C') rows from `side` (for m = 0, (A, B)
    rows from `rng`), so N draws are a prefix of any longer run.
    """
    if law.kind == "sphere":
        if d == 1:
            return np.where(rng.random(rows) < 0.5, -1.0, 1.0)
        half = (d - 1) / 2.0
        return 2.0 * rng.beta(half, half, rows) - 1.0
    if law.kind != "normal":
        raise ValueError("the exact method needs normal or sphere components")
    m, rho = law.m, law.rho
    if m == 0.0:  # nothing to centre: A and B are plain χ²_d, one (A, B) row per pair
        ab = rng.chisquare(d, (rows, 2))
        return 0.5 * (1.0 + rho) * ab[:, 0] - 0.5 * (1.0 - rho) * ab[:, 1]
    z = rng.standard_normal((rows, 2))
    c = (side or rng).chisquare(d - 1, (rows, 2)) if d > 1 else np.zeros((rows, 2))
    b = z[:, 1] * z[:, 1] + c[:, 1]
    out = -0.5 * (1.0 - rho) * b
    if rho > -1.0:
        root_lam = math.sqrt(2.0 * d / (1.0 + rho)) * abs(m)
        centred_a = 2.0 * root_lam * z[:, 0] + z[:, 0] * z[:, 0] + c[:, 0]
        out += 0.5 * (1.0 + rho) * centred_a
    return out
