"""What a softmax-sweep or jacobian spec costs, and the scales it may use."""

from __future__ import annotations

from typing import Any

from sdpa_cli.errors import SpecFieldError
from sdpa_cli.spec.limits import (
    ADDITIVE_TRIAL_WORK,
    MAX_MEMORY,
    SCALE_RANGE,
    Cost,
    Loc,
    table_cost,
)


def _scale_in_range(spec: Any) -> None:
    source = spec.score_source
    if source == "explicit" and not spec.uses_rules:
        named = [(("scales", i), c, f"scale {c:g}") for i, c in enumerate(spec.scale_list)]
    else:
        dims = [spec.dim or 1] if source in ("explicit", "leading") else (spec.dim_list or [1])
        # logn's factor S·ln n needs n: the score count, or the largest key count
        n = len(spec.scores) if source == "explicit" else max(spec.key_list)
        named = [(("scalings", i), s.factor(d, n), f"{s.label} at d = {d} multiplies by "
                  f"{s.factor(d, n):g}; that")
                 for i, s in enumerate(spec.scalings) for d in dims]
    for loc, c, what in named:
        if not SCALE_RANGE[0] <= c <= SCALE_RANGE[1]:
            raise SpecFieldError(loc, f"{what} is outside [{SCALE_RANGE[0]:g}, "
                                 f"{SCALE_RANGE[1]:g}], where the scaled scores overflow or "
                                 "vanish (the weights there are already exactly one-hot or "
                                 "uniform)")


def cost(spec: Any) -> Cost:
    """softmax-sweep and jacobian: explicit scores, random vectors, or Gaussian scores."""
    source = spec.score_source
    if source != "gaussian":
        _scale_in_range(spec)
    if source == "leading":  # exact: a few numbers per (n, rule)
        rows = len(spec.key_list) * len(spec.scalings)
        work, memory, output = table_cost(rows, rows)
        return Cost(work, memory, output, rows, ("keys",), "give fewer keys", ("keys",),
                    "keys × scalings", "give fewer keys or scalings")
    if source == "explicit":
        n = len(spec.scores)
        rows = len(spec.scalings) if spec.uses_rules else len(spec.scale_list)
        # each row keeps the scaled scores and their weights: 2n numbers
        work, memory, output = table_cost(rows, rows * n * 200, entries=2 * n * rows)
        field: Loc = ("scalings",) if spec.uses_rules else ("scales",)
        return Cost(work, memory, output, rows, field, "give fewer scales or fewer scores",
                    field, "one per multiplier", f"give fewer {field[0]}")
    keys = spec.key_list
    if source == "vectors":
        h = spec.additive or 0  # additive scores: W₂ (h × d) and n keys per trial
        rows = len(spec.dim_list) * len(keys) * (len(spec.scalings) + (1 if h else 0))
        # additive scores draw W₂ (h × d) and form the n × h products kᵀW₂ᵀ for every
        # trial, one trial at a time (a Python loop: ADDITIVE_TRIAL_WORK each)
        draws = sum(spec.trials * (2 * n * d + n * n * (1 + len(spec.scalings))
                                   + (h * d * (1 + n) + ADDITIVE_TRIAL_WORK if h else 0))
                    for d in spec.dim_list for n in keys)
        # a block holds a few n × n score matrices and n × d vectors (float64); an additive
        # trial holds W₂ twice (drawn, then scaled) and three n × h arrays
        blocks = 8 * max(max(6 * n * n, 6 * n * d) for n in keys for d in spec.dim_list)
        weights = 8 * max(2 * h * d + 3 * n * h for n in keys for d in spec.dim_list)
        work, memory, output = table_cost(rows, draws, memory=max(blocks, weights))
        field = ("dims",) if spec.dims is not None else ("d_model",)
        lower, hint = ((("additive",), "lower additive, dims or keys")
                       if weights > MAX_MEMORY // 2 and weights > blocks
                       else (("trials",), "lower trials, keys or dims"))
        return Cost(work, memory, output, rows, lower, hint,
                    field, "dims × keys × scalings", "give fewer dims, keys or scalings")
    stds = spec.score_stds or []
    rows = len(keys) * len(stds)
    work, memory, output = table_cost(rows, spec.trials * sum(keys) * (1 + len(stds)))
    return Cost(work, memory, output, rows, ("trials",), "lower trials or keys",
                ("score_stds",), "keys × score_stds", "give fewer score_stds or keys")
