"""Attacks on a GGUF file's weights and model metadata, and on safetensors weights."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")
pytest.importorskip("gguf")

import gguf_build as gb
import inspect_fixtures as fx
from attack import Bad, check
from gguf_build import F16_NAN, Typed

ARGV = ["inspect", "m.gguf", "--text", "t.txt", "--seq-len", "8", "--sequences", "2",
        "--out", "o"]
NAN, INF = float("nan"), float("inf")
F16_INF = struct.pack("<e", INF)
Q = "blk.0.attn_q.weight"


def _model(**kw: Any) -> Callable[[Path], None]:
    def make(w: Path) -> None:
        gb.gguf(w / "m.gguf", **kw)
        (w / "t.txt").write_text(fx.text(400), encoding="utf-8")
    return make


def _patched(name: str, at: int, data: bytes, **kw: Any) -> Callable[[Path], None]:
    """A model whose tensor `name` has `data` written `at` bytes into it (a block's scale)."""
    def make(w: Path) -> None:
        _model(**kw)(w)
        gb.patch_tensor(w / "m.gguf", name, at, data)
    return make


def _set(row: int, col: int, value: float) -> Callable[[np.ndarray], np.ndarray]:
    def change(a: np.ndarray) -> np.ndarray:
        a[row, col] = value
        return a
    return change


def tensor(id: str, says: str, make: Callable[[Path], None]) -> Bad:
    return Bad(id, ARGV, says, make=make, where="m.gguf: ")


def key(id: str, says: str, meta: dict[str, Any], field: str, arch: str = "llama") -> Bad:
    return Bad(id, ARGV, says, make=_model(meta=meta, arch=arch), where=f"m.gguf: {field}: ")


L = "llama."
G3 = "gemma3."
WEIGHTS = [
    tensor("nan-in-q", f"tensor '{Q}' holds NaN (row 3); sdpa measures finite weights only",
           _model(change={Q: _set(3, 4, NAN)})),
    tensor("inf-in-k", "tensor 'blk.1.attn_k.weight' holds ±inf (row 0)",
           _model(change={"blk.1.attn_k.weight": _set(0, 0, INF)})),
    tensor("minus-inf-in-v", "tensor 'blk.0.attn_v.weight' holds ±inf (row 11)",
           _model(change={"blk.0.attn_v.weight": _set(11, 15, -INF)})),
    tensor("nan-in-norm", "tensor 'blk.1.attn_norm.weight' holds NaN",
           _model(change={"blk.1.attn_norm.weight": lambda a: a * NAN})),
    tensor("nan-in-ffn", "tensor 'blk.0.ffn_down.weight' holds NaN (row 2)",
           _model(change={"blk.0.ffn_down.weight": _set(2, 2, NAN)})),
    tensor("nan-in-used-embedding-row", "tensor 'token_embd.weight' holds NaN (row 1)",
           _model(change={"token_embd.weight": _set(1, 0, NAN)})),  # BOS, in every sequence
    tensor("f16-nan-in-q", f"tensor '{Q}' holds NaN (row 5)",
           _model(change={Q: _set(5, 1, NAN)}, f16=(Q,))),
    tensor("f16-overflow-in-k", "tensor 'blk.0.attn_k.weight' holds ±inf (row 7)",
           _model(change={"blk.0.attn_k.weight": _set(7, 3, 1e6)},
                  f16=("blk.0.attn_k.weight",))),
    tensor("f16-bytes-nan", f"tensor '{Q}' holds NaN (row 0)",
           _patched(Q, 6, F16_NAN, f16=(Q,))),
    tensor("q8-0-nan-scale", f"tensor '{Q}' holds NaN (row 0)",
           _patched(Q, 0, F16_NAN, width=32, quant={Q: "Q8_0"})),
    tensor("q8-0-inf-scale-row-2", f"tensor '{Q}' holds ±inf (row 2)",
           _patched(Q, 2 * 34, F16_INF, width=32, quant={Q: "Q8_0"})),
    tensor("q4-0-nan-scale", "tensor 'blk.1.attn_k.weight' holds NaN (row 1)",
           _patched("blk.1.attn_k.weight", 18, F16_NAN, width=32,
                    quant={"blk.1.attn_k.weight": "Q4_0"})),
    tensor("q4-1-nan-min", f"tensor '{Q}' holds NaN (row 0)",
           _patched(Q, 2, F16_NAN, width=32, quant={Q: "Q4_1"})),
    tensor("q5-0-inf-scale", f"tensor '{Q}' holds NaN (row 0)",  # inf × 0 where q = 16
           _patched(Q, 0, F16_INF, width=32, quant={Q: "Q5_0"})),
    tensor("q4-k-nan-d", f"tensor '{Q}' holds NaN (row 0)",
           _patched(Q, 0, F16_NAN, width=256, quant={Q: "Q4_K"})),
    tensor("q6-k-nan-d", f"tensor '{Q}' holds NaN (row 0)",
           _patched(Q, 208, F16_NAN, width=256, quant={Q: "Q6_K"})),
    tensor("q8-0-nan-embedding-row", "tensor 'token_embd.weight' holds NaN (row 1)",
           _patched("token_embd.weight", 34, F16_NAN, width=32,
                    quant={"token_embd.weight": "Q8_0"})),
]

METADATA = [
    key("arch-array", "general.architecture is an array of 2 strings, expected a string",
        {"general.architecture": ["llama", "qwen2"]}, "general.architecture"),
    key("arch-number", "general.architecture is 5, expected a string",
        {"general.architecture": 5}, "general.architecture"),
    key("rope-type-array", f"{L}rope.scaling.type is an array of 2 strings, expected a "
        "string", {f"{L}rope.scaling.type": ["linear", "yarn"]}, f"{L}rope.scaling.type"),
    key("rope-type-number", f"{L}rope.scaling.type is 1, expected a string",
        {f"{L}rope.scaling.type": 1}, f"{L}rope.scaling.type"),
    key("rope-factor-nan", f"{L}rope.scaling.factor is nan, expected a finite number",
        {f"{L}rope.scaling.type": "linear", f"{L}rope.scaling.factor": NAN},
        f"{L}rope.scaling.factor"),
    key("rope-factor-string", f"{L}rope.scaling.factor is '2', expected a number",
        {f"{L}rope.scaling.type": "linear", f"{L}rope.scaling.factor": "2"},
        f"{L}rope.scaling.factor"),
    key("freq-base-nan", f"{L}rope.freq_base is nan, expected a finite number",
        {f"{L}rope.freq_base": NAN}, f"{L}rope.freq_base"),
    key("freq-base-inf", f"{L}rope.freq_base is inf, expected a finite number",
        {f"{L}rope.freq_base": INF}, f"{L}rope.freq_base"),
    key("freq-base-array", f"{L}rope.freq_base is an array of 2 numbers (float32), expected "
        "a number", {f"{L}rope.freq_base": Typed("ARRAY", [1.0, 2.0], "FLOAT32")},
        f"{L}rope.freq_base"),
    key("rms-eps-nan", f"{L}attention.layer_norm_rms_epsilon is nan, expected a finite number",
        {f"{L}attention.layer_norm_rms_epsilon": NAN}, f"{L}attention.layer_norm_rms_epsilon"),
    key("rms-eps-string", f"{L}attention.layer_norm_rms_epsilon is '1e-6', expected a number",
        {f"{L}attention.layer_norm_rms_epsilon": "1e-6"},
        f"{L}attention.layer_norm_rms_epsilon"),
    key("context-negative", f"{L}context_length is -5, expected a whole number ≥ 1",
        {f"{L}context_length": Typed("INT32", -5)}, f"{L}context_length"),
    key("context-zero", f"{L}context_length is 0, expected a whole number ≥ 1",
        {f"{L}context_length": 0}, f"{L}context_length"),
    key("width-float", f"{L}embedding_length is 16.0, expected an integer",
        {f"{L}embedding_length": 16.0}, f"{L}embedding_length"),
    key("heads-bool", f"{L}attention.head_count is true, expected an integer",
        {f"{L}attention.head_count": True}, f"{L}attention.head_count"),
    key("kv-heads-array", f"{L}attention.head_count_kv is an array of 2 numbers (int32), "
        "expected an integer", {f"{L}attention.head_count_kv": Typed("ARRAY", [2, 2], "INT32")},
        f"{L}attention.head_count_kv"),
    key("kv-heads-negative", f"{L}attention.head_count_kv is -2, expected a whole number ≥ 0",
        {f"{L}attention.head_count_kv": Typed("INT64", -2)}, f"{L}attention.head_count_kv"),
    key("ffn-string", f"{L}feed_forward_length is '24', expected an integer",
        {f"{L}feed_forward_length": "24"}, f"{L}feed_forward_length"),
    key("key-length-negative", f"{L}attention.key_length is -6, expected a whole number ≥ 0",
        {f"{L}attention.key_length": Typed("INT32", -6)}, f"{L}attention.key_length"),
    key("window-negative", f"{L}attention.sliding_window is -1, expected a whole number ≥ 0",
        {f"{L}attention.sliding_window": Typed("INT32", -1)}, f"{L}attention.sliding_window"),
    key("gemma-pattern-strings", f"{G3}attention.sliding_window_pattern is an array of 2 "
        "strings, expected an integer", {f"{G3}attention.sliding_window_pattern": ["a", "b"]},
        f"{G3}attention.sliding_window_pattern", "gemma3"),
    key("gemma-pattern-floats", f"{G3}attention.sliding_window_pattern has 2 float32 values "
        "for 2 layers (one flag each)", {f"{G3}attention.sliding_window_pattern":
                                         Typed("ARRAY", [NAN, 1.0], "FLOAT32")},
        f"{G3}attention.sliding_window_pattern", "gemma3"),
    key("gemma-window-nan", f"{G3}attention.sliding_window is nan, expected an integer",
        {f"{G3}attention.sliding_window": NAN}, f"{G3}attention.sliding_window", "gemma3"),
    key("gemma2-softcap-inf", "gemma2.attn_logit_softcapping is inf, expected a finite number",
        {"gemma2.attn_logit_softcapping": INF}, "gemma2.attn_logit_softcapping", "gemma2"),
    key("alignment-float", "general.alignment 32.0 is not a power of two",
        {"general.alignment": 32.0}, "general.alignment"),
]


def test_corpus_is_large_and_distinct():
    cases = WEIGHTS + METADATA
    assert len(cases) >= 40
    assert len({b.id for b in cases}) == len(cases)


@pytest.mark.parametrize("case", WEIGHTS + METADATA, ids=lambda b: b.id)
def test_hostile_gguf_is_one_line(sdpa, workdir: Path, case: Bad):
    check(sdpa, workdir, case)


def test_nan_in_an_embedding_row_no_text_reads_runs(sdpa, workdir: Path):
    """Only the rows a run reads are checked: a NaN in the row of a token that is never drawn
    (the last byte token, 255) is never read, so the run goes on."""
    _model(change={"token_embd.weight": _set(255, 0, NAN)})(workdir)
    got = sdpa(*ARGV, "--no-plots", "-q", "--induction-sequences", "0")
    assert got.code == 0, got.err


def test_weights_that_overflow_the_forward_fail_its_check_without_a_warning(sdpa, workdir):
    """Finite but absurd weights (3e38) overflow float32 in the forward: the run's own check
    says the statistics are not finite (exit 1 with --check); no raw RuntimeWarning, no
    internal error."""
    import warnings

    _model(change={Q: lambda a: a * 0 + 3e38})(workdir)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = sdpa(*ARGV, "--no-plots", "-q", "--check")
    assert got.code == 1, got.err
    assert "statistics finite" in got.err and "Warning" not in got.err, got.err


# ---- a safetensors checkpoint's weights ---------------------------------------------------

def _safetensors(change: dict[str, Callable[[np.ndarray], np.ndarray]],
                 bf16: str | None = None) -> Callable[[Path], None]:
    def make(w: Path) -> None:
        from safetensors.numpy import load_file, save_file

        folder = fx.llama(w / "m")
        fx.write_tokenizer(folder, "llama")
        t = load_file(str(folder / "model.safetensors"))
        for name, fn in change.items():
            t[name] = fn(t[name])
        if bf16 is not None:  # stored as BF16: the top half of each float32
            t[bf16] = (t[bf16].view(np.uint32) >> 16).astype(np.uint16)
        save_file(t, str(folder / "model.safetensors"))
        if bf16 is not None:
            _retype(folder / "model.safetensors", bf16, "BF16")
        (w / "t.txt").write_text(fx.text(400), encoding="utf-8")
    return make


def _retype(path: Path, name: str, dtype: str) -> None:
    import json

    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    doc = json.loads(raw[8:8 + n])
    doc[name]["dtype"] = dtype
    head = json.dumps(doc, separators=(",", ":")).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + raw[8 + n:])


SQ = "model.layers.0.self_attn.q_proj.weight"
SAFETENSORS = [
    Bad("st-nan-in-q", ["inspect", "m", "--text", "t.txt", "--seq-len", "8", "--sequences",
                        "2", "--out", "o"], "tensor 'layers.0.self_attn.q_proj.weight' holds "
        "NaN (row 1)", make=_safetensors({SQ: _set(1, 2, NAN)}),
        where="m/model.safetensors: "),
    Bad("st-inf-in-embedding-row", ["inspect", "m", "--text", "t.txt", "--seq-len", "8",
                                    "--sequences", "2", "--out", "o"],
        "tensor 'embed_tokens.weight' holds ±inf",
        make=_safetensors({"model.embed_tokens.weight": lambda a: a * INF}),
        where="m/model.safetensors: "),
    Bad("st-bf16-nan-in-k", ["inspect", "m", "--text", "t.txt", "--seq-len", "8",
                             "--sequences", "2", "--out", "o"],
        "tensor 'layers.1.self_attn.k_proj.weight' holds NaN (row 0)",
        make=_safetensors({"model.layers.1.self_attn.k_proj.weight": _set(0, 0, NAN)},
                          bf16="model.layers.1.self_attn.k_proj.weight"),
        where="m/model.safetensors: "),
]


@pytest.mark.parametrize("case", SAFETENSORS, ids=lambda b: b.id)
def test_hostile_safetensors_weights_are_one_line(sdpa, workdir: Path, case: Bad):
    check(sdpa, workdir, case)
