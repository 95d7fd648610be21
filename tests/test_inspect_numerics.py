"""The inspect study's numerics: erf, RoPE, GQA, masks, families and attention_stats, by
invariants that fail when the maths is wrong and by direct formulas on hand cases."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")

import inspect_fixtures as fx

from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.studies.inspect.checkpoint import Weights, open_checkpoint
from sdpa_cli.studies.inspect.models import gpt2, llama
from sdpa_cli.studies.inspect.models.common import erf, init_reader
from sdpa_cli.studies.inspect.models.stats import attention_stats, causal_mask


def _layers(folder: Path, ids: np.ndarray, dtype: type = np.float64) -> list:
    fx.write_tokenizer(folder, None)
    ckpt = open_checkpoint(folder)
    return list(ckpt.family.forward(ckpt.config, Weights(ckpt), ids, dtype))


def test_erf_matches_math_erf_to_a_few_ulps():
    x = np.concatenate([np.linspace(-7, 7, 20001), [0.0, 1e-300, -2.0, 2.0, 6.0]])
    want = np.array([math.erf(v) for v in x])
    assert np.abs(erf(x) - want).max() < 5e-15
    x32 = x.astype(np.float32)  # float32 input: shorter pieces, about one float32 ulp
    want32 = np.array([math.erf(float(v)) for v in x32])
    assert erf(x32).dtype == np.float32
    assert np.abs(erf(x32).astype(np.float64) - want32).max() < 2.5e-7


def test_rope_depends_on_relative_position_only_and_keeps_norms():
    rng = np.random.default_rng(1)
    inv = llama.rope_frequencies({"rope_theta": 500.0}, 8)
    q, k = rng.normal(size=(1, 8)), rng.normal(size=(1, 8))
    dots = []
    for shift in (0, 5, 37):
        qm = llama.rope(q, inv, offset=3 + shift)
        kn = llama.rope(k, inv, offset=11 + shift)
        dots.append((qm @ kn.T).item())
        assert np.linalg.norm(qm) == pytest.approx(np.linalg.norm(q), rel=1e-13)
    assert dots[1] == pytest.approx(dots[0], abs=1e-12)
    assert dots[2] == pytest.approx(dots[0], abs=1e-12)
    # and it is not the identity: a different gap gives a different dot product
    assert (llama.rope(q, inv, 4) @ llama.rope(k, inv, 11).T).item() != pytest.approx(dots[0])


def test_rope_theta_from_rope_parameters_equals_top_level():
    a = llama.rope_frequencies({"rope_theta": 1e6}, 16)
    b = llama.rope_frequencies({"rope_parameters": {"rope_type": "default",
                                                    "rope_theta": 1e6}}, 16)
    assert np.array_equal(a, b)
    assert a[1] == pytest.approx(1e6 ** (-2 / 16), rel=1e-15)


def test_gqa_query_heads_share_their_key_head(tmp_path: Path):
    ids = np.arange(4, 4 + 10)[None, :]
    layers = _layers(fx.llama(tmp_path / "m", heads=4, kv=2), ids)
    for lo in layers:
        assert np.array_equal(lo.k[:, 0], lo.k[:, 1]) and np.array_equal(lo.k[:, 2], lo.k[:, 3])
        assert not np.allclose(lo.k[:, 1], lo.k[:, 2])
        assert not np.allclose(lo.q[:, 0], lo.q[:, 1])  # queries stay per head


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_decoders_are_causal_and_encoders_are_not(tmp_path: Path, family: str):
    ids = np.arange(4, 4 + 12)[None, :]
    later = ids.copy()
    later[0, 8:] = 5  # change tokens 8… only
    build = getattr(fx, family)
    a, b = _layers(build(tmp_path / "a"), ids), _layers(build(tmp_path / "a"), later)
    for la, lb in zip(a, b, strict=True):
        assert np.array_equal(la.hidden[:, :8], lb.hidden[:, :8])  # the past never sees it
        assert not np.allclose(la.hidden[:, 8:], lb.hidden[:, 8:])
    enc_a = _layers(fx.bert(tmp_path / "e"), ids)
    enc_b = _layers(fx.bert(tmp_path / "e"), later)
    assert not np.allclose(enc_a[-1].hidden[:, :8], enc_b[-1].hidden[:, :8])


def test_weight_prefix_is_stripped(tmp_path: Path):
    ids = np.arange(4, 14)[None, :]
    a = _layers(fx.bert(tmp_path / "a", prefix="bert."), ids)
    b = _layers(fx.bert(tmp_path / "b", prefix=""), ids)
    assert all(np.array_equal(x.hidden, y.hidden) for x, y in zip(a, b, strict=True))


def test_zero_biases_equal_no_biases(tmp_path: Path):
    from safetensors.numpy import load_file, save_file

    ids = np.arange(4, 14)[None, :]
    folder = fx.llama(tmp_path / "m", bias=True)
    tensors = load_file(str(folder / "model.safetensors"))
    save_file({k: (np.zeros_like(v) if k.endswith(".bias") else v) for k, v in tensors.items()},
              str(folder / "model.safetensors"))
    zero = _layers(folder, ids)
    save_file({k: v for k, v in tensors.items() if not k.endswith(".bias")},
              str(folder / "model.safetensors"))
    none = _layers(folder, ids)
    assert all(np.allclose(x.q, y.q, atol=1e-13) for x, y in zip(zero, none, strict=True))


def test_gpt2_own_rule_includes_the_inverse_layer_index():
    assert gpt2.layer_scale({}, 3, 16) == pytest.approx(0.25)
    assert gpt2.layer_scale({"scale_attn_by_inverse_layer_idx": True}, 3, 16) == \
        pytest.approx(0.25 / 4)
    assert gpt2.layer_scale({"scale_attn_weights": False}, 0, 16) == 1.0


def test_init_reader_draws_as_the_family_initialises():
    shapes = {"a.weight": (300, 200), "a.bias": (200,), "ln.weight": (200,)}
    read = init_reader(shapes, 0.02, seed=7)
    w = read("a.weight")
    # sample std of 60000 normals: standard error σ/√(2N) ≈ 5.8e-5; 5 se
    assert abs(w.std() - 0.02) < 5 * 0.02 / math.sqrt(2 * w.size)
    assert np.all(read("a.bias") == 0) and np.all(read("ln.weight") == 1)
    again = init_reader(shapes, 0.02, seed=7)
    assert np.array_equal(again("a.weight"), w)  # by name, not by reading order
    assert not np.array_equal(init_reader(shapes, 0.02, seed=8)("a.weight"), w)


def _hand(p: list[float]) -> dict[str, float]:
    """Row statistics of one weight row p, written out from their definitions."""
    sq = sum(x * x for x in p)
    jac = math.sqrt(sum((x - x * x) ** 2 for x in p)
                    + sum(p[i] ** 2 * p[j] ** 2 for i in range(len(p))
                          for j in range(len(p)) if i != j))
    ent = -sum(x * math.log(x) for x in p if x > 0)
    return {"max": max(p), "ent": ent / math.log(len(p)) if len(p) > 1 else math.nan,
            "jac": jac, "first": p[0], "sq": sq}


def test_attention_stats_on_a_hand_case():
    # one sequence, one head, d = 2, n = 3: q_i·k_j by hand
    q = np.array([[[[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]]]])
    k = np.array([[[[2.0, 0.0], [0.0, 1.0], [1.0, -1.0]]]])
    raw = [[2.0, 0.0, 1.0], [0.0, 2.0, -2.0], [2.0, 1.0, 0.0]]
    rule = Scaling.parse("sqrt")
    st = attention_stats(q, k, rule)
    scaled = [[x / math.sqrt(2) for x in row] for row in raw]
    rows = []
    for s in scaled:
        e = [math.exp(x) for x in s]
        rows.append(_hand([x / sum(e) for x in e]))
    flat = [x for row in scaled for x in row]
    mean = sum(flat) / 9
    assert st.score_std[0] == pytest.approx(math.sqrt(sum((x - mean) ** 2 for x in flat) / 9))
    flat_raw = [x for row in raw for x in row]
    m_raw = sum(flat_raw) / 9
    assert st.score_std_raw[0] == pytest.approx(
        math.sqrt(sum((x - m_raw) ** 2 for x in flat_raw) / 9))
    assert st.max_weight[0] == pytest.approx(sum(r["max"] for r in rows) / 3)
    assert st.entropy_ratio[0] == pytest.approx(sum(r["ent"] for r in rows) / 3)
    assert st.first_token_share[0] == pytest.approx(sum(r["first"] for r in rows) / 3)
    assert st.jacobian[0] == pytest.approx(sum(r["jac"] for r in rows) / 3)
    assert st.frozen_share[0] == 0.0


def test_attention_stats_with_a_causal_mask_and_a_frozen_head():
    n = 5
    q = np.zeros((2, 2, n, 3))
    k = np.random.default_rng(0).normal(size=(2, 2, n, 3))
    q[:, 1] = 400 * k[:, 1]  # head 1: each query picks its own key, hugely: one-hot rows
    st = attention_stats(q, k, Scaling.parse("none"), causal_mask(n))
    # head 0: q = 0, uniform over the keys each row sees; row 0 sees one key (J = 0) and is
    # left out of the frozen share, as of the entropy ratio: it is one-hot whatever the scores
    seen = np.arange(1, n + 1)
    assert st.max_weight[0] == pytest.approx(np.mean(1 / seen))
    assert st.first_token_share[0] == pytest.approx(np.mean(1 / seen))
    assert st.entropy_ratio[0] == pytest.approx(1.0)  # rows 1…n−1 only, each uniform
    assert st.frozen_share[0] == 0.0
    assert st.score_std[0] == 0.0
    assert st.frozen_share[1] == 1.0 and st.max_weight[1] == pytest.approx(1.0)
    # without scores every row is uniform: with causal rows 1…n−1 uniform and row 0 left out,
    # nothing is frozen (before, row 0 alone kept every causal head at 1/n or more)
    flat = attention_stats(np.zeros((1, 1, 40, 3)), np.ones((1, 1, 40, 3)),
                           Scaling.parse("none"), causal_mask(40))
    assert flat.frozen_share[0] == 0.0


def test_rules_rescale_the_same_scores():
    rng = np.random.default_rng(3)
    q, k = rng.normal(size=(2, 3, 6, 16)), rng.normal(size=(2, 3, 6, 16))
    none = attention_stats(q, k, Scaling.parse("none"))
    sqrt = attention_stats(q, k, Scaling.parse("sqrt"))
    model = attention_stats(q, k, 0.25)  # the model's own multiplier, 1/√16
    assert np.allclose(none.score_std, 4 * sqrt.score_std)
    assert np.allclose(model.score_std, sqrt.score_std) and np.array_equal(
        model.frozen_share, sqrt.frozen_share)
    assert np.array_equal(none.score_std_raw, sqrt.score_std_raw)
    logn = attention_stats(q, k, Scaling.parse("logn:1"), causal_mask(6))
    # row i sees i + 1 keys: its factor is ln(i + 1); row 0's scores are all zero
    direct = np.einsum("snd,smd->snm", q[:, 0], k[:, 0]) * np.log(np.arange(1, 7))[:, None]
    kept = direct[:, causal_mask(6)]
    assert logn.score_std[0] == pytest.approx(kept.std())


def test_pooling_over_sequences_equals_the_direct_statistics():
    rng = np.random.default_rng(5)
    q, k = 3 * rng.normal(size=(4, 2, 7, 5)), rng.normal(size=(4, 2, 7, 5)) + 0.5
    mask = causal_mask(7)
    st = attention_stats(q, k, Scaling.parse("sqrt"), mask)
    for h in range(2):
        s = np.einsum("snd,smd->snm", q[:, h], k[:, h]) / math.sqrt(5)
        kept = s[:, mask]  # every unmasked pair of every sequence, pooled
        assert st.score_std[h] == pytest.approx(kept.std(), rel=1e-12)
        assert st.score_mean[h] == pytest.approx(kept.mean(), rel=1e-12)
        e = np.where(mask, np.exp(s - s.max(axis=-1, keepdims=True)), 0.0)
        p = e / e.sum(axis=-1, keepdims=True)
        assert st.max_weight[h] == pytest.approx(p.max(axis=-1).mean(), rel=1e-12)
        assert st.first_token_share[h] == pytest.approx(p[..., 0].mean(), rel=1e-12)


def test_the_saturated_head_pattern_is_named_from_its_rows():
    from sdpa_cli.studies.inspect.findings import pattern

    shift = np.eye(6, k=-1)
    shift[0, 0] = 1.0  # row 0 has no previous token
    assert "the previous token in 100%" in pattern(shift.argmax(axis=-1), 0, 2)
    assert "the token itself in 100%" in pattern(np.eye(6).argmax(axis=-1), 1, 0)
    sink = np.zeros((6, 6))
    sink[:, 0] = 1.0
    assert "the first token in 100%" in pattern(sink.argmax(axis=-1), 1, 0)


def test_the_score_histogram_is_numpys_bin_for_bin() -> None:
    """stats.histogram (counting on even edges, searchsorted on others; no sort) against
    np.histogram of the clipped scores,
    with values on, just beside and beyond every edge, on even and uneven edges."""
    from sdpa_cli.studies.inspect.models.stats import histogram

    rng = np.random.default_rng(7)
    for edges in (np.linspace(-12.0, 12.0, 49), np.sort(rng.uniform(-20.0, 20.0, 30))):
        x = np.concatenate([rng.standard_normal(5000) * 8, edges, 1.5 * edges[[0, -1]],
                            np.nextafter(edges, np.inf), np.nextafter(edges, -np.inf)])
        want = np.histogram(np.clip(x, edges[0], edges[-1]), bins=edges)[0]
        got = histogram(x, edges)
        assert got.dtype == np.int64 and np.array_equal(got, want)
        assert got.sum() == x.size  # nothing falls outside after clipping


def test_gelu_tanh_and_silu_match_their_formulas():
    """½x(1 + tanh(√(2/π)(x + 0.044715x³))) and x/(1 + e^−x) at 50 digits (mpmath): float64
    within a few ulps of the value's scale, float32 within float32's step near the value."""
    import mpmath

    from sdpa_cli.studies.inspect.models.common import gelu_tanh, silu

    mpmath.mp.dps = 50
    x = np.concatenate([np.linspace(-12, 12, 481), [0.0, 1e-8, -1e-8, 40.0, -40.0]])
    c = mpmath.sqrt(2 / mpmath.pi)
    gelu = np.array([float(mpmath.mpf(0.5) * mpmath.mpf(v) * (1 + mpmath.tanh(
        c * (mpmath.mpf(v) + mpmath.mpf("0.044715") * mpmath.mpf(v) ** 3)))) for v in x])
    sig = np.array([float(mpmath.mpf(v) / (1 + mpmath.exp(-mpmath.mpf(v)))) for v in x])
    for f, want in ((gelu_tanh, gelu), (silu, sig)):
        got = f(x.reshape(3, -1)).reshape(-1)
        assert np.all(np.abs(got - want) <= 4e-16 * np.maximum(np.abs(x), 1.0)), f
        got32 = f(x.astype(np.float32)).astype(np.float64)
        assert got32.dtype == np.float64 and f(x.astype(np.float32)).dtype == np.float32
        assert np.all(np.abs(got32 - want) <= 3e-7 * np.maximum(np.abs(x), 1.0)), f
