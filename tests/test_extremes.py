"""Numerical extremes: finite where the mathematics is, exact 0/1 where it saturates, no
NumPy warning (the suite turns warnings into errors), figures drawn without complaint."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import sdpa_cli


def _rows(sdpa, *args, plots=False):
    r = sdpa(*args, "--format", "json", "-q", "--seed", "1", *([] if plots else ["--no-plots"]))
    assert r.code == 0, r.err
    return r.json()["rows"], r.json()["checks"]


@pytest.mark.slow  # heavy; the quick tier keeps a cheaper test of the same behaviour
@pytest.mark.parametrize("std", ["1e-150", "1e150"])
def test_tiny_and_huge_std(sdpa, std):
    rows, checks = _rows(sdpa, "variance", "--std", std, "--dims", "3", "1000", plots=True)
    for row in rows:
        # Var = d·σ⁴ is 1e-600 or 1e600: not a float64. It is reported as null with a note;
        # everything dimensionless stays exact.
        assert row["variance"] is None and "beyond float64" in row["note"]
        assert abs(row["z"]) < 4 and math.isfinite(row["kurtosis"])
        assert row["ratio"] == pytest.approx(1.0, abs=4 * math.sqrt(2 / 1000) * 1.5)
        assert row["mean"] is not None and math.isfinite(row["mean"])
    assert all(c["passed"] for c in checks)


def test_spread_far_below_the_mean_keeps_its_digits(sdpa):
    # q_i = 1 + 1e-150·x: forming q·k directly would round the spread away entirely.
    # Var(q·k) = d(σ⁴ + 2μ²σ²) = 3(1e-600 + 2e-300) = 6e-300.
    rows, checks = _rows(sdpa, "variance", "--mean", "1", "--std", "1e-150", "--dims", "3",
                         "--pairs", "20000", "--scalings", "none")
    row = rows[0]
    assert row["theory_variance"] == pytest.approx(6e-300, rel=1e-12)
    assert abs(row["variance"] - 6e-300) <= 4 * row["se"]
    assert row["mean"] == pytest.approx(3.0, rel=1e-12)
    assert all(c["passed"] for c in checks)


def test_a_million_dimensions(sdpa):
    rows, checks = _rows(sdpa, "variance", "--dims", "1000000", "--pairs", "20")
    assert rows[0]["theory_variance"] == 1e6 and abs(rows[0]["z"]) < 4
    assert all(c["passed"] for c in checks)


@pytest.mark.slow
def test_a_hundred_million_pairs_with_the_exact_method(sdpa):
    rows, checks = _rows(sdpa, "variance", "--dims", "1024", "--pairs", "100000000",
                         "--method", "exact", "--scalings", "sqrt")
    row = rows[0]
    assert row["pairs"] == 100_000_000
    assert abs(row["variance"] - 1.0) <= 4 * row["se"]  # se ≈ √(2/1e8): four digits
    assert row["p025"] == pytest.approx(-1.96, abs=0.01)  # from the histogram, past the cap
    assert all(c["passed"] for c in checks)


def test_constant_dot_product(sdpa):
    # ±1 components with ρ = 1: k = q, so q·k = d exactly, every time.
    rows, checks = _rows(sdpa, "variance", "--distribution", "rademacher", "--correlation", "1",
                         "--dims", "5", plots=True)
    assert rows[0]["variance"] == 0.0 and rows[0]["theory_variance"] == 0.0
    assert rows[0]["mean"] == 5.0 and rows[0]["min"] == rows[0]["max"] == 5.0
    assert all(c["passed"] for c in checks)


@pytest.mark.parametrize("study", ["softmax-sweep", "jacobian"])
def test_masked_scores_and_a_scale_of_1e300(sdpa, study):
    rows, _ = _rows(sdpa, study, "--scores", "1", "0.5", "-inf", "0", "--scales", "1", "1e300",
                    plots=True)
    at_one, huge = rows
    assert huge["max_prob"] == 1.0
    if study == "softmax-sweep":
        assert at_one["probs"][2] == 0.0  # masked: exactly zero, not 1e-300
        assert huge["probs"] == [1.0, 0.0, 0.0, 0.0] and huge["entropy"] == 0.0
        # three live keys: softmax(1, 0.5, 0)
        e = [math.exp(1), math.exp(0.5), 1.0]
        assert at_one["probs"][0] == pytest.approx(e[0] / sum(e), rel=1e-12)
    else:
        assert huge["frobenius"] == 0.0 and huge["max_abs_jacobian"] == 0.0


def test_score_spreads_from_1e_minus_300_to_1e300(sdpa):
    rows, _ = _rows(sdpa, "jacobian", "--score-stds", "1e-300", "1e300", "--keys", "16",
                    "--trials", "200")
    flat, frozen = rows
    assert flat["mean_entropy"] == pytest.approx(math.log(16), rel=1e-12)
    assert flat["mean_max_prob"] == pytest.approx(1 / 16, rel=1e-12)
    assert flat["mean_frobenius"] == pytest.approx(math.sqrt(15) / 16, rel=1e-9)
    assert frozen["mean_entropy"] == 0.0 and frozen["mean_max_prob"] == 1.0
    assert frozen["mean_frobenius"] == 0.0


@pytest.mark.slow  # heavy; the quick tier keeps a cheaper test of the same behaviour
@pytest.mark.parametrize("study", ["softmax-sweep", "jacobian"])
def test_random_vectors_with_huge_components(sdpa, study):
    rows, _ = _rows(sdpa, study, "--dims", "64", "--keys", "8", "--std", "1e150", "--trials",
                    "50", "--scalings", "none", "sqrt", "cosine", plots=True)
    by_rule = {r["scaling"]: r for r in rows}
    assert by_rule["none"]["mean_max_prob"] == 1.0  # scores ~1e301: frozen one-hot
    assert 1 / 8 < by_rule["cosine"]["mean_max_prob"] < 1  # cosine ignores the size


# --- found in review, kept fixed -----------------------------------------------------------


def test_limit_of_largest_weight_does_not_overflow(sdpa):
    # cosine/0.001 with correlated keys: the own-key gap is ~800, e^800 overflows a float.
    rows, _ = _rows(sdpa, "softmax-sweep", "--dims", "16", "--correlation", "0.8",
                    "--scalings", "cosine:0.001", "--trials", "50")
    assert rows[0]["limit_max_prob"] == 1.0


def test_cosine_under_a_huge_mean_is_one_not_zero(sdpa):
    # |q|²·|k|² overflows at mean/std = 1e80 while each norm does not.
    rows, _ = _rows(sdpa, "variance", "--mean", "1", "--std", "1e-80", "--dims", "4",
                    "--scalings", "cosine")
    assert rows[0]["mean"] == pytest.approx(1.0)


def test_explicit_scores_need_no_seed_and_repeat_exactly(sdpa):
    a = sdpa("softmax-sweep", "--scores", "1", "0", "--scales", "1", "2", "--format", "json",
             "-q", "--no-plots").out
    b = sdpa("softmax-sweep", "--scores", "1", "0", "--scales", "1", "2", "--format", "json",
             "-q", "--no-plots").out
    assert a == b and '"seed": null' in a


def test_variance_factor_is_the_rules_own(sdpa):
    rows, _ = _rows(sdpa, "variance", "--std", "2", "--dims", "4", "--pairs", "50")
    assert [r["factor"] for r in rows] == [1.0, 0.5]  # none, sqrt: 1/√4, without σ²


@pytest.mark.parametrize("args", [
    ["jacobian", "--score-stds", "1e-300", "1e-5", "1e300", "--keys", "2", "4", "--trials",
     "100"],
    ["jacobian", "--scores", "1e300", "-1e300", "0", "--scales", "1", "1e300"],
])
@pytest.mark.slow  # ≥ 1 s; moved out of the quick tier (its 75 s budget)
def test_figures_of_degenerate_data_are_drawn_quietly(sdpa, workdir, args):
    r = sdpa(*args, "-q", "--seed", "1")
    assert r.code == 0 and r.err == ""
    assert list((workdir / "outputs" / "jacobian").glob("*.png"))


def test_variance_with_a_vanishing_power_rule_is_null_with_a_note(sdpa, workdir: Path):
    # power:1e300 at d = 3: d^P overflows; the factor is 0 (a row of zeros, a note), never an
    # OverflowError reported as an internal error
    r = sdpa("variance", "--dims", "3", "1000", "--pairs", "10", "--seed", "1", "--scalings",
             "power:1e300", "power:-1e300", "--no-plots", "-q", "--out", "run")
    assert r.code == 0, r.err
    assert "internal error" not in r.err



def test_variance_below_float64s_smallest_is_null_never_a_false_zero(workdir):
    """At σ = 1e-300 the mean, min and max of q·k (about 1e-600) were reported as exactly 0;
    at σ = 1e-160 the histograms divided by bins 1e-320 wide (RuntimeWarning: overflow)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tiny = sdpa_cli.variance(dims=[3], pairs=500, std=1e-300, seed=1)
        sdpa_cli.variance(dims=[3, 100], pairs=500, std=1e-160, seed=1).save("run")
    row = tiny.rows[0]
    assert row["mean"] is None and row["min"] is None and row["max"] is None
    assert row["variance"] is None and "beyond float64" in row["note"]
    assert row["z"] == sdpa_cli.variance(dims=[3], pairs=500, std=1.0, seed=1).rows[0]["z"]

