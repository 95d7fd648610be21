"""Per-row attention statistics of a layer, in blocks of query rows: one score product per block."""

# A block's raw scores q·kᵀ (pairs × rows × the keys its rows see) are computed once; the raw
# row moments, largest scores and cosine sums come from them, and every rule's softmax is a
# map of them (a normalising rule has its own product, made the same way). Nothing n × n
# outlives a block: what leaves it is a few numbers per row, in float64. Each row is summed
# alone along its keys, so a row's numbers do not depend on how rows or pairs are grouped.

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]
Mask = NDArray[np.bool_]
ROW_ELEMENTS = 1 << 17  # scores per head in a block: rows = this ÷ n (at least MIN_ROWS)
MIN_ROWS = 16
GROUP_ELEMENTS = 1 << 19  # scores held at once per buffer (2 MB in float32)
# A masked score: finite, so exp gives 0 and 0 · LOW is 0 (−inf would make it NaN), and
# still far below any score after a factor up to MAX_FACTOR, in float32 as in float64.
LOW = -1e30
MAX_FACTOR = 1e6


@dataclass(frozen=True)
class Map:
    """How one rule turns a source's raw scores into the softmax's: × factor (per row when
    log_n is set: log_n · ln(keys seen)), then cap · tanh(s / cap) when cap is set."""

    factor: float
    log_n: float | None = None
    cap: float | None = None
    source: int = 0  # which source's raw scores (0: the vectors as given)
    histogram: bool = False  # count this rule's scores into the layer's histogram


@dataclass(frozen=True)
class Block:
    """Query rows r0…r1 − 1 against keys lo…hi − 1 (every key one of them sees); spans:
    (first, last + 1, masked) column runs, relative to lo, that hold every masked score."""

    r0: int
    r1: int
    lo: int
    hi: int
    seen: F64  # keys each row sees
    spans: tuple[tuple[int, int, Mask], ...]
    masked: int  # masked scores in the block (per head)


def plan(mask: Mask | None, n: int) -> list[Block]:
    """Row blocks of a layer's mask; the block height depends on n only."""
    rows = max(MIN_ROWS, min(n, ROW_ELEMENTS // n))
    out = []
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        if mask is None:
            out.append(Block(r0, r1, 0, n, np.full(r1 - r0, float(n)), (), 0))
            continue
        m = mask[r0:r1]
        cols = np.flatnonzero(m.any(axis=0))
        lo, hi = int(cols[0]), int(cols[-1]) + 1
        m = m[:, lo:hi]
        hidden = np.flatnonzero(~m.all(axis=0))
        spans = []
        if hidden.size:  # contiguous runs of columns with a masked score
            cut = np.flatnonzero(np.diff(hidden) > 1) + 1
            for run in np.split(hidden, cut):
                a, b = int(run[0]), int(run[-1]) + 1
                spans.append((a, b, ~m[:, a:b]))
        out.append(Block(r0, r1, lo, hi, m.sum(axis=1).astype(np.float64), tuple(spans),
                         int((~m).sum())))
    return out


def fill(x: NDArray[Any], blk: Block, value: Any) -> None:
    """Masked scores of x (heads × rows × keys) set to value (a number, or one per row)."""
    v = value if np.ndim(value) == 0 else np.asarray(value)[..., None]
    for a, b, hid in blk.spans:
        np.copyto(x[..., a:b], v, where=hid)


@dataclass
class Source:
    """Per-row raw numbers of one (q, k) source: (sequence, head) pairs × n each."""

    count: F64
    mean: F64
    m2: F64
    top1: F64
    top2: F64
    low: F64
    arg: NDArray[np.int64] = field(repr=False)
    cos1: F64 | None = None  # Σ_j cos θ_ij over the keys row i sees
    cos2: F64 | None = None  # Σ_j cos² θ_ij

    @classmethod
    def empty(cls, shape: tuple[int, ...], cosine: bool) -> Source:
        def z() -> F64:
            return np.zeros(shape)

        return cls(z(), z(), z(), z(), z(), z(), np.zeros(shape, dtype=np.int64),
                   z() if cosine else None, z() if cosine else None)


@dataclass
class Rows:
    """Per-row softmax numbers of one rule: (sequence, head) pairs × n each, and the weight
    each key receives summed over rows (pairs × n)."""

    inv_z: F64  # 1 / Σ exp(s − max): the largest weight
    entropy: F64
    jacobian: F64
    first: F64  # weight on key 0
    prev: F64  # weight on key i − 1
    column: F64
    moments: tuple[F64, F64, F64] | None  # (count, mean, M2) of the scores, when not a map
    # of the source's (a soft-cap)

    @classmethod
    def empty(cls, shape: tuple[int, ...], moments: bool) -> Rows:
        def z() -> F64:
            return np.zeros(shape)

        return cls(z(), z(), z(), z(), z(), z(), (z(), z(), z()) if moments else None)


def _scores(qb: NDArray[Any], kb: NDArray[Any], buf: NDArray[Any]) -> NDArray[Any]:
    g, rows, keys = qb.shape[0], qb.shape[1], kb.shape[1]
    x: NDArray[Any] = buf[:g * rows * keys].reshape(g, rows, keys)
    np.matmul(qb, np.swapaxes(kb, -1, -2), out=x)
    return x


def _moments(x: NDArray[Any], blk: Block, work: NDArray[Any]) -> tuple[F64, F64]:
    """Row means and sums of squared deviations over the visible scores, with x's masked
    entries at 0 on entry; they are left at the row mean, so x's row minimum and maximum
    are the visible ones (a mean lies between them)."""
    mean = _sum(x) / blk.seen
    mean_x = mean.astype(x.dtype)
    fill(x, blk, mean_x)
    np.subtract(x, mean_x[..., None], out=work)  # exactly 0 where masked
    m2 = _dot(work, work)
    return mean, m2


# Row sums and dot products in the scores' dtype (float32 sums pairwise; every sum taken here
# but a row's mean adds terms of one sign), then float64: casting first costs 2-4× the sum.
def _sum(x: NDArray[Any]) -> F64:
    out: F64 = x.sum(axis=-1).astype(np.float64)
    return out


def _dot(x: NDArray[Any], y: NDArray[Any]) -> F64:
    out: F64 = np.einsum("gbk,gbk->gb", x, y).astype(np.float64)
    return out


def _at(x: NDArray[Any], arg: NDArray[np.int64]) -> NDArray[Any]:
    """x's entries at one key per row: the row's largest by argmax (a max reduction over
    float32 rows is several times slower than argmax and a gather)."""
    out: NDArray[Any] = np.take_along_axis(x, arg[..., None], axis=-1)
    return out


def _raw(x: NDArray[Any], blk: Block, work: NDArray[Any], src: Source, at: tuple[Any, ...],
         norms: tuple[NDArray[Any], NDArray[Any]] | None) -> NDArray[np.int64]:
    """Fill one block's rows of src from raw scores x; x ends with LOW where masked."""
    fill(x, blk, 0.0)
    if norms is not None:  # cos θ_ij = x_ij / (‖q_i‖ ‖k_j‖): column scaling by a product
        inv_q, inv_k = norms
        src.cos1[at] = np.matmul(x, inv_k[..., None])[..., 0] * inv_q  # type: ignore[index]
        np.multiply(x, x, out=work)
        src.cos2[at] = (np.matmul(work, (inv_k * inv_k)[..., None])[..., 0]  # type: ignore[index]
                        * inv_q * inv_q)
    mean, m2 = _moments(x, blk, work)
    src.count[at], src.mean[at], src.m2[at] = blk.seen, mean, m2
    src.low[at] = _at(x, x.argmin(axis=-1))[..., 0]
    fill(x, blk, LOW)
    arg: NDArray[np.int64] = x.argmax(axis=-1)
    top = _at(x, arg)
    np.put_along_axis(x, arg[..., None], LOW, axis=-1)
    src.top2[at] = _at(x, x.argmax(axis=-1))[..., 0]
    np.put_along_axis(x, arg[..., None], top, axis=-1)
    src.top1[at], src.arg[at] = top[..., 0], arg + blk.lo
    return arg


def _rule(x: NDArray[Any], arg: NDArray[np.int64], blk: Block, m: Map, bufs: Sequence[
          NDArray[Any]], out: Rows, at: tuple[Any, ...], hist: NDArray[np.int64] | None,
          edges: F64 | None) -> None:
    """One rule's softmax on one block: weights never leave the block, only row sums do."""
    g, rows, keys = x.shape
    s = _mapped(x, blk, m, bufs[0])
    e: NDArray[Any] = bufs[1][:x.size].reshape(x.shape)
    if out.moments is not None:  # a soft-cap changes the spread: its own moments
        fill(s, blk, 0.0)
        mean, m2 = _moments(s, blk, e)
        out.moments[0][at], out.moments[1][at], out.moments[2][at] = blk.seen, mean, m2
        fill(s, blk, LOW)
    if hist is not None and edges is not None:
        hist += counts(s, edges) - _masked_counts(blk, g, len(edges) - 1)
    s -= _at(s, arg)
    np.exp(s, out=e)
    np.put_along_axis(e, arg[..., None], 0.0, axis=-1)  # the top key's weight is 1/Z: kept
    rest = _sum(e)  # out of the sums, so no 1 − p cancels
    z = 1.0 + rest
    ed = _dot(e, s)
    np.multiply(e, e, out=s)
    a = _sum(s) / (z * z)
    b = _dot(s, e) / (z * z * z)
    top_p = 1.0 / z
    sq = top_p * top_p + a
    # ‖diag(p) − ppᵀ‖²_F = Σ p_i²(1 − p_i)² + Σ p_i²(Σp² − p_i²), the top key's terms
    # written with 1 − p* = rest/z: no cancellation when the row is nearly one-hot
    jac2 = a * (1.0 + sq + top_p * top_p) - 2.0 * b + top_p * top_p * (rest * top_p) ** 2
    out.inv_z[at] = top_p
    out.entropy[at] = np.log1p(rest) - ed * top_p
    out.jacobian[at] = np.sqrt(np.maximum(jac2, 0.0))
    row = np.arange(blk.r0, blk.r1)
    top_abs = arg + blk.lo
    if blk.lo == 0:
        out.first[at] = np.where(top_abs == 0, 1.0, e[..., 0]) * top_p
    prev = row - 1 - blk.lo
    ok = (prev >= 0) & (prev < keys)
    if ok.any():
        got = np.zeros((g, rows))
        got[:, ok] = e[:, np.flatnonzero(ok), prev[ok]]
        got = np.where(top_abs == row - 1, 1.0, got)
        out.prev[at] = np.where(ok, got, 0.0) * top_p
    col = np.matmul(top_p.astype(x.dtype)[:, None, :], e)[:, 0, :].astype(np.float64)
    np.add.at(col, (np.arange(g)[:, None], arg), top_p)
    out.column[at[0], blk.lo:blk.hi] += col


def counts(s: NDArray[Any], edges: F64) -> NDArray[np.int64]:
    """Counts of s (any shape) in the bins of even edges, clipped into the outer bins, the
    bin by arithmetic in s's dtype: a score within that dtype's rounding of an edge (about
    1e-6 relative in float32) may fall in the bin beside (the counts are drawn, not read)."""
    bins = len(edges) - 1
    lo, hi = float(edges[0]), float(edges[-1])
    dt = s.dtype.type
    t = np.multiply(s.reshape(-1), dt(bins / (hi - lo)))
    t -= dt(lo * bins / (hi - lo))
    np.clip(t, 0, bins - 0.5, out=t)
    out: NDArray[np.int64] = np.bincount(t.astype(np.intp), minlength=bins).astype(np.int64)
    return out


def _masked_counts(blk: Block, heads: int, bins: int) -> NDArray[np.int64]:
    out = np.zeros(bins, dtype=np.int64)
    out[0] = heads * blk.masked  # masked scores are LOW: clipped into the first bin
    return out


def groups(pairs: int, n: int, parts: int) -> list[slice]:
    """(sequence, head) pairs split into runs whose buffers stay near GROUP_ELEMENTS, at least
    `parts` of them (a run's numbers do not depend on where it starts or ends)."""
    rows = max(MIN_ROWS, min(n, ROW_ELEMENTS // n))
    size = max(1, min(pairs, GROUP_ELEMENTS // (rows * n), math.ceil(pairs / max(parts, 1))))
    return [slice(i, min(pairs, i + size)) for i in range(0, pairs, size)]


@dataclass(frozen=True)
class Task:
    """What one layer's statistics run on: sources (q, k) shaped ((sequence, head) pairs, n,
    d) (source 0: the vectors as given; others: prepared for a normalising rule), the maps,
    the mask, and the repeated sequences' pairs with their induction pattern (sequences, n,
    n); `heads` per sequence."""

    sources: Sequence[tuple[NDArray[Any], NDArray[Any]]]
    maps: Sequence[Map]
    mask: Mask | None
    heads: int
    edges: F64 | None = None
    patterned: Sequence[tuple[NDArray[Any], NDArray[Any]]] = ()
    pattern: Mask | None = None


@dataclass
class Out:
    """Per-row numbers ((sequence, head) pairs × n) of each source and rule, the histogram,
    and per map and repeated pair the weight on the induction pattern ÷ n."""

    sources: list[Source]
    rules: list[Rows]
    induction: F64 | None


def _norms(x: NDArray[Any]) -> NDArray[Any]:
    """1 / ‖x‖ along the last axis (0 for a zero vector), in x's dtype."""
    norm = np.sqrt(np.einsum("...d,...d->...", x, x))
    out: NDArray[Any] = np.divide(1.0, norm, out=np.zeros_like(norm), where=norm > 0)
    return out


def _buffers(blocks: Sequence[Block], pairs: int, dtype: Any) -> list[NDArray[Any]]:
    size = pairs * max(b.r1 - b.r0 for b in blocks) * max(b.hi - b.lo for b in blocks)
    return [np.empty(size, dtype=dtype) for _ in range(3)]


def run_group(task: Task, grp: slice, out: Out) -> NDArray[np.int64] | None:
    """Every block of one run of (sequence, head) pairs; returns its histogram counts."""
    n = task.sources[0][0].shape[1]
    blocks = plan(task.mask, n)
    bufs = _buffers(blocks, grp.stop - grp.start, task.sources[0][0].dtype)
    hist = np.zeros(len(task.edges) - 1, dtype=np.int64) if task.edges is not None else None
    for si, (q, k) in enumerate(task.sources):
        qs, ks = q[grp], k[grp]
        norms = (_norms(qs), _norms(ks)) if si == 0 else None
        for blk in blocks:
            at = (grp, slice(blk.r0, blk.r1))
            x = _scores(qs[:, blk.r0:blk.r1], ks[:, blk.lo:blk.hi], bufs[2])
            pair = (norms[0][:, blk.r0:blk.r1], norms[1][:, blk.lo:blk.hi]) \
                if norms is not None else None
            arg = _raw(x, blk, bufs[0][:x.size].reshape(x.shape), out.sources[si], at, pair)
            for m, rows in zip(task.maps, out.rules, strict=True):
                if m.source == si:
                    _rule(x, arg, blk, m, bufs, rows, at, hist if m.histogram else None,
                          task.edges)
    return hist


def induction(task: Task, grp: slice, acc: F64) -> None:
    """Per repeated (sequence, head) pair in grp, its weight on the pattern's (query, key)
    pairs ÷ n, into acc (maps × pairs)."""
    assert task.pattern is not None
    n = task.pattern.shape[-1]
    blocks = plan(task.mask, n)
    bufs = _buffers(blocks, grp.stop - grp.start, task.patterned[0][0].dtype)
    targets = [np.nonzero(p) for p in task.pattern]
    owner = np.arange(grp.start, grp.stop) // task.heads  # each pair's sequence
    for si, (q, k) in enumerate(task.patterned):
        qs, ks = q[grp], k[grp]
        for blk in blocks:
            x = _scores(qs[:, blk.r0:blk.r1], ks[:, blk.lo:blk.hi], bufs[2])
            fill(x, blk, LOW)
            for j, m in enumerate(task.maps):
                if m.source != si:
                    continue
                s_ = _mapped(x, blk, m, bufs[0])
                s_ -= _at(s_, s_.argmax(axis=-1))
                e = bufs[1][:x.size].reshape(x.shape)
                np.exp(s_, out=e)
                z = _sum(e)
                for seq in np.unique(owner):
                    ri, ci = targets[seq]
                    pick = (ri >= blk.r0) & (ri < blk.r1) & (ci >= blk.lo) & (ci < blk.hi)
                    r, c = ri[pick] - blk.r0, ci[pick] - blk.lo
                    mine = np.flatnonzero(owner == seq)
                    got = e[mine[:, None], r, c] / z[mine[:, None], r]
                    acc[j, grp.start + mine] += got.sum(axis=-1) / n


def _mapped(x: NDArray[Any], blk: Block, m: Map, buf: NDArray[Any]) -> NDArray[Any]:
    """The rule's scores of raw x (LOW where masked) into buf, LOW where masked (or below)."""
    s: NDArray[Any] = buf[:x.size].reshape(x.shape)
    dt = x.dtype.type
    if m.log_n is not None:
        factor: Any = (m.log_n * np.log(blk.seen)).astype(x.dtype)[:, None]
    else:
        factor = dt(m.factor)
    if m.cap is not None:
        np.multiply(x, factor / dt(m.cap), out=s)
        np.tanh(s, out=s)
        s *= dt(m.cap)
    else:
        np.multiply(x, factor, out=s)
    if m.cap is not None or m.log_n is not None or not 0 < m.factor <= MAX_FACTOR:
        fill(s, blk, LOW)  # tanh(LOW) is −cap; log_n's factor 0 (one key) makes LOW 0
    return s
