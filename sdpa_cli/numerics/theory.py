"""Closed forms for q·k: exact moments for every law offered, standard errors, densities.

All moments are in standardized units: components have unit variance and mean m = μ/σ, so
the dot product of the physical vectors is σ² times the one computed here.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np


def component_moment(kind: str, j: int) -> float:
    """E[X^j] for a standardized component X (mean 0, variance 1) of the given law."""
    if j % 2:
        return 0.0
    if kind == "normal":
        return float(math.prod(range(j - 1, 0, -2))) if j else 1.0  # (j−1)!!
    if kind == "uniform":
        return float(3.0 ** (j / 2) / (j + 1))  # X uniform on [−√3, √3]
    if kind == "rademacher":
        return 1.0
    raise ValueError(f"no component law {kind!r}")


Poly = dict[tuple[int, int], float]  # {(power of X, power of Y): coefficient}


def _mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for (i, j), ca in a.items():
        for (k, m), cb in b.items():
            key = (i + k, j + m)
            out[key] = out.get(key, 0.0) + ca * cb
    return out


def _expect(p: Poly, kind_x: str, kind_y: str) -> float:
    """E[p(X, Y)] for independent X and Y of the given standardized laws."""
    return sum(
        c * component_moment(kind_x, i) * component_moment(kind_y, j) for (i, j), c in p.items()
    )


def _central_powers(p: Poly, kind_x: str, kind_y: str) -> tuple[float, float, float]:
    """E[p²], E[p³], E[p⁴] of a centred polynomial p."""
    p2 = _mul(p, p)
    p3 = _mul(p2, p)
    p4 = _mul(p2, p2)
    return _expect(p2, kind_x, kind_y), _expect(p3, kind_x, kind_y), _expect(p4, kind_x, kind_y)


@dataclass(frozen=True)
class DotMoments:
    """Mean, variance and fourth central moment of q·k (standardized units).

    `kurt`, when given, is the kurtosis computed without forming μ₄: for a huge mean μ₄ can
    overflow (≈ 1e600) while the variance and kurtosis are ordinary numbers.
    """

    mean: float
    variance: float
    mu4: float  # E[(q·k − mean)⁴]; may be inf where only `kurt` is representable
    kurt: float | None = None

    @property
    def kurtosis(self) -> float:
        if self.kurt is not None:
            return self.kurt
        return self.mu4 / (self.variance * self.variance)

    def variance_se(self, n: int) -> float:
        """se of the sample variance of n draws, as σ²·√((kurtosis − (n−3)/(n−1))/n)."""
        if self.variance == 0.0:
            return 0.0
        excess = max(0.0, self.kurtosis - (n - 3) / (n - 1))
        return self.variance * math.sqrt(excess / n)

    def scaled(self, c: float) -> DotMoments:
        """The moments of c·(q·k)."""
        return DotMoments(c * self.mean, c * c * self.variance, c**4 * self.mu4, self.kurt)


@functools.lru_cache(maxsize=1024)  # pure; a figure's smooth curve asks 200 times per law
def term_moments(kind: str, m: float, rho: float, scale: float = 1.0
                 ) -> tuple[float, float, float, float]:
    """Mean and central moments μ2, μ3, μ4 of one term W = q_i·k_i, the central moments
    in units of `scale` (i.e. of W/scale), so that a huge m need not overflow.

    q_i = m + X and k_i = m + Y with standardized X, Y and corr(X, Y) = ρ. For the normal law
    Y = ρX + √(1−ρ²)Z (jointly Gaussian). For the other laws Y is a copy of X (or its mirror
    −X when ρ < 0) with probability |ρ| and an independent draw otherwise, which keeps the
    marginal law and gives corr = ρ. The centred term W − E[W] is written out so that the
    large m² part cancels exactly instead of in floating point.
    """
    mean = m * m + rho
    ms, u = m / scale, 1.0 / scale
    if kind == "normal":
        s = math.sqrt(max(0.0, 1.0 - rho * rho))
        # W − E[W] = m(1+ρ)X + m·s·Z + ρX² + s·XZ − ρ, with Z independent of X.
        p: Poly = {(1, 0): ms * (1 + rho), (0, 1): ms * s, (2, 0): rho * u, (1, 1): s * u,
                   (0, 0): -rho * u}
        mu2, mu3, mu4 = _central_powers(p, "normal", "normal")
        return mean, mu2, mu3, mu4
    a = abs(rho)
    c = 1.0 if rho >= 0 else -1.0
    # Independent branch: W − E[W] = mX + mY + XY − ρ.
    indep: Poly = {(1, 0): ms, (0, 1): ms, (1, 1): u, (0, 0): -rho * u}
    # Copy branch (Y = cX): W − E[W] = m(1+c)X + cX² − ρ.
    copy: Poly = {(1, 0): ms * (1 + c), (2, 0): c * u, (0, 0): -rho * u}
    i2, i3, i4 = _central_powers(indep, kind, kind)
    c2, c3, c4 = _central_powers(copy, kind, kind)
    return mean, a * c2 + (1 - a) * i2, a * c3 + (1 - a) * i3, a * c4 + (1 - a) * i4


def dot_moments(kind: str, d: int, m: float = 0.0, rho: float = 0.0) -> DotMoments:
    """Exact mean, variance and fourth central moment of q·k over d iid coordinates."""
    if kind == "sphere":
        # u·v for independent uniform unit vectors: a coordinate of a uniform unit vector.
        return DotMoments(0.0, 1.0 / d, 3.0 / (d * (d + 2.0)), 3.0 * d / (d + 2.0))
    scale = 1.0 + abs(m)  # keeps every coefficient of the term's polynomial O(1)
    mean, mu2, _mu3, mu4 = term_moments(kind, m, rho, scale)
    variance = d * mu2 * scale * scale
    with np.errstate(over="ignore"):
        unit4 = float(np.float64(scale) ** 4)
    kurt = 3.0 + (mu4 - 3.0 * mu2 * mu2) / (d * mu2 * mu2) if mu2 > 0 else None
    mu4_total = (d * (mu4 - 3.0 * mu2 * mu2) + 3.0 * (d * mu2) ** 2) * unit4
    return DotMoments(d * mean, variance, mu4_total, kurt)


def cosine_moments(kind: str, d: int, m: float = 0.0, rho: float = 0.0) -> DotMoments | None:
    """Moments of cos(q, k) when a closed form exists (isotropic laws), else None."""
    if kind == "sphere" or (kind == "normal" and m == 0.0 and rho == 0.0):
        return dot_moments("sphere", d)
    return None


def variance_se(variance: float, mu4: float, n: int) -> float:
    """Standard error of the unbiased sample variance of n draws: √((μ₄ − σ⁴(n−3)/(n−1))/n)."""
    return math.sqrt(max(0.0, (mu4 - variance * variance * (n - 3) / (n - 1)) / n))


# --- densities, for the curves drawn over histograms -------------------------------------


def log_bessel_k(nu: float, z: np.ndarray, points: int = 129) -> np.ndarray:
    """log K_ν(z) for z > 0 from K_ν(z) = ∫₀^∞ exp(−z·cosh t)·cosh(νt) dt.

    The integrand is summed in log space with the trapezoid rule on the window where it is
    within e⁻⁴⁰ of its peak t* = asinh(ν/z); the integrand is analytic, so the rule converges
    geometrically and 129 points give full double precision for any order and argument
    (checked against mpmath in the tests). Evaluated in chunks of z to bound memory.
    """
    z = np.atleast_1d(np.asarray(z, dtype=float))
    out = np.empty_like(z)
    chunk = max(1, 2**18 // points)
    for start in range(0, z.size, chunk):
        out[start : start + chunk] = _log_bessel_k_chunk(abs(float(nu)), z[start : start + chunk],
                                                         points)
    return out


_DROP = 40.0  # the integrand is summed where it is within e^-40 of its peak


def _bessel_window(nu: float, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Peak t* and how far below and above it the log-integrand stays within _DROP.

    With h(t) = −z·cosh t + νt and R = √(z² + ν²) = z·cosh t*:
    above: h(t*+Δ) − h(t*) ≤ −R(cosh Δ − 1), so Δ = acosh(1 + drop/R) suffices;
    below: h(t*−Δ) − h(t*) = −(R−ν)(cosh Δ − 1) − ν(Δ − 1 + e^−Δ), solved by bisection.
    """
    t_peak = np.arcsinh(nu / z)
    radius = np.hypot(z, nu)
    above = np.arccosh(1.0 + _DROP / radius)
    excess = radius - nu
    hi = np.arccosh(1.0 + _DROP / np.maximum(excess, 1e-300))
    if nu > 0:
        hi = np.minimum(hi, _DROP / nu + 2.0)
    lo = np.zeros_like(hi)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        short = excess * (np.cosh(mid) - 1.0) + nu * (mid - 1.0 + np.exp(-mid)) < _DROP
        lo = np.where(short, mid, lo)
        hi = np.where(short, hi, mid)
    return t_peak, np.minimum(t_peak, hi), above


def _log_bessel_k_chunk(nu: float, z: np.ndarray, points: int) -> np.ndarray:
    t_peak, below, above = _bessel_window(nu, z)
    u = np.linspace(0.0, 1.0, points)
    t = (t_peak - below)[:, None] + (below + above)[:, None] * u[None, :]
    nut = nu * t
    log_cosh = nut + np.log1p(np.exp(-2.0 * nut)) - math.log(2.0)
    g = -z[:, None] * np.cosh(t) + log_cosh
    top = g.max(axis=1, keepdims=True)
    weights = np.full(points, 1.0)
    weights[0] = weights[-1] = 0.5
    step = (below + above) / (points - 1)
    out: np.ndarray = top[:, 0] + np.log((np.exp(g - top) * weights).sum(axis=1) * step)
    return out


def gaussian_dot_density(x: np.ndarray, d: int, rho: float = 0.0) -> np.ndarray:
    """Exact density of q·k for standard normal components with corr ρ and mean 0.

    q·k = ½((1+ρ)A − (1−ρ)B) with A, B independent χ²_d: a difference of two gamma
    variables of shape d/2, i.e. a (skewed when ρ ≠ 0) variance-gamma law.
    """
    x = np.asarray(x, dtype=float)
    k = d / 2.0
    if rho in (1.0, -1.0):  # a single scaled χ²_d
        y = x if rho == 1.0 else -x
        out = np.zeros_like(x)
        pos = y > 0
        yp = y[pos]
        out[pos] = np.exp((k - 1) * np.log(yp) - yp / 2 - math.lgamma(k) - k * math.log(2.0))
        return out
    theta1, theta2 = 1.0 + rho, 1.0 - rho  # scales of the two gamma variables
    alpha = 0.5 * (1.0 / theta1 + 1.0 / theta2)
    beta = 0.5 * (1.0 / theta2 - 1.0 / theta1)
    nu = k - 0.5
    out = np.empty_like(x)
    zero = x == 0.0
    ax = np.abs(x[~zero])
    log_f = (
        -k * math.log(theta1 * theta2)  # γ^{2λ} with γ² = 1/(θ1θ2)
        + nu * np.log(ax)
        + log_bessel_k(nu, alpha * ax)
        - 0.5 * math.log(math.pi)
        - math.lgamma(k)
        - nu * math.log(2.0 * alpha)
        + beta * x[~zero]
    )
    out[~zero] = np.exp(log_f)
    if zero.any():  # the limit of |x|^ν K_ν(α|x|) at 0 is Γ(ν)2^{ν−1}α^{−ν} for ν > 0
        out[zero] = (
            math.exp(
                -k * math.log(theta1 * theta2)
                + math.lgamma(nu)
                + (nu - 1) * math.log(2.0)
                - nu * math.log(alpha)
                - 0.5 * math.log(math.pi)
                - math.lgamma(k)
                - nu * math.log(2.0 * alpha)
            )
            if nu > 0
            else math.inf
        )
    return out


def sphere_dot_density(t: np.ndarray, d: int) -> np.ndarray:
    """Density of u·v for independent uniform unit vectors in d ≥ 2 dimensions."""
    t = np.asarray(t, dtype=float)
    out = np.zeros_like(t)
    inside = np.abs(t) < 1.0
    log_norm = math.lgamma(d / 2.0) - math.lgamma(0.5) - math.lgamma((d - 1) / 2.0)
    out[inside] = np.exp(log_norm + (d - 3) / 2.0 * np.log1p(-t[inside] ** 2))
    return out


def normal_density(x: np.ndarray, mean: float, variance: float) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    return np.exp(-0.5 * (x - mean) ** 2 / variance) / math.sqrt(2.0 * math.pi * variance)


# Beyond this d the variance-gamma log-density is a difference of terms of size d·ln d whose
# rounding (d·ln d·2⁻⁵³) is no longer small: the normal law (excess kurtosis 6/d) is closer.
EXACT_DENSITY_MAX_D = 10**8


def dot_density(
    x: np.ndarray, kind: str, d: int, m: float = 0.0, rho: float = 0.0
) -> tuple[np.ndarray, str]:
    """The density of q·k (standardized units) and what it is: 'exact' or 'normal approx.'."""
    if kind == "sphere":
        if d >= 2:
            return sphere_dot_density(x, d), "exact"
        mom = dot_moments(kind, d)
        return normal_density(x, mom.mean, mom.variance), "normal approx."
    if kind == "normal" and m == 0.0 and d <= EXACT_DENSITY_MAX_D:
        return gaussian_dot_density(x, d, rho), "exact"
    mom = dot_moments(kind, d, m, rho)
    if mom.variance <= 0.0:  # q·k is a constant (e.g. ±1 components with ρ = ±1)
        return np.zeros_like(np.asarray(x, dtype=float)), "none (q·k is constant)"
    return normal_density(x, mom.mean, mom.variance), "normal approx."
