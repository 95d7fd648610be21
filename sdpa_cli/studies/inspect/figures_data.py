"""The data of the inspect figures, gathered from the rows (drawing is in figures.py)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sdpa_cli.framework.result import Figure
from sdpa_cli.studies.inspect.spec import InspectSpec

Row = Mapping[str, Any]
HEATMAP_FIELDS = (("score_std", "score std"), ("max_weight", "largest weight"),
                  ("frozen_share", "frozen share"))
TYPE_FIELDS = (("first_token_share", "mean weight on the first token"),
               ("prev_token", "previous-token score"), ("induction", "induction score"))


def _grid(rows: Sequence[Row], field: str, layers: int, heads: int) -> list[list[float]]:
    grid = np.full((layers, heads), np.nan)
    for r in rows:
        grid[r["layer"], r["head"]] = r[field]
    return grid.tolist()


def figures(spec: InspectSpec, rows: Sequence[Row], hist: Mapping[tuple[str, int, int],
            list[int]], picture: Mapping[str, Any], shape: tuple[int, int, int, int],
            scale: Sequence[Row] = ()) -> tuple[Figure, ...]:
    layers, heads, _, dim = shape
    n0 = sorted(spec.seq_len)[len(spec.seq_len) // 2]  # the middle length for the maps
    first = min(spec.seq_len)  # the attention picture: the shortest, so labels stay readable
    rules = [r for r in ("model", "none") if any(x["scaling"] == r for x in rows)]
    maps = {rule: {f: _grid([r for r in rows if r["weights"] == "trained" and
                             r["seq_len"] == n0 and r["scaling"] == rule], f, layers, heads)
                   for f, _ in HEATMAP_FIELDS} for rule in rules}
    edges = np.linspace(-10.0, 10.0, 101).tolist()
    pooled = {f"{w} n={n} layer {layer}": counts for (w, n, layer), counts in hist.items()
              if w == "trained" and n == n0}
    entropy = {}
    for layer in range(layers):
        entropy[f"layer {layer}"] = [float(np.median([r["entropy_ratio"] for r in rows
                                                      if r["weights"] == "trained" and
                                                      r["scaling"] == "model" and
                                                      r["layer"] == layer and r["seq_len"] == n
                                                      and r["entropy_ratio"] is not None]))
                                     for n in sorted(spec.seq_len)]
    model = [r for r in rows if r["weights"] == "trained" and r["seq_len"] == first
             and r["scaling"] == "model"]
    worst = max(model, key=lambda r: (r["frozen_share"], r["max_weight"]))
    weights = picture["weights"][worst["layer"]][worst["head"]]
    mid = [r for r in rows if r["weights"] == "trained" and r["seq_len"] == n0
           and r["scaling"] == "model"]
    types = {f: _grid([r for r in mid if r[f] is not None], f, layers, heads)
             for f, _ in TYPE_FIELDS}
    saturated = [[r["layer"], r["head"]] for r in mid if r["frozen_share"] > 0.5]
    count = f"{spec.sequences} sequence{'s' if spec.sequences > 1 else ''}"
    sizes = f"{spec.model}, d_k = {dim}, {count}"
    where = f"{spec.model}, d_k = {dim}, n = {n0}, {count}"
    # the entropy ratio versus n needs two lengths at least: one n is a column of dots
    versus_n = (Figure("entropy_vs_n", "inspect.entropy_vs_n", "Entropy ratio versus n (median "
                       "head per layer, the model's rule)",
                       {"n": sorted(spec.seq_len), "series": entropy, "where": sizes}),
                ) if len(spec.seq_len) > 1 else ()
    return (
        *_scale_loss(spec, scale, dim),
        Figure("heatmaps", "inspect.heatmaps", "Per head: score std, largest weight, frozen "
               "share, with the model's rule and without scaling",
               {"maps": maps, "fields": [list(f) for f in HEATMAP_FIELDS], "where": where}),
        Figure("pooled_scores", "inspect.pooled", "Pooled scaled scores per layer against "
               "N(0, 1)", {"edges": edges, "counts": pooled, "where": where}),
        *versus_n,
        Figure("head_types", "inspect.head_types", "Per head, the model's rule: sinks, "
               "previous-token and induction heads; x marks a saturated head (frozen share > ½)",
               {"maps": types, "fields": [list(f) for f in TYPE_FIELDS],
                "saturated": saturated, "where": where},
               caption="A saturated head (x) in a bright cell of one panel is a sink, a "
               "previous-token or an induction head; TransformerLens's scores divide by every "
               "row, so an induction head on a sequence repeated once scores at most about ½."),
        Figure("attention_picture", "inspect.picture",
               f"Most saturated head: layer {worst['layer']} head {worst['head']} (frozen "
               f"{worst['frozen_share']:.0%})",
               {"weights": np.asarray(weights).tolist(), "tokens": picture["tokens"],
                "where": _picture_where(spec.model, len(picture["tokens"]), picture["n"])}),
    )


def _scale_loss(spec: InspectSpec, scale: Sequence[Row], dim: int) -> tuple[Figure, ...]:
    """The loss as the scale changes: every layer's q·k times each factor, and each layer's
    scale removed alone (present only when a run changed the scale)."""
    every = sorted({(r["factor"], r["loss_increase"]) for r in scale
                    if r["layer"] == "all" and r["factor"] is not None} | {(1.0, 0.0)})
    single = sorted((r["layer"], r["loss_increase"]) for r in scale
                    if isinstance(r["layer"], int))
    if len(every) == 1 and not single:
        return ()
    return (Figure("scale_loss", "inspect.scale_loss", "The model's next-token loss with its "
                   "attention scale changed, against the model as trained",
                   {"factors": [f for f, _ in every], "every": [x for _, x in every],
                    "layers": [layer for layer, _ in single], "single": [x for _, x in single],
                    "where": f"{spec.model}, d_k = {dim}"},
                   caption="Left: q·k multiplied by a factor in every layer (×1 is the model as "
                   f"trained; ×{math.sqrt(dim):g} removes ÷√d_k). Right: the scale removed from "
                   "one layer at a time, the others as trained."),)


def _picture_where(model: str, m: int, n: int) -> str:
    if m == n:
        return f"{model}, first sequence, n = {n}"
    return (f"{model}, first sequence: the first {m} queries and keys of n = {n} (each row's "
            "softmax over all its keys, cropped)")
