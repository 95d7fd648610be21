"""Scaling rules: parsing, factors, formulas and the vectorised score functions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdpa_cli.numerics.scaling import Scaling, apply_to_scores, prepare, rule_scores


@pytest.mark.parametrize(("text", "label", "d", "n", "factor"), [
    ("none", "none", 64, None, 1.0),
    ("sqrt", "sqrt", 64, None, 1 / 8),
    ("qknorm", "qknorm", 64, None, 1 / 8),
    ("qknorm:rms", "qknorm:rms", 16, None, 1 / 4),
    ("softcap:50", "softcap:50", 100, None, 1 / 10),
    ("logn:0.43", "logn:0.43", 7, 1000, 0.43 * math.log(1000)),
    ("linear:2", "linear:2", 16, None, 2 / 16),
    ("mup", "mup", 64, None, 1 / 8),  # 8/d equals 1/√d at d = 64
    ("mup:4", "mup:4", 32, None, 4 / 32),
    ("cosine:0.5", "cosine:0.5", 9, None, 2.0),
])
def test_parse_label_and_factor(text: str, label: str, d: int, n: int | None,
                                factor: float) -> None:
    rule = Scaling.parse(text)
    assert rule.label == label
    assert Scaling.parse(rule.label) == rule  # the label round-trips
    assert rule.factor(d, n) == pytest.approx(factor, rel=1e-15)


def test_contract_fields() -> None:
    assert Scaling.parse("qknorm").norm == "layer"
    assert Scaling.parse("qknorm:rms").norm == "rms"
    assert Scaling.parse("softcap:50").cap == 50.0
    assert Scaling.parse("logn:0.43").log_n == 0.43
    with pytest.raises(ValueError, match="number of keys"):
        Scaling.parse("logn:1").factor(16)


@pytest.mark.parametrize("bad", ["softcap", "softcap:0", "logn:-1", "qknorm:foo", "mup:x",
                                 "linear:inf", "bogus"])
def test_bad_rules_raise(bad: str) -> None:
    with pytest.raises(ValueError):
        Scaling.parse(bad)


@pytest.mark.parametrize(("text", "formula"), [
    ("temperature:22.627416997969522", "q·k/√512"),
    ("power:-0.5", "√d·(q·k)"),
    ("temperature:3.14159265358979", "q·k/3.14159"),
    ("power:0.75", "q·k/d^0.75"),
    ("mup", "8·q·k/d"),
    ("softcap:50", "50·tanh(q·k/(√d·50))"),
    ("logn:0.43", "0.43·ln(n)·q·k"),
    ("sqrt", "q·k/√d"),
])
def test_formula_is_short(text: str, formula: str) -> None:
    assert Scaling.parse(text).formula == formula


def _digits(text: str) -> int:
    import re
    runs = re.findall(r"\d+(?:\.\d+)?", text)
    return max((len(r.replace(".", "").lstrip("0")) for r in runs), default=0)


@given(st.floats(min_value=1e-3, max_value=1e4, allow_nan=False))
@settings(max_examples=50, deadline=None)
def test_formula_never_more_than_six_digits(t: float) -> None:
    for text in (f"temperature:{t!r}", f"power:{t!r}", f"softcap:{t!r}", f"linear:{t!r}"):
        assert _digits(Scaling.parse(text).formula) <= 6


def test_rule_scores_match_the_definitions() -> None:
    rng = np.random.default_rng(5)
    d, n = 16, 7
    q = rng.standard_normal((3, d))
    k = rng.standard_normal((3, n, d))
    raw = np.einsum("td,tnd->tn", q, k)
    np.testing.assert_allclose(rule_scores(q, k, Scaling.parse("sqrt")), raw / 4, rtol=1e-14)
    np.testing.assert_allclose(rule_scores(q, k, Scaling.parse("softcap:2")),
                               2 * np.tanh(raw / 4 / 2), rtol=1e-14)
    np.testing.assert_allclose(rule_scores(q, k, Scaling.parse("logn:0.5")),
                               0.5 * math.log(n) * raw, rtol=1e-14)
    # qknorm: LayerNorm without parameters, population std, then ÷√d
    qc = q - q.mean(-1, keepdims=True)
    kc = k - k.mean(-1, keepdims=True)
    qh = qc / qc.std(-1, keepdims=True)
    kh = kc / kc.std(-1, keepdims=True)
    np.testing.assert_allclose(rule_scores(q, k, Scaling.parse("qknorm")),
                               np.einsum("td,tnd->tn", qh, kh) / 4, rtol=1e-12)
    qr = q / np.sqrt((q * q).mean(-1, keepdims=True))
    kr = k / np.sqrt((k * k).mean(-1, keepdims=True))
    np.testing.assert_allclose(rule_scores(q, k, Scaling.parse("qknorm:rms")),
                               np.einsum("td,tnd->tn", qr, kr) / 4, rtol=1e-12)
    # RMS qknorm = d·cos/√d = √d·cos(q, k): a factor √d above cosine:1 (|q̂|² = d)
    np.testing.assert_allclose(rule_scores(q, k, Scaling.parse("qknorm:rms")),
                               math.sqrt(d) * rule_scores(q, k, Scaling.parse("cosine")),
                               rtol=1e-12)


def test_prepare_zero_vectors_give_zeros() -> None:
    x = np.array([[0.0, 0.0, 0.0], [2.0, 2.0, 2.0]])
    assert np.all(prepare(x, Scaling.parse("qknorm")) == 0.0)
    assert np.all(prepare(x[:1], Scaling.parse("cosine")) == 0.0)


def test_apply_to_scores_uses_length_as_n() -> None:
    s = np.array([3.0, -2.0, -2.0, -2.0])
    np.testing.assert_allclose(apply_to_scores(s, Scaling.parse("logn:0.43")),
                               0.43 * math.log(4) * s, rtol=1e-15)
    with pytest.raises(ValueError):
        apply_to_scores(s, Scaling.parse("qknorm"))
