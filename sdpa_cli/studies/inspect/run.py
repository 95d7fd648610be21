"""Study: a real checkpoint's attention on real text, per layer and head, beside other rules."""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from sdpa_cli.framework.audit import Lookup, find_rows
from sdpa_cli.framework.common import assemble, skipped
from sdpa_cli.framework.context import SERIAL, RunContext
from sdpa_cli.framework.result import Check, Result, Table, as_row
from sdpa_cli.io.digest import input_sha256
from sdpa_cli.numerics.order import median
from sdpa_cli.spec.common import Documented
from sdpa_cli.studies.inspect import interventions
from sdpa_cli.studies.inspect.checkpoint import Weights
from sdpa_cli.studies.inspect.figures_data import figures
from sdpa_cli.studies.inspect.findings import (
    SELECTORS,
    SUMMARIES,
    expect,
    findings,
    layer_rows,
    pattern,
    summary_quantity,
    within_findings,
)
from sdpa_cli.studies.inspect.findings_heads import (
    bound_findings,
    floor_check,
    head_findings,
    prenorm_findings,
    residual_findings,
    sink_findings,
    summary_rows,
)
from sdpa_cli.studies.inspect.heads import Induction, induction_tokens
from sdpa_cli.studies.inspect.inputs import Inputs, Skipped, prepare
from sdpa_cli.studies.inspect.interventions import Capture, Interventions
from sdpa_cli.studies.inspect.measure import Layer, layer_spectra, measure_layer, own_rule
from sdpa_cli.studies.inspect.models.common import LayerOut, init_reader, softmax_rows
from sdpa_cli.studies.inspect.models.qkbound import Spectra
from sdpa_cli.studies.inspect.models.stats import head_scores as _scores
from sdpa_cli.studies.inspect.models.tensormap import Mapped
from sdpa_cli.studies.inspect.models.threads import blas_threads
from sdpa_cli.studies.inspect.rows import (
    FIELDS,
    HEAD_COLUMNS,
    INTERVENTION_COLUMNS,
    LAYER_COLUMNS,
    RESIDUAL_COLUMNS,
    SUMMARY_COLUMNS,
    HeadRow,
    ResidualRow,
)
from sdpa_cli.studies.inspect.spec import InspectSpec
from sdpa_cli.studies.inspect.text import default_paths

PICTURE_MAX = 64  # tokens in the attention picture (labels stay readable)
Row = Mapping[str, Any]


def rules_of(spec: InspectSpec) -> list[tuple[str, Any]]:
    return [("model", None), *((s.label, s) for s in spec.scalings)]


def plan_rows(spec: InspectSpec) -> list[dict[str, Any]]:
    """Row keys without running (layers and heads unknown until the checkpoint is read)."""
    kinds = ["trained", "init"] if spec.weights == "init" else ["trained"]
    return [{"weights": w, "seq_len": n, "scaling": label} for w in kinds
            for n in spec.seq_len for label, _ in rules_of(spec)]


def documented_problem(spec: InspectSpec, entry: Documented) -> str | None:
    """An entry names a head field or a summary over the heads it selects (SUMMARIES), and
    its row selects weights, seq_len and scaling the run will have (layer, head optional)."""
    name = entry.quantity
    if interventions.quantity(name):
        return interventions.problem(spec, entry)
    if summary_quantity(name) is None and name not in FIELDS:
        return (f"no quantity {name!r}; one of "
                f"{', '.join((*FIELDS, *SUMMARIES, *interventions.QUANTITIES))}")
    unknown = sorted(set(entry.row) - set(SELECTORS))
    if unknown:
        return f"row key {unknown[0]!r} is not one of {', '.join(SELECTORS)}"
    planned = {k: v for k, v in entry.row.items() if k not in ("layer", "head")}
    if not find_rows(plan_rows(spec), planned):
        return "its row selects nothing this spec will run (check weights, seq_len, scaling)"
    return None


def run(spec: InspectSpec, ctx: RunContext = SERIAL) -> Result:
    got = prepare(spec)
    if isinstance(got, Skipped):
        return _skipped(spec, got)
    heads: list[HeadRow] = []
    residual: list[ResidualRow] = []
    hist: dict[tuple[str, int, int], list[int]] = {}
    picture: dict[str, Any] = {}
    kinds = ["trained", "init"] if spec.weights == "init" else ["trained"]
    layer_count = got.ckpt.shape[0]
    scale = interventions.unmeasured(spec, got.ckpt)
    cap = Capture.of(spec, layer_count, spec.sequences) if \
        interventions.wanted(spec) and scale is None else None
    if ctx.tick is not None:  # progress: one task per (weights, length) forward pass, per
        # changed forward, and the pass over the LM head
        ctx.tick(len(kinds) * len(spec.seq_len) + (
            interventions.planned(spec, layer_count) + 1 if cap is not None else 0), 0)
    rows_ = got.ckpt.tensors[got.ckpt.family.embedding].shape[0]
    induction = induction_tokens(spec, got.tok, rows_)
    for kind in kinds:  # weights that overflow float32: the "statistics finite" check says so
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            got_rows, got_scale = _measure(spec, got, kind, hist, picture, ctx, induction,
                                           residual, cap if kind == "trained" else None)
        heads += got_rows
        scale = got_scale or scale
    rows = [as_row(r) for r in heads]
    layers = layer_rows(rows)
    checks = [Check("statistics finite", all(np.isfinite(r["score_std"]) for r in rows),
                    "every score std is a finite number")]
    floor = floor_check(rows)
    checks += [floor] if floor is not None else []
    notes = (f"Tokens: {got.text}; {spec.sequences} sequences per length.",
             f"Model: {got.ckpt.folder} ({got.ckpt.family.name} family, "
             f"model_type {got.ckpt.config.get('model_type')}); its own rule: "
             f"{own_rules(rows)}.",
             "Frozen row: ‖diag(p) − ppᵀ‖_F < 1e-3 (rows that see one key left out); "
             "saturated head: frozen share > ½.",
             "Induction: " + (induction.described if induction is not None else "not measured")
             + "; token ids of every sequence in results.json (tokens).",
             "Per length and rule, per layer, per head: table.md and results.json.")
    d = got.ckpt.shape[3]
    bos = got.tok.label(got.tok.prefix[0]) if got.tok.prefix else None
    result = assemble(
        spec, study="inspect", title=f"Attention in {spec.model}",
        table=Table("heads", "Per head and rule", HEAD_COLUMNS, tuple(rows), terminal=False),
        # in the files only: the terminal shows what was found (a 30-layer model's 60 layer
        # rows would push the found: lines off the screen)
        tables=[Table("summary", "Per length and rule: heads saturated, sinks, head types",
                      SUMMARY_COLUMNS, tuple(summary_rows(rows)), terminal=False),
                Table("layers", "Per layer: medians and ranges over heads", LAYER_COLUMNS,
                      tuple(layers), terminal=False),
                Table("residual", "Per layer: the largest residual activation and where it "
                      "sits (the last layer's after the final norm)", RESIDUAL_COLUMNS,
                      tuple(as_row(r) for r in residual), terminal=False),
                *_loss_tables(scale)],
        checks=checks, lookup=_lookup(rows, scale), theory=(
            "Independent q, k with unit components: q·k has std √d_k; ÷√d_k makes it 1.",),
        notes=notes,
        figures=figures(spec, rows, hist, picture, got.ckpt.shape,
                        [as_row(r) for r in scale.rows] if scale else ())
        if ctx.figures else (),
        # a run that changes the scale asks whether the model needs it: that answer first
        findings=(*interventions.findings(scale, d), *findings(spec, rows, got.ckpt.shape),
                  *within_findings(rows, spec.seq_len, d), _pattern(spec, rows, picture),
                  *head_findings(rows, spec.seq_len, induction),
                  *sink_findings(rows, spec.seq_len, _first_tokens(spec, got), bos),
                  *residual_findings([as_row(r) for r in residual], spec.seq_len, bos),
                  *prenorm_findings(rows, spec.seq_len), *bound_findings(rows, spec.seq_len, d)),
        expect=expect(),
    )
    # what was read, so a result names its checkpoint, tokenizer, text and tokens exactly
    extra = {"inputs": {**_digests(spec, got), "tensor_types": tensor_types(got)},
             "tokens": _tokens(spec, got, induction)}
    if scale is not None:
        extra["interventions"] = scale.to_json()
    return dataclasses.replace(result, extra=extra)


def _loss_tables(scale: Interventions | None) -> list[Table]:
    """The loss as trained and changed: a small table for the terminal (the changes of every
    layer and the layers that matter most), every layer unscaled alone in the files."""
    if scale is None or scale.loss is None:
        return []
    head = (f"Next-token loss (nats) with the attention scale changed: n = {scale.seq_len}, "
            f"{scale.positions} predicted tokens")
    out = [Table("interventions", head, INTERVENTION_COLUMNS,
                 tuple(interventions.terminal_rows(scale)))]
    by_layer = interventions.layer_rows(scale)
    if len(by_layer) > interventions.TOP:
        out.append(Table("interventions_by_layer", "Each layer's scale removed alone",
                         INTERVENTION_COLUMNS, tuple(by_layer), terminal=False))
    return out


def own_rules(rows: Sequence[Row]) -> str:
    """The model's own rule per layer, grouped: "÷√64 (all 30 layers)"."""
    by_rule: dict[str, list[int]] = {}
    for r in rows:
        if r["scaling"] == "model" and r["head"] == 0 and r["weights"] == "trained":
            layers = by_rule.setdefault(r["rule"], [])
            if r["layer"] not in layers:
                layers.append(r["layer"])
    if len(by_rule) == 1:
        (rule, layers), = by_rule.items()
        return f"{rule} (all {len(layers)} layers)"
    return "; ".join(f"{rule} (layers {', '.join(map(str, layers))})"
                     for rule, layers in by_rule.items())


def _first_tokens(spec: InspectSpec, got: Inputs) -> dict[int, list[str]]:
    return {n: [got.tok.label(int(i)) for i in got.ids[n][:, 0]] for n in spec.seq_len}


def tensor_types(got: Inputs) -> dict[str, dict[str, int]]:
    """How each family of tensors is stored (its name without the layer index): storage
    type (Q4_1, Q6_K, BF16, …) → how many tensors of that family."""
    out: dict[str, dict[str, int]] = {}
    for name, t in sorted(got.ckpt.tensors.items()):
        family = re.sub(r"(^|\.)(?:layers|layer|h)\.\d+\.", r"\1", name)
        kinds = out.setdefault(family, {})
        kinds[t.dtype] = kinds.get(t.dtype, 0) + 1
    return out


def _residual(kind: str, n: int, layer: int, lo: LayerOut, texts: int, got: Inputs
              ) -> ResidualRow:
    h = np.abs(lo.hidden[:texts])
    at = int(h.argmax())
    largest = float(h.flat[at])
    seq, pos, channel = (int(i) for i in np.unravel_index(at, h.shape))
    return ResidualRow(weights=kind, seq_len=n, layer=layer, largest=largest,
                       median_abs=median(h), sequence=seq, position=pos, channel=channel,
                       token=got.tok.label(int(got.ids[n][seq, pos])))


def _tokens(spec: InspectSpec, got: Inputs, induction: Induction | None) -> dict[str, Any]:
    """Every token id measured, per length and sequence, so another implementation can run
    the same tokens: the text's chunks (or the random control's) and the repeated sequences."""
    out: dict[str, Any] = {"text": {str(n): got.ids[n].tolist() for n in spec.seq_len}}
    if induction is not None:
        out["induction"] = {str(n): induction.ids[n].tolist() for n in spec.seq_len}
        out["induction_seed"] = induction.seed
    return out


def _pattern(spec: InspectSpec, rows: Sequence[Row], picture: Mapping[str, Any]) -> str:
    first = [r for r in rows if r["weights"] == "trained" and r["seq_len"] == min(spec.seq_len)
             and r["scaling"] == "model"]
    worst = max(first, key=lambda r: (r["frozen_share"], r["max_weight"]))
    return pattern(picture["peaks"][worst["layer"]][worst["head"]], worst["layer"],
                   worst["head"])


def _digests(spec: InspectSpec, got: Inputs) -> dict[str, Any]:
    files = got.ckpt.read_files()
    if not spec.random_tokens:
        files += [Path(t) for t in spec.text] or default_paths()
    return {"model": str(got.ckpt.folder), "text": got.text,
            "files": [{"path": str(f), "bytes": f.stat().st_size, "sha256": input_sha256(f)}
                      for f in files]}


def _measure(spec: InspectSpec, got: Inputs, kind: str, hist: dict[tuple[str, int, int],
             list[int]], picture: dict[str, Any], ctx: RunContext,
             induction: Induction | None, residual: list[ResidualRow], cap: Capture | None
             ) -> tuple[list[HeadRow], Interventions | None]:
    ckpt = got.ckpt
    dtype = np.float64 if spec.dtype == "float64" else np.float32
    std = float(ckpt.config.get("initializer_range", 0.02))
    qk = ckpt.table.qk
    # the bound reads the q and k weights the forward has just read, not a second copy
    held = [name for layer in qk or () for name in layer.names()]
    read = Weights(ckpt, held) if kind == "trained" else Mapped(
        ckpt.table, init_reader(ckpt.shapes(), std, spec.entropy), held)
    out: list[HeadRow] = []
    bounds: dict[int, dict[str, Spectra]] = {}  # per layer, computed at the first length
    # --workers cores: BLAS threads for the forward's large products (nothing else runs
    # then), or as many threads each measuring a group of heads with one BLAS thread (a
    # small product on several threads costs many times its CPU); never both at once. On a
    # cluster (an executor) other specs' threads share this process: BLAS stays at one.
    cores = ctx.workers if ctx.executor is None else 1
    pool = ThreadPoolExecutor(cores, thread_name_prefix="sdpa-heads") if cores > 1 else None
    last = ckpt.shape[0] - 1
    scale = None
    try:
        for n in spec.seq_len:
            ids = got.ids[n]
            rep = induction.ids[n] if induction is not None else None
            # text and repeated tokens in one batch: each layer's weights are read once
            batch = ids if rep is None else np.concatenate([ids, rep])
            layers = iter(ckpt.family.forward(ckpt.config, read, batch, dtype))
            for layer in itertools.count():
                with blas_threads(cores):
                    lo = next(layers, None)
                if lo is None:
                    break
                with blas_threads(1):
                    if layer not in bounds:
                        bounds[layer] = layer_spectra(qk[layer] if qk else None, read.kept)

                    def keep(counts: Any, key: tuple[str, int, int] = (kind, n, layer)) -> None:
                        hist[key] = counts.tolist()

                    at = Layer(kind, n, layer, lo, len(ids), rep)
                    residual.append(_residual(kind, n, layer, lo, len(ids), got))
                    # the histogram is drawn only: without figures it is not counted
                    out += measure_layer(at, rules_of(spec), bounds[layer],
                                         keep if ctx.figures else None, pool, cores)
                    if kind == "trained" and n == min(spec.seq_len):
                        _picture(picture, lo, n, got, ids)
                    if cap is not None:
                        cap.take(n, layer, lo, layer == last)
                del lo  # this layer's q, k and v go before the next layer's arrive
            if ctx.tick is not None:
                ctx.tick(0, 1)
        if cap is not None:
            tick = ctx.tick
            # the changed forwards are the forward's large products again: every core
            with blas_threads(cores):
                scale = interventions.measure(spec, ckpt, read, got.ids[cap.n], cap, dtype,
                                              (lambda: tick(0, 1)) if tick is not None else None)
            if tick is not None:  # the pass over the LM head, and any change planned but
                # not run (a scale factor that was the removal of the scale)
                run_ = len(scale.rows) - 1
                tick(0, 1 + interventions.planned(spec, ckpt.shape[0]) - run_)
    finally:
        if pool is not None:
            pool.shutdown()
        read.close()
    return out, scale


def _picture(picture: dict[str, Any], lo: LayerOut, n: int, got: Inputs, ids: Any) -> None:
    """The first sequence's weights under the model's own rule, every key in the softmax, then
    the first PICTURE_MAX queries and keys kept (the model's own weights, cropped), and where
    each of those rows peaks over all its keys. Only those rows are computed, and only copies
    are kept: a view would keep a layer's n × n array alive."""
    m = min(n, PICTURE_MAX)
    mask = lo.mask(n)
    rows = mask[:m] if mask is not None else None
    p = softmax_rows(_scores(lo.q[0, :, :m], lo.k[0], own_rule(lo), rows), rows)
    picture.setdefault("weights", []).append(np.ascontiguousarray(p[:, :, :m]))
    picture.setdefault("peaks", []).append(p.argmax(axis=-1))
    picture["tokens"] = [got.tok.label(i) for i in ids[0, :m]]
    picture["n"] = n


def _lookup(rows: Sequence[Row], scale: Interventions | None) -> Lookup:
    def lookup(entry: Documented, quantity: str) -> tuple[float | None, float | None]:
        if interventions.quantity(quantity):
            return interventions.lookup(scale, entry, quantity), None
        found = find_rows(rows, entry.row)
        if not found:
            return None, None
        summary = summary_quantity(quantity)
        if summary is not None:
            return summary(found), None
        if len(found) != 1:
            return None, None
        value = found[0].get(quantity)
        return (float(value) if isinstance(value, int | float) else None), None

    return lookup


def _skipped(spec: InspectSpec, why: Skipped) -> Result:
    checks = [Check("model present", False, why.reason)] if spec.require_models else []
    return skipped(spec, study="inspect", title=f"Attention in {spec.model}",
                   table=Table("heads", "Per head and rule", HEAD_COLUMNS, ()),
                   reason=why.reason, checks=checks)
