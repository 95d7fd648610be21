"""Slopes versus n for n iid N(0, s²) scores: the exact moments and the slopes_vs_n table."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from sdpa_cli import registry
from sdpa_cli.framework.context import RunContext
from sdpa_cli.runner import loader as spec_mod
from sdpa_cli.studies.saturation import gauss_slopes
from sdpa_cli.studies.saturation.keys import iid_softmax_moments


def _two_keys(s: float) -> tuple[float, float]:
    """n = 2: x = s(g₁ − g₂) ~ N(0, 2s²), Σp² = σ(x)² + σ(−x)², H the binary entropy."""
    with mp.workdps(30):
        sd = mp.sqrt(2) * s
        cuts = sorted({-mp.inf, mp.inf, *(mp.mpf(k) * sd / 4 for k in range(-40, 41)),
                       *(mp.mpf(k) for k in range(-30, 31))})
        sig = lambda x: 1 / (1 + mp.e ** (-x))  # noqa: E731
        part = mp.quad(lambda x: (sig(x) ** 2 + sig(-x) ** 2) * mp.npdf(x, 0, sd), cuts)
        ent = mp.quad(lambda x: (mp.log(1 + mp.e ** (-x)) + x * sig(-x)) * mp.npdf(x, 0, sd),
                      cuts)
        return float(part), float(ent)


@pytest.mark.slow  # heavy; the quick tier keeps a cheaper test of the same behaviour
@pytest.mark.parametrize("s", [0.125, 1.0, 4.0, 16.0])
def test_moments_against_30_digits_at_two_keys(s: float) -> None:
    part, ent = iid_softmax_moments(2, s)
    ref_part, ref_ent = _two_keys(s)
    assert part == pytest.approx(ref_part, rel=1e-12)
    assert ent == pytest.approx(ref_ent, rel=1e-11)


def test_moments_limits() -> None:
    assert iid_softmax_moments(1, 2.0) == (1.0, 0.0)
    part, ent = iid_softmax_moments(1000, 1e-3)  # s → 0: uniform weights
    assert part == pytest.approx(1e-3, rel=1e-5) and ent == pytest.approx(math.log(1000), rel=1e-6)


@pytest.mark.parametrize(("n", "s"), [(64, 3.0), (512, 1.0), (16, 8.0)])
def test_moments_against_monte_carlo(n: int, s: float) -> None:
    rng = np.random.default_rng(n + int(10 * s))
    g = s * rng.standard_normal((20000, n))
    g -= g.max(axis=1, keepdims=True)
    p = np.exp(g)
    p /= p.sum(axis=1, keepdims=True)
    part = (p * p).sum(axis=1)
    ent = -np.sum(p * np.log(np.where(p > 0, p, 1.0)), axis=1)
    exact_part, exact_ent = iid_softmax_moments(n, s)
    for sample, exact in ((part, exact_part), (ent, exact_ent)):
        se = sample.std(ddof=1) / math.sqrt(sample.size)
        assert abs(sample.mean() - exact) < 4 * se


def _run(study: str, **overrides):
    spec = spec_mod.load(None, study=study, overrides=overrides)
    return spec, registry.get(study).run(spec, RunContext(workers=1))


@pytest.mark.parametrize("study", ["softmax-sweep", "jacobian"])
def test_gaussian_source_gets_slopes_versus_n(study: str) -> None:
    _, result = _run(study, score_stds=[0.5, 5.0], keys=[8, 32, 128], trials=300, seed=7)
    rows = next(t for t in result.tables if t.name == "slopes_vs_n").rows
    last = "mean_frobenius" if study == "jacobian" else "participation"
    assert [(r["score_std"], r["quantity"]) for r in rows] == [
        (s, q) for s in (0.5, 5.0) for q in ("max_prob", "entropy_ratio", last)]
    by = {(r["score_std"], r["quantity"]): r for r in rows}
    # checked where exact: entropy ÷ ln n (both), Σp² (softmax-sweep)
    checked = {k for k, r in by.items() if r["agrees"] is not None}
    assert checked == {(s, q) for s in (0.5, 5.0) for q in ("entropy_ratio", last)
                       if q != "mean_frobenius"}
    assert all(r["agrees"] for r in rows if r["agrees"] is not None)
    assert sum(c.name.endswith("slope vs n") for c in result.checks) == len(checked)
    assert all(c.passed for c in result.checks)
    # near-uniform rows: the largest weight fades (toward −1), ‖J‖_F toward −½
    assert by[(0.5, "max_prob")]["slope"] < -0.7
    assert by[(0.5, "max_prob")]["theory_slope"] == -1.0
    if study == "jacobian":
        assert by[(0.5, "mean_frobenius")]["slope"] == pytest.approx(-0.5, abs=0.05)
    else:
        # s = 5 > √(2 ln 128) = 3.1: frozen at every n, the REM limit's slope is printed
        frozen = by[(5.0, "participation")]
        assert frozen["rem_slope"] is not None and "not checked" in frozen["theory_basis"]
        assert by[(0.5, "participation")]["rem_slope"] is None


def test_two_key_counts_give_no_slope_table() -> None:
    _, result = _run("softmax-sweep", score_stds=[1.0], keys=[8, 32], trials=50, seed=7)
    assert "slopes_vs_n" not in [t.name for t in result.tables]


def test_slope_check_fails_when_the_theory_is_wrong() -> None:
    """Rows holding the exact Σp² and H to 0.1% pass; the same rows against values that
    drift by a factor n^0.05 (a wrong theory) fail. At s = 0.5 both are close to power laws
    (slope se 0.004 and 0.001); where a curve bends (Σp² at s = 2: se 0.026 from the
    √(χ²/ν) scaling) the check only catches larger errors."""
    keys, s = [8, 32, 128, 512], 0.5
    exact = {n: iid_softmax_moments(n, s) for n in keys}
    rows = [{"keys": n, "score_std": s, "mean_max_prob": 0.5, "mean_max_prob_se": 0.01,
             "mean_entropy": exact[n][1], "mean_entropy_se": 1e-3 * exact[n][1],
             "mean_participation": exact[n][0], "mean_participation_se": 1e-3 * exact[n][0]}
            for n in keys]
    _, checks = gauss_slopes.slope_rows(keys, [s], rows, ("entropy_ratio", "participation"),
                                        4.0)
    assert [c.passed for c in checks] == [True, True]
    wrong = [{**r, "mean_entropy": r["mean_entropy"] * r["keys"] ** 0.05,
              "mean_participation": r["mean_participation"] * r["keys"] ** 0.05} for r in rows]
    _, checks = gauss_slopes.slope_rows(keys, [s], wrong, ("entropy_ratio", "participation"),
                                        4.0)
    assert [c.passed for c in checks] == [False, False]
