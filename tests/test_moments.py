"""Streaming accumulators merge to exactly what one pass over all the data gives."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sdpa_cli.numerics.moments import Histogram, Moments, Reservoir

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, st.integers(2, 300), elements=finite), st.data())
def test_merged_moments_equal_one_pass(x, data):
    cuts = sorted(data.draw(st.lists(st.integers(0, x.size), max_size=5)))
    merged = Moments()
    for part in np.split(x, cuts):
        merged = merged.merge(Moments.of(part))
    whole = Moments.of(x)
    assert merged.n == whole.n
    scale = max(1.0, float(np.abs(x).max()))
    assert merged.mean == pytest.approx(whole.mean, abs=1e-9 * scale)
    dev = x - x.mean()
    for got, want, p in ((merged.m2, whole.m2, 2), (merged.m3, whole.m3, 3),
                         (merged.m4, whole.m4, 4)):
        assert got == pytest.approx(want, rel=1e-7, abs=1e-7 * float((np.abs(dev) ** p).sum())
                                    + 1e-9 * scale**p)
    assert (merged.min, merged.max) == (x.min(), x.max())


def test_moments_against_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000) * 3 + 7
    m = Moments.of(x[:300]).merge(Moments.of(x[300:]))
    assert m.variance == pytest.approx(np.var(x, ddof=1), rel=1e-12)
    dev = x - x.mean()
    assert m.kurtosis == pytest.approx(np.mean(dev**4) / np.mean(dev**2) ** 2, rel=1e-12)


def test_large_mean_keeps_variance():
    # Pébay merging keeps the spread of values sitting on a huge mean.
    x = 1e9 + np.arange(10, dtype=float)
    m = Moments()
    for part in np.split(x, [3, 7]):
        m = m.merge(Moments.of(part))
    assert m.variance == pytest.approx(np.var(np.arange(10.0), ddof=1), rel=1e-9)


def test_histogram_counts_and_merge():
    h = Histogram.empty(0.0, 1.0, 4)
    a = h.of(np.array([-0.5, 0.0, 0.1, 0.25, 0.99, 1.0, 3.0]))
    assert a.counts.tolist() == [2, 1, 0, 1]
    assert (a.under, a.over) == (1, 2)
    b = a.merge(h.of(np.array([0.6])))
    assert b.counts.tolist() == [2, 1, 1, 1]
    assert b.total == 8


def test_histogram_quantile_interpolates_inside_a_bin():
    h = Histogram.empty(0.0, 10.0, 10).of(np.arange(10) + 0.5)  # one value per bin
    assert h.quantile(0.5, 0.0, 10.0) == pytest.approx(5.0)
    assert h.quantile(0.05, 0.0, 10.0) == pytest.approx(0.5)


def test_coarsen_merges_whole_bins_only():
    rng = np.random.default_rng(1)
    h = Histogram.empty(-4.0, 4.0, 800).of(rng.standard_normal(5000))
    edges, counts = h.coarsen(30, -3.0, 3.0)
    assert counts.sum() <= h.counts.sum()
    width = 8.0 / 800
    steps = np.diff(edges) / width
    assert np.allclose(steps, np.round(steps)) and len(set(np.round(steps))) == 1
    assert 30 <= counts.size <= 32
    inside = h.of(rng.standard_normal(0))  # empty
    assert inside.total == 0


def test_reservoir_keeps_first_values_in_order():
    r = Reservoir.empty(5).merge(np.arange(3.0)).merge(np.arange(3.0, 10.0))
    assert r.values.tolist() == [0, 1, 2, 3, 4]
    assert r.full
