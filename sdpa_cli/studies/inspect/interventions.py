"""The model's next-token loss, and the same with its attention scale changed: what to run,
what the forward keeps for it, and its rows, results.json object, findings and lookups."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sdpa_cli.framework.audit import find_rows
from sdpa_cli.framework.common import plain
from sdpa_cli.framework.result import as_row
from sdpa_cli.framework.wording import move
from sdpa_cli.spec.common import Documented
from sdpa_cli.studies.inspect.checkpoint import FLOATS, Checkpoint, Tensor, bad
from sdpa_cli.studies.inspect.models import nexttoken, rescale
from sdpa_cli.studies.inspect.models.common import Array, ConfigError, LayerOut, Reader, real, rows
from sdpa_cli.studies.inspect.rows import InterventionRow
from sdpa_cli.studies.inspect.spec import InspectSpec

ALL, NONE = "all", "none"  # the `layer` of a change of every layer, and of the unchanged model
TOP = 3  # the layers named in the findings and the terminal's table
ONE_ROW = ("loss", "kl", "loss_increase", "perplexity_ratio")
OVER_LAYERS = {f"{how}_layer_{what}": (how, what) for how in ("max", "median", "min")
               for what in ("loss_increase", "perplexity_ratio", "kl")}
SELECTORS = ("layer", "factor")
KEEP_BYTES = 1 << 30  # the changed forwards keep up to this much of the weights they read
QUANTITIES = (*ONE_ROW, *OVER_LAYERS)


def wanted(spec: InspectSpec) -> bool:
    return spec.loss or spec.interventions


def head_name(ckpt: Checkpoint) -> str:
    """The LM head as the forward's reader names it: an untied lm_head when the checkpoint
    has one, else the tied embedding."""
    head = ckpt.table.head
    if head is not None and ckpt.table.target(head).source.name in ckpt.tensors:
        return head
    return ckpt.table.embedding


def head_tensor(ckpt: Checkpoint) -> Tensor:
    """Where the LM head is stored (its shape, type and file)."""
    return ckpt.tensors[ckpt.table.target(head_name(ckpt)).source.name]


def final_cap(ckpt: Checkpoint) -> float | None:
    """Gemma 2's final soft-cap on the logits (transformers' default 30 when the config says
    nothing); None for the other families or when the config sets null."""
    config = ckpt.config
    if ckpt.family.name == "gemma2" and "final_logit_softcapping" not in config:
        return 30.0
    if config.get("final_logit_softcapping") is None:
        return None
    return real(config, "final_logit_softcapping")


def check(spec: InspectSpec, ckpt: Checkpoint) -> None:
    """Before anything runs: the layers named exist; the LM head is a float matrix of the
    embedding's shape; a final soft-cap, when set, is a positive number."""
    layers = ckpt.shape[0]
    for i, layer in enumerate(spec.unscale_layers):
        if isinstance(layer, int) and layer >= layers:
            raise bad(f"layer {layer} does not exist: the model has layers 0…{layers - 1}",
                      None, f"unscale_layers[{i}]")
    if not wanted(spec) or not ckpt.family.causal:
        return
    name, emb = head_name(ckpt), ckpt.tensors[ckpt.family.embedding]
    t = head_tensor(ckpt)
    if len(t.shape) != 2 or t.shape[1] != emb.shape[1] or t.shape[0] < emb.shape[0]:
        raise bad(f"the LM head {name!r} has shape {list(t.shape)}, expected "
                  f"[{emb.shape[0]}, {emb.shape[1]}] (the embedding's)", t.file)
    if t.dtype not in FLOATS:
        raise bad(f"the LM head {name!r} is {t.dtype}; sdpa reads float tensors only", t.file)
    try:
        final_cap(ckpt)
    except ConfigError as e:
        raise bad(str(e), ckpt.folder, e.field) from None


@dataclass(frozen=True)
class Change:
    layer: int | str
    factor: float | None
    factors: dict[int, float]


def changes(spec: InspectSpec, scales: Sequence[float]) -> list[Change]:
    """The scale factors on every layer, the scale removed everywhere (1/scale per layer), and
    each layer named (or every layer) unscaled alone, in that order."""
    layers = len(scales)
    out = [Change(ALL, f, dict.fromkeys(range(layers), f)) for f in spec.scale_factors]
    undo = {i: 1.0 / s for i, s in enumerate(scales)}
    everywhere = removal(scales)
    if everywhere is None or everywhere not in spec.scale_factors:
        out.append(Change(ALL, everywhere, undo))
    out += [Change(i, undo[i], {i: undo[i]}) for i in _named(spec, layers)]
    return out


def removal(scales: Sequence[float]) -> float | None:
    """The factor that removes the scale from every layer (1/scale), None when the layers'
    scales differ (GPT-2's ÷(i + 1) rule): then each layer takes its own."""
    undo = {1.0 / s for s in scales}
    return undo.pop() if len(undo) == 1 else None


def planned(spec: InspectSpec, layers: int) -> int:
    """How many changed forwards a run makes (for progress: at most this many)."""
    if not spec.interventions:
        return 0
    return len(spec.scale_factors) + 1 + len(_named(spec, layers))


def _named(spec: InspectSpec, layers: int) -> list[int]:
    return list(range(layers)) if "all" in spec.unscale_layers else \
        [i for i in spec.unscale_layers if isinstance(i, int)]


def work(spec: InspectSpec, ckpt: Checkpoint, params: int) -> int:
    """Multiply-adds of the loss and the changes: each changed forward from the layer it
    first touches, and every model's logits over the whole vocabulary."""
    if not wanted(spec) or unmeasured(spec, ckpt) is not None:
        return 0
    layers, n, s = ckpt.shape[0], max(spec.seq_len), spec.sequences
    runs = (len(spec.scale_factors) + 1) * layers + sum(layers - i for i in _named(spec, layers))
    vocab, width = head_tensor(ckpt).shape[:2]
    models = 1 + (planned(spec, layers) if spec.interventions else 0)
    emb, head = ckpt.tensors[ckpt.family.embedding], head_tensor(ckpt)
    by_rows = math.prod(emb.shape) + (math.prod(head.shape) if head is not emb else 0)
    per_layer = (params - by_rows) // layers  # the embedding and head are read by rows
    return (2 * s * n * per_layer * runs if spec.interventions else 0) + \
        2 * models * s * (n - 1) * vocab * width


def memory(spec: InspectSpec, ckpt: Checkpoint, item: int) -> int:
    """Bytes the loss and the changes hold: the residual stream kept at each layer a change
    resumes from, every changed model's final hidden states, a block of logits per model."""
    if not wanted(spec) or unmeasured(spec, ckpt) is not None:
        return 0
    layers, n, s = ckpt.shape[0], max(spec.seq_len), spec.sequences
    width = head_tensor(ckpt).shape[-1]
    kept = len([i for i in _named(spec, layers) if i > 0]) * s * n * width * item
    models = 1 + (planned(spec, layers) if spec.interventions else 0)
    return kept + models * s * n * width * item + 3 * nexttoken.BLOCK_BYTES


def kept_weights(spec: InspectSpec, ckpt: Checkpoint) -> int:
    """Bytes of the weights the changed forwards keep (Kept): up to KEEP_BYTES."""
    if not spec.interventions or unmeasured(spec, ckpt) is not None:
        return 0
    return min(KEEP_BYTES, sum(4 * math.prod(t.shape) for t in ckpt.tensors.values()))


@dataclass
class Capture:
    """What the forward of the trained weights at the longest length keeps for the loss and
    the changes: each layer's scale, the input residual stream of each layer a change resumes
    from (text sequences only: layers × sequences × n × width floats at most) and the final
    hidden states."""

    n: int
    texts: int
    need: set[int]
    scales: dict[int, float] = field(default_factory=dict)
    inputs: dict[int, Array] = field(default_factory=dict)
    final: Array | None = None

    @classmethod
    def of(cls, spec: InspectSpec, layers: int, texts: int) -> Capture:
        return cls(max(spec.seq_len), texts, {i for i in _named(spec, layers) if i > 0})

    def take(self, n: int, layer: int, lo: LayerOut, last: bool) -> None:
        if n != self.n:
            return
        self.scales[layer] = lo.scale
        if layer + 1 in self.need:  # copies: the batch's arrays (with induction) are freed
            self.inputs[layer + 1] = lo.hidden[:self.texts].copy()
        if last:
            self.final = lo.hidden[:self.texts].copy()


@dataclass(frozen=True)
class Interventions:
    """The loss and each change's loss and KL, on `positions` predicted tokens (sequences × (n
    − 1)); `loss` None, with `reason`, for an encoder or random tokens."""

    loss: float | None
    rows: tuple[InterventionRow, ...] = ()
    seq_len: int = 0
    sequences: int = 0
    positions: int = 0
    scales: tuple[float, ...] = ()  # each layer's own scale, as trained
    reason: str | None = None

    @property
    def removed(self) -> InterventionRow | None:
        """The row of the scale removed from every layer."""
        factor = removal(self.scales) if self.scales else None
        return next((r for r in self.rows if r.layer == ALL and r.factor == factor), None)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"loss": self.loss}
        if self.reason is not None:
            out["reason"] = self.reason
        else:
            out.update(seq_len=self.seq_len, sequences=self.sequences,
                       positions=self.positions, scales=list(self.scales))
        out["rows"] = [{"layer": r.layer, "factor": r.factor, "loss": r.loss, "kl": r.kl}
                       for r in self.rows if r.layer != NONE]
        return out


def unmeasured(spec: InspectSpec, ckpt: Checkpoint) -> Interventions | None:
    """No loss, and why, when one was asked for and cannot be measured: an encoder predicts
    no next token; uniform random tokens (--random-tokens) are no text to predict."""
    if not wanted(spec):
        return None
    if not ckpt.family.causal:
        return Interventions(None, reason=f"{ckpt.family.name} is an encoder: it predicts no "
                             "next token, so it has no next-token loss and no change of scale "
                             "is measured by one")
    if spec.random_tokens:
        return Interventions(None, reason="the tokens are uniform random ids (random_tokens), "
                             "no text whose next token the model could predict")
    return None


def measure(spec: InspectSpec, ckpt: Checkpoint, read: Reader, ids: NDArray[np.int64],
            cap: Capture, dtype: type, done: Callable[[], None] | None = None
            ) -> Interventions:
    """The loss of the text `ids` (the forward's final hidden states in `cap`) and of every
    change, each resumed from the residual stream `cap` kept; one pass over the LM head."""
    if cap.final is None:
        raise ValueError("the forward kept no final hidden state")
    scales = [cap.scales[i] for i in range(len(cap.scales))]
    todo = changes(spec, scales) if spec.interventions else []
    finals = [nexttoken.predicting(h, ids)[0] for h in rescale.changed(
        ckpt.family.forward, ckpt.config, read, ids, dtype, cap.inputs,
        [c.factors for c in todo], KEEP_BYTES, done)]
    base, targets = nexttoken.predicting(cap.final, ids)
    name = head_name(ckpt)
    vocab = head_tensor(ckpt).shape[0]

    def head(start: int, stop: int) -> Array:
        return rows(read, name, np.arange(start, stop), dtype)

    got = nexttoken.next_token(base, finals, targets, head, vocab, final_cap(ckpt))
    loss = float(got.loss.mean())
    out = [_row(NONE, 1.0, loss, loss, 0.0)]
    out += [_row(c.layer, c.factor, float(x.mean()), loss, float(kl.mean()))
            for c, x, kl in zip(todo, got.changed_loss, got.kl, strict=True)]
    return Interventions(loss, tuple(out), ids.shape[1], ids.shape[0], targets.size,
                         tuple(scales))


def _row(layer: int | str, factor: float | None, loss: float, base: float,
         kl: float) -> InterventionRow:
    return InterventionRow(layer=layer, factor=factor, loss=loss, loss_increase=loss - base,
                           perplexity_ratio=nexttoken.perplexity_ratio(loss, base), kl=kl)


def single(result: Interventions) -> list[InterventionRow]:
    return [r for r in result.rows if isinstance(r.layer, int)]


def terminal_rows(result: Interventions) -> list[dict[str, Any]]:
    """The unchanged model, every change of all layers, and the TOP layers whose unscaling
    raises the loss most."""
    top = sorted(single(result), key=lambda r: -r.loss_increase)[:TOP]
    return [as_row(r) for r in result.rows if not isinstance(r.layer, int)] + \
        [as_row(r) for r in top]


def layer_rows(result: Interventions) -> list[dict[str, Any]]:
    return [as_row(r) for r in single(result)]


def findings(result: Interventions | None, d: int) -> tuple[str, ...]:
    if result is None:
        return ()
    if result.loss is None:
        return (f"No next-token loss: {result.reason}.",)
    base = result.loss
    where = (f"{result.positions:,} predicted tokens ({result.sequences} sequences of "
             f"{result.seq_len})")
    out = [f"The model's next-token loss on the text is {base:.3f} nats (perplexity "
           f"{plain(math.exp(base))}) over {where}."]
    removed = result.removed
    if removed is not None:
        r = removed
        how = f"q·k × {plain(r.factor, whole=True)} in every layer" if r.factor is not None else \
            "each layer's q·k × 1/its scale"
        word = move(base, r.loss)
        verdict = ("depends on its scale" if word.material else
                   f"hardly depends on its scale (the loss moves {word.percent})")
        out.append(f"With the scale removed everywhere ({how}, d_k = {d}) the loss is "
                   f"{r.loss:.3f} nats (perplexity {plain(math.exp(min(r.loss, 700)))}, "
                   f"{plain(r.perplexity_ratio)}× the trained model's; KL from its "
                   f"predictions {plain(r.kl)} nats): the trained model {verdict}.")
    scaled = [r for r in result.rows if r.layer == ALL and r is not removed]
    if scaled:
        out.append("Every layer's scale × " + "; × ".join(
            f"{plain(r.factor or 0, whole=True)}: loss {r.loss:.3f} ({r.loss_increase:+.3f} "
            f"nats, KL {plain(r.kl)})" for r in scaled) + ".")
    layers = single(result)
    if layers:
        top = sorted(layers, key=lambda r: -r.loss_increase)[:TOP]
        med = float(np.median([r.loss_increase for r in layers]))
        material = sum(move(base, r.loss).material and r.loss > base for r in layers)
        out.append(f"Unscaled one layer at a time ({len(layers)} layer"
                   f"{'s' if len(layers) != 1 else ''}), the loss rises most for " +
                   ", ".join(f"layer {r.layer} ({r.loss_increase:+.3f} nats, KL "
                             f"{plain(r.kl)})" for r in top) +
                   f"; the median layer {med:+.3f} nats; {material} of {len(layers)} raise "
                   "it by 10% or more.")
    return tuple(out)


def quantity(name: str) -> bool:
    return name in ONE_ROW or name in OVER_LAYERS


def problem(spec: InspectSpec, entry: Documented) -> str | None:
    """Why an entry naming a loss quantity cannot be looked up in this spec's run."""
    unknown = sorted(set(entry.row) - set(SELECTORS))
    if unknown:
        return (f"row key {unknown[0]!r} is not one of {', '.join(SELECTORS)} (for "
                f"{entry.quantity})")
    if not wanted(spec):
        return "this spec measures no loss (give loss: true, scale_factors or unscale_layers)"
    if entry.quantity in OVER_LAYERS and not spec.unscale_layers:
        return f"{entry.quantity} is over unscaled layers: give unscale_layers"
    return None


def lookup(result: Interventions | None, entry: Documented, name: str) -> float | None:
    """A loss quantity: of one row (`row: {}` is the unchanged model), or a summary over the
    single-layer rows the row selects."""
    if result is None or result.loss is None:
        return None
    if name in OVER_LAYERS:
        how, what = OVER_LAYERS[name]
        found = find_rows(layer_rows(result), entry.row)
        vals = [float(r[what]) for r in found]
        if not vals:
            return None
        return max(vals) if how == "max" else min(vals) if how == "min" else \
            float(np.median(vals))
    table = [as_row(r) for r in result.rows]
    found = find_rows(table, entry.row or {"layer": NONE})
    return float(found[0][name]) if len(found) == 1 else None
