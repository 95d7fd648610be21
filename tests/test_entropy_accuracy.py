"""Softmax entropy keeps its relative accuracy when one weight is nearly 1 (50-digit references)."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

from sdpa_cli.numerics.softmax import entropy, log_softmax


def _reference_entropy(z: list[float]) -> float:
    with mp.workdps(50):
        e = [mp.e ** mp.mpf(x) for x in z]
        t = mp.fsum(e)
        return float(-mp.fsum(x / t * mp.log(x / t) for x in e))


def test_the_audited_case() -> None:
    # softmax(0, −37, −37): the top weight's term −p·log p ≈ 2e^−37 is half the entropy
    assert entropy(np.array([0.0, -37.0, -37.0])) == pytest.approx(6.4851162e-15, rel=1e-8)


@pytest.mark.parametrize("gap", [1, 2, 5, 10, 20, 30, 36.5, 37, 40, 50, 100, 200, 300, 500,
                                 600, 700])
@pytest.mark.parametrize("shape", ["tie", "spread", "pair"])
def test_entropy_against_mpmath_over_gaps(gap: float, shape: str) -> None:
    z = {"tie": [0.0, -gap, -gap], "pair": [0.0, -gap],
         "spread": [3.0, 3.0 - gap, 3.0 - gap - 0.5, 3.0 - 2 * gap, 3.0 - gap - 1.25]}[shape]
    got = float(entropy(np.array(z)))
    assert got == pytest.approx(_reference_entropy(z), rel=1e-13)


def test_log_softmax_of_the_top_weight_is_minus_the_rest() -> None:
    # log p_max = −log1p(Σ others) ≈ −2e^−40, not the 0 that log(1 + δ) rounds to
    logp = log_softmax(np.array([0.0, -40.0, -40.0]))
    assert logp[0] == pytest.approx(-2 * np.exp(-40.0), rel=1e-14)


def test_rows_and_masks_still_work() -> None:
    z = np.array([[0.0, -np.inf, -3.0], [1.0, 1.0, 1.0]])
    h = entropy(z)
    assert h[1] == pytest.approx(np.log(3.0), rel=1e-15)
    assert h[0] == pytest.approx(_reference_entropy([0.0, -3.0]), rel=1e-14)
