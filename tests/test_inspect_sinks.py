"""`sdpa inspect`'s sinks as Gu et al. measure them, the values at the sink, the largest
residual activation per layer and each tensor family's storage type, on a tiny Llama against
its own forward recomputed here (softmax by its definition, norms and maxima with NumPy)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

import inspect_fixtures as fx
import inspect_stats_reference as ref

from sdpa_cli.cli.entry import run as cli
from sdpa_cli.studies.inspect.checkpoint import Weights, open_checkpoint
from sdpa_cli.studies.inspect.heads import SINK

N, SEQS = 16, 3


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, list]:
    """One run for the module's tests (results.json from --out)."""
    where = tmp_path_factory.mktemp("sinks")
    folder = fx.llama(where / "m", seed=4)
    fx.write_tokenizer(folder, "llama")
    (where / "t.txt").write_text(fx.text(400), encoding="utf-8")
    code = cli([str(a) for a in ("inspect", folder, "--text", where / "t.txt", "--seq-len", N,
                                 "--sequences", SEQS, "--no-plots", "-q", "--out",
                                 where / "o")])
    assert code == 0
    doc = json.loads((where / "o" / "results.json").read_text(encoding="utf-8"))
    ids = np.array(doc["tokens"]["text"][str(N)] + doc["tokens"]["induction"][str(N)])
    ckpt = open_checkpoint(folder)
    layers = list(ckpt.family.forward(ckpt.config, Weights(ckpt), ids, np.float32))
    return doc, layers


def test_sink_rate_thresholds_each_sequence_then_averages(run: tuple[dict, list]):
    doc, layers = run
    model = [r for r in doc["rows"] if r["scaling"] == "model"]
    assert model
    for r in model:
        lo = layers[r["layer"]]
        q, k = lo.q[:SEQS, r["head"]], lo.k[:SEQS, r["head"]]
        alpha = [ref.softmax(ref.scores(q[s], k[s], lo.scale, lo.mask(N)), lo.mask(N))[:, 0]
                 .mean() for s in range(SEQS)]
        assert r["sink_rate"] == pytest.approx(np.mean(np.array(alpha) > SINK))
        assert r["first_token_std"] == pytest.approx(np.std(alpha), abs=1e-6)
        assert r["first_token_share"] == pytest.approx(np.mean(alpha), abs=1e-6)
        v = lo.v[:SEQS, r["head"]].astype(np.float64)
        assert r["sink_value_norm"] == pytest.approx(np.linalg.norm(v[:, 0], axis=-1).mean())
        assert r["value_norm"] == pytest.approx(np.linalg.norm(v[:, 1:], axis=-1).mean())
    summary = next(s for s in doc["tables"]["summary"] if s["scaling"] == "model")
    assert summary["sink_rate"] == pytest.approx(np.mean([r["sink_rate"] for r in model]))
    assert any("Gu et al.'s sink rate" in f for f in doc["findings"])


def test_the_largest_residual_activation_per_layer(run: tuple[dict, list]):
    doc, layers = run
    residual = doc["tables"]["residual"]
    assert [r["layer"] for r in residual] == list(range(len(layers)))
    for r, lo in zip(residual, layers, strict=True):
        h = np.abs(lo.hidden[:SEQS])
        assert r["largest"] == pytest.approx(float(h.max()))
        assert h[r["sequence"], r["position"], r["channel"]] == h.max()
        assert r["median_abs"] == pytest.approx(float(np.median(h)))


def test_each_tensor_family_names_its_storage_type(run: tuple[dict, list]):
    doc, layers = run
    kinds = doc["inputs"]["tensor_types"]
    assert kinds["self_attn.q_proj.weight"] == {"F32": len(layers)}
    assert sum(sum(v.values()) for v in kinds.values()) == len(
        open_checkpoint(Path(doc["inputs"]["model"])).tensors)
