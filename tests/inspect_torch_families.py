"""Reference forwards of the QK-norm, soft-capped and sliding-window families, and of SmolLM2's
GGUF, with transformers (eager attention); run in the torch venv by tests/test_inspect_families.py.

Usage: python inspect_torch_families.py OUT [NAME=FILE.gguf ...]

Writes tiny random qwen3, olmo2, gemma2, gemma3, mistral and phi3 checkpoints (float32,
safetensors) to OUT/<name>/, the same weights as GGUF files written with the `gguf` package
under llama.cpp's names and conventions (OUT/<name>-gguf/model.gguf: Llama's q/k rows
permuted, Gemma's norms stored as 1 + w), and a Llama GGUF quantised to Q8_0 that transformers
itself reads (its GGUF loader is the reference there). For each, the eager forward on
OUT/ids.npy: attention weights and hidden states as .npy under OUT/ref/<name>/ (never pickle).
Each NAME=FILE.gguf (SmolLM2, Gemma 3 270M): transformers' from_pretrained(folder,
gguf_file=...) on OUT/NAME-ids.npy, every layer's attention weights saved (float32) under
OUT/ref/NAME/; with OUT/NAME-changes.json (a list of {"layer": "all" or i, "factor": F or
"unscale"}), the next-token loss of OUT/NAME-loss-ids.npy and, per change of the attention
modules' `scaling`, its loss and KL from the unchanged model, in OUT/ref/NAME/losses.json.
Prints one JSON line of facts.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import gguf
import numpy as np
import torch
import transformers as tf

INIT_STD = 0.25  # peaked heads, so a wrong scale, cap, mask or norm shows
COMMON = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
              num_hidden_layers=3, intermediate_size=96, vocab_size=101,
              max_position_embeddings=64, initializer_range=INIT_STD, rms_norm_eps=1e-6)
SLIDING = ["sliding_attention", "full_attention", "sliding_attention"]


def configs() -> dict[str, tuple[type, object]]:
    """name → (model class, config); the -g variants keep what llama.cpp's GGUF can say
    (Gemma: ÷√head_dim, the pattern and RoPE bases llama.cpp fixes)."""
    gemma3_rope = {"full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0},
                   "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0}}
    return {
        "qwen3": (tf.Qwen3Model, tf.Qwen3Config(**COMMON, rope_theta=500.0)),
        "olmo2": (tf.Olmo2Model, tf.Olmo2Config(**COMMON, rope_theta=500.0)),
        "gemma2": (tf.Gemma2Model, tf.Gemma2Config(
            **COMMON, query_pre_attn_scalar=24, attn_logit_softcapping=5.0, sliding_window=8,
            layer_types=SLIDING, rope_theta=500.0)),
        "gemma2g": (tf.Gemma2Model, tf.Gemma2Config(
            **COMMON, query_pre_attn_scalar=16, attn_logit_softcapping=5.0, sliding_window=8,
            rope_theta=500.0)),
        "gemma3": (tf.Gemma3TextModel, tf.Gemma3TextConfig(
            **COMMON, query_pre_attn_scalar=24, sliding_window=8, layer_types=SLIDING,
            rope_parameters=gemma3_rope)),
        "gemma3g": (tf.Gemma3TextModel, tf.Gemma3TextConfig(
            **COMMON, query_pre_attn_scalar=16, sliding_window=8, rope_parameters=gemma3_rope,
            sliding_window_pattern=2)),
        "mistral": (tf.MistralModel, tf.MistralConfig(**COMMON, sliding_window=8,
                                                      rope_theta=500.0)),
        "llama": (tf.LlamaModel, tf.LlamaConfig(**COMMON, rope_theta=500.0)),
        # fused qkv_proj and gate_up_proj, a window on every layer
        "phi3": (tf.Phi3Model, tf.Phi3Config(**COMMON, rope_theta=500.0, sliding_window=8,
                                             pad_token_id=None, eos_token_id=None,
                                             bos_token_id=None)),
    }


GGUF_ARCH = {"qwen3": "qwen3", "olmo2": "olmo2", "gemma2g": "gemma2", "gemma3g": "gemma3",
             "mistral": "llama", "llama": "llama"}
NAMES = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
         "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
         "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
         "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
         "input_layernorm": "attn_norm", "post_feedforward_layernorm": "post_ffw_norm",
         "pre_feedforward_layernorm": "ffn_norm"}


def permute(w: np.ndarray, heads: int) -> np.ndarray:
    """convert_hf_to_gguf's reordering of Llama's q/k rows (interleaved rotation pairs)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2) \
        .reshape(w.shape)


def gguf_name(hf: str, arch: str) -> str:
    if hf == "embed_tokens.weight":
        return "token_embd.weight"
    if hf == "norm.weight":
        return "output_norm.weight"
    _, i, rest = hf.split(".", 2)
    part, kind = rest.rsplit(".", 1)
    if part == "post_attention_layernorm":
        part = "ffn_norm" if arch in ("llama", "qwen3") else "post_attention_norm"
    else:
        part = NAMES[part]
    return f"blk.{i}.{part}.{kind}"


def write_gguf(model: torch.nn.Module, cfg: object, arch: str, path: Path,
               quant: gguf.GGMLQuantizationType | None = None) -> None:
    c = cfg
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(c.num_hidden_layers)
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_key_length(c.head_dim)
    w.add_value_length(c.head_dim)
    w.add_rope_dimension_count(c.head_dim)
    params = getattr(c, "rope_parameters", None) or {}
    theta = params.get("full_attention", params).get("rope_theta", 10000.0)
    w.add_rope_freq_base(float(theta))
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    if arch.startswith("gemma"):
        w.add_sliding_window(c.sliding_window)
        if arch == "gemma3":
            w.add_sliding_window_pattern(2)
    if arch == "gemma2":
        w.add_attn_logit_softcapping(c.attn_logit_softcapping)
    if getattr(c, "sliding_window", None) and arch == "llama":
        w.add_sliding_window(c.sliding_window)
    # a byte-level vocabulary of single characters (the tests feed token ids directly)
    spelled = [chr(0x100 + i) for i in range(c.vocab_size)]
    w.add_tokenizer_model("gpt2")
    w.add_token_list(spelled)
    w.add_token_types([1] * c.vocab_size)
    w.add_token_merges([])
    for name, t in model.state_dict().items():
        a = t.detach().double().numpy().astype(np.float32)
        if arch.startswith("gemma") and name.endswith("norm.weight"):
            a = a + 1.0  # llama.cpp stores Gemma's (1 + w)
        if arch == "llama" and (".q_proj." in name or ".k_proj." in name):
            a = permute(a, c.num_attention_heads if ".q_proj." in name
                        else c.num_key_value_heads)
        if quant is not None and a.ndim == 2:
            w.add_tensor(gguf_name(name, arch), gguf.quants.quantize(a, quant),
                         raw_dtype=quant)
        else:
            w.add_tensor(gguf_name(name, arch), a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def run(model: torch.nn.Module, dest: Path, ids: np.ndarray) -> dict[str, float]:
    model.eval()
    with torch.no_grad():
        got = model(torch.from_numpy(ids), output_attentions=True, output_hidden_states=True)
    dest.mkdir(parents=True, exist_ok=True)
    for i, h in enumerate(got.hidden_states):
        np.save(dest / f"hidden{i}.npy", h.double().numpy(), allow_pickle=False)
    for i, a in enumerate(got.attentions):
        np.save(dest / f"attn{i}.npy", a.double().numpy(), allow_pickle=False)
    return {f"{dest.name}/mean_largest_weight":
            float(np.mean([a.max(dim=-1).values.mean() for a in got.attentions]))}


def tiny(out: Path) -> dict[str, float]:
    facts: dict[str, float] = {}
    ids = np.load(out / "ids.npy", allow_pickle=False)
    for name, (cls, cfg) in configs().items():
        torch.manual_seed(1)
        cfg._attn_implementation = "eager"
        model = cls(cfg).float()
        with torch.no_grad():  # norm weights away from 0 and 1 (Gemma's: from 0): they matter
            for p in model.parameters():
                if p.ndim == 1:
                    p.add_(torch.randn_like(p) * 0.2)
        if name != "llama":
            model.save_pretrained(out / name, safe_serialization=True)
            facts.update(run(model, out / "ref" / name, ids))
        if name in GGUF_ARCH:
            (out / f"{name}-gguf").mkdir(exist_ok=True)
            write_gguf(model, cfg, GGUF_ARCH[name], out / f"{name}-gguf" / "model.gguf")
    # transformers' own GGUF reader on a Q8_0 Llama: the permutation and dequantisation
    cls, cfg = configs()["llama"]
    torch.manual_seed(1)
    model = cls(cfg).float()
    (out / "llama-q8").mkdir(exist_ok=True)
    write_gguf(model, cfg, "llama", out / "llama-q8" / "model.gguf",
               gguf.GGMLQuantizationType.Q8_0)
    loaded = tf.AutoModel.from_pretrained(out / "llama-q8", gguf_file="model.gguf",
                                          attn_implementation="eager",
                                          dtype=torch.float32)
    facts.update(run(loaded, out / "ref" / "llama-q8", ids))
    return facts


def real(out: Path, name: str, path: Path) -> dict[str, float]:
    ids = np.load(out / f"{name}-ids.npy", allow_pickle=False)
    t = time.perf_counter()
    model = tf.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        got = model.model(torch.from_numpy(ids), output_attentions=True)
    seconds = time.perf_counter() - t
    dest = out / "ref" / name
    dest.mkdir(parents=True, exist_ok=True)
    for i, a in enumerate(got.attentions):
        np.save(dest / f"attn{i}.npy", a.float().numpy(), allow_pickle=False)
    if (out / f"{name}-changes.json").is_file():
        changes = json.loads((out / f"{name}-changes.json").read_text())
        losses = changed_losses(model, np.load(out / f"{name}-loss-ids.npy"), changes)
        (dest / "losses.json").write_text(json.dumps(losses))
    return {f"{name}/seconds": seconds, f"{name}/layers": len(got.attentions)}


def _log_probs(model: torch.nn.Module, ids: torch.Tensor) -> list[torch.Tensor]:
    """Per sequence, log-softmax of the next-token logits at every position but the last
    (float64), one sequence at a time: Gemma's 262,144-token vocabulary."""
    out = []
    with torch.no_grad():
        for row in ids:
            logits = model(row[None]).logits[0, :-1].double()
            out.append(torch.log_softmax(logits, dim=-1))
    return out


def changed_losses(model: torch.nn.Module, ids: np.ndarray, changes: list[dict]) -> dict:
    """The mean next-token cross-entropy, then per change each attention module's `scaling`
    multiplied by the factor (set to 1 for "unscale") in the layers named: the loss and the
    mean KL(unchanged ‖ changed) over the same positions."""
    model.eval()
    tokens = torch.from_numpy(ids)
    targets = tokens[:, 1:]
    attention = [layer.self_attn for layer in model.model.layers]
    own = [a.scaling for a in attention]

    def loss(logp: list[torch.Tensor]) -> float:
        return float(-torch.cat([lp.gather(-1, t[:, None])[:, 0]
                                 for lp, t in zip(logp, targets, strict=True)]).mean())

    base = _log_probs(model, tokens)
    rows = []
    for change in changes:
        layers = range(len(attention)) if change["layer"] == "all" else [change["layer"]]
        for i in layers:
            attention[i].scaling = 1.0 if change["factor"] == "unscale" else \
                own[i] * change["factor"]
        logp = _log_probs(model, tokens)
        kl = torch.cat([(p.exp() * (p - q)).sum(-1)
                        for p, q in zip(base, logp, strict=True)]).mean()
        rows.append({**change, "loss": loss(logp), "kl": float(kl)})
        for a, s in zip(attention, own, strict=True):
            a.scaling = s
    return {"loss": loss(base), "rows": rows}


def main() -> None:
    out = Path(sys.argv[1])
    facts = tiny(out)
    for item in sys.argv[2:]:
        name, _, path = item.partition("=")
        facts.update(real(out, name, Path(path)))
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
