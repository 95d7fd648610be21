"""The families sdpa can run, by config `model_type`: forward pass, shape, position limit."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sdpa_cli.numerics.models import bert, gpt2, llama
from sdpa_cli.numerics.models.common import LayerOut

Forward = Callable[..., Iterator[LayerOut]]


@dataclass(frozen=True)
class Family:
    name: str
    forward: Forward
    # config → (layers, query heads, key heads, head_dim); ConfigError when fields are missing
    shape: Callable[[Mapping[str, Any]], tuple[int, int, int, int]]
    positions: tuple[str, ...]  # config fields bounding seq_len (learned positions, RoPE's range)
    causal: bool
    embedding: str  # the token-embedding tensor, whose rows bound the vocabulary


def _mha(shape: Callable[[Mapping[str, Any]], tuple[int, int, int]]
         ) -> Callable[[Mapping[str, Any]], tuple[int, int, int, int]]:
    def four(config: Mapping[str, Any]) -> tuple[int, int, int, int]:
        layers, count, dim = shape(config)
        return layers, count, count, dim

    return four


_BERT = Family("bert", bert.forward, _mha(bert.shape), ("max_position_embeddings",), False,
               "embeddings.word_embeddings.weight")
_GPT2 = Family("gpt2", gpt2.forward, _mha(gpt2.shape), ("n_positions", "n_ctx",
               "max_position_embeddings"), True, "wte.weight")
_LLAMA = Family("llama", llama.forward, llama.shape, ("max_position_embeddings",), True,
                "embed_tokens.weight")

FAMILIES: dict[str, Family] = {"bert": _BERT, "gpt2": _GPT2, "llama": _LLAMA,
                               "mistral": _LLAMA, "qwen2": _LLAMA}
