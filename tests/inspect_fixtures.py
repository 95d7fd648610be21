"""Tiny checkpoints for the inspect tests, written with safetensors.numpy (no torch); the
BERT one and the tokenizer are the study's own (sdpa_cli/studies/inspect/tiny.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from sdpa_cli.studies.inspect.tiny import WORDS, bert, save_checkpoint, text, write_tokenizer

__all__ = ["WORDS", "bert", "gpt2", "llama", "text", "write_tokenizer"]


def gpt2(folder: Path, seed: int = 0, width: int = 16, heads: int = 2, layers: int = 2,
         vocab: int = 44, positions: int = 64) -> Path:
    rng = np.random.default_rng(seed)
    t: dict[str, np.ndarray] = {"wte.weight": rng.normal(0, 1, (vocab, width)),
                                "wpe.weight": rng.normal(0, 1, (positions, width))}

    def conv(name: str, inp: int, out: int) -> None:  # Conv1D: (in, out)
        t[f"{name}.weight"] = rng.normal(0, 0.3, (inp, out))
        t[f"{name}.bias"] = rng.normal(0, 0.1, out)

    def ln(name: str) -> None:
        t[f"{name}.weight"] = 1 + rng.normal(0, 0.1, width)
        t[f"{name}.bias"] = rng.normal(0, 0.1, width)

    for i in range(layers):
        p = f"h.{i}."
        ln(p + "ln_1")
        conv(p + "attn.c_attn", width, 3 * width)
        conv(p + "attn.c_proj", width, width)
        ln(p + "ln_2")
        conv(p + "mlp.c_fc", width, 4 * width)
        conv(p + "mlp.c_proj", 4 * width, width)
    ln("ln_f")
    config = {"model_type": "gpt2", "n_embd": width, "n_head": heads, "n_layer": layers,
              "n_positions": positions, "vocab_size": vocab, "initializer_range": 0.02}
    return save_checkpoint(folder, config, t)


def llama(folder: Path, seed: int = 0, width: int = 16, heads: int = 4, kv: int = 2,
          head_dim: int = 6, layers: int = 2, vocab: int = 44, positions: int = 64,
          bias: bool = True, model_type: str = "llama",
          rope: dict[str, Any] | None = None) -> Path:
    rng = np.random.default_rng(seed)
    t: dict[str, np.ndarray] = {"model.embed_tokens.weight": rng.normal(0, 1, (vocab, width))}

    def lin(name: str, out: int, inp: int, with_bias: bool = False) -> None:
        t[f"model.{name}.weight"] = rng.normal(0, 0.4, (out, inp))
        if with_bias:
            t[f"model.{name}.bias"] = rng.normal(0, 0.2, out)

    for i in range(layers):
        p = f"layers.{i}."
        t[f"model.{p}input_layernorm.weight"] = 1 + rng.normal(0, 0.1, width)
        lin(p + "self_attn.q_proj", heads * head_dim, width, bias)
        lin(p + "self_attn.k_proj", kv * head_dim, width, bias)
        lin(p + "self_attn.v_proj", kv * head_dim, width, bias)
        lin(p + "self_attn.o_proj", width, heads * head_dim)
        t[f"model.{p}post_attention_layernorm.weight"] = 1 + rng.normal(0, 0.1, width)
        lin(p + "mlp.gate_proj", 24, width)
        lin(p + "mlp.up_proj", 24, width)
        lin(p + "mlp.down_proj", width, 24)
    t["model.norm.weight"] = 1 + rng.normal(0, 0.1, width)
    config: dict[str, Any] = {
        "model_type": model_type, "hidden_size": width, "num_attention_heads": heads,
        "num_key_value_heads": kv, "head_dim": head_dim, "num_hidden_layers": layers,
        "intermediate_size": 24, "max_position_embeddings": positions, "vocab_size": vocab,
        "rms_norm_eps": 1e-6, "hidden_act": "silu", "initializer_range": 0.02,
        **(rope or {"rope_theta": 10000.0})}
    return save_checkpoint(folder, config, t)
