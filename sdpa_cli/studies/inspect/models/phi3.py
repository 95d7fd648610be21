"""Phi-3: Llama's decoder with q, k, v stored as one qkv_proj and gate, up as one gate_up_proj."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sdpa_cli.studies.inspect.models import decoder, llama
from sdpa_cli.studies.inspect.models.common import integer, real
from sdpa_cli.studies.inspect.models.decoder import Plan
from sdpa_cli.studies.inspect.models.tensormap import Table, fused

# each stored tensor → the parts it holds, in order (the forward reads the parts)
FUSED = {"self_attn.qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
         "mlp.gate_up_proj": ("mlp.gate_proj", "mlp.up_proj")}


def plan(config: Mapping[str, Any]) -> Plan:
    """Llama's plan with Phi-3's defaults: no biases, ε 1e-5, a sliding window on every layer
    when the config gives one."""
    layers = llama.shape(config)[0]
    window = integer(config, "sliding_window") if config.get("sliding_window") else None
    return llama.base_plan(config, biases=False, eps=real(config, "rms_norm_eps", 1e-5),
                           ffn=integer(config, "intermediate_size"), windows=(window,) * layers)


def table(config: Mapping[str, Any], vocab: int) -> Table:
    t = decoder.table(plan(config), vocab)
    return Table(fused(t.targets, FUSED), t.embedding, t.qk, t.head)
