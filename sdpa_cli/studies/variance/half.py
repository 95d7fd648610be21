"""q·k in float16: the product formed first and then scaled, or q and k scaled first."""

from __future__ import annotations

import math

import numpy as np

from sdpa_cli.numerics.rng import block_generator
from sdpa_cli.numerics.sampling import PairLaw, fill_pairs
from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.studies.variance.rows import HalfRow

# Its own stream, apart from the engine's blocks (keyed by the dimension's index).
STREAM = 16


def half_dots(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Row-wise q·k as a half-precision matrix product does it: float16 operands and
    products, a float32 accumulator, the sum stored back in float16 (±inf beyond 65504)."""
    products = np.multiply(q.astype(np.float16), k.astype(np.float16))
    with np.errstate(over="ignore"):
        out: np.ndarray = products.sum(axis=-1, dtype=np.float32).astype(np.float16)
    return out


def _worst(x: np.ndarray, truth: np.ndarray) -> float | None:
    """The largest relative error of the finite entries of x (None when none is finite)."""
    ok = np.isfinite(x) & (truth != 0)
    if not ok.any():
        return None
    return float(np.max(np.abs(x[ok].astype(np.float64) - truth[ok]) / np.abs(truth[ok])))


def half_row(law: PairLaw, std: float, d: int, rule: Scaling, pairs: int, entropy: int,
             index: int) -> HalfRow:
    """One row: `pairs` draws of (q, k) at dimension d, components of std `std`."""
    rng = block_generator(entropy, (STREAM, index))
    q, k = np.empty((pairs, d)), np.empty((pairs, d))
    fill_pairs(rng, law, q, k, np.empty((pairs, d)))
    q *= std
    k *= std
    dots = np.einsum("ij,ij->i", q, k)
    c = rule.factor(d)
    truth = c * dots
    with np.errstate(over="ignore", invalid="ignore"):
        after = half_dots(q, k) * np.float16(c)
        root = np.float16(math.sqrt(c))
        split = half_dots(q.astype(np.float16) * root, k.astype(np.float16) * root)
    return HalfRow(
        dim=d, scaling=rule.label, pairs=pairs,
        largest_dot=float(np.max(np.abs(dots))),
        overflow_after=float(np.mean(~np.isfinite(after))),
        overflow_split=float(np.mean(~np.isfinite(split))),
        error_after=_worst(after, truth), error_split=_worst(split, truth))
