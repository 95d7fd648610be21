"""The number-of-keys axis: the exact leading-key family and the random-energy-model threshold."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.numerics.scaling import Scaling, finish

Array = NDArray[np.float64]


@dataclass(frozen=True)
class LeadingKey:
    """softmax of (g, 0, …, 0) with n − 1 tied keys, exactly, for each n (arrays over n)."""

    keys: Array
    gap: Array  # the margin after the rule: g·factor(d, n), capped if the rule caps
    max_prob: Array  # p₁ = 1/(1 + (n−1)e^−g)
    entropy: Array  # nats
    entropy_ratio: Array  # entropy / ln n (1 for uniform weights; n = 1 gives 0)
    frobenius: Array  # ‖J‖_F of J = diag(p) − ppᵀ


def _softplus(a: Array) -> Array:
    out: Array = np.logaddexp(0.0, a)
    return out


def leading_key(keys: list[int] | Array, margin: float, rule: Scaling | None = None,
                d: int = 1) -> LeadingKey:
    """The leading-key family at each n: one key leads the other n − 1 (tied) by `margin` in
    q·k units; the rule turns that into the score gap g (so logn's S·ln n grows g with n).

    With a = ln(n−1) − g: log p₁ = −softplus(a), 1 − p₁ = sigmoid(a), entropy = softplus(a) +
    g·sigmoid(a), and ‖J‖²_F = p₁²(1−p₁)² + (n−1)p₀²(1−p₀)² + 2(n−1)p₁²p₀² + (n−1)(n−2)p₀⁴
    with p₀ = e^−g·p₁: every term positive, nothing cancels at any margin.
    """
    n = np.asarray(keys, dtype=np.float64)
    if np.any(n < 1) or np.any(n != np.round(n)):
        raise ValueError("key counts are whole numbers ≥ 1")
    rule = rule or Scaling.parse("none")
    gap = np.array([float(finish(np.array(margin), rule, d, int(k))) for k in n])
    with np.errstate(divide="ignore"):
        a = np.where(n > 1, np.log(np.maximum(n - 1, 1)) - gap, -np.inf)
    log_p1 = -_softplus(a)
    p1 = np.exp(log_p1)
    rest = np.exp(-_softplus(-a))  # 1 − p₁ = sigmoid(a), without forming 1 − p₁
    rest = np.where(n > 1, rest, 0.0)
    p0 = np.where(n > 1, np.exp(-gap + log_p1), 0.0)
    entropy = np.where(n > 1, _softplus(a) + gap * rest, 0.0)
    one_minus_p0 = p1 + (n - 2) * p0
    with np.errstate(under="ignore"):
        frob2 = (p1 * p1 * rest * rest + (n - 1) * (p0 * one_minus_p0) ** 2
                 + 2 * (n - 1) * p1 * p1 * p0 * p0 + (n - 1) * (n - 2) * p0**4)
    ratio = np.divide(entropy, np.log(n), out=np.zeros_like(entropy), where=n > 1)
    return LeadingKey(n, gap, p1, entropy, ratio, np.sqrt(frob2))


def rem_threshold(n: int) -> float:
    """√(2 ln n): the score std past which softmax of n iid N(0, s²) scores condenses (REM)."""
    return math.sqrt(2.0 * math.log(n)) if n > 1 else 0.0


def rem_participation(n: int, s: float) -> float:
    """Large-n prediction of E[Σp²] for softmax of n iid N(0, s²) scores.

    Above the threshold s_c = √(2 ln n) the weights of the largest scores converge to a
    Poisson–Dirichlet law PD(μ) with μ = s_c/s, whose E[Σp²] = 1 − μ (Derrida's REM; the
    Gibbs weights e^{s·g_i} of n Gaussians, β/β_c = s/s_c). Below it, Σp² → 0 (the annealed
    value e^{s²}/n, see rem_participation_small). Convergence in n is slow (corrections
    ~ ln ln n/√ln n), which is why the study prints the finite-n gap.
    """
    sc = rem_threshold(n)
    return 1.0 - sc / s if s > sc else 0.0


def rem_participation_small(n: int, s: float) -> float:
    """Annealed E[Σp²] ≈ n·E[e^{2sg}]/(n·E[e^{sg}])² = e^{s²}/n, valid well below threshold."""
    return math.exp(s * s) / n


def _logsumexp(a: Array) -> Array:
    top = np.max(a, axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    out: Array = (np.log(np.sum(np.exp(a - top), axis=1, keepdims=True)) + top)[:, 0]
    return out


def iid_softmax_moments(n: int, s: float) -> tuple[float, float]:
    """(E[Σp²], E[entropy]) of softmax of n iid N(0, s²) scores, by one-dimensional
    quadrature (exact up to quadrature error ~1e-10, no draws).

    With Z = Σe^{s g_i}, 1/Z² = ∫₀^∞ t e^{−tZ} dt and the scores independent, t = e^u, w =
    e^{u + s g}: E[Σp²] = n ∫ E[w²e^{−w}] φ(u)^{n−1} du, φ(u) = E[e^{−w}]. Entropy = ln Z −
    s Σp_i g_i with E ln Z = ∫ (e^{−e^u} − φ^n) du (Frullani) and, by Stein's lemma,
    s E[Σp g] = n s² ∫ E[w(1−w)e^{−w}] φ^{n−1} du. Each E over g is a trapezoid sum over
    v = u + s g (integrands smooth on scale 1 in v, the Gaussian on scale s), in logs.
    """
    if n < 1 or s <= 0:
        raise ValueError("n ≥ 1 keys and a spread s > 0")
    if n == 1:
        return 1.0, 0.0
    h = min(0.2, s / 3)
    u_lo = -s * s - math.log(n) / 2 - 25.0
    u = np.arange(u_lo, 8.5 * s + 8.0 + h, h)
    v = np.arange(u_lo - 10.0 * s - 5.0, 7.0 + h, h)
    ev = np.exp(v)
    lnorm = math.log(h) - 0.5 * math.log(2 * math.pi) - math.log(s)
    log_a = np.empty(u.size)
    log_1mphi = np.empty(u.size)
    phi = np.empty(u.size)
    b = np.empty(u.size)
    for i in range(0, u.size, 256):
        lg = -((v[None, :] - u[i:i + 256, None]) ** 2) / (2 * s * s) + lnorm
        log_a[i:i + 256] = _logsumexp(lg + (2 * v - ev))
        with np.errstate(divide="ignore"):
            log_1mphi[i:i + 256] = _logsumexp(lg + np.log(-np.expm1(-ev)))
        phi[i:i + 256] = np.sum(np.exp(lg - ev), axis=1)
        b[i:i + 256] = np.sum(np.exp(lg + v - ev) * (1.0 - ev), axis=1)
    # 1 − φ from its own sum (no cancellation) while the Gaussian about u lies below the
    # grid's top (there 1 − e^{−w} is not yet 1); above, φ itself (which vanishes there)
    inside = u + 12.0 * s <= v[-1]
    with np.errstate(divide="ignore"):
        log_phi = np.where(inside, np.log1p(-np.minimum(np.exp(log_1mphi), 1.0)),
                           np.log(np.maximum(phi, 0.0)))
        rest = np.exp((n - 1) * log_phi)
        part = n * h * float(np.sum(np.exp(log_a + (n - 1) * log_phi)))
        log_z = h * float(np.sum(np.exp(-np.exp(u)) - np.exp(n * log_phi)))
    spg = n * s * s * h * float(np.sum(b * rest))
    return part, log_z - spg
