"""Saturation numerics: row statistics, λ_max of J, peaks, batch medians, score samplers."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sdpa_cli.numerics import theory
from sdpa_cli.numerics.rng import block_generator
from sdpa_cli.numerics.sampling import CHUNK, PairLaw
from sdpa_cli.numerics.softmax import entropy, jacobian, jacobian_norms, softmax
from sdpa_cli.studies.saturation import score_rows as sat

K = 4.5  # standard errors; every statistical case has a fixed seed


# --- λ_max of J from the secular equation ------------------------------------------------


@pytest.mark.parametrize("gap", [0.0, 1.0, 50.0, 200.0, 700.0])
def test_spectral_of_two_keys_is_twice_p1_p2(gap):
    # J = p1·p2·[[1, −1], [−1, 1]]: eigenvalues 0 and 2·p1·p2, to full relative accuracy.
    p1 = 1 / (1 + math.exp(-gap))
    p2 = math.exp(-gap) / (1 + math.exp(-gap))
    got = sat.jacobian_spectral(softmax(np.array([gap, 0.0])))[0]
    assert got == pytest.approx(2 * p1 * p2, rel=1e-13)


@pytest.mark.parametrize("n", [2, 3, 10, 4096])
def test_spectral_of_uniform_weights_is_one_over_n(n):
    # J = (I − 11ᵀ/n)/n: every non-zero eigenvalue is 1/n.
    assert sat.jacobian_spectral(np.full(n, 1.0 / n))[0] == pytest.approx(1.0 / n, rel=1e-12)


def test_spectral_with_ties_and_zeros():
    # Tied top weights: e₁ − e₂ is an eigenvector with eigenvalue p₁ = 0.4; the rest give 0.24.
    assert sat.jacobian_spectral(np.array([0.4, 0.4, 0.2]))[0] == pytest.approx(0.4, rel=1e-14)
    assert sat.jacobian_spectral(np.array([1.0, 0.0, 0.0]))[0] == 0.0
    assert sat.jacobian_spectral(np.array([1.0]))[0] == 0.0


scores = arrays(np.float64, st.integers(1, 10),
                elements=st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False))
scales = st.floats(1e-3, 1e3, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(scores, scales)
def test_spectral_matches_the_eigenvalues_of_the_full_matrix(z, scale):
    p = softmax(z, scale)
    eig = np.linalg.eigvalsh(jacobian(p))
    got = sat.jacobian_spectral(p)[0]
    assert got == pytest.approx(eig[-1], rel=1e-10, abs=1e-15 * max(eig[-1], 1e-300))
    norms = jacobian_norms(p)
    # PSD: |J_ij| ≤ √(J_ii J_jj) ≤ λ_max ≤ ‖J‖_F ≤ trace J (the eigenvalues are ≥ 0).
    assert norms["max_abs"] <= got * (1 + 1e-10) + 1e-300
    assert got <= norms["frobenius"] * (1 + 1e-10) + 1e-300
    assert norms["frobenius"] <= norms["trace"] * (1 + 1e-10) + 1e-300


def test_spectral_works_on_many_rows_at_once():
    p = softmax(np.random.default_rng(3).standard_normal((50, 7)) * 3)
    rows = sat.jacobian_spectral(p)
    each = [np.linalg.eigvalsh(jacobian(r))[-1] for r in p]
    assert rows == pytest.approx(each, rel=1e-10)


# --- row statistics ------------------------------------------------------------------------


def test_row_stats_agree_with_the_foundation_functions_across_row_chunks():
    rng = np.random.default_rng(1)
    n = 50
    z = rng.standard_normal((sat.ROW_CHUNK // n + 37, n)) * 3  # crosses a chunk boundary
    z[::7, 5:] = -np.inf  # masked keys
    got = sat.row_stats(z, 1.7, threshold=0.5)
    p = softmax(z, 1.7)
    norms = jacobian_norms(p)
    assert np.array_equal(got["max_prob"], p.max(axis=-1))
    assert np.allclose(got["entropy"], entropy(z, 1.7), rtol=1e-13, atol=1e-15)
    assert np.array_equal(got["frobenius"], norms["frobenius"])
    assert np.array_equal(got["max_abs"], norms["max_abs"])
    assert np.array_equal(got["saturated"], (p.max(axis=-1) > 0.5).astype(float))


@pytest.mark.parametrize("n", [1, 2, 16, 4096])
def test_equal_scores_give_uniform_rows(n):
    got = sat.row_stats(np.full((3, n), 2.5), 7.0)
    assert got["max_prob"] == pytest.approx(1.0 / n, rel=1e-14)
    assert got["entropy"] == pytest.approx(math.log(n), abs=1e-12)
    assert got["frobenius"] == pytest.approx(sat.uniform_frobenius(n), abs=1e-15)


@pytest.mark.parametrize("a,b,scale", [(0.3, -1.2, 1.0), (5.0, 5.0, 3.0), (40.0, -3.0, 0.5)])
def test_two_keys_follow_the_logistic_function(a, b, scale):
    got = sat.row_stats(np.array([[a, b]]), scale)
    p = 1 / (1 + math.exp(-scale * abs(a - b)))
    q = math.exp(-scale * abs(a - b)) * p  # 1 − p without cancellation
    assert got["max_prob"][0] == pytest.approx(p, rel=1e-14)
    assert got["entropy"][0] == pytest.approx(-p * math.log(p) - q * math.log(q), rel=1e-12)
    assert got["frobenius"][0] == pytest.approx(2 * p * q, rel=1e-12)  # J = pq[[1,−1],[−1,1]]
    assert got["max_abs"][0] == pytest.approx(p * q, rel=1e-12)


def test_huge_scales_and_masks_give_exact_zeros_and_ones():
    z = np.array([[1.0, 0.5, 0.0, -0.5], [-np.inf, 3.0, -np.inf, -np.inf]])
    got = sat.row_stats(z, 1e6, threshold=0.99)
    assert got["max_prob"].tolist() == [1.0, 1.0]
    assert got["entropy"].tolist() == [0.0, 0.0]
    assert got["frobenius"].tolist() == [0.0, 0.0]
    assert got["saturated"].tolist() == [1.0, 1.0]


def test_closed_forms_of_the_theory_helpers():
    assert sat.freezing_std(2) == pytest.approx(math.sqrt(2 * math.log(2)))
    assert sat.entropy_small_s(10, 0.0) == pytest.approx(math.log(10))
    assert sat.entropy_small_s(10, 0.2) == pytest.approx(math.log(10) - 9 * 0.04 / 20)
    assert sat.uniform_frobenius(2) == 0.5  # two keys at 1/2: J = [[1/4, −1/4], [−1/4, 1/4]]


# --- peaks and batch medians --------------------------------------------------------------


def test_parabola_vertex_is_exact_for_a_parabola_in_log_s():
    s = np.geomspace(0.25, 16, 9)
    x0 = math.log(2.7)
    y = 1.0 - (np.log(s) - x0) ** 2
    peak = sat.peak_on_grid(s[::-1], y[::-1])  # order of the grid does not matter
    assert not peak.at_edge
    assert peak.s_star == pytest.approx(2.7, rel=1e-12)
    assert peak.fitted_max == pytest.approx(1.0, rel=1e-12)
    assert peak.grid_max == pytest.approx(y.max())


@pytest.mark.parametrize("values,edge_s", [([3.0, 2.0, 1.0], 0.5), ([1.0, 2.0, 3.0], 2.0)])
def test_a_maximum_at_the_edge_is_flagged_not_extrapolated(values, edge_s):
    peak = sat.peak_on_grid(np.array([0.5, 1.0, 2.0]), np.array(values))
    assert peak.at_edge and peak.s_star == edge_s and peak.grid_max == 3.0


def test_batch_medians_do_not_depend_on_how_trials_arrive():
    rng = np.random.default_rng(5)
    values = rng.standard_normal((103, 4))
    edges = sat.batch_edges(103, 20)
    direct = [np.median(values[a:b]) for a, b in itertools.pairwise(edges)]
    acc = sat.BatchMedians(103, 20)
    start = 0
    for size in (1, 7, 30, 2, 63):  # uneven blocks that straddle batch boundaries
        acc.add(values[start : start + size])
        start += size
    assert acc.medians == direct
    mean, se = acc.result()
    assert mean == pytest.approx(np.mean(direct))
    assert se == pytest.approx(np.std(direct, ddof=1) / math.sqrt(20))


# --- samplers ------------------------------------------------------------------------------


def test_sequence_scores_are_q_times_k_transposed():
    law = PairLaw("normal", 0.3, 0.5)
    s, cos, first = sat.sequence_scores(block_generator(1, (0,)), law, 3, 6, 5, cosine=True,
                                        keep_first=True)
    q, k = first
    assert s.shape == (3, 6, 6)
    assert np.allclose(s[0], q @ k.T, rtol=1e-13)
    norms = np.linalg.norm(q, axis=1)[:, None] * np.linalg.norm(k, axis=1)[None, :]
    assert np.allclose(cos[0], (q @ k.T) / norms, rtol=1e-13)


def test_sphere_law_gives_unit_vectors():
    s, _, first = sat.sequence_scores(block_generator(1, (0,)), PairLaw("sphere"), 2, 4, 9,
                                      cosine=False, keep_first=True)
    q, k = first
    assert np.allclose(np.linalg.norm(q, axis=1), 1.0)
    assert np.allclose(s[0], q @ k.T, rtol=1e-12)


def test_causal_mask_hides_later_keys():
    m = sat.causal(np.zeros((2, 3, 3)))
    assert np.isneginf(m[:, 0, 1:]).all() and np.isneginf(m[:, 1, 2]).all()
    assert (m[:, np.tril_indices(3)[0], np.tril_indices(3)[1]] == 0).all()


def test_blocks_depend_on_the_problem_only():
    per, blocks = sat.sequence_blocks(10, 64, 2000)
    assert per * 10 * 64 <= CHUNK and per * 100 <= sat.SCORE_CHUNK and blocks * per >= 2000
    assert sat.sequence_blocks(100, 4096, 7) == (1, 7)
    assert sat.gaussian_blocks(16, 20000) == (CHUNK // 16, -(-20000 // (CHUNK // 16)))


# whole draws, and column slices (≥ 1 s; moved out of the quick tier (its 75 s budget))
@pytest.mark.parametrize("n,d", [(6, 20), pytest.param(40, 2000, marks=pytest.mark.slow)])
def test_independent_pair_scores_follow_their_law(n, d):
    # Position (1, 0) holds an independent query-key pair: one iid value per trial.
    law = PairLaw("normal", 0.5, 0.4)
    per, blocks = sat.sequence_blocks(n, d, 600)
    off, diag = [], []
    for b in range(blocks):
        s, _, _ = sat.sequence_scores(block_generator(11, (b,)), law, min(per, 600 - b * per),
                                      n, d, cosine=False)
        off.append(s[:, 1, 0])
        diag.append(s[:, 0, 0])
    off, diag = np.concatenate(off), np.concatenate(diag)
    pair = theory.dot_moments("normal", d, 0.5, 0.0)
    own = theory.dot_moments("normal", d, 0.5, 0.4)
    assert abs(off.var(ddof=1) - pair.variance) <= K * theory.variance_se(pair.variance,
                                                                          pair.mu4, off.size)
    assert abs(off.mean() - pair.mean) <= K * math.sqrt(pair.variance / off.size)
    assert abs(diag.mean() - own.mean) <= K * math.sqrt(own.variance / diag.size)
