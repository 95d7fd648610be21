"""The inspect statistics engine (models/stats.py, models/rowstats.py) against an independent
float64 reference (tests/inspect_stats_reference.py), float32 against float64 within the
tolerances stats.TOLERANCE states, blocks and head groups that change no number, and the
within-row spread against a row's scores recovered from its weights (log p plus a constant)."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import inspect_stats_reference as ref
import numpy as np
import pytest

from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.studies.inspect.models import rowstats
from sdpa_cli.studies.inspect.models.common import visible
from sdpa_cli.studies.inspect.models.stats import TOLERANCE, OwnRule, layer_stats

FIELDS = ("score_std", "score_mean", "score_std_raw", "max_weight", "entropy_ratio",
          "frozen_share", "frozen_low", "frozen_high", "first_token_share", "jacobian",
          "sink_other", "prev_token", "score_max", "score_std_within", "score_std_within_raw",
          "top_gap", "between_share", "cos_std", "q_norm", "k_norm", "first_by_seq")
RULES = [Scaling.parse("none"), Scaling.parse("sqrt"), Scaling.parse("logn:0.5"),
         Scaling.parse("softcap:3"), Scaling.parse("cosine:0.1"), Scaling.parse("qknorm"),
         Scaling.parse("qknorm:rms"), OwnRule(0.125), OwnRule(0.25, cap=2.0)]


def _case(seed: int, seqs: int = 3, heads: int = 3, n: int = 37, d: int = 8
          ) -> tuple[np.ndarray, np.ndarray]:
    """Heads of different kinds: spread, peaked (large q), offset rows (a bias on q·k)."""
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(seqs, heads, n, d))
    k = rng.normal(size=(seqs, heads, n, d))
    q[:, 1] *= 6.0  # peaked rows, some nearly one-hot
    k[:, 2] += 2.0  # row offsets: much of the pooled variance lies between rows
    return q, k


@pytest.fixture()
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 4 rows (the shipped size makes one block at these n)."""
    monkeypatch.setattr(rowstats, "ROW_ELEMENTS", 4 * 37)
    monkeypatch.setattr(rowstats, "MIN_ROWS", 4)


@pytest.mark.parametrize("mask", ["none", "causal", "window"])
def test_every_statistic_matches_the_reference_in_float64(small_blocks: None, mask: str):
    q, k = _case(1)
    n = q.shape[2]
    m = None if mask == "none" else visible(n, True, 5 if mask == "window" else None)
    got, _ = layer_stats(q, k, RULES, m)
    for rule, st in zip(RULES, got, strict=True):
        want = ref.stats(q, k, rule, m)
        for f in FIELDS:
            np.testing.assert_allclose(getattr(st, f), want[f], rtol=1e-9, atol=1e-12,
                                       err_msg=f"{f} under {rule}")


def test_float32_stays_within_the_stated_tolerances():
    """The same float32 vectors measured in float32 and in float64; unscaled scores of a
    peaked head reach the hundreds, where float32's steps are largest."""
    q, k = _case(2, n=96, d=32)
    q32, k32 = q.astype(np.float32), k.astype(np.float32)
    mask = visible(96, True)
    lo, _ = layer_stats(q32, k32, RULES, mask)
    hi, _ = layer_stats(q32.astype(np.float64), k32.astype(np.float64), RULES, mask)
    rows = 3 * 95
    for rule, a, b in zip(RULES, lo, hi, strict=True):
        for f in FIELDS:
            x, y = getattr(a, f), getattr(b, f)
            kind, tol = TOLERANCE[f]
            if kind == "rows":  # a share may move by whole rows near its bar
                assert np.all(np.abs(x - y) <= tol / rows + 1e-12), (f, rule, x, y)
            elif kind == "rel":
                np.testing.assert_allclose(x, y, rtol=tol, atol=0, err_msg=f"{f} {rule}")
            else:
                scale = np.maximum(1.0, b.score_std) if f == "score_mean" else 1.0
                assert np.all(np.abs(x - y) <= tol * scale), (f, rule, x, y)


def test_head_groups_and_threads_change_no_number():
    q, k = _case(3, heads=5, n=40)
    q, k = q.astype(np.float32), k.astype(np.float32)
    mask = visible(40, True)
    edges = np.linspace(-10, 10, 101)
    one, _ = layer_stats(q, k, RULES, mask, edges, 0)
    with ThreadPoolExecutor(2) as pool:
        many, _ = layer_stats(q, k, RULES, mask, edges, 0, pool=pool, parts=3)
    for a, b in zip(one, many, strict=True):
        for f in (*FIELDS, "counts"):
            x, y = getattr(a, f), getattr(b, f)
            assert (x is None and y is None) or np.array_equal(x, y, equal_nan=True), f


def test_the_histogram_counts_the_visible_scores_of_the_rule():
    q, k = _case(4, n=30)
    mask = visible(30, True)
    edges = np.linspace(-10, 10, 101)
    got, _ = layer_stats(q, k, [Scaling.parse("none"), Scaling.parse("sqrt")], mask, edges, 1)
    s = np.einsum("shnd,shmd->shnm", q, k) / math.sqrt(8)
    want = np.histogram(np.clip(s[..., mask], -10, 10), bins=edges)[0]
    assert got[0].counts is None and np.array_equal(got[1].counts, want)


def test_a_nearly_one_hot_row_keeps_its_jacobian_in_float32():
    """‖J‖_F of rows with one weight near 1 (J down to 1e-5): Σp² − 2Σp³ + (Σp²)² would
    cancel to noise in float32; the engine's form keeps about float32's precision."""
    rng = np.random.default_rng(6)
    n, d = 24, 4
    k = rng.normal(size=(1, 1, n, d))
    q = np.repeat(k[:, :, -1:], n, axis=2) * np.linspace(2.0, 8.0, n)[None, None, :, None]
    mask = visible(n, False)
    got, _ = layer_stats(q.astype(np.float32), k.astype(np.float32), [Scaling.parse("none")],
                         mask)
    want = ref.stats(q.astype(np.float32), k.astype(np.float32), Scaling.parse("none"), mask)
    assert 1e-9 < want["jacobian"][0] < 0.1
    assert got[0].jacobian[0] == pytest.approx(want["jacobian"][0], rel=1e-4)


def test_within_row_spread_from_the_weights_alone():
    """A row's scores are log p plus a constant: the std of log p over the keys a row sees
    is the std of its scores, whatever constant (a bias) the row carries."""
    q, k = _case(7, n=50)
    q[:, 0, :, 0] = 30.0 * np.random.default_rng(8).normal(size=(*q.shape[::2][:1], 50))
    k[:, 0, :, 0] = 1.0
    mask = visible(50, True)
    got, _ = layer_stats(q, k, [Scaling.parse("none")], mask)
    for h in range(q.shape[1]):
        stds = []
        for s in range(q.shape[0]):
            p = ref.softmax(q[s, h] @ k[s, h].T, mask)
            for r in range(1, 50):
                stds.append(np.log(p[r, :r + 1]).std())
        assert got[0].score_std_within_raw[h] == pytest.approx(np.median(stds), rel=1e-3)
    assert got[0].between_share[0] > 0.9  # the offsets are between rows, not within
