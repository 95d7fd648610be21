"""GGUF reading: every tensor type against the gguf package's own reader, llama.cpp's q/k order
undone, a GGUF and a safetensors copy of the same weights giving the same forward; the new
families' pieces (windows, pre-norm q/k, soft-cap) against direct computations."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gguf")
pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

import gguf
import inspect_fixtures as fx

from sdpa_cli.studies.inspect import gguf_file, gguf_model
from sdpa_cli.studies.inspect.checkpoint import Weights, open_checkpoint
from sdpa_cli.studies.inspect.models import decoder, gemma, qwen3
from sdpa_cli.studies.inspect.models.common import attend, init_reader, visible

QUANTISED = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "BF16", "F16"]
K_QUANTS = ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]


def _write(path: Path, tensors: dict[str, tuple[np.ndarray, object]]) -> Path:
    w = gguf.GGUFWriter(str(path), "llama")
    for name, (a, kind) in tensors.items():
        w.add_tensor(name, a, raw_dtype=kind)  # type: ignore[arg-type]
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("kind", QUANTISED + K_QUANTS)
def test_every_tensor_type_reads_as_the_gguf_package_reads_it(tmp_path: Path, kind: str):
    """sdpa's reader (its own bounded header, one tensor's bytes) against gguf.GGUFReader and
    gguf's dequantiser over the whole file: the same float32 values, the same shape. K-quants,
    which gguf cannot write, are random blocks (their fp16 scales finite)."""
    qtype = getattr(gguf.GGMLQuantizationType, kind)
    rng = np.random.default_rng(3)
    values = rng.normal(0, 1, (8, 512)).astype(np.float32)
    if kind in K_QUANTS:
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, (8, 512 // block * size), dtype=np.uint8)
        halves = raw.view(np.uint16)
        halves[...] = np.where((halves & 0x7C00) == 0x7C00, halves & 0x3FFF, halves)
        data = raw
    else:
        data = gguf.quants.quantize(values, qtype)
    path = _write(tmp_path / "t.gguf", {"blk.0.attn_q.weight": (data, qtype)})
    header = gguf_file.read_header(path)
    t = header.tensors["blk.0.attn_q.weight"]
    mine = gguf_file.dequantize(t, path)
    reader = gguf.GGUFReader(str(path))
    theirs = gguf.quants.dequantize(reader.tensors[0].data, reader.tensors[0].tensor_type)
    assert t.dtype == kind and t.shape == (8, 512) and mine.shape == (8, 512)
    np.testing.assert_array_equal(mine, np.asarray(theirs, dtype=np.float32))
    if kind not in K_QUANTS:  # and near the values quantised (4 bits: within a step)
        assert np.abs(mine - values).max() < 0.6


def test_unpermute_undoes_llama_cpp_permute():
    """convert_hf_to_gguf's permute, written out independently, then undone."""
    rng = np.random.default_rng(0)
    for heads, dim in ((4, 6), (3, 64), (1, 2)):
        w = rng.normal(size=(heads * dim, 5))
        # llama.cpp: within a head, row i of the first half and row i of the second half
        # become rows 2i and 2i + 1
        p = np.empty_like(w)
        for h in range(heads):
            block = w[h * dim:(h + 1) * dim]
            p[h * dim:(h + 1) * dim][0::2] = block[:dim // 2]
            p[h * dim:(h + 1) * dim][1::2] = block[dim // 2:]
        np.testing.assert_array_equal(gguf_model.unpermute(p, heads), w)


def test_a_gguf_copy_of_a_safetensors_model_gives_the_same_forward(tmp_path: Path):
    """The tiny Llama written as safetensors and, under llama.cpp's names with its q/k rows
    permuted, as F32 GGUF: identical q, k and hidden states (naming, un-permuting, config)."""
    from safetensors.numpy import load_file

    folder = fx.llama(tmp_path / "st", bias=False, heads=4, kv=2, head_dim=6)
    fx.write_tokenizer(folder, "llama")
    cfg = json.loads((folder / "config.json").read_text())
    st = load_file(str(folder / "model.safetensors"))
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q",
             "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    w = gguf.GGUFWriter(str(tmp_path / "m.gguf"), "llama")
    for key, value in (("block_count", 2), ("embedding_length", 16), ("context_length", 64),
                       ("feed_forward_length", 24), ("attention.head_count", 4),
                       ("attention.head_count_kv", 2), ("attention.key_length", 6),
                       ("rope.dimension_count", 6)):
        w.add_uint32(f"llama.{key}", value)
    w.add_float32("llama.rope.freq_base", cfg["rope_theta"])
    w.add_float32("llama.attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"])
    for name, a in st.items():
        hf = name.removeprefix("model.")
        if hf == "embed_tokens.weight":
            g = "token_embd.weight"
        elif hf == "norm.weight":
            g = "output_norm.weight"
        else:
            _, i, rest = hf.split(".", 2)
            part, kind = rest.rsplit(".", 1)
            g = f"blk.{i}.{names[part]}.{kind}"
            if part in ("self_attn.q_proj", "self_attn.k_proj"):
                heads = 4 if part.endswith("q_proj") else 2
                a = a.reshape(heads, 2, 3, 16).swapaxes(1, 2).reshape(a.shape)
        w.add_tensor(g, np.ascontiguousarray(a, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    ids = np.random.default_rng(1).integers(0, 44, (2, 10))
    a_ck, b_ck = open_checkpoint(folder), open_checkpoint(tmp_path / "m.gguf")
    a = list(a_ck.family.forward(a_ck.config, Weights(a_ck), ids, np.float64))
    b = list(b_ck.family.forward(b_ck.config, Weights(b_ck), ids, np.float64))
    for x, y in zip(a, b, strict=True):
        for field in ("q", "k", "hidden"):
            np.testing.assert_allclose(getattr(y, field), getattr(x, field), rtol=0,
                                       atol=1e-6 * float(np.abs(getattr(x, field)).max()))


def test_windows_match_a_brute_force_mask():
    for n, window in ((9, 3), (5, 1), (12, 20)):
        want = np.array([[j <= i and i - j < window for j in range(n)] for i in range(n)])
        np.testing.assert_array_equal(visible(n, True, window), want)
    assert visible(4, False) is None


def test_soft_cap_and_window_in_attend_match_a_loop():
    rng = np.random.default_rng(2)
    q, k, v = (rng.normal(0, 3, (1, 2, 7, 4)) for _ in range(3))
    got = attend(q, k, v, 0.5, True, window=3, cap=2.0)
    for h in range(2):
        for i in range(7):
            keys = [j for j in range(7) if j <= i and i - j < 3]
            s = np.array([2.0 * np.tanh(0.5 * q[0, h, i] @ k[0, h, j] / 2.0) for j in keys])
            p = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
            np.testing.assert_allclose(got[0, h, i], p @ v[0, h, keys], rtol=1e-12)


def _config(model_type: str, **extra: object) -> dict:
    return {"model_type": model_type, "hidden_size": 16, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 8, "num_hidden_layers": 2,
            "intermediate_size": 24, "rms_norm_eps": 1e-6, **extra}


def test_pre_norm_q_k_are_the_projections_the_norm_rescales():
    """Qwen3 with unit norm weights: each head's q is its pre-norm q divided by its RMS (RoPE
    is a rotation, so it keeps the RMS): the pre-norm vectors are what the norm received."""
    cfg = _config("qwen3")
    plan = qwen3.plan(cfg)
    table = decoder.table(plan, 44)
    shapes = {s.name: s.shape for s in table.sources().values()}
    read = init_reader(shapes, 0.5, 3)  # norm weights (1-D .weight) are 1
    ids = np.random.default_rng(0).integers(0, 44, (2, 9))
    for lo in qwen3.forward(cfg, read, ids, np.float64):
        assert lo.q_pre is not None and lo.k_pre is not None
        rms = np.sqrt(np.mean(lo.q_pre ** 2, axis=-1, keepdims=True) + 1e-6)
        np.testing.assert_allclose(lo.q, lo.q_pre / rms, rtol=1e-10)
        rms_k = np.sqrt(np.mean(lo.k_pre ** 2, axis=-1, keepdims=True) + 1e-6)
        np.testing.assert_allclose(lo.k, lo.k_pre / rms_k, rtol=1e-10)
        assert lo.rule == "QK-norm, then ÷√8" and lo.scale == pytest.approx(8 ** -0.5)


def test_gemma_rules_windows_and_rope_bases_from_the_config():
    g2 = gemma.gemma2_plan(_config("gemma2", query_pre_attn_scalar=32, sliding_window=5,
                                   attn_logit_softcapping=50.0))
    assert g2.windows == (5, None) and g2.cap == 50.0 and g2.scale == pytest.approx(32 ** -0.5)
    assert g2.rule == "soft-cap 50 after ÷√32" and g2.norm_offset == 1.0
    assert g2.embed_scale == pytest.approx(4.0)
    # absent: transformers' default cap of 50; null: none
    assert gemma.gemma2_plan(_config("gemma2", sliding_window=5)).cap == 50.0
    assert gemma.gemma2_plan(_config("gemma2", sliding_window=5,
                                     attn_logit_softcapping=None)).cap is None
    g3 = gemma.gemma3_plan(_config("gemma3_text", num_hidden_layers=6, sliding_window=5,
                                   rope_theta=1e6, rope_local_base_freq=1e4))
    assert g3.windows == (5, 5, 5, 5, 5, None) and g3.cap is None and g3.qk_norm == "head"
    np.testing.assert_allclose(g3.inv[0], 1e4 ** (-np.arange(0, 8, 2) / 8))
    np.testing.assert_allclose(g3.inv[5], 1e6 ** (-np.arange(0, 8, 2) / 8))


def test_the_same_spec_is_prepared_once_until_a_file_changes(tmp_path: Path):
    """The cost estimate and the run prepare the same spec: the second call reuses the first
    (a 262,144-token vocabulary takes seconds to rebuild) unless a file it read changed."""
    import os

    from sdpa_cli.studies.inspect.inputs import prepare
    from sdpa_cli.studies.inspect.spec import InspectSpec

    model = fx.llama_gguf(tmp_path / "m.gguf")
    text = tmp_path / "t.txt"
    text.write_text(fx.text(400), encoding="utf-8")
    spec = InspectSpec(model=str(model), text=[str(text)], seq_len=[8], sequences=2)
    first = prepare(spec)
    assert prepare(spec) is first
    os.utime(text, ns=(1, 1))  # the text changed (as far as its stamp shows)
    again = prepare(spec)
    assert again is not first and prepare(spec) is again
