"""Closed forms of q·k against independent derivations written out in the test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sdpa_cli.numerics import theory

LAWS = ["normal", "uniform", "rademacher"]
# E[X⁴] of a standardized component: 3 (normal), 9/5 (uniform on ±√3), 1 (±1).
KURT = {"normal": 3.0, "uniform": 9.0 / 5.0, "rademacher": 1.0}


@pytest.mark.parametrize("d", [1, 3, 64, 1000])
def test_standard_normal_matches_design_formulas(d):
    mom = theory.dot_moments("normal", d)
    assert mom.mean == 0.0
    assert mom.variance == pytest.approx(d)
    assert mom.mu4 == pytest.approx(3 * d * d + 6 * d)
    assert mom.kurtosis == pytest.approx(3 + 6 / d)


@pytest.mark.parametrize("kind", LAWS)
@pytest.mark.parametrize("mu,sigma", [(0.0, 1.0), (0.5, 1.0), (-1.5, 2.0), (3.0, 0.25)])
def test_independent_components_variance(kind, mu, sigma):
    # Var(q·k) = d[(σ²+μ²)² − μ⁴] for independent components of any law.
    d = 7
    mom = theory.dot_moments(kind, d, mu / sigma, 0.0)
    physical = mom.variance * sigma**4
    assert physical == pytest.approx(d * ((sigma**2 + mu**2) ** 2 - mu**4), rel=1e-12)
    assert mom.mean * sigma**2 == pytest.approx(d * mu * mu, rel=1e-12)


@pytest.mark.parametrize("kind", LAWS)
def test_fourth_moment_of_centred_independent_components(kind):
    # W = XY with independent standardized X, Y: E[W²] = 1, E[W⁴] = κ², so the fourth
    # cumulant is κ² − 3 and μ4(S) = d(κ² − 3) + 3d².
    d = 11
    k2 = KURT[kind] ** 2
    assert theory.dot_moments(kind, d).mu4 == pytest.approx(d * (k2 - 3) + 3 * d * d)


@pytest.mark.parametrize("rho", [-1.0, -0.3, 0.0, 0.5, 1.0])
@pytest.mark.parametrize("m", [0.0, 0.7])
def test_correlated_gaussian_variance(rho, m):
    # q_i = m + X, k_i = m + Y, corr(X, Y) = ρ, jointly normal (Isserlis):
    # Var(q_i k_i) = 1 + ρ² + 2m²(1 + ρ).
    d = 5
    mom = theory.dot_moments("normal", d, m, rho)
    assert mom.mean == pytest.approx(d * (m * m + rho))
    assert mom.variance == pytest.approx(d * (1 + rho * rho + 2 * m * m * (1 + rho)))


def test_rademacher_perfect_correlation_is_constant():
    # k = q with ±1 components: q·k = d exactly.
    mom = theory.dot_moments("rademacher", 9, 0.0, 1.0)
    assert (mom.mean, mom.variance, mom.mu4) == (9.0, 0.0, 0.0)


@pytest.mark.parametrize("d", [1, 2, 3, 10, 500])
def test_sphere_moments(d):
    mom = theory.dot_moments("sphere", d)
    assert mom.variance == pytest.approx(1 / d)
    assert mom.mu4 == pytest.approx(3 / (d * (d + 2)))


def test_variance_se_normal_case():
    # For a normal sample (μ4 = 3σ⁴) the formula reduces to σ²·√(2/(n−1)).
    n = 1000
    assert theory.variance_se(4.0, 3 * 16.0, n) == pytest.approx(4.0 * math.sqrt(2 / (n - 1)))


@pytest.mark.parametrize("z", [1e-3, 0.1, 1.0, 7.0, 40.0])
def test_bessel_k_half_orders(z):
    # K_{1/2}(z) = √(π/2z)·e^{−z};  K_{3/2}(z) = K_{1/2}(z)·(1 + 1/z).
    k12 = math.log(math.sqrt(math.pi / (2 * z))) - z
    assert theory.log_bessel_k(0.5, np.array([z]))[0] == pytest.approx(k12, abs=1e-12)
    k32 = k12 + math.log1p(1 / z)
    assert theory.log_bessel_k(1.5, np.array([z]))[0] == pytest.approx(k32, abs=1e-12)


def test_bessel_k_large_order_does_not_overflow():
    # Uniform asymptotics: K_ν(ν·z) ~ √(π/(2ν)) e^{−νη}/(1+z²)^{1/4},
    # η = √(1+z²) + ln(z/(1+√(1+z²))), accurate to O(1/ν).
    nu, z = 5000.0, 0.5
    s = math.sqrt(1 + z * z)
    eta = s + math.log(z / (1 + s))
    approx = 0.5 * math.log(math.pi / (2 * nu)) - nu * eta - 0.25 * math.log(1 + z * z)
    got = theory.log_bessel_k(nu, np.array([nu * z]))[0]
    assert math.isfinite(got)
    assert got == pytest.approx(approx, rel=1e-4)


def test_gaussian_density_d2_is_laplace_and_d4_closed_form():
    x = np.linspace(-9, 9, 37)
    x = x[x != 0]
    assert np.allclose(theory.gaussian_dot_density(x, 2), 0.5 * np.exp(-np.abs(x)), rtol=1e-10)
    d4 = (1 + np.abs(x)) * np.exp(-np.abs(x)) / 4  # from K_{3/2} in closed form
    assert np.allclose(theory.gaussian_dot_density(x, 4), d4, rtol=1e-10)


@pytest.mark.parametrize("d,rho", [(3, 0.0), (10, 0.5), (10, -0.7), (50, 0.2), (4, 1.0)])
def test_gaussian_density_integrates_to_law(d, rho):
    x = np.linspace(-120, 160, 56_001)
    f = theory.gaussian_dot_density(x, d, rho)
    mom = theory.dot_moments("normal", d, 0.0, rho)
    # Trapezoid error is O(dx²) = 2.5e-5 where the density has a kink (at 0 when ρ = ±1).
    assert np.trapezoid(f, x) == pytest.approx(1.0, abs=1e-5)
    mean = np.trapezoid(x * f, x)
    assert mean == pytest.approx(mom.mean, abs=1e-5)
    assert np.trapezoid((x - mean) ** 2 * f, x) == pytest.approx(mom.variance, rel=1e-5)


def test_sphere_density_d3_is_uniform():
    t = np.linspace(-0.99, 0.99, 11)
    assert np.allclose(theory.sphere_dot_density(t, 3), 0.5)


@given(st.integers(min_value=3, max_value=400))
def test_sphere_density_integrates_to_one(d):
    t = np.linspace(-1, 1, 200_001)
    f = theory.sphere_dot_density(t, d)
    if d == 3:  # density 1/2 up to the ends; sphere_dot_density gives 0 exactly at ±1
        f[[0, -1]] = 0.5
    assert np.trapezoid(f, t) == pytest.approx(1.0, abs=1e-6)
