"""OLMo 2: RMSNorm after attention and MLP (none before), QK-norm over the whole projection."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.studies.inspect.models import decoder, llama
from sdpa_cli.studies.inspect.models.common import LayerOut, Reader, Resume, real
from sdpa_cli.studies.inspect.models.decoder import Plan

shape = llama.shape


def plan(config: Mapping[str, Any]) -> Plan:
    dim = shape(config)[3]
    return llama.base_plan(config, layout="post", qk_norm="proj",
                           eps=real(config, "rms_norm_eps", 1e-5),
                           rule=f"QK-norm, then {decoder.sqrt_rule(dim)}")


def forward(config: Mapping[str, Any], read: Reader, ids: NDArray[np.integer[Any]],
            dtype: type = np.float32, resume: Resume | None = None) -> Iterator[LayerOut]:
    return decoder.forward(plan(config), read, ids, dtype, resume)
