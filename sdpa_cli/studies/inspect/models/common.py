"""Pieces every family shares: the weight reader, norms, activations, masked softmax, init draws."""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.polynomial import chebyshev
from numpy.typing import NDArray

from sdpa_cli.studies.inspect.models.threads import for_product

Array = NDArray[np.floating[Any]]
F64 = NDArray[np.float64]
# name (without the checkpoint's prefix such as "bert.") → that tensor, any float dtype.
# KeyError when the checkpoint has no such tensor; the caller owns every file.
Reader = Callable[[str], NDArray[Any]]


@dataclass(frozen=True)
class LayerOut:
    """One layer as its attention sees it (the interface between the forward passes and the
    statistics: every family fills the same fields).

    q, k: (sequences, query heads, n, head_dim), the vectors the model's own scores use (after
    biases, any QK-norm and RoPE); under GQA each query head carries the key head it shares.
    scale: the model's own multiplier on q·k; cap: its soft-cap C (scores C·tanh(s/C) after
    the multiplier), None without. causal: query i sees keys 0…i; window: a sliding window
    (query i sees keys j with i − j < window), None for full attention. hidden: the residual
    stream after the layer (for decoders, the last layer's is after the final norm, as
    transformers reports it). v: the values, per query head like k. q_pre, k_pre: for a
    QK-norm model, the projections before the norm, rotated by the same RoPE (the scores q·k
    would have had without the norm); None otherwise. rule: the model's own rule in words,
    e.g. "÷√64", "QK-norm, then ÷√128", "soft-cap 50 after ÷√256"."""

    q: Array
    k: Array
    scale: float
    causal: bool
    hidden: Array
    v: Array | None = None
    window: int | None = None
    cap: float | None = None
    q_pre: Array | None = None
    k_pre: Array | None = None
    rule: str = ""

    def mask(self, n: int) -> NDArray[np.bool_] | None:
        """(n, n), True where query i sees key j; None when every query sees every key."""
        return visible(n, self.causal, self.window)


@dataclass(frozen=True)
class Resume:
    """A forward changed or resumed (the interventions on the attention scale): layer i's
    scale is multiplied by factors.get(i, 1) (on q·k, after any QK-norm, before any cap),
    and the layers run from `start`, whose input residual stream is `residual` (None: the
    embeddings of the ids, so `start` must then be 0)."""

    factors: Mapping[int, float] = field(default_factory=dict)
    start: int = 0
    residual: Array | None = None

    def begin(self, layers: int) -> int:
        if not 0 <= self.start < layers or (self.residual is None) != (self.start == 0):
            raise ValueError(f"a forward resumes at a layer in 1…{layers - 1} from its "
                             f"residual, or at 0 from the ids (got {self.start})")
        return self.start


def visible(n: int, causal: bool, window: int | None = None) -> NDArray[np.bool_] | None:
    """The attention mask of n tokens: causal and/or a sliding window; None for neither."""
    if not causal and window is None:
        return None
    i = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    out: NDArray[np.bool_] = np.ones((n, n), dtype=bool)
    if causal:
        out &= j <= i
    if window is not None:
        out &= np.abs(i - j) < window
    return out


class ConfigError(ValueError):
    """A config lacks a field its family needs, or holds one we cannot honour; `field` names
    the config field when there is one."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


MAX_DIM = 1 << 24  # no config count (layers, heads, widths) is anywhere near this


def integer(config: Mapping[str, Any], name: str, default: int | None = None,
            low: int = 1) -> int:
    """An integer field in low…MAX_DIM (absent: `default`, or ConfigError when None)."""
    value = config.get(name)
    if value is None:
        if default is None:
            raise ConfigError(f"the config has no {name!r}", name)
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_DIM:
        raise ConfigError(f"{name} must be an integer in {low}…{MAX_DIM}, not {value!r}", name)
    return value


def real(config: Mapping[str, Any], name: str, default: float | None = None,
         positive: bool = True) -> float:
    """A finite number (> 0 when `positive`); absent: `default`, or ConfigError when None."""
    value = config.get(name)
    if value is None:
        if default is None:
            raise ConfigError(f"the config has no {name!r}", name)
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not math.isfinite(value) or (positive and value <= 0):
        raise ConfigError(f"{name} must be a finite {'positive ' if positive else ''}number, "
                          f"not {value!r}", name)
    return float(value)


def choice(config: Mapping[str, Any], name: str, default: str, known: Sequence[str]) -> str:
    value = config.get(name, default)
    if value is None:
        value = default
    if not isinstance(value, str) or value not in known:
        raise ConfigError(f"{name} {value!r} is not supported; known: {', '.join(known)}", name)
    return value


def need(config: Mapping[str, Any], *names: str) -> Any:
    """The first of `names` present in the config; ConfigError naming them all otherwise."""
    for name in names:
        if config.get(name) is not None:
            return config[name]
    raise ConfigError(f"the config has no {' or '.join(repr(n) for n in names)}")


def weight(read: Reader, name: str, dtype: type) -> Array:
    out: Array = np.asarray(read(name), dtype=dtype)
    return out


def rows(read: Reader, name: str, ids: NDArray[np.integer[Any]], dtype: type) -> Array:
    """Rows `ids` of a 2-D tensor (an embedding): through the reader's own `rows` when it has
    one (a GGUF reader dequantises only those rows), else the whole tensor, then indexed."""
    pick = getattr(read, "rows", None)
    out: Array = np.asarray(pick(name, ids) if pick is not None else read(name)[ids],
                            dtype=dtype)
    return out


def optional(read: Reader, name: str, dtype: type) -> Array | None:
    """A tensor the family may or may not have (q/k/v biases): None when absent."""
    try:
        return weight(read, name, dtype)
    except KeyError:
        return None


def layer_norm(x: Array, w: Array, b: Array, eps: float) -> Array:
    c: Array = x - x.mean(axis=-1, keepdims=True)
    var = np.einsum("...i,...i->...", c, c)[..., None] / c.shape[-1]
    c /= np.sqrt(var + eps)  # in place: one activation-sized array in all
    c *= w
    c += b
    return c


def rms_norm(x: Array, w: Array, eps: float, offset: float = 0.0) -> Array:
    """x / rms(x) · (offset + w): offset 0 for Llama-style norms, 1 for Gemma's (1 + w)."""
    gain = w if offset == 0.0 else offset + w
    out: Array = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * gain
    return out


# NumPy has no erf, and BERT's GELU needs it exact. Two polynomial pieces, each the
# Chebyshev interpolant of math.erf (error ~1e-15): erf(x) = x·A(x²) for |x| ≤ 2, and
# erfc(x) = exp(−x²)/x · B(1/x²) for 2 < |x| < 6 (both smooth there); erf = ±1 beyond 6.
_SPLIT, _TOP = 2.0, 6.0
_U0, _U1 = 1.0 / _TOP**2, 1.0 / _SPLIT**2


def _fit(f: Callable[[F64], F64], degree: int) -> F64:
    """Power-basis coefficients in t ∈ [−1, 1], highest power first (for Horner)."""
    cheb: Any = chebyshev.chebinterpolate  # numpy's stubs want a scalar-valued f
    out: F64 = np.asarray(chebyshev.cheb2poly(cheb(f, degree)), dtype=np.float64)[::-1]
    return out


def _erf_small(t: F64) -> F64:  # A(z) = erf(√z)/√z with z = 2(t + 1) ∈ [0, 4]
    r = np.sqrt(2.0 * (t + 1.0))
    safe = np.where(r > 0, r, 1.0)
    out: F64 = np.where(r > 0, _ERF(r) / safe, 2.0 / math.sqrt(math.pi))
    return out


def _erf_large(t: F64) -> F64:  # B(u) = erfc(x)·x·exp(x²) with u = 1/x² ∈ [1/36, 1/4]
    x = 1.0 / np.sqrt(_U0 + (t + 1.0) * (_U1 - _U0) / 2.0)
    out: F64 = _ERFC(x) * x * np.exp(x * x)
    return out


_ERF = np.vectorize(math.erf)
_ERFC = np.vectorize(math.erfc)
# float64 pieces (≤ 5e-15), and shorter ones for float32 input (≤ 1.4e-7 against math.erf,
# about two of float32's steps near 1): the GELU is half of a float32 BERT forward otherwise.
_PIECES = {np.dtype(np.float64): (_fit(_erf_small, 18), _fit(_erf_large, 14)),
           np.dtype(np.float32): (_fit(_erf_small, 9), _fit(_erf_large, 5))}


def _horner(coef: F64, t: Array) -> Array:
    acc: Array = np.multiply(t, coef[0], dtype=t.dtype)
    acc += coef[1]
    for c in coef[2:]:
        acc *= t  # in place: no temporaries per degree
        acc += c
    return acc


# float32: erf by linear interpolation in a table of math.erf at steps of 1/1024 on [0, 4]
# (|error| ≤ h²/8 · max|erf''| ≈ 1.2e-7, about float32's step near 1; erf(4) rounds to 1 in
# float32): a gather and a multiply-add instead of two polynomials.
_STEP = 1024
_GRID = np.array([math.erf(i / _STEP) for i in range(4 * _STEP + 2)], dtype=np.float64)
_TABLE = (_GRID[:-1].astype(np.float32), np.diff(_GRID).astype(np.float32))


def _erf32(x: NDArray[np.float32]) -> NDArray[np.float32]:
    t = np.abs(x)
    t *= np.float32(_STEP)
    np.minimum(t, np.float32(4 * _STEP), out=t)
    i = t.astype(np.int32)
    t -= i
    out = _TABLE[1].take(i)
    out *= t
    out += _TABLE[0].take(i)
    result: NDArray[np.float32] = np.copysign(out, x)
    return result


def erf(x: Array) -> Array:
    """erf elementwise: ~1e-15 in float64 (two polynomial pieces, odd), ~1.5e-7 in float32
    (a table).
    The small piece runs over the whole array (its argument clipped to its range) and the
    large piece only over the elements beyond it, usually few: arithmetic over every element
    is far cheaper than gathering and scattering most of them."""
    if x.dtype == np.float32:
        return _erf32(x)
    a = np.abs(x)
    small_poly, large_poly = _PIECES.get(a.dtype, _PIECES[np.dtype(np.float64)])
    xs = np.minimum(a, _SPLIT)
    t = xs * xs
    t *= 0.5
    t -= 1.0
    out = _horner(small_poly, t)
    out *= xs
    beyond = np.flatnonzero(a > _SPLIT)
    if beyond.size:
        flat = out.reshape(-1)
        xl = np.minimum(a.reshape(-1)[beyond], _TOP)
        u = (1.0 / (xl * xl) - _U0) * (2.0 / (_U1 - _U0)) - 1.0
        flat[beyond] = np.where(xl < _TOP, 1.0 - np.exp(-xl * xl) / xl * _horner(large_poly, u),
                                1.0)
    result: Array = np.copysign(out, x)
    return result


BLOCK = 1 << 14  # elements per block: a block's temporaries stay in the CPU's cache


def _by_blocks(x: Array, half_gate: Callable[[Array], Array]) -> Array:
    """½x(1 + g(x)) block by block, g returning a new array: passes over a cache-sized block
    are several times faster than over a whole activation."""
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    for i in range(0, flat.size, BLOCK):
        b = flat[i:i + BLOCK]
        t = half_gate(b)
        t += 1.0
        t *= b
        t *= 0.5
        out[i:i + BLOCK] = t
    result: Array = out.reshape(x.shape)
    return result


def gelu(x: Array) -> Array:
    """GELU with the exact erf (BERT's "gelu"): erf(x/√2) takes a few dozen passes."""
    root = np.asarray(1.0 / math.sqrt(2.0), dtype=x.dtype)
    return _by_blocks(x, lambda b: erf(b * root))


def gelu_tanh(x: Array) -> Array:
    """GELU's tanh form (GPT-2's "gelu_new", Gemma's "gelu_pytorch_tanh"),
    ½x(1 + tanh(√(2/π)(x + 0.044715x³))), the argument as x(c + c'x²): x ** 3 in float32
    goes through pow, tens of times slower than two multiplies."""
    c = math.sqrt(2.0 / math.pi)
    inner = np.asarray(c, dtype=x.dtype)
    cubic = np.asarray(c * 0.044715, dtype=x.dtype)

    def gate(b: Array) -> Array:
        t = b * b
        t *= cubic
        t += inner
        t *= b
        out: Array = np.tanh(t, out=t)
        return out

    return _by_blocks(x, gate)


def silu(x: Array) -> Array:
    """x·σ(x) = x / (1 + exp(−x)), in place on one temporary."""
    t = np.negative(x)
    with np.errstate(over="ignore"):  # exp(−x) = inf for x below −88 (float32): x/inf = −0
        np.exp(t, out=t)
    t += 1.0
    out: Array = np.divide(x, t, out=t)
    return out


ACTIVATIONS: dict[str, Callable[[Array], Array]] = {
    "gelu": gelu, "gelu_new": gelu_tanh, "gelu_pytorch_tanh": gelu_tanh, "silu": silu,
    "swish": silu, "relu": lambda x: np.maximum(x, 0.0),
}


def activation(name: str, field: str | None = None) -> Callable[[Array], Array]:
    if name not in ACTIVATIONS:
        raise ConfigError(f"activation {name!r} is not supported; known: "
                          f"{', '.join(sorted(ACTIVATIONS))}", field)
    return ACTIVATIONS[name]


def matmul_t(h: Array, w: Array) -> Array:
    """h @ wᵀ for h of shape (…, in) and w (out, in), as one 2-D BLAS product (a stacked
    product calls BLAS once per leading index)."""
    out: Array = (h.reshape(-1, h.shape[-1]) @ w.T).reshape(*h.shape[:-1], w.shape[0])
    return out


def heads(x: Array, count: int, dim: int) -> Array:
    """(sequences, n, count·dim) → (sequences, count, n, dim)."""
    s, n, _ = x.shape
    return x.reshape(s, n, count, dim).transpose(0, 2, 1, 3)


def merge(x: Array) -> Array:
    """(sequences, heads, n, dim) → (sequences, n, heads·dim)."""
    s, h, n, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(s, n, h * d)


def softmax_rows(s: Array, mask: NDArray[np.bool_] | None) -> Array:
    """Softmax along the last axis; keys where `mask` is False get weight 0 (in s's dtype)."""
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    out: Array = e / e.sum(axis=-1, keepdims=True)
    return out


ATTEND_ELEMENTS = 1 << 24  # scores held at once by the forward's attention (64 MB float32)


def attend(q: Array, k: Array, v: Array, scale: float, causal: bool,
           window: int | None = None, cap: float | None = None) -> Array:
    """softmax(rule(q·kᵀ), masked) · v per head; k and v already carry one head per query head.
    The rule: × scale, then C·tanh(s/C) when a cap is given. One sequence and as many heads
    as ATTEND_ELEMENTS holds at a time (every head of a sequence at short n, one at long n)."""
    n = q.shape[-2]
    allowed = visible(n, causal, window)
    hidden = ~allowed if allowed is not None else None
    out: Array = np.empty((*q.shape[:-1], v.shape[-1]), dtype=np.result_type(q, v))
    heads = q.shape[1]
    step = max(1, min(heads, ATTEND_ELEMENTS // (n * n)))
    with for_product(n * n * q.shape[-1]):
        for i in range(q.shape[0]):
            for h in range(0, heads, step):
                part = slice(h, h + step)
                s = np.matmul(q[i, part], np.swapaxes(k[i, part], -1, -2))
                s *= scale
                if cap is not None:
                    s /= cap
                    np.tanh(s, out=s)
                    s *= cap
                if hidden is not None:
                    np.copyto(s, -np.inf, where=hidden)
                s -= s.max(axis=-1, keepdims=True)  # the softmax in place: no n × n temporaries
                np.exp(s, out=s)
                s /= s.sum(axis=-1, keepdims=True)
                out[i, part] = np.matmul(s, v[i, part])
    return out


def init_reader(shapes: Mapping[str, Sequence[int]], std: float, seed: int) -> Reader:
    """The family's initialisation, read like a checkpoint: matrices and embeddings iid
    N(0, std²), biases 0, norm weights (1-D `.weight`) 1. Each tensor is drawn from its own
    stream (seed, crc32 of its name), so reading order and skipped tensors change nothing."""

    def read(name: str) -> NDArray[np.float64]:
        shape = tuple(shapes[name])  # KeyError: the architecture has no such tensor
        if name.endswith(".bias"):
            return np.zeros(shape)
        if len(shape) == 1:
            return np.ones(shape)
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(
            seed, spawn_key=(zlib.crc32(name.encode()),))))
        out: NDArray[np.float64] = rng.normal(0.0, std, size=shape)
        return out

    return read
