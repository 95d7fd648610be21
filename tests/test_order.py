"""numerics.order.median against np.median, bit for bit, on the arrays it meets and edges."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sdpa_cli.numerics.order import median

DTYPES = [np.float32, np.float64, np.int64]


def _same(got: float, want: float) -> bool:
    return (math.isnan(got) and math.isnan(want)) or got == want


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(DTYPES).flatmap(
    lambda dt: hnp.arrays(dt, st.integers(1, 41), elements=(
        st.integers(-5, 5) if dt is np.int64 else
        st.floats(width=32 if dt is np.float32 else 64, allow_nan=True,
                  allow_infinity=True)))))
def test_equal_to_numpys_median_bit_for_bit(x: np.ndarray) -> None:
    with np.errstate(all="ignore"):  # both warn alike on an overflowing pair (1.8e308 × 2)
        want, got = float(np.median(x)), median(x)
    assert _same(got, want), (x, got, want)


@pytest.mark.parametrize("shape", [(8, 128, 576), (7, 13, 9)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_arrays_of_both_parities(shape: tuple[int, ...], dtype: type) -> None:
    x = np.abs(np.random.default_rng(sum(shape)).standard_normal(shape)).astype(dtype)
    assert median(x) == float(np.median(x))
    x.flat[3] = np.nan
    assert math.isnan(median(x))


def test_an_even_pair_whose_sum_overflows_float32_is_inf_as_numpys() -> None:
    x = np.array([3e38, 3e38], dtype=np.float32)
    with np.errstate(over="ignore"):
        assert median(x) == float(np.median(x)) == math.inf


def test_an_empty_array_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        median(np.zeros(0))


def test_the_middle_pair_is_averaged_in_the_arrays_dtype() -> None:
    """1 and the next float32 above it: their float32 sum rounds (a tie, to even), so the
    median is 1.0 as NumPy's, not the float64 mean 1 + 2⁻²⁴."""
    x = np.array([np.nextafter(np.float32(1), np.float32(2)), np.float32(1)])
    assert median(x) == float(np.median(x)) == 1.0
