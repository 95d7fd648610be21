"""The families sdpa can run, by config `model_type`: forward pass, shape, tensor table."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.studies.inspect.models import (
    bert,
    decoder,
    gemma,
    gpt2,
    llama,
    lnstack,
    olmo2,
    phi3,
    qwen3,
)
from sdpa_cli.studies.inspect.models.common import LayerOut, Reader, Resume
from sdpa_cli.studies.inspect.models.tensormap import Table

Forward = Callable[..., Iterator[LayerOut]]
Config = Mapping[str, Any]


@dataclass(frozen=True)
class Family:
    name: str
    forward: Forward
    # config → (layers, query heads, key heads, head_dim); ConfigError when fields are missing
    shape: Callable[[Config], tuple[int, int, int, int]]
    positions: tuple[str, ...]  # config fields bounding seq_len (learned positions, RoPE's range)
    causal: bool
    embedding: str  # the stored token embedding, whose rows bound the vocabulary
    # (config, vocabulary) → every tensor the forward reads, where it is stored and how it is
    # converted, and the weight-only q·k bound; reads and checks every config field the
    # forward uses (ConfigError naming the field)
    table: Callable[[Config, int], Table]


def _mha(shape: Callable[[Config], tuple[int, int, int]]
         ) -> Callable[[Config], tuple[int, int, int, int]]:
    def four(config: Config) -> tuple[int, int, int, int]:
        layers, count, dim = shape(config)
        return layers, count, count, dim

    return four


def _run(make: Callable[[Config], Any], engine: Callable[..., Iterator[LayerOut]]) -> Forward:
    """The forward of a family whose module reads a config into what a shared engine runs."""
    def forward(config: Config, read: Reader, ids: NDArray[np.integer[Any]],
                dtype: type = np.float32, resume: Resume | None = None) -> Iterator[LayerOut]:
        return engine(make(config), read, ids, dtype, resume)

    return forward


def _decoder(plan: Callable[[Config], decoder.Plan], permuted: bool = False
             ) -> Callable[[Config, int], Table]:
    def table(config: Config, vocab: int) -> Table:
        return decoder.table(plan(config), vocab, permuted)

    return table


def _rope(name: str, forward: Forward, table: Callable[[Config, int], Table]) -> Family:
    return Family(name, forward, llama.shape, ("max_position_embeddings",), True,
                  "embed_tokens.weight", table)


_BERT = Family("bert", _run(bert.stack, lnstack.forward), _mha(bert.shape),
               ("max_position_embeddings",), False, "embeddings.word_embeddings.weight",
               bert.table)
_GPT2 = Family("gpt2", _run(gpt2.stack, lnstack.forward), _mha(gpt2.shape),
               ("n_positions", "n_ctx", "max_position_embeddings"), True, "wte.weight",
               gpt2.table)
# llama.cpp stores Llama's and Mistral's q and k rows interleaved, Qwen2's as transformers does
_LLAMA = _rope("llama", llama.forward, _decoder(llama.plan, permuted=True))

FAMILIES: dict[str, Family] = {
    "bert": _BERT, "gpt2": _GPT2, "llama": _LLAMA, "mistral": _LLAMA,
    "qwen2": _rope("llama", llama.forward, _decoder(llama.plan)),
    "qwen3": _rope("qwen3", qwen3.forward, _decoder(qwen3.plan)),
    "olmo2": _rope("olmo2", olmo2.forward, _decoder(olmo2.plan)),
    "gemma2": _rope("gemma2", gemma.gemma2_forward, _decoder(gemma.gemma2_plan)),
    "gemma3_text": _rope("gemma3", gemma.gemma3_forward, _decoder(gemma.gemma3_plan)),
    "phi3": _rope("phi3", _run(phi3.plan, decoder.forward), phi3.table),
}
