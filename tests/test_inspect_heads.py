"""Inspect's statistics: sinks and head types (known-answer heads), TransformerLens's patterns,
the weight-only W_Q W_Kᵀ bounds (against brute force and measured attention), the model's own
rule, windows, token ids in results.json, the picture's crop, the terminal at 80 columns."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

import inspect_fixtures as fx

from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.studies.inspect.models import llama
from sdpa_cli.studies.inspect.models.common import softmax_rows, visible
from sdpa_cli.studies.inspect.models.families import FAMILIES
from sdpa_cli.studies.inspect.models.headtypes import (
    duplicate_pattern,
    induction_pattern,
    previous_pattern,
    repeated_tokens,
)
from sdpa_cli.studies.inspect.models.qkbound import (
    QKMaps,
    Spectra,
    entropy_bound,
    layer_maps,
    logit_bound,
    min_entropy,
    offset_norms,
    row_sigma,
    spectra,
)
from sdpa_cli.studies.inspect.models.stats import (
    OwnRule,
    attention_stats,
    causal_mask,
    head_scores,
    own_rule_name,
    pattern_score,
)


def _entropy(s: np.ndarray) -> float:
    p = np.exp(s - s.max())
    p /= p.sum()
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


# ── the entropy floor under |s| ≤ b ─────────────────────────────────────────────────────

@pytest.mark.parametrize("m", [2, 3, 5, 8])
def test_min_entropy_is_the_least_over_every_vertex_and_below_random_points(m: int):
    rng = np.random.default_rng(m)
    for b in (1e-6, 0.01, 0.3, 1.0, 2.5, 7.0, 40.0):
        floor = float(min_entropy(np.array(m), np.array(b)))
        # brute force: every corner of the box [−b, b]^m, softmax written out
        corners = min(_entropy(b * np.array(c)) for c in itertools.product([-1, 1], repeat=m))
        assert floor == pytest.approx(corners, rel=1e-9, abs=1e-12)
        inside = min(_entropy(rng.uniform(-b, b, m)) for _ in range(300))
        assert inside >= floor - 1e-12


def test_min_entropy_at_length_uses_the_best_count_of_top_keys():
    # for m in the hundreds the corners cannot be listed: every count k of top keys can
    for m in (50, 128, 1000):
        for b in (0.05, 0.5, 1.0, 1.5, 3.0, 8.0):
            k = np.arange(1, m)
            low = (m - k) * np.exp(-2 * b)
            direct = np.min(np.log(k + low) + 2 * b * low / (k + low))
            assert float(min_entropy(np.array(m), np.array(b))) == pytest.approx(direct,
                                                                                  rel=1e-12)
    # small b: about half the keys on top and H ≈ ln m − b²/2; large b: Zhai et al.'s form
    assert float(min_entropy(np.array(1000), np.array(0.01))) == pytest.approx(
        math.log(1000) - 0.01 ** 2 / 2, rel=1e-8)
    m, beta = 64, 2 * 6.0
    zhai = math.log(1 + (m - 1) * math.exp(-beta)) + beta * (m - 1) * math.exp(-beta) / (
        1 + (m - 1) * math.exp(-beta))
    assert float(min_entropy(np.array(m), np.array(6.0))) == pytest.approx(zhai, rel=1e-12)
    assert float(min_entropy(np.array(1), np.array(3.0))) == 0.0


# ── the score bound from the weights ────────────────────────────────────────────────────

INV = llama.rope_frequencies({"rope_theta": 50.0}, 8)


def _rope_maps(rng: np.random.Generator, heads: int = 3, width: int = 20, d: int = 8
               ) -> QKMaps:
    return QKMaps(rng.normal(size=(heads, width, d)), rng.normal(size=(heads, width, d)),
                  math.sqrt(width), math.sqrt(width), rotary=True)


def test_offset_norms_equal_the_full_matrix_norm_with_rope_rotating_q_and_k():
    rng = np.random.default_rng(1)
    maps = _rope_maps(rng)
    got = offset_norms(maps, INV, np.arange(6))
    for h in range(3):
        for i, j in [(0, 0), (3, 1), (5, 0), (4, 4)]:
            # the bilinear form (u, v) ↦ rope(u·a, i)·rope(v·b, j) as a matrix, row by row
            eye = np.eye(20)
            rot_q = np.stack([llama.rope((e @ maps.a[h])[None], INV, i)[0] for e in eye])
            rot_k = np.stack([llama.rope((e @ maps.b[h])[None], INV, j)[0] for e in eye])
            full = np.linalg.norm(rot_q @ rot_k.T, 2)
            assert got[h, i - j] == pytest.approx(full, rel=1e-10)


@pytest.mark.parametrize("rotary", [False, True])
def test_spectra_are_numpys_svd_norms_with_shared_keys_and_diagonal_maps(rotary: bool):
    """Under GQA a key head's work is done once for its group, and a QK-norm's diagonal maps
    take their largest gains: the same norms as numpy's SVD of every head's full matrices."""
    rng = np.random.default_rng(9)
    heads, group, d = 6, 3, 8
    keys = rng.normal(size=(heads // group, 20, d))
    dense = QKMaps(rng.normal(size=(heads, 20, d)), np.repeat(keys, group, axis=0), 4.0, 4.0,
                   rotary, group)
    gains = rng.normal(1, 0.5, (2, heads, d))
    gains[1] = np.repeat(gains[1, ::group], group, axis=0)
    diagonal = QKMaps(np.stack([np.diag(g) for g in gains[0]]),
                      np.stack([np.diag(g) for g in gains[1]]), 4.0, 4.0, rotary, group,
                      diagonal=True)
    for maps in (dense, diagonal):
        sp = spectra(maps)
        for h in range(heads):
            a, b = maps.a[h], maps.b[h]
            assert sp.at_zero[h] == pytest.approx(np.linalg.svd(a @ b.T, compute_uv=False)[0],
                                                  rel=1e-13)
            top = (np.linalg.svd(a, compute_uv=False)[0] * np.linalg.svd(b, compute_uv=False)[0]
                   if rotary else sp.at_zero[h])
            assert sp.bound[h] == pytest.approx(top, rel=1e-13)
    # the key heads' work done once per group changes no bit
    alone = spectra(dataclasses.replace(dense, group=1))
    np.testing.assert_array_equal(spectra(dense).bound, alone.bound)
    np.testing.assert_array_equal(spectra(dense).at_zero, alone.at_zero)


@pytest.mark.parametrize("rotary", [False, True])
def test_spectra_hold_for_singular_and_ill_conditioned_heads(rotary: bool):
    """The Gram route against NumPy's SVD where it is weakest: a key head of rank below d_k
    (its Cholesky fails: the eigenvector root) and a head whose q·k map is small beside
    ‖a‖·‖b‖ (relative error about ε·(‖a‖‖b‖/‖abᵀ‖)², here ≈ 10⁴·ε: held to 10⁻¹⁰)."""
    rng = np.random.default_rng(11)
    heads, group, d, width = 4, 2, 6, 30
    a = rng.normal(size=(heads, width, d))
    keys = rng.normal(size=(heads // group, width, d))
    keys[0, :, 3:] = 0.0  # rank 3 of 6
    u, _, vt = np.linalg.svd(rng.normal(size=(width, d)), full_matrices=False)
    a[3] = u @ np.diag(np.logspace(0, -6, d)) @ vt  # condition number 10⁶
    b = np.repeat(keys, group, axis=0)
    # head 2's query space nearly orthogonal to its key space: ‖abᵀ‖ ≈ 10⁻² ‖a‖‖b‖
    q, _ = np.linalg.qr(rng.normal(size=(width, 2 * d)))
    a[2], b[2] = q[:, :d] + 1e-2 * q[:, d:], q[:, d:]
    b[3] = b[2]  # a key head is shared by its group: heads 2 and 3 see one key head
    maps = QKMaps(a, b, 1.0, 1.0, rotary, group)
    sp = spectra(maps)
    for h in range(heads):
        want = np.linalg.svd(a[h] @ b[h].T, compute_uv=False)[0]
        assert sp.at_zero[h] == pytest.approx(want, rel=1e-10)
        if rotary:
            top = np.linalg.svd(a[h], compute_uv=False)[0] * np.linalg.svd(
                b[h], compute_uv=False)[0]
            assert sp.bound[h] == pytest.approx(top, rel=1e-12)


def test_every_score_lies_inside_the_bound_and_the_bound_is_reached():
    rng = np.random.default_rng(2)
    maps = _rope_maps(rng)
    n = 6
    sp = spectra(maps)
    sigma = row_sigma(sp, n)
    # the offset-free bound on RoPE heads sits above the exact norm at every offset
    exact = offset_norms(maps, INV, np.arange(64))
    assert (exact <= sp.bound[:, None] * (1 + 1e-12)).all()
    assert exact[:, 0] == pytest.approx(sp.at_zero, rel=1e-12)
    rule = OwnRule(1 / math.sqrt(8))
    bound = logit_bound(sigma, sp, rule, 8, np.arange(1, n + 1))
    worst = 0.0
    for _ in range(200):  # inputs of the largest norm the norm layer allows
        u = rng.normal(size=(n, 20))
        u *= math.sqrt(20) / np.linalg.norm(u, axis=1, keepdims=True)
        for h in range(3):
            q = llama.rope(u @ maps.a[h], INV)
            k = llama.rope(u @ maps.b[h], INV)
            s = np.abs(np.tril(q @ k.T)) * rule.scale
            assert (s.max(axis=1) <= bound[h] * (1 + 1e-12)).all()
            worst = max(worst, float((s.max(axis=1) / bound[h]).max()))
    assert worst < 1
    # the top singular pair at offset δ reaches it: u_i and u_j chosen from its vectors
    h, delta = 1, 3
    basis = np.eye(8)[:, None, :]  # each basis row alone, at one position

    def turn(pos: int) -> np.ndarray:
        return llama.rope(basis, INV, pos)[:, 0, :]

    c = maps.a[h] @ turn(delta) @ turn(0).T @ maps.b[h].T
    left, sv, right = np.linalg.svd(c)
    assert sv[0] == pytest.approx(offset_norms(maps, INV, np.array([delta]))[h, 0], rel=1e-10)
    ui, uj = math.sqrt(20) * left[:, 0], math.sqrt(20) * right[0]
    qi = llama.rope((ui @ maps.a[h])[None], INV, delta)
    kj = llama.rope((uj @ maps.b[h])[None], INV, 0)
    assert abs((qi @ kj.T).item()) == pytest.approx(20 * sv[0], rel=1e-10)


def test_rules_map_the_raw_bound():
    sp_sigma = np.array([[2.0, 3.0]])  # one head, two rows
    sp = Spectra(np.array([2.0]), np.array([2.0]), 2.0, 3.0)
    seen = np.array([1, 2])
    raw = logit_bound(sp_sigma, sp, Scaling.parse("none"), 16, seen)
    assert raw.tolist() == [[12.0, 18.0]]  # σ·r_q·r_k
    assert logit_bound(sp_sigma, sp, Scaling.parse("sqrt"), 16, seen).tolist() == [[3.0, 4.5]]
    capped = logit_bound(sp_sigma, sp, Scaling.parse("softcap:2"), 16, seen)
    assert capped[0, 1] == pytest.approx(2 * math.tanh(4.5 / 2))
    assert logit_bound(sp_sigma, sp, Scaling.parse("qknorm"), 16, seen).tolist() == [[4.0, 4.0]]
    assert logit_bound(sp_sigma, sp, Scaling.parse("cosine:0.5"), 16, seen).tolist() == \
        [[2.0, 2.0]]
    logn = logit_bound(sp_sigma, sp, Scaling.parse("logn:1"), 16, seen)
    assert logn[0, 0] == 0.0 and logn[0, 1] == pytest.approx(18 * math.log(2))
    own = logit_bound(sp_sigma, sp, OwnRule(0.5, cap=5.0), 16, seen)
    assert own[0, 1] == pytest.approx(5 * math.tanh(9 / 5))
    # the floor of a row that cannot score apart is 1 (uniform); it falls as the bound grows
    assert entropy_bound(np.zeros((1, 4)), np.array([1, 2, 3, 4]))[0] == pytest.approx(1.0)
    floors = entropy_bound(np.array([[0.5] * 4, [3.0] * 4]), np.array([1, 2, 3, 4]))
    assert 1 > floors[0] > floors[1] > 0


@pytest.mark.parametrize("family", ["bert", "gpt2", "llama"])
def test_the_weight_only_floor_holds_under_every_measured_row(tmp_path: Path, family: str):
    """Every row of a real forward: |score| within the row's bound, entropy above H_min."""
    from sdpa_cli.studies.inspect.checkpoint import Weights, open_checkpoint

    folder = getattr(fx, family)(tmp_path / "m")
    fx.write_tokenizer(folder, None)
    ckpt = open_checkpoint(folder)
    ids = np.random.default_rng(3).integers(0, 44, size=(3, 12))
    read = Weights(ckpt)
    n = 12
    for layer, lo in enumerate(ckpt.family.forward(ckpt.config, read, ids, np.float64)):
        sp = spectra(layer_maps(ckpt.table.qk[layer], read)["q,k"])
        mask = visible(n, lo.causal)
        seen = mask.sum(axis=1) if mask is not None else np.full(n, n)
        for rule in (OwnRule(lo.scale), Scaling.parse("none"), Scaling.parse("logn:2")):
            bound = logit_bound(row_sigma(sp, n), sp, rule, lo.q.shape[-1], seen)
            for h in range(lo.q.shape[1]):
                s = head_scores(lo.q[:, h], lo.k[:, h], rule, mask)
                if mask is not None:
                    s = np.where(mask, s, 0.0)
                assert (np.abs(s).max(axis=(0, 2)) <= bound[h] * (1 + 1e-9)).all()
                p = softmax_rows(head_scores(lo.q[:, h], lo.k[:, h], rule, mask), mask)
                with np.errstate(divide="ignore", invalid="ignore"):
                    ent = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=-1)
                assert (ent >= min_entropy(seen, bound[h]) - 1e-9).all()


def test_qk_norm_layouts_bound_their_scores(tmp_path: Path):
    """Per-head QK-norm (Qwen 3), whole-projection QK-norm (OLMo 2, no norm before
    attention), Gemma's 1 + w gains: scores from an independent forward of those layouts stay
    inside the maps' bound, and the pre-norm maps exist exactly when a norm precedes them."""
    rng = np.random.default_rng(4)
    width, heads, kv, d = 16, 4, 2, 8

    def norm(x: np.ndarray, g: np.ndarray) -> np.ndarray:
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g

    for kind in ("qwen3", "olmo2", "gemma3_text"):
        t = {"layers.0.input_layernorm.weight": rng.normal(1, 0.3, width),
             "layers.0.self_attn.q_proj.weight": rng.normal(0, 1, (heads * d, width)),
             "layers.0.self_attn.k_proj.weight": rng.normal(0, 1, (kv * d, width))}
        whole = kind == "olmo2"
        t["layers.0.self_attn.q_norm.weight"] = rng.normal(1, 0.5, heads * d if whole else d)
        t["layers.0.self_attn.k_norm.weight"] = rng.normal(1, 0.5, kv * d if whole else d)
        if whole:
            del t["layers.0.input_layernorm.weight"]
        config = {"model_type": kind, "hidden_size": width, "num_attention_heads": heads,
                  "num_key_value_heads": kv, "head_dim": d, "num_hidden_layers": 1,
                  "rope_theta": 100.0, "sliding_window": 4}
        qk = FAMILIES[kind].table(config, 8).qk
        maps = layer_maps(qk[0], t.__getitem__)
        assert ("pre-norm" in maps) == (not whole)
        one = 1.0 if kind.startswith("gemma") else 0.0
        inv = llama.rope_frequencies(config, d)
        n = 10
        sp = spectra(maps["q,k"])
        bound = logit_bound(row_sigma(sp, n), sp, OwnRule(1.0), d, np.arange(1, n + 1))
        top = np.zeros(heads)
        for _ in range(50):
            x = rng.normal(0, rng.uniform(0.1, 30), (n, width))
            h_in = x if whole else norm(x, t["layers.0.input_layernorm.weight"] + one)
            q = h_in @ t["layers.0.self_attn.q_proj.weight"].T
            k = h_in @ t["layers.0.self_attn.k_proj.weight"].T
            if whole:
                q = norm(q, t["layers.0.self_attn.q_norm.weight"])
                k = norm(k, t["layers.0.self_attn.k_norm.weight"])
            q, k = q.reshape(n, heads, d), k.reshape(n, kv, d)
            if not whole:
                q = norm(q, t["layers.0.self_attn.q_norm.weight"] + one)
                k = norm(k, t["layers.0.self_attn.k_norm.weight"] + one)
            for h in range(heads):
                s = llama.rope(q[:, h], inv) @ llama.rope(k[:, h // (heads // kv)], inv).T
                ratio = np.abs(np.tril(s)).max(axis=1) / bound[h]
                assert (ratio <= 1 + 1e-9).all(), kind
                top[h] = max(top[h], ratio.max())
        if not whole:  # per-head norms: a one-hot-like q can come near the bound
            assert top.max() > 0.3, kind


# ── TransformerLens's patterns and the scores ───────────────────────────────────────────

def test_patterns_follow_transformer_lens_definitions():
    tokens = np.array([3, 7, 9, 7, 5, 9, 7, 7])
    n = len(tokens)
    dup = duplicate_pattern(tokens)
    ind = induction_pattern(tokens)
    for i in range(n):
        for j in range(n):
            assert dup[i, j] == (j < i and tokens[i] == tokens[j])
            # the key right after an earlier occurrence of the query's token, at or before i
            assert ind[i, j] == (1 <= j <= i and j - 1 < i and tokens[j - 1] == tokens[i])
    assert previous_pattern(4).tolist() == [[0, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0],
                                            [0, 0, 1, 0]]


def test_repeated_tokens_are_seeded_repeats_from_the_candidates():
    pool = np.arange(10, 60)
    a = repeated_tokens(np.random.default_rng(5), pool, (1,), (), 16, 3)
    b = repeated_tokens(np.random.default_rng(5), pool, (1,), (), 16, 3)
    assert np.array_equal(a, b) and a.shape == (3, 16)
    assert (a[:, 0] == 1).all()
    body = a[:, 1:]  # 15 tokens: m = 7, r, r, then r[0] once more
    assert np.array_equal(body[:, :7], body[:, 7:14]) and (body[:, 14] == body[:, 0]).all()
    assert all(len(set(r[:7])) == 7 for r in body)  # without replacement: one target a row
    assert np.isin(body, pool).all()
    wrapped = repeated_tokens(np.random.default_rng(5), pool, (1,), (2,), 10, 1)
    assert wrapped[0, 0] == 1 and wrapped[0, -1] == 2
    small = repeated_tokens(np.random.default_rng(5), np.arange(3), (), (), 20, 1)
    assert np.isin(small, np.arange(3)).all()  # fewer candidates than m: with replacement


def test_known_answer_heads_on_hand_made_vectors():
    n, d = 12, 12
    eye = np.eye(d)
    q = np.zeros((1, 3, n, d))
    k = np.zeros((1, 3, n, d))
    q[0, 0, 1:] = 30 * eye[:n - 1]  # previous token: query i matches key i − 1
    k[0, 0] = eye[:n]
    q[0, 1] = 30 * eye[0]  # sink: every query matches key 0 only
    k[0, 1, 0] = eye[0]
    mask = causal_mask(n)
    st = attention_stats(q, k, 1.0, mask)
    assert st.prev_token[0] == pytest.approx((n - 1) / n, rel=1e-9)  # TL: ÷ every row
    assert st.first_token_share[1] == pytest.approx(1.0) and st.prev_token[1] < 0.1
    # head 2 (q = k = 0) is uniform: TransformerLens's score is the mean of 1/(i + 1), i ≥ 1
    assert st.prev_token[2] == pytest.approx(np.sum(1 / np.arange(2, n + 1)) / n)
    assert st.first_token_share[2] == pytest.approx(np.mean(1 / np.arange(1, n + 1)))
    # a later sink: every query past 3 matches key 3, seen by n − 3 rows
    q2, k2 = np.zeros((1, 1, n, d)), np.zeros((1, 1, n, d))
    q2[0, 0, 3:] = 30 * eye[3]
    k2[0, 0, 3] = eye[3]
    later = attention_stats(q2, k2, 1.0, mask)
    assert later.sink_other[0] == pytest.approx(1.0, abs=1e-9)
    # induction on BOS r r: query 5 + j (token r_j) matches key 2 + j, after r_j's first copy
    tokens = np.array([[0, 5, 6, 7, 8, 5, 6, 7, 8]])
    ind = induction_pattern(tokens)
    assert [np.flatnonzero(row).tolist() for row in ind[0]] == [[], [], [], [], [], [2], [3],
                                                               [4], [5]]
    qi, ki = np.zeros((1, 1, 9, 9)), np.zeros((1, 1, 9, 9))
    qi[0, 0] = 30 * ind[0]  # each query points at its targets (rows without one: uniform)
    ki[0, 0] = np.eye(9)
    score, ceiling = pattern_score(qi, ki, 1.0, causal_mask(9), ind)
    assert ceiling == pytest.approx(4 / 9)  # rows 5 … 8 have a target
    assert score[0] == pytest.approx(ceiling, rel=1e-9)
    flat, _ = pattern_score(np.zeros((1, 1, 9, 9)), ki, 1.0, causal_mask(9), ind)
    assert flat[0] == pytest.approx(sum(1 / (i + 1) for i in range(5, 9)) / 9)


def test_frozen_share_and_first_token_with_a_sliding_window():
    n, w = 9, 3
    mask = visible(n, True, w)
    for i in range(n):
        for j in range(n):
            assert mask[i, j] == (0 <= i - j < w)
    assert visible(5, False) is None
    assert np.array_equal(visible(5, True), causal_mask(5))
    st = attention_stats(np.zeros((1, 1, n, 2)), np.zeros((1, 1, n, 2)), 1.0, mask)
    # only rows 0 … w − 1 see position 0: its mean weight is over them (Gu et al.'s α_0)
    assert st.first_token_share[0] == pytest.approx(np.mean(1 / np.arange(1, w + 1)))
    assert st.entropy_ratio[0] == pytest.approx(1.0) and st.frozen_share[0] == 0.0


def test_the_model_rule_soft_caps_and_names_itself():
    q = np.random.default_rng(6).normal(size=(5, 4)) * 10
    k = np.random.default_rng(7).normal(size=(5, 4)) * 10
    s = head_scores(q, k, OwnRule(0.0625, cap=5.0), None)
    assert np.allclose(s, 5 * np.tanh(q @ k.T * 0.0625 / 5))
    assert np.array_equal(head_scores(q, k, OwnRule(0.0625), None), head_scores(q, k, 0.0625,
                                                                                 None))
    assert own_rule_name(1 / 8) == "÷√64"
    assert own_rule_name(256 ** -0.5, qk_norm=True) == "QK-norm, then ÷√256"
    assert own_rule_name(256 ** -0.5, cap=50.0) == "soft-cap 50 after ÷√256"
    assert own_rule_name(1.0) == "unscaled" and own_rule_name(0.3) == "×0.3"


# ── the study end to end ────────────────────────────────────────────────────────────────

def test_known_answer_heads_are_told_apart(sdpa, workdir: Path):
    folder = fx.gpt2_heads(workdir / "k")
    fx.write_tokenizer(folder, "llama")  # <s> first: a position-0 sink has its token
    (workdir / "t.txt").write_text(fx.text(400), encoding="utf-8")
    got = sdpa("inspect", "k", "--text", "t.txt", "--seq-len", "32", "--sequences", "3",
               "--scalings", "sqrt", "--no-plots", "--format", "json")
    assert got.code == 0, got.err
    doc = got.json()
    model = {(r["layer"], r["head"]): r for r in doc["rows"] if r["scaling"] == "model"}
    for where, kind in fx.KNOWN.items():
        assert model[where]["head_type"] == kind, (where, model[where])
    assert model[(0, 0)]["prev_token"] > 0.9
    assert model[(0, 1)]["first_token_share"] > 0.99
    assert model[(1, 0)]["induction"] > 0.45  # its ceiling: 16 of 32 rows have a target
    # the two saturated heads are named by type
    assert any("the 2 heads saturated with the model's rule, by their type" in f and
               "sinks 1 on the first token" in f and "previous-token heads 1;" in f
               for f in doc["findings"]), doc["findings"]
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["weight-only bounds"]["passed"]
    # every token measured is recorded, per length and sequence
    tokens = doc["tokens"]
    assert len(tokens["text"]["32"]) == 3 and len(tokens["text"]["32"][0]) == 32
    rep = np.array(tokens["induction"]["32"])
    assert rep.shape == (4, 32) and (rep[:, 0] == 3).all()
    assert np.array_equal(rep[:, 1:16], rep[:, 16:31])


def test_init_weights_give_a_floor_that_says_something(sdpa, workdir: Path):
    """At std 0.02 the weights allow small scores only: the floor is close to 1, and the
    measured entropy ratio sits above it."""
    folder = fx.llama(workdir / "m")
    fx.write_tokenizer(folder, "llama")
    (workdir / "t.txt").write_text(fx.text(400), encoding="utf-8")
    got = sdpa("inspect", "m", "--text", "t.txt", "--seq-len", "16", "--sequences", "2",
               "--weights", "init", "--seed", "1", "--no-plots", "--format", "json")
    assert got.code == 0, got.err
    init = [r for r in got.json()["rows"] if r["weights"] == "init" and r["scaling"] == "model"]
    assert all(r["entropy_bound"] > 0.99 for r in init)
    assert all(r["entropy_ratio"] >= r["entropy_bound"] for r in init)
    assert all(r["rule"] == "÷√6" for r in init)


@pytest.mark.parametrize("family", ["bert", "llama"])  # an encoder's rows see every key
def test_the_picture_is_the_models_own_weights_cropped(workdir: Path, family: str):
    from sdpa_cli.studies.inspect.checkpoint import Weights, open_checkpoint
    from sdpa_cli.studies.inspect.run import run
    from sdpa_cli.studies.inspect.spec import InspectSpec

    folder = getattr(fx, family)(workdir / "m", positions=128)
    fx.write_tokenizer(folder, family)
    (workdir / "t.txt").write_text(fx.text(800), encoding="utf-8")
    result = run(InspectSpec(model=str(folder), text=[str(workdir / "t.txt")], seq_len=[80],
                             sequences=1, induction_sequences=0))
    fig = next(f for f in result.figures if f.name == "attention_picture")
    worst = fig.title.split("layer ")[1].split(" (")[0]
    layer, head = int(worst.split(" head ")[0]), int(worst.split(" head ")[1])
    ids = np.array(result.extra["tokens"]["text"]["80"])
    ckpt = open_checkpoint(folder)
    lo = list(ckpt.family.forward(ckpt.config, Weights(ckpt), ids, np.float32))[layer]
    mask = causal_mask(80) if lo.causal else None
    full = softmax_rows(head_scores(lo.q[0, head], lo.k[0, head], lo.scale, mask), mask)
    assert np.allclose(np.array(fig.data["weights"]), full[:64, :64], atol=1e-12)
    assert "first 64" in fig.data["where"] and "n = 80" in fig.data["where"]


def test_a_30_layer_model_shows_its_findings_not_its_layers(sdpa, workdir: Path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    folder = fx.llama(workdir / "m", layers=30)
    fx.write_tokenizer(folder, "llama")
    (workdir / "t.txt").write_text(fx.text(400), encoding="utf-8")
    got = sdpa("inspect", "m", "--text", "t.txt", "--seq-len", "16", "--sequences", "2",
               "--induction-sequences", "1", "--no-plots", "--out", "o")
    assert got.code == 0, got.err
    lines = got.out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("found:"))
    assert first < 12, lines[:first]
    assert all(len(line) <= 80 for line in lines[:first])
    doc = json.loads((workdir / "o" / "results.json").read_text())
    assert len(doc["tables"]["layers"]) == 60  # in the files, whole


def test_an_unknown_name_says_how_to_fetch_only_what_sdpa_reads(sdpa, workdir: Path,
                                                                 monkeypatch):
    monkeypatch.setenv("HF_HOME", str(workdir / "empty"))
    got = sdpa("inspect", "org/none", "--out", "o")
    assert got.code == 2
    assert 'hf download org/none --include "*.json" "*.safetensors"' in got.err
    (workdir / "s.yaml").write_text("study: inspect\nmodel: org/none\n", encoding="utf-8")
    skipped = sdpa("inspect", "s.yaml", "--no-plots")
    assert 'hf download org/none --include "*.json" "*.safetensors"' in " ".join(
        skipped.out.split())


def test_a_qk_norm_soft_capped_windowed_layer_gives_rows_for_both_vectors():
    """What a family trained with other rules hands over (QK-norm vectors and the ones before
    the norm, a soft-cap, a window, its rule's name): every rule on both, the model's own by
    name, the window and the cap in the statistics."""
    from sdpa_cli.studies.inspect.findings_heads import prenorm_findings
    from sdpa_cli.studies.inspect.measure import Layer, measure_layer
    from sdpa_cli.studies.inspect.models.common import LayerOut

    rng = np.random.default_rng(8)
    n, d = 10, 4
    pre_q, pre_k = 6 * rng.normal(size=(2, 2, n, d)), 6 * rng.normal(size=(2, 2, n, d))
    q = pre_q / np.sqrt(np.mean(pre_q ** 2, axis=-1, keepdims=True))
    k = pre_k / np.sqrt(np.mean(pre_k ** 2, axis=-1, keepdims=True))
    lo = LayerOut(q=q, k=k, scale=0.5, causal=True, hidden=np.zeros((2, n, 3)), cap=1.5,
                  window=4, rule="QK-norm, then ÷√4, soft-cap 1.5", q_pre=pre_q, k_pre=pre_k)
    rows = measure_layer(Layer("trained", n, 0, lo, 2, None),
                         [("model", None), ("none", Scaling.parse("none"))], {}, None)
    got = {(r.scaling, r.head): r for r in rows}
    assert {s for s, _ in got} == {"model", "none", "pre-norm:model", "pre-norm:none"}
    assert got[("model", 0)].rule == "QK-norm, then ÷√4, soft-cap 1.5"
    assert got[("pre-norm:model", 0)].rule == "pre-norm q·k, soft-cap 1.5 after ÷√4"
    assert got[("pre-norm:none", 0)].rule == "pre-norm q·k, unscaled"
    mask = visible(n, True, 4)
    for h in range(2):
        own = attention_stats(q, k, OwnRule(0.5, 1.5), mask)
        before = attention_stats(pre_q, pre_k, Scaling.parse("none"), mask)
        assert got[("model", h)].score_std == pytest.approx(own.score_std[h], rel=1e-12)
        assert got[("model", h)].score_max <= 1.5  # capped
        assert got[("pre-norm:none", h)].score_std_raw == pytest.approx(
            before.score_std_raw[h], rel=1e-12)
        assert got[("pre-norm:none", h)].induction is None
    # row 9 sees keys 6 … 9 only: position 0 is a sink over the rows that see it (0 … 3)
    direct = softmax_rows(head_scores(q[:, 0], k[:, 0], OwnRule(0.5, 1.5), mask), mask)
    assert got[("model", 0)].first_token_share == pytest.approx(direct[:, :4, 0].mean())
    lines = prenorm_findings([dataclasses.asdict(r) for r in rows], [n])
    assert len(lines) == 1 and "before the QK-norm the raw q·k std is" in lines[0]
