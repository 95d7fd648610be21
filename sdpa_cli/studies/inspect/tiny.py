"""A tiny random BERT-layout checkpoint and word-level tokenizer: the study's own example
(the contract test runs it) and the tests' smallest model. Needs sdpa[models]."""

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


def save_checkpoint(folder: Path, config: dict[str, Any], tensors: dict[str, np.ndarray]) -> Path:
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
    return save_checkpoint(folder, config, t)


def example_files(folder: Path) -> dict[str, Any]:
    """Write the example's model and text into `folder`; the spec fields that name them."""
    model = bert(folder / "tiny-bert")
    write_tokenizer(model)
    (folder / "text.txt").write_text(text(400), encoding="utf-8")
    return {"model": str(model), "text": [str(folder / "text.txt")]}
