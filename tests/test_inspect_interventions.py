"""`sdpa inspect`'s next-token loss and its changes of the attention scale: the online
log-sum-exp against whole-vocabulary softmaxes, the scale factor against the same factor put
into the weights, the resumed forward against the full one, the rows, JSON and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

import inspect_fixtures as fx

from sdpa_cli.studies.inspect.checkpoint import Weights, open_checkpoint
from sdpa_cli.studies.inspect.figures import draw_scale_loss
from sdpa_cli.studies.inspect.models import nexttoken, rescale
from sdpa_cli.studies.inspect.models.common import Resume
from sdpa_cli.studies.inspect.run import run
from sdpa_cli.studies.inspect.spec import InspectSpec


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def _whole(h: np.ndarray, w: np.ndarray, cap: float | None) -> np.ndarray:
    """Log-probabilities from the whole logit matrix at once, float64 (the reference)."""
    z = h.astype(np.float64) @ w.astype(np.float64).T
    return _log_softmax(cap * np.tanh(z / cap) if cap is not None else z)


@pytest.mark.parametrize(("block", "cap"), [(7, None), (44, None), (5, 3.0), (1000, 2.0)])
def test_online_loss_and_kl_equal_whole_vocabulary_softmaxes(block: int, cap: float | None):
    rng = np.random.default_rng(3)
    vocab, width, positions = 44, 8, 30
    w = rng.normal(0, 1, (vocab, width))
    base = rng.normal(0, 2, (positions, width))  # peaked rows: large logits
    changed = [base + rng.normal(0, s, base.shape) for s in (0.0, 0.3, 3.0)]
    targets = rng.integers(0, vocab, positions)
    got = nexttoken.next_token(base, changed, targets, lambda a, b: w[a:b], vocab, cap, block)
    p = _whole(base, w, cap)
    rows = np.arange(positions)
    assert np.allclose(got.loss, -p[rows, targets], rtol=1e-13, atol=1e-13)
    for h, loss, kl in zip(changed, got.changed_loss, got.kl, strict=True):
        q = _whole(h, w, cap)
        assert np.allclose(loss, -q[rows, targets], rtol=1e-13, atol=1e-13)
        assert np.allclose(kl, (np.exp(p) * (p - q)).sum(-1), rtol=1e-10, atol=1e-13)
    assert np.abs(got.kl[0]).max() < 1e-13  # unchanged: no divergence
    assert got.kl[2].mean() > 10 * got.kl[1].mean() > 0


def test_predicting_positions_drop_each_sequences_last_and_shift_the_targets():
    hidden = np.arange(2 * 4 * 3, dtype=float).reshape(2, 4, 3)
    ids = np.array([[5, 6, 7, 8], [9, 10, 11, 12]])
    h, t = nexttoken.predicting(hidden, ids)
    assert h.shape == (6, 3) and t.tolist() == [6, 7, 8, 10, 11, 12]
    assert h[3].tolist() == hidden[1, 0].tolist()


def _scaled_q(read, layer: int, factor: float, family: str):  # type: ignore[no-untyped-def]
    """The checkpoint with layer `layer`'s queries multiplied by `factor` in the weights: q's
    projection and bias, or for a QK-norm model the
    q-norm's gain (the forward's reader names GPT-2's c_attn parts q, k, v). q·k, and so the
    scale on it, is then that factor larger."""

    def read2(name: str) -> np.ndarray:
        w = np.array(read(name), dtype=np.float64)
        query = {"qwen3": f"layers.{layer}.self_attn.q_norm.weight",
                 "llama": f"layers.{layer}.self_attn.q_proj.",
                 "gpt2": f"layers.{layer}.attn.q."}[family]
        if name.startswith(query):
            w *= factor
        return w

    return read2


def _qwen3(folder: Path) -> Path:
    """The tiny Llama with a q-norm and k-norm on each head (Qwen3's QK-norm)."""
    from safetensors.numpy import load_file, save_file

    fx.llama(folder, bias=False)
    t = load_file(str(folder / "model.safetensors"))
    rng = np.random.default_rng(5)
    for i in range(2):
        for part in "qk":
            t[f"model.layers.{i}.self_attn.{part}_norm.weight"] = \
                (1 + rng.normal(0, 0.2, 6)).astype(np.float32)
    save_file(t, str(folder / "model.safetensors"))
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "qwen3"}))
    return folder


def _model(workdir: Path, family: str, **kw) -> Path:  # type: ignore[no-untyped-def]
    folder = _qwen3(workdir / "m") if family == "qwen3" else \
        getattr(fx, family)(workdir / "m", **kw)
    fx.write_tokenizer(folder, None)
    return folder


@pytest.mark.parametrize("family", ["llama", "gpt2", "qwen3"])
@pytest.mark.parametrize("layer", [0, 1])
def test_a_scale_factor_equals_the_same_factor_in_the_query_weights(workdir: Path, family: str,
                                                                    layer: int):
    ckpt = open_checkpoint(_model(workdir, family))
    ids = np.random.default_rng(1).integers(0, 44, (2, 12))
    read = Weights(ckpt)
    for factor in (0.25, 8.0):
        mine = rescale.final_hidden(ckpt.family.forward, ckpt.config, read, ids, np.float64,
                                    Resume({layer: factor}))
        theirs = list(ckpt.family.forward(ckpt.config, _scaled_q(read, layer, factor, family),
                                          ids, np.float64))[-1].hidden
        plain = list(ckpt.family.forward(ckpt.config, read, ids, np.float64))[-1].hidden
        assert np.allclose(mine, theirs, rtol=1e-12, atol=1e-12)
        assert not np.allclose(mine, plain, rtol=1e-3)  # the factor changes the model


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_resuming_at_a_layer_equals_the_whole_forward_bit_for_bit(workdir: Path, family: str):
    """From the unchanged forward's input residual at layer i, on the same ids and dtype, the
    resumed forward does the same arithmetic as the whole one: the same bits."""
    ckpt = open_checkpoint(_model(workdir, family, layers=4))
    ids = np.random.default_rng(2).integers(0, 44, (3, 10))
    read = Weights(ckpt)
    outs = list(ckpt.family.forward(ckpt.config, read, ids, np.float32))
    inputs = {i + 1: lo.hidden for i, lo in enumerate(outs[:-1])}
    changes = [{i: 8.0} for i in range(4)] + [dict.fromkeys(range(4), 0.5)]
    resumed = list(rescale.changed(ckpt.family.forward, ckpt.config, read, ids, np.float32,
                                   inputs, changes))
    kept = rescale.changed(ckpt.family.forward, ckpt.config, read, ids, np.float32, inputs,
                           changes, budget=1 << 30)  # the weights read once, then kept
    for factors, got, again in zip(changes, resumed, kept, strict=True):
        whole = rescale.final_hidden(ckpt.family.forward, ckpt.config, read, ids, np.float32,
                                     Resume(factors))
        assert np.array_equal(got, whole) and np.array_equal(again, whole)


def test_the_kept_reader_keeps_within_its_budget_and_read_only(workdir: Path):
    ckpt = open_checkpoint(_model(workdir, "llama"))
    calls: list[str] = []

    def read(name: str) -> np.ndarray:
        calls.append(name)
        return Weights(ckpt)(name)

    size = read("layers.0.self_attn.q_proj.weight").nbytes
    kept = rescale.Kept(read, budget=size)
    for _ in range(3):
        w = kept("layers.0.self_attn.q_proj.weight")
        kept("layers.1.self_attn.q_proj.weight")
    assert calls.count("layers.0.self_attn.q_proj.weight") == 2  # before, then kept
    assert calls.count("layers.1.self_attn.q_proj.weight") == 3  # over the budget
    with pytest.raises(ValueError):
        w *= 2.0
    with pytest.raises(KeyError):
        kept("layers.0.self_attn.o_proj.bias")  # absent (optional): never kept


def test_unscaling_every_layer_runs_half_the_layer_forwards(workdir: Path):
    ckpt = open_checkpoint(_model(workdir, "llama", layers=5))
    ids = np.random.default_rng(2).integers(0, 44, (1, 6))
    outs = list(ckpt.family.forward(ckpt.config, Weights(ckpt), ids, np.float32))
    ran: list[int] = []

    def counting(*args, **kw):  # type: ignore[no-untyped-def]
        for lo in ckpt.family.forward(*args, **kw):
            ran.append(1)
            yield lo

    inputs = {i + 1: lo.hidden for i, lo in enumerate(outs[:-1])}
    list(rescale.changed(counting, ckpt.config, Weights(ckpt), ids, np.float32, inputs,
                         [{i: 8.0} for i in range(5)]))
    assert len(ran) == 5 * 6 // 2
    assert rescale.resumes([{0: 8.0}, {3: 8.0}, dict.fromkeys(range(5), 2.0)]) == {3}
    with pytest.raises(ValueError):
        list(ckpt.family.forward(ckpt.config, Weights(ckpt), ids, np.float32,
                                 resume=Resume({}, start=2)))  # a later start needs its input


def _run(workdir: Path, folder: Path, **spec):  # type: ignore[no-untyped-def]
    (workdir / "t.txt").write_text(fx.text(600), encoding="utf-8")
    fields = {"model": str(folder), "text": [str(workdir / "t.txt")], "seq_len": [16],
              "sequences": 3, "dtype": "float64", **spec}
    return run(InspectSpec(**fields))


@pytest.mark.parametrize("lm_head", [False, True])
def test_the_loss_is_the_mean_cross_entropy_of_the_next_token(workdir: Path, lm_head: bool):
    """Tied embeddings, or an untied lm_head: the loss from the whole logit matrix."""
    folder = fx.llama(workdir / "m", lm_head=lm_head)
    fx.write_tokenizer(folder, "llama")
    result = _run(workdir, folder, loss=True, induction_sequences=2)
    ids = np.array(result.extra["tokens"]["text"]["16"])
    ckpt = open_checkpoint(folder)
    read = Weights(ckpt)
    final = list(ckpt.family.forward(ckpt.config, read, ids, np.float64))[-1].hidden
    head = read("lm_head.weight" if lm_head else "embed_tokens.weight")
    logp = _whole(final[:, :-1].reshape(-1, final.shape[-1]), head, None)
    want = -logp[np.arange(logp.shape[0]), ids[:, 1:].reshape(-1)].mean()
    got = result.extra["interventions"]
    assert got["loss"] == pytest.approx(want, rel=1e-12)
    assert got["positions"] == 3 * 15 and got["rows"] == []
    if lm_head:  # the untied head is the one read: the embedding would give another loss
        tied = _whole(final[:, :-1].reshape(-1, final.shape[-1]), read("embed_tokens.weight"),
                      None)
        assert abs(-tied[np.arange(45), ids[:, 1:].reshape(-1)].mean() - want) > 1e-3


def test_changes_give_rows_loss_and_kl_of_whole_recomputes(workdir: Path):
    """The run's rows against forwards recomputed from the ids with the scale changed: each
    layer unscaled alone, every layer × 0.5 and the scale removed everywhere (rows with
    induction sequences in the cached forward's batch: equal within float64 rounding)."""
    folder = fx.llama(workdir / "m", layers=3)
    fx.write_tokenizer(folder, "llama")
    result = _run(workdir, folder, scale_factors=[0.5], unscale_layers=["all"])
    doc = result.extra["interventions"]
    ids = np.array(result.extra["tokens"]["text"]["16"])
    ckpt = open_checkpoint(folder)
    read = Weights(ckpt)
    undo = 6 ** 0.5  # head_dim 6: the model multiplies q·k by 1/√6
    assert doc["scales"] == pytest.approx([1 / undo] * 3, rel=1e-15)
    assert [(r["layer"], r["factor"]) for r in doc["rows"]] == [
        ("all", 0.5), ("all", pytest.approx(undo)), (0, pytest.approx(undo)),
        (1, pytest.approx(undo)), (2, pytest.approx(undo))]
    head = read("embed_tokens.weight")
    targets = ids[:, 1:].reshape(-1)
    rows = np.arange(targets.size)

    def logp(factors):  # type: ignore[no-untyped-def]
        h = rescale.final_hidden(ckpt.family.forward, ckpt.config, read, ids, np.float64,
                                 Resume(factors))
        return _whole(h[:, :-1].reshape(-1, h.shape[-1]), head, None)

    p = logp({})
    assert doc["loss"] == pytest.approx(-p[rows, targets].mean(), rel=1e-12)
    for r in doc["rows"]:
        layers = range(3) if r["layer"] == "all" else [r["layer"]]
        q = logp(dict.fromkeys(layers, r["factor"]))
        assert r["loss"] == pytest.approx(-q[rows, targets].mean(), rel=1e-12)
        assert r["kl"] == pytest.approx((np.exp(p) * (p - q)).sum(-1).mean(), rel=1e-9)
    table = next(t for t in result.tables if t.name == "interventions")
    assert [r["layer"] for r in table.rows][:3] == ["none", "all", "all"]
    assert any(f.startswith("With the scale removed everywhere") for f in result.findings)
    assert any(f.startswith("Unscaled one layer at a time (3 layers)") for f in result.findings)
    # the figure: the model as trained (×1, no change), then each factor on every layer; and
    # each layer's scale removed alone, all as loss increases over the recomputed loss
    fig = next(f for f in result.figures if f.name == "scale_loss").data
    every = {r["factor"]: r["loss"] for r in doc["rows"] if r["layer"] == "all"}
    assert fig["factors"] == [0.5, 1.0, pytest.approx(undo)]
    assert fig["every"] == pytest.approx([every[0.5] - doc["loss"], 0.0,
                                          every[max(every)] - doc["loss"]], abs=1e-12)
    assert fig["layers"] == [0, 1, 2]
    assert fig["single"] == pytest.approx([r["loss"] - doc["loss"] for r in doc["rows"]
                                           if r["layer"] != "all"], abs=1e-12)
    drawn = draw_scale_loss(next(f for f in result.figures if f.name == "scale_loss"))
    assert [ax.get_xlabel() for ax in drawn.axes] == [
        "factor on q·k in every layer (×1: as trained)", "layer whose ÷√d_k is removed"]
    assert len(drawn.axes[1].patches) == 3  # a bar per layer


def test_an_encoder_records_no_loss_and_says_why(workdir: Path):
    folder = fx.bert(workdir / "m")
    fx.write_tokenizer(folder, "bert")
    result = _run(workdir, folder, unscale_layers=[0])
    doc = result.extra["interventions"]
    assert doc["loss"] is None and doc["rows"] == [] and "encoder" in doc["reason"]
    assert any("No next-token loss" in f and "encoder" in f for f in result.findings)
    assert not any(t.name.startswith("interventions") for t in result.tables)


def test_random_tokens_record_no_loss_and_say_why(workdir: Path):
    folder = fx.llama(workdir / "m")
    fx.write_tokenizer(folder, "llama")
    result = _run(workdir, folder, loss=True, random_tokens=True, seed=3)
    doc = result.extra["interventions"]
    assert doc["loss"] is None and "random" in doc["reason"]


@pytest.mark.parametrize(("factors", "layers"), [([2.0], [0]), ([6 ** 0.5], ["all"])])
def test_progress_counts_every_planned_task_done(workdir: Path, factors, layers):
    """A scale factor equal to the scale's removal runs once, and the progress still ends
    with every planned task done."""
    from sdpa_cli.framework.context import RunContext

    folder = fx.llama(workdir / "m")
    fx.write_tokenizer(folder, "llama")
    (workdir / "t.txt").write_text(fx.text(600), encoding="utf-8")
    counts = [0, 0]

    def tick(planned: int, done: int) -> None:
        counts[0] += planned
        counts[1] += done

    result = run(InspectSpec(model=str(folder), text=[str(workdir / "t.txt")], seq_len=[16],
                             sequences=2, scale_factors=factors, unscale_layers=layers),
                 RunContext(tick=tick, figures=False))
    rows = result.extra["interventions"]["rows"]
    alls = [r for r in rows if r["layer"] == "all"]
    # × 2, the removal and layer 0; or the removal given as a factor (run once), layers 0, 1
    assert len(alls) == (2 if layers == [0] else 1) and len(rows) == 3
    assert counts[0] == counts[1] > 0


def test_without_the_fields_nothing_is_measured(workdir: Path):
    folder = fx.llama(workdir / "m")
    fx.write_tokenizer(folder, "llama")
    result = _run(workdir, folder)
    assert "interventions" not in result.extra


def test_the_results_json_fits_the_shipped_schemas(sdpa, workdir: Path):
    jsonschema = pytest.importorskip("jsonschema")
    from sdpa_cli import registry, schemas
    from sdpa_cli.framework import schema

    folder = fx.llama(workdir / "m", layers=2)
    fx.write_tokenizer(folder, "llama")
    (workdir / "t.txt").write_text(fx.text(400), encoding="utf-8")
    got = sdpa("inspect", "m", "--text", "t.txt", "--seq-len", "12", "--sequences", "2",
               "--unscale-layers", "all", "--scale-factors", "2", "--no-plots", "--out", "o")
    assert got.code == 0, got.err
    doc = json.loads((workdir / "o" / "results.json").read_text())
    own = json.loads(schema.shipped(registry.get("inspect")).read_text(encoding="utf-8"))
    jsonschema.validators.validator_for(own)(own).validate(doc)
    shared = schemas.load("result")
    jsonschema.validators.validator_for(shared)(shared).validate(doc)
    broken = {**doc, "interventions": {**doc["interventions"], "rows": [{"layer": "x"}]}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validators.validator_for(own)(own).validate(broken)
    assert "Next-token loss" in got.out and "× scale" in got.out


@pytest.mark.parametrize(("args", "said"), [
    (["--unscale-layers", "2"], "unscale_layers[0]: layer 2 does not exist"),
    (["--unscale-layers", "0", "all"], "all stands alone"),
    (["--unscale-layers", "1", "1"], "1 is listed twice"),
    (["--scale-factors", "-1"], "scale_factors"),
    (["--scale-factors", "nan"], "scale_factors")])
def test_bad_changes_are_one_line_exit_2(sdpa, workdir: Path, args: list[str], said: str):
    folder = fx.llama(workdir / "m")
    fx.write_tokenizer(folder, "llama")
    (workdir / "t.txt").write_text(fx.text(200), encoding="utf-8")
    got = sdpa("inspect", "m", "--text", "t.txt", "--seq-len", "8", "--sequences", "2",
               *args, "--out", "o")
    assert got.code == 2 and said in got.err, got.err
    assert len(got.err.strip().splitlines()) == 1 and not (workdir / "o").exists()


@pytest.mark.parametrize(("head", "said"), [
    (lambda w: w[:, :8].copy(), "'lm_head.weight' has shape [44, 8]"),
    (lambda w: w.astype(np.int32), "'lm_head.weight' is I32")])
def test_an_lm_head_of_the_wrong_shape_or_type_is_refused(sdpa, workdir: Path, head, said):
    from safetensors.numpy import load_file, save_file

    folder = fx.llama(workdir / "m", lm_head=True)
    t = load_file(str(folder / "model.safetensors"))
    t["lm_head.weight"] = head(t["lm_head.weight"])
    save_file(t, str(folder / "model.safetensors"))
    fx.write_tokenizer(folder, "llama")
    (workdir / "t.txt").write_text(fx.text(200), encoding="utf-8")
    got = sdpa("inspect", "m", "--text", "t.txt", "--seq-len", "8", "--sequences", "2",
               "--loss", "--out", "o")
    assert got.code == 2 and said in got.err, got.err
    assert "model.safetensors" in got.err and len(got.err.strip().splitlines()) == 1


def test_layers_with_their_own_scales_are_each_unscaled_by_their_own(workdir: Path):
    """GPT-2's ÷(i + 1) rule: layer i's scale is 1/(√d·(i + 1)); removing the scale
    everywhere multiplies each layer's q·k by its own 1/scale (the row's factor is null)."""
    folder = fx.gpt2(workdir / "m")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(
        {**config, "scale_attn_by_inverse_layer_idx": True}))
    fx.write_tokenizer(folder, None)
    result = _run(workdir, folder, unscale_layers=["all"])
    rows = result.extra["interventions"]["rows"]
    root = 8 ** 0.5  # width 16, 2 heads: d_k = 8
    assert [(r["layer"], r["factor"]) for r in rows] == [
        ("all", None), (0, pytest.approx(root)), (1, pytest.approx(2 * root))]
    ckpt = open_checkpoint(folder)
    ids = np.array(result.extra["tokens"]["text"]["16"])
    h = rescale.final_hidden(ckpt.family.forward, ckpt.config, Weights(ckpt), ids, np.float64,
                             Resume({0: root, 1: 2 * root}))
    logp = _whole(h[:, :-1].reshape(-1, h.shape[-1]), Weights(ckpt)(ckpt.table.embedding),
                  None)
    assert rows[0]["loss"] == pytest.approx(
        -logp[np.arange(logp.shape[0]), ids[:, 1:].reshape(-1)].mean(), rel=1e-12)
    assert any("each layer's q·k × 1/its scale" in f for f in result.findings)
