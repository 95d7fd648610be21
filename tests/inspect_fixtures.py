"""Tiny checkpoints for the inspect tests, written with safetensors.numpy (no torch)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

WORDS = 40  # plain words w0 … w39 after the specials


def write_tokenizer(folder: Path, template: str | None = "bert", pad_to: int | None = None
                    ) -> int:
    """A WordLevel tokenizer over [UNK] [CLS] [SEP] <s> and w0…w39; `template` bert wraps
    with [CLS] … [SEP], llama prefixes <s>, None adds nothing. Returns the vocabulary size."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "<s>": 3}
    vocab.update({f"w{i}": 4 + i for i in range(WORDS)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if template == "bert":
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
    elif template == "llama":
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", 3)])
    if pad_to:  # as MiniLM's file does: sdpa must switch this off
        tok.enable_padding(length=pad_to)
        tok.enable_truncation(max_length=pad_to)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    return len(vocab)


def text(words: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    return " ".join(f"w{i}" for i in rng.integers(0, WORDS, size=words))


def _save(folder: Path, config: dict[str, Any], tensors: dict[str, np.ndarray]) -> Path:
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    save_file({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()},
              str(folder / "model.safetensors"))
    return folder


def bert(folder: Path, seed: int = 0, width: int = 16, heads: int = 2, layers: int = 2,
         vocab: int = 44, positions: int = 64, prefix: str = "bert.") -> Path:
    rng = np.random.default_rng(seed)
    t: dict[str, np.ndarray] = {}

    def lin(name: str, out: int, inp: int) -> None:
        t[f"{prefix}{name}.weight"] = rng.normal(0, 0.3, (out, inp))
        t[f"{prefix}{name}.bias"] = rng.normal(0, 0.1, out)

    def ln(name: str) -> None:
        t[f"{prefix}{name}.weight"] = 1 + rng.normal(0, 0.1, width)
        t[f"{prefix}{name}.bias"] = rng.normal(0, 0.1, width)

    t[f"{prefix}embeddings.word_embeddings.weight"] = rng.normal(0, 1, (vocab, width))
    t[f"{prefix}embeddings.position_embeddings.weight"] = rng.normal(0, 1, (positions, width))
    t[f"{prefix}embeddings.token_type_embeddings.weight"] = rng.normal(0, 1, (2, width))
    ln("embeddings.LayerNorm")
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for part in ("query", "key", "value"):
            lin(p + "attention.self." + part, width, width)
        lin(p + "attention.output.dense", width, width)
        ln(p + "attention.output.LayerNorm")
        lin(p + "intermediate.dense", 2 * width, width)
        lin(p + "output.dense", width, 2 * width)
        ln(p + "output.LayerNorm")
    config = {"model_type": "bert", "hidden_size": width, "num_attention_heads": heads,
              "num_hidden_layers": layers, "intermediate_size": 2 * width,
              "max_position_embeddings": positions, "vocab_size": vocab, "hidden_act": "gelu",
              "layer_norm_eps": 1e-12, "initializer_range": 0.02}
    return _save(folder, config, t)


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
    return _save(folder, config, t)


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
    return _save(folder, config, t)
