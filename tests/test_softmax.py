"""Softmax, entropy and Jacobian: closed forms, identities, and stability at any scale."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sdpa_cli.numerics.softmax import (
    entropy,
    jacobian,
    jacobian_norms,
    log_softmax,
    one_minus,
    softmax,
    spectral_norm,
)


@pytest.mark.parametrize("n", [1, 2, 7, 4096])
def test_equal_scores_give_uniform_weights(n):
    p = softmax(np.full(n, 3.7))
    assert np.allclose(p, 1 / n, rtol=1e-14)
    assert entropy(np.full(n, 3.7)) == pytest.approx(math.log(n), abs=1e-12)
    # J = (I − 11ᵀ/n)/n: Frobenius √(n−1)/n, largest eigenvalue 1/n (for n > 1).
    assert jacobian_norms(p)["frobenius"] == pytest.approx(math.sqrt(n - 1) / n, abs=1e-15)


@pytest.mark.parametrize("a,b", [(0.3, -1.2), (5.0, 5.0), (40.0, -3.0)])
def test_two_keys_is_the_logistic_function(a, b):
    p = softmax(np.array([a, b]))
    assert p[0] == pytest.approx(1 / (1 + math.exp(b - a)), rel=1e-14)


@pytest.mark.parametrize("gap", [1.0, 50.0, 200.0, 700.0])
def test_nearly_one_hot_jacobian_keeps_relative_accuracy(gap):
    # Two keys: J = p1·p2·[[1, −1], [−1, 1]], so ‖J‖_F = 2·p1·p2 and max|J| = p1·p2.
    p2 = math.exp(-gap) / (1 + math.exp(-gap))
    p1 = 1 / (1 + math.exp(-gap))
    norms = jacobian_norms(softmax(np.array([gap, 0.0])))
    # abs=0: pytest.approx's default absolute tolerance (1e-12) would accept 0 here.
    assert norms["frobenius"] == pytest.approx(2 * p1 * p2, rel=1e-13, abs=0)
    assert norms["max_abs"] == pytest.approx(p1 * p2, rel=1e-13, abs=0)


def test_one_minus_p_of_the_largest_weight_is_the_rest():
    p = softmax(np.array([50.0, 25.0, 0.0]))
    assert one_minus(p)[0] == pytest.approx(p[1] + p[2], rel=1e-15)
    assert one_minus(p)[0] > 0  # 1.0 − p[0] would round to 1e-11 with 5 digits of noise


def test_huge_scales_give_exact_zeros_and_ones():
    z = np.array([1.0, 0.5, 0.0, -0.5])
    for scale in (1e6, 1e100, 1e300):
        p = softmax(z, scale)
        assert p.tolist() == [1.0, 0.0, 0.0, 0.0]
        assert entropy(z, scale) == 0.0
        assert jacobian_norms(p)["frobenius"] == 0.0


def test_masked_entries_get_exactly_zero_weight():
    z = np.array([[2.0, -np.inf, 0.0], [-np.inf, -np.inf, 1.0]])
    p = softmax(z)
    assert p[0, 1] == 0.0 and p[1].tolist() == [0.0, 0.0, 1.0]
    assert entropy(z)[1] == 0.0
    assert np.isfinite(entropy(z)).all()


@pytest.mark.parametrize("bad", [[np.nan, 1.0], [np.inf, 1.0], [-np.inf, -np.inf]])
def test_undefined_rows_are_refused(bad):
    with pytest.raises(ValueError):
        softmax(np.array(bad))


def test_scale_must_be_positive():
    with pytest.raises(ValueError):
        softmax(np.array([1.0, 2.0]), 0.0)


scores = arrays(np.float64, st.integers(1, 12),
                elements=st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False))
scales = st.floats(1e-6, 1e300, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(scores, scales)
def test_weights_are_a_distribution(z, scale):
    p = softmax(z, scale)
    assert np.isfinite(p).all() and (p >= 0).all() and (p <= 1).all()
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    h = entropy(z, scale)
    assert 0.0 <= h <= math.log(z.size) + 1e-12
    assert np.all(np.isfinite(log_softmax(z, scale)) | (p == 0))


@settings(max_examples=300, deadline=None)
@given(scores, scales)
def test_jacobian_identities(z, scale):
    p = softmax(z, scale)
    j = jacobian(p)
    assert np.allclose(j, j.T)
    assert np.allclose(j.sum(axis=1), 0.0, atol=1e-15)  # softmax is shift invariant
    eig = np.linalg.eigvalsh(j)
    assert eig.min() >= -1e-15 * max(1.0, eig.max())  # positive semi-definite
    norms = jacobian_norms(p)
    assert norms["trace"] == pytest.approx(np.trace(j), rel=1e-12, abs=1e-300)
    assert norms["trace"] == pytest.approx(1 - (p * p).sum(), abs=1e-12)
    # The reference is scaled first: squaring entries of 1e-300 underflows to 0 in a plain
    # norm (hypothesis found z = (659051, 658360): a gap of 691 nats), the O(n) method not.
    top = np.abs(j).max()
    reference = np.linalg.norm(j / top) * top if top > 0 else 0.0
    assert norms["frobenius"] == pytest.approx(reference, rel=1e-9, abs=1e-300)
    assert norms["max_abs"] == pytest.approx(np.abs(j).max(), rel=1e-12, abs=1e-300)
    assert spectral_norm(p) == pytest.approx(eig.max(), rel=1e-12, abs=1e-300)


def test_rows_broadcast():
    z = np.random.default_rng(0).standard_normal((5, 3, 8)) * 4
    p = softmax(z)
    assert p.shape == z.shape and np.allclose(p.sum(-1), 1)
    assert jacobian_norms(p)["frobenius"].shape == (5, 3)
