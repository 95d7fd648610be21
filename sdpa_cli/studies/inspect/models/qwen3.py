"""Qwen3: Llama's decoder with an RMSNorm on each head's q and k before RoPE (QK-norm)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.studies.inspect.models import decoder, llama
from sdpa_cli.studies.inspect.models.common import LayerOut, Reader, Resume
from sdpa_cli.studies.inspect.models.decoder import Plan

shape = llama.shape


def plan(config: Mapping[str, Any]) -> Plan:
    dim = shape(config)[3]
    return llama.base_plan(config, qk_norm="head", rule=f"QK-norm, then {decoder.sqrt_rule(dim)}")


def forward(config: Mapping[str, Any], read: Reader, ids: NDArray[np.integer[Any]],
            dtype: type = np.float32, resume: Resume | None = None) -> Iterator[LayerOut]:
    return decoder.forward(plan(config), read, ids, dtype, resume)
