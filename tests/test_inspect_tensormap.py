"""Each family's tensor table: the forward reads exactly what it declares, fused and transposed
sources read as their parts, the q·k bound reads what the forward read (no second read)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

import inspect_fixtures as fx

from sdpa_cli.studies.inspect.checkpoint import Weights, open_checkpoint
from sdpa_cli.studies.inspect.measure import layer_spectra
from sdpa_cli.studies.inspect.models import decoder, llama
from sdpa_cli.studies.inspect.models.common import init_reader
from sdpa_cli.studies.inspect.models.families import FAMILIES
from sdpa_cli.studies.inspect.models.tensormap import QK, Mapped, Table, Undeclared, fused

DECODER = {"hidden_size": 16, "num_attention_heads": 4, "num_key_value_heads": 2,
           "head_dim": 8, "num_hidden_layers": 2, "intermediate_size": 24,
           "max_position_embeddings": 32, "sliding_window": 4}
CONFIGS: dict[str, dict[str, Any]] = {
    "bert": {"hidden_size": 16, "num_attention_heads": 2, "num_hidden_layers": 2,
             "intermediate_size": 24, "max_position_embeddings": 32},
    "gpt2": {"n_embd": 16, "n_head": 2, "n_layer": 2, "n_positions": 32},
    **{kind: DECODER for kind in FAMILIES if kind not in ("bert", "gpt2")},
}


def _init(table: Table) -> dict[str, tuple[int, ...]]:
    """Every stored tensor of the table (optional ones too) at its declared shape (any: 2)."""
    return {s.name: tuple(2 if n == -1 else n for n in s.shape)
            for s in table.sources().values()}


class Recording(Mapped):
    def __init__(self, table: Table, raw: Any) -> None:
        super().__init__(table, raw)
        self.read: list[str] = []

    def __call__(self, name: str) -> Any:
        self.read.append(name)
        return super().__call__(name)

    def rows(self, name: str, ids: Any) -> Any:
        self.read.append(name)
        return super().rows(name, ids)


@pytest.mark.parametrize("kind", list(CONFIGS))
def test_the_forward_reads_exactly_what_its_table_declares(kind: str):
    """Every target once per layer's pass, nothing undeclared (a read of an undeclared name is
    an error, never the KeyError of an absent optional tensor)."""
    config = {"model_type": kind, **CONFIGS[kind]}
    family = FAMILIES[kind]
    table = family.table(config, 30)
    read = Recording(table, init_reader(_init(table), 0.3, 1))
    ids = np.random.default_rng(0).integers(0, 30, (2, 6))
    layers = list(family.forward(config, read, ids, np.float64))
    assert len(layers) == family.shape(config)[0]
    # the untied LM head is read by the next-token loss, not by the forward
    assert sorted(read.read) == sorted(t.name for t in table.targets if t.name != table.head)
    assert table.qk is not None and len(table.qk) == len(layers)
    with pytest.raises(Undeclared):
        read("layers.0.no_such.weight")


def test_a_fused_layout_reads_its_parts_and_runs_as_the_unfused_one():
    """Llama's q, k, v and gate, up stored fused (Phi-3's layout): the same forward, each fused
    tensor read once per layer."""
    config = {"model_type": "llama", **DECODER}
    plan = llama.plan(config)
    table = decoder.table(plan, 30)
    plain = init_reader(_init(table), 0.3, 2)
    groups = {"self_attn.qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
              "mlp.gate_up_proj": ("mlp.gate_proj", "mlp.up_proj")}
    stored = {name: plain(name) for name in _init(table)}
    for i in range(plan.layers):
        for group, parts in groups.items():
            for kind in ("weight", "bias"):
                names = [f"layers.{i}.{part}.{kind}" for part in parts]
                stored[f"layers.{i}.{group}.{kind}"] = np.concatenate([stored.pop(n)
                                                                       for n in names])
    both = Table(fused(table.targets, groups), table.embedding, table.qk)
    assert set(stored) == set(both.sources())
    reads: list[str] = []

    def raw(name: str) -> np.ndarray:
        reads.append(name)
        return stored[name]

    ids = np.random.default_rng(1).integers(0, 30, (2, 7))
    want = list(decoder.forward(plan, Mapped(table, plain), ids, np.float64))
    got = list(decoder.forward(plan, Mapped(both, raw), ids, np.float64))
    for a, b in zip(want, got, strict=True):
        for field in ("q", "k", "v", "hidden"):
            np.testing.assert_allclose(getattr(b, field), getattr(a, field), rtol=1e-12,
                                       atol=1e-12)
    assert reads.count("layers.1.self_attn.qkv_proj.weight") == 1
    assert reads.count("layers.0.mlp.gate_up_proj.weight") == 1


def test_a_layer_with_no_norm_and_no_qk_norm_must_declare_no_bound():
    with pytest.raises(ValueError, match="declare qk=None"):
        QK("layers.0.q", "layers.0.k", 2, 2, 4, None)


@pytest.mark.parametrize("family", ["bert", "gpt2", "llama"])
def test_the_bound_reads_the_weights_the_forward_read(tmp_path: Path, family: str):
    """With the bound's tensors kept, the checkpoint is read once per tensor for the forward
    and the bound together, and the spectra are the same as from a fresh read."""
    folder = getattr(fx, family)(tmp_path / "m")
    fx.write_tokenizer(folder, None)
    ckpt = open_checkpoint(folder)
    assert ckpt.table.qk is not None
    keep = [n for qk in ckpt.table.qk for n in qk.names()]
    read = Weights(ckpt, keep)
    counts: dict[str, int] = {}
    raw = read.raw

    def counted(name: str) -> Any:
        counts[name] = counts.get(name, 0) + 1
        return raw(name)

    read.raw = counted
    ids = np.random.default_rng(3).integers(0, 44, size=(2, 9))
    for layer, _ in enumerate(ckpt.family.forward(ckpt.config, read, ids, np.float64)):
        got = layer_spectra(ckpt.table.qk[layer], read.kept)
        fresh = layer_spectra(ckpt.table.qk[layer], Weights(ckpt))
        for key, sp in fresh.items():
            np.testing.assert_array_equal(got[key].at_zero, sp.at_zero)
            np.testing.assert_array_equal(got[key].bound, sp.bound)
    assert counts and max(counts.values()) == 1, counts
