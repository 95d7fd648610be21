"""Reference forward passes with transformers, run in the torch venv (tests/test_inspect_slow.py).

Usage: python inspect_torch_reference.py OUT [MINILM_FOLDER]

Builds tiny random GPT-2 and Llama (GQA: 4 query heads, 2 key heads) checkpoints in OUT/gpt2
and OUT/llama (safetensors), then runs each model (and MiniLM when given) in eager attention
on OUT/<model>-ids.npy, in float64 and float32, and saves every hidden state and attention
map as .npy (never pickle) under OUT/ref/<model>/<dtype>/. Prints one JSON line of facts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModel, GPT2Config, GPT2Model, LlamaConfig, LlamaModel

# Large enough that heads are peaked rather than uniform (checked: mean largest weight).
INIT_STD = 0.25


def float64_llama() -> None:
    """transformers' Llama computes RMSNorm and RoPE's angles in float32 whatever the model's
    dtype (meant for half precision), which caps a float64 comparison near 1e-6 relative.
    For the float64 reference, the same formulas run in float64 (default RoPE only)."""
    from transformers.models.llama import modeling_llama as ml

    norm, rotary = ml.LlamaRMSNorm.forward, ml.LlamaRotaryEmbedding.forward

    def norm64(self, h):  # type: ignore[no-untyped-def]
        if h.dtype != torch.float64:
            return norm(self, h)
        return self.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True)
                                              + self.variance_epsilon))

    def rotary64(self, x, position_ids):  # type: ignore[no-untyped-def]
        if x.dtype != torch.float64:
            return rotary(self, x, position_ids)
        cfg = self.config
        dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        base = cfg.rope_parameters["rope_theta"]
        inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
        if self.rope_type != "default":  # rescaled in float32 by transformers: no float64 run
            return rotary(self, x, position_ids)
        freqs = position_ids[..., None].double() * inv
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()

    ml.LlamaRMSNorm.forward = norm64
    ml.LlamaRotaryEmbedding.forward = rotary64


def tiny_models(out: Path) -> None:
    torch.manual_seed(0)
    gpt2 = GPT2Model(GPT2Config(n_embd=64, n_head=4, n_layer=2, n_positions=64,
                                vocab_size=101, initializer_range=INIT_STD,
                                scale_attn_by_inverse_layer_idx=True))
    llama = LlamaModel(LlamaConfig(hidden_size=64, num_attention_heads=4,
                                   num_key_value_heads=2, head_dim=24, num_hidden_layers=2,
                                   intermediate_size=96, vocab_size=101,
                                   max_position_embeddings=64, rope_theta=500.0,
                                   attention_bias=True, initializer_range=INIT_STD,
                                   rms_norm_eps=1e-6))
    # RoPE's llama3 rescaling, with an original context short enough to matter at 40 tokens
    llama3 = LlamaModel(LlamaConfig(hidden_size=64, num_attention_heads=4,
                                    num_key_value_heads=2, head_dim=24, num_hidden_layers=2,
                                    intermediate_size=96, vocab_size=101,
                                    max_position_embeddings=64, initializer_range=INIT_STD,
                                    rope_parameters={"rope_type": "llama3", "rope_theta": 500.0,
                                                     "factor": 8.0, "low_freq_factor": 1.0,
                                                     "high_freq_factor": 4.0,
                                                     "original_max_position_embeddings": 16}))
    for name, model in (("gpt2", gpt2), ("llama", llama), ("llama3", llama3)):
        with torch.no_grad():  # biases and norm weights away from 0 and 1: they must matter
            for p in model.parameters():
                if p.ndim == 1:
                    p.add_(torch.randn_like(p) * 0.1)
        model.save_pretrained(out / name, safe_serialization=True)
    # transformers computes rescaled RoPE frequencies in float32: compared on their own
    (out / "ref").mkdir(exist_ok=True)
    np.save(out / "ref" / "llama3-inv-freq.npy", llama3.rotary_emb.inv_freq.double().numpy(),
            allow_pickle=False)


def run(folder: Path, dest: Path, ids: np.ndarray, dtype: torch.dtype) -> dict[str, float]:
    model = AutoModel.from_pretrained(folder, attn_implementation="eager", torch_dtype=dtype)
    model.eval()
    with torch.no_grad():
        got = model(torch.from_numpy(ids), output_attentions=True, output_hidden_states=True)
    tag = "float64" if dtype == torch.float64 else "float32"
    dest = dest / tag
    dest.mkdir(parents=True, exist_ok=True)
    for i, h in enumerate(got.hidden_states):
        np.save(dest / f"hidden{i}.npy", h.numpy().astype(np.float64), allow_pickle=False)
    peaks = []
    for i, a in enumerate(got.attentions):
        np.save(dest / f"attn{i}.npy", a.numpy().astype(np.float64), allow_pickle=False)
        peaks.append(float(a.max(dim=-1).values.mean()))
    return {f"{dest.parent.name}/{tag}/mean_largest_weight": float(np.mean(peaks))}


def main() -> None:
    out = Path(sys.argv[1])
    tiny_models(out)
    float64_llama()
    folders = {"gpt2": out / "gpt2", "llama": out / "llama", "llama3": out / "llama3"}
    if len(sys.argv) > 2:
        folders["minilm"] = Path(sys.argv[2])
    facts: dict[str, float] = {}
    for name, folder in folders.items():
        ids = np.load(out / f"{name}-ids.npy", allow_pickle=False)
        # llama3-rescaled RoPE frequencies exist only in float32 in transformers
        for dtype in (torch.float32,) if name == "llama3" else (torch.float64, torch.float32):
            facts.update(run(folder, out / "ref" / name, ids, dtype))
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
