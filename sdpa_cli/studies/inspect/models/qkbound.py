"""Weight-only per-head diagnostics: the spectral norm of W_Q W_Kᵀ and the logit and
attention-entropy bounds it implies (after Zhai et al. 2023), without a forward pass.

Each head's q and k are linear maps of a bounded input: q = u·A, k = v·B with ‖u‖ ≤ r_q and
‖v‖ ≤ r_k (the output of the norm before attention, its gain and shift and the projection's
bias folded into A and B; or, for a QK-norm model, the normalised q and k themselves), then
RoPE rotates q by its position i and k by j, so q·k = u·A·R(i − j)·Bᵀ·vᵀ. Hence

    |q·k| ≤ r_q · r_k · σ,   σ ≥ ‖A·R(i − j)·Bᵀ‖₂ for every offset i − j

(σ = ‖A·Bᵀ‖₂ without RoPE, ‖A‖₂·‖B‖₂ with it: see spectra), and a rule maps that to a bound B
on every score of the row. For a row of m keys whose scores
all lie in [−B, B] the entropy is at least H_min(m, B) (min_entropy below, derived there)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.studies.inspect.models.common import Reader
from sdpa_cli.studies.inspect.models.stats import OwnRule
from sdpa_cli.studies.inspect.models.tensormap import QK

F64 = NDArray[np.float64]


@dataclass(frozen=True)
class QKMaps:
    """One layer's queries and keys as maps of bounded inputs, one per query head:
    q_h = u·a[h] with ‖u‖ ≤ radius_q and k_h = v·b[h] with ‖v‖ ≤ radius_k (under GQA b[h]
    is the shared key head's: b[h] = b[group·(h // group)]), then rotated by position when
    `rotary` (RoPE). diagonal: every a[h] and b[h] is a d_k × d_k diagonal (a QK-norm's gains),
    whose norms are the largest gains."""

    a: F64  # (heads, inputs, d_k)
    b: F64  # (heads, inputs, d_k)
    radius_q: float
    radius_k: float
    rotary: bool = False
    group: int = 1
    diagonal: bool = False


def _rotated(x: F64, inv: F64, offsets: F64) -> F64:
    """x (…, r, d) with every row rotated by each offset: (offsets, …, r, d)."""
    angles = np.outer(offsets, inv)  # (D, d/2)
    cos = np.cos(np.concatenate([angles, angles], axis=-1))
    sin = np.sin(np.concatenate([angles, angles], axis=-1))
    half = x.shape[-1] // 2
    turned = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    shape = (len(offsets),) + (1,) * (x.ndim - 1) + (x.shape[-1],)
    out: F64 = x[None] * cos.reshape(shape) + turned[None] * sin.reshape(shape)
    return out


def _factors(maps: QKMaps) -> tuple[F64, F64]:
    """Each map's (heads, ≤ d_k, d_k) triangular QR factor: a = Q·ra with Q orthonormal, so
    ‖a·M·bᵀ‖₂ = ‖ra·M·rbᵀ‖₂ for any M, whatever the model's width. b's once per key head."""
    ra = np.asarray(np.linalg.qr(maps.a, mode="r"), dtype=np.float64)
    rb = np.asarray(np.linalg.qr(maps.b[::maps.group], mode="r"), dtype=np.float64)
    return ra, np.repeat(rb, maps.group, axis=0)


def offset_norms(maps: QKMaps, inv: F64 | None, offsets: NDArray[Any],
                 factors: tuple[F64, F64] | None = None) -> F64:
    """‖a_h·R(δ)·b_hᵀ‖₂ per head (rows) and offset δ (columns; one column when `inv`, RoPE's
    inverse frequencies, is None), one d_k × d_k SVD per head and offset."""
    ra, rb = factors if factors is not None else _factors(maps)
    if inv is None:
        c = ra @ np.swapaxes(rb, -1, -2)
        out: F64 = np.asarray(np.linalg.svd(c, compute_uv=False)[:, :1], dtype=np.float64)
        return out
    turned = _rotated(ra, inv, np.asarray(offsets, dtype=np.float64))  # (D, heads, r, d)
    c = turned @ np.swapaxes(rb, -1, -2)[None]
    out = np.ascontiguousarray(np.linalg.svd(c, compute_uv=False)[..., 0].T)  # (heads, D)
    return out


@dataclass(frozen=True)
class Spectra:
    """One layer's spectral norms per head: `at_zero` = ‖a·bᵀ‖₂ (W_Q W_Kᵀ itself, the scores
    of a query and key at the same position), and `bound` ≥ ‖a·R(δ)·bᵀ‖₂ at every offset δ a
    row sees: the same without RoPE, ‖a‖₂·‖b‖₂ with it."""

    at_zero: F64
    bound: F64
    radius_q: float
    radius_k: float


def spectra(maps: QKMaps) -> Spectra:
    """Under RoPE the exact largest ‖a·R(δ)·bᵀ‖₂ over the offsets of n keys costs one SVD
    per head and offset (offset_norms: 0.3 s a layer for SmolLM2 at n = 128, more than its
    forward); ‖a‖₂·‖b‖₂ bounds it at every offset (on SmolLM2 about twice the exact largest
    over 128 offsets: still a bound, looser). So the bound needs no RoPE frequencies, only
    whether q and k are rotated. Each norm is the square root of a Gram matrix's largest
    eigenvalue: ‖a‖₂² = λ_max(aᵀa), and with bᵀb = L·Lᵀ, ‖a·bᵀ‖₂² = λ_max(aᵀa·bᵀb) =
    λ_max(Lᵀ·aᵀa·L), symmetric (a GEMM and one symmetric eigenvalue problem a head, where a QR
    and an SVD cost about twice as much). The Gram matrices square the
    condition number but not the largest eigenvalue's relative error: about ε·(‖a‖‖b‖/‖abᵀ‖)²,
    10⁻¹⁵ at the ratios of real heads (tests/test_inspect_heads.py holds them to 10⁻¹³ of
    NumPy's SVD). Diagonal maps need no factorisation: ‖diag(g)‖₂ = max |g| and
    ‖diag(g)·diag(h)‖₂ = max |g·h|."""
    if maps.diagonal:
        ga = np.abs(np.diagonal(maps.a, axis1=1, axis2=2))
        gb = np.abs(np.diagonal(maps.b, axis1=1, axis2=2))
        zero: F64 = (ga * gb).max(axis=1)
        top: F64 = ga.max(axis=1) * gb.max(axis=1)
        return Spectra(zero, top if maps.rotary else zero, maps.radius_q, maps.radius_k)
    gram_a = np.swapaxes(maps.a, -1, -2) @ maps.a
    keys = maps.b[::maps.group]  # once per key head
    gram_b = np.swapaxes(keys, -1, -2) @ keys
    root = np.repeat(_root(gram_b), maps.group, axis=0)
    zero = _sqrt_top(np.swapaxes(root, -1, -2) @ gram_a @ root)
    if not maps.rotary:
        return Spectra(zero, zero, maps.radius_q, maps.radius_k)
    product = _sqrt_top(gram_a) * np.repeat(_sqrt_top(gram_b), maps.group)
    return Spectra(zero, product, maps.radius_q, maps.radius_k)


def _root(gram: F64) -> F64:
    """L with L·Lᵀ = gram for each positive semi-definite matrix: Cholesky's, or, where one
    is singular (a head of zeros, rank below d_k), V·√max(Λ, 0) from its eigenvectors."""
    try:
        out: F64 = np.asarray(np.linalg.cholesky(gram), dtype=np.float64)
    except np.linalg.LinAlgError:
        lam, vec = np.linalg.eigh(gram)
        out = np.asarray(vec * np.sqrt(np.maximum(lam, 0.0))[..., None, :], dtype=np.float64)
    return out


def _sqrt_top(gram: F64) -> F64:
    """√ of each symmetric positive semi-definite matrix's largest eigenvalue (≥ 0)."""
    out: F64 = np.sqrt(np.maximum(np.linalg.eigvalsh(gram)[..., -1], 0.0))
    return out


def row_sigma(sp: Spectra, n: int) -> F64:
    """Per head and query row, a bound on ‖a·R(δ)·bᵀ‖₂ over the offsets the row sees:
    (heads, n) (the same for every row)."""
    return np.repeat(sp.bound[:, None], n, axis=1)


def min_entropy(m: NDArray[Any], b: NDArray[Any]) -> F64:
    """The least entropy (nats) of softmax over m scores that all lie in [−b, b].

    p = softmax(s) with |s_j| ≤ b is exactly the set P of distributions with
    p_j ≤ ρ·p_l for all j, l (ρ = e^{2b}): a polytope. Entropy is concave, so its minimum
    over P sits at a vertex. At a vertex every p_j is either the largest value or the largest
    ÷ ρ (a coordinate strictly between could move, the others rescaling to keep the sum and
    the ratio, so the point would not be a vertex). With k coordinates on top (t = 2b):

        H(k) = ln(k + (m − k)e^{−t}) + t·(m − k)e^{−t} / (k + (m − k)e^{−t}),

    whose derivative in k changes sign once, at k* = m·(ρ ln ρ − ρ + 1)/(ρ − 1)², so the
    least is at an integer beside k* (clamped to 1 … m − 1). For large b, k = 1: Zhai et
    al.'s form, log(1 + (m − 1)e^{−β}) + β(m − 1)e^{−β}/(1 + (m − 1)e^{−β}), with the logit
    range 2b as β; for small b, k ≈ m/2 and H ≈ ln m − b²/2."""
    m = np.asarray(m, dtype=np.float64)
    t = 2.0 * np.maximum(np.asarray(b, dtype=np.float64), 0.0)
    m, t = np.broadcast_arrays(m, t)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        em1 = np.expm1(np.minimum(t, 700.0))
        frac = np.where(t < 1e-4, 0.5 - t / 6.0,
                        (t * (em1 + 1.0) - em1) / (em1 * em1))
    star = np.where(t > 700.0, 0.0, m * frac)
    best = np.full(m.shape, np.inf)
    for step in (-1.0, 0.0, 1.0, 2.0):
        k = np.clip(np.floor(star) + step, 1.0, np.maximum(m - 1.0, 1.0))
        best = np.minimum(best, _vertex_entropy(m, k, t))
    out: F64 = np.where(m <= 1, 0.0, best)
    return out


def _vertex_entropy(m: F64, k: F64, t: F64) -> F64:
    low = (m - k) * np.exp(-t)
    z = k + low
    out: F64 = np.log(z) + t * low / z
    return out


def logit_bound(sigma: F64, sp: Spectra, rule: Scaling | OwnRule, d: int,
                seen: NDArray[Any]) -> F64:
    """The largest |score| a rule allows, per head and row: sigma (heads, rows) from
    row_sigma, seen (rows,) the keys each row sees (logn's n). QK-norm and cosine rules
    normalise q and k first, so their bound is d·factor and factor whatever the weights."""
    if isinstance(rule, OwnRule):
        raw = sigma * (sp.radius_q * sp.radius_k * abs(rule.scale))
        cap = rule.cap
    else:
        if rule.cosine:
            pre: F64 = np.ones_like(sigma)
        elif rule.norm is not None:
            pre = np.full_like(sigma, float(d))
        else:
            pre = sigma * (sp.radius_q * sp.radius_k)
        if rule.log_n is not None:
            factor: F64 | float = rule.log_n * np.log(np.maximum(seen, 1))[None, :]
        else:
            factor = abs(rule.factor(d))
        raw = pre * factor
        cap = rule.cap
    out: F64 = np.asarray(raw, dtype=np.float64)
    if cap is not None:
        out = cap * np.tanh(out / cap)
    return out


def entropy_bound(bound: F64, seen: NDArray[Any]) -> F64:
    """Per head, the mean over the rows that see more than one key of H_min(m, B) ÷ ln m:
    a floor under the measured entropy_ratio. bound: (heads, rows) from logit_bound."""
    wide = np.asarray(seen) > 1
    m = np.asarray(seen)[wide].astype(np.float64)
    if not m.size:
        return np.full(bound.shape[0], math.nan)
    out: F64 = (min_entropy(m[None, :], bound[:, wide]) / np.log(m)[None, :]).mean(axis=1)
    return out


# ── the maps of each layout ─────────────────────────────────────────────────────────────

def _w(read: Reader, name: str) -> F64:
    return np.asarray(read(name), dtype=np.float64)


def _maybe(read: Reader, name: str) -> F64 | None:
    try:
        return _w(read, name)
    except KeyError:
        return None


def _heads(w: F64, count: int, dim: int) -> F64:
    """A projection (inputs, count·dim), as y = x·w, split per head: (count, inputs, dim)."""
    return np.ascontiguousarray(w.reshape(w.shape[0], count, dim).transpose(1, 0, 2))


def _normed(w: F64, bias: F64 | None, gain: F64 | None, shift: F64 | None,
            centred: bool) -> tuple[F64, bool]:
    """x̂·w + bias with x̂ = z ⊙ gain + shift (z the norm's unit-RMS output) as u·A, and
    whether the input was augmented with a constant 1 (a shift or a bias): u = [z, 1].
    LayerNorm's z is centred, so the centring projection is folded in too."""
    a = w if gain is None else gain[:, None] * w
    if centred:
        a = a - a.mean(axis=0, keepdims=True)  # z ⊥ 1: z·a = z·(a − mean)
    extra = np.zeros(w.shape[1])
    if shift is not None:
        extra = extra + shift @ w
    if bias is not None:
        extra = extra + bias
    if shift is None and bias is None:
        return a, False
    return np.vstack([a, extra[None, :]]), True


def _linear_maps(wq: F64, bq: F64 | None, wk: F64, bk: F64 | None, gain: F64 | None,
                 shift: F64 | None, centred: bool, count: int, kv: int, dim: int,
                 rotary: bool) -> QKMaps:
    """Maps of pre-norm (or post-norm: the previous norm) attention: the norm's z has
    ‖z‖ ≤ √width (unit RMS; eps only shrinks it); a constant 1 beside it adds 1 to ‖u‖²."""
    width = wq.shape[0]
    a, aug_q = _normed(wq, bq, gain, shift, centred)
    b, aug_k = _normed(wk, bk, gain, shift, centred)
    if aug_q != aug_k:  # one input for both: augment both
        a = a if aug_q else np.vstack([a, np.zeros((1, a.shape[1]))])
        b = b if aug_k else np.vstack([b, np.zeros((1, b.shape[1]))])
    radius = math.sqrt(width + (1 if (aug_q or aug_k) else 0))
    group = count // kv
    return QKMaps(_heads(a, count, dim), np.repeat(_heads(b, kv, dim), group, axis=0),
                  radius, radius, rotary, group)


def layer_maps(qk: QK, read: Reader) -> dict[str, QKMaps]:
    """One layer's maps, as its family's table declares them: "q,k" is what the dot product
    sees; "pre-norm" the q and k before a QK-norm, when a norm precedes attention (without one,
    as in OLMo 2, the residual stream is unbounded and so are the pre-norm scores)."""
    wq, wk = _w(read, f"{qk.q}.weight").T, _w(read, f"{qk.k}.weight").T
    bq = _maybe(read, f"{qk.q}.bias") if qk.biases else None
    bk = _maybe(read, f"{qk.k}.bias") if qk.biases else None
    linear = None
    if qk.norm is not None:
        gain = _w(read, f"{qk.norm}.weight") + qk.offset
        shift = _w(read, f"{qk.norm}.bias") if qk.centred else None
        linear = _linear_maps(wq, bq, wk, bk, gain, shift, qk.centred, qk.heads, qk.kv, qk.dim,
                              qk.rotary)
    if qk.qk_norm is None:
        assert linear is not None  # QK refuses a layer with neither
        return {"q,k": linear}
    gq = _w(read, f"{qk.q_norm}.weight") + qk.offset
    gk = _w(read, f"{qk.k_norm}.weight") + qk.offset
    count, kv, dim = qk.heads, qk.kv, qk.dim
    group = count // kv
    if qk.qk_norm == "head":  # qwen3, gemma3: each head's q has unit RMS over d_k
        a = np.repeat(np.diag(gq)[None], count, axis=0)
        b = np.repeat(np.diag(gk)[None], count, axis=0)
        rq = rk = math.sqrt(dim)
    else:  # over the whole projection (olmo2): one head's part is at most all of it
        a = np.stack([np.diag(gq[h * dim:(h + 1) * dim]) for h in range(count)])
        b = np.stack([np.diag(gk[(h // group) * dim:(h // group + 1) * dim])
                      for h in range(count)])
        rq, rk = math.sqrt(count * dim), math.sqrt(kv * dim)
    out = {"q,k": QKMaps(a, b, rq, rk, True, group, diagonal=True)}
    if linear is not None:
        out["pre-norm"] = linear
    return out
