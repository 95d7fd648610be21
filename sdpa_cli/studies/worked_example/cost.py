"""What a worked-example spec costs, and the numbers its exact arithmetic can hold."""

from __future__ import annotations

from typing import Any

from sdpa_cli.errors import SpecFieldError
from sdpa_cli.spec.limits import Cost, Loc, table_cost


def cost(spec: Any) -> Cost:
    """Exact arithmetic on a page of numbers (at most spec.worked.MAX_ENTRIES per matrix):
    no budget to speak of, but every product, quotient and square it forms must stay a
    finite float64, so numbers whose arithmetic would overflow are refused here."""
    numbers = 0
    computed = 0
    for i, part in enumerate(spec.parts):
        _worked_part_range(part, ("parts", i))
        numbers += sum(len(_flat(getattr(part, name))) for name in NUMBER_FIELDS)
        computed += _attention_rows(part) if part.kind == "attention" else 0
    # a step row per number given, per entry of every matrix an attention part computes
    # (n × n scores, weights, … for n tokens: the given numbers alone undercounted 64 tokens
    # of width 1 by 235×), a few steps per part, and the audit's entries
    rows = numbers + computed + 4 * len(spec.parts) + len(spec.documented)
    work, memory, output = table_cost(rows, rows)
    return Cost(work, memory, output, rows, ("parts",), "give fewer or smaller parts",
                ("parts",), "every entry of every step", "give fewer tokens: each n × n step "
                "is n² rows")


def _attention_rows(part: Any) -> int:
    """The long-format rows one attention part writes beyond the numbers it was given: per
    path (the main one, the printed divisor's, embeddings·weights beside stated vectors),
    the n × n steps (scores, scaled scores, both weights; the four exp tables with
    exp_tables), the outputs, the projections and a dozen statistics."""
    def rows_of(m: Any) -> int:
        return len(m) if m else 0

    def width(*ms: Any) -> int:
        return max((len(m[0]) for m in ms if m), default=0)

    n_q = rows_of(part.q) or rows_of(part.embeddings) or rows_of(part.scores)
    n_k = rows_of(part.k) or rows_of(part.embeddings) or width(part.scores)
    d_k = width(part.q, part.k, part.w_q, part.w_k)  # 0 when the scores are given
    d_v = width(part.v, part.w_v)  # 0 without values: no outputs
    square = (4 + (4 if part.exp_tables else 0)) * n_q * n_k
    per_path = square + (n_q + n_k) * d_k + 3 * n_q * d_v + 12
    stated = part.q is not None or part.k is not None
    weights = part.embeddings is not None and part.w_q is not None
    paths = 1 + (not isinstance(part.scale, str)) + (stated and weights)
    return paths * per_path


# Worked examples square their numbers (variances) and sum up to 4096 products of two:
# with every intermediate within ±1e150, squares and sums stay far inside float64.
WORKED_RANGE = 1e150


# The fields of a part that hold numbers (matrices or lists).
NUMBER_FIELDS = ("embeddings", "w_q", "w_k", "w_v", "q", "k", "v", "scores", "values",
                 "dims", "variances", "factors")


def _flat(m: Any) -> list[float]:
    if m is None:
        return []
    return [abs(x) for row in m for x in (row if isinstance(row, list) else [row])]


def _largest(m: Any) -> float:
    return max((x for x in _flat(m) if x != float("inf")), default=0.0)


def _worked_part_range(part: Any, at: Loc) -> None:
    def refuse(name: str, what: str) -> None:
        raise SpecFieldError((*at, name), f"{what} beyond ±{WORKED_RANGE:.0e}, where the "
                             "example's products and squares would overflow float64; "
                             "use smaller numbers")

    if part.kind == "variance" and part.values is not None:
        top = _largest(part.values)
        if top > WORKED_RANGE:
            refuse("values", "values reach")
        if part.divisor is not None and top / part.divisor > WORKED_RANGE:
            refuse("divisor", "values ÷ divisor reach")
    elif part.kind == "scaling-arithmetic":
        for name in ("variances", "factors"):
            if _largest(getattr(part, name)) > WORKED_RANGE:
                refuse(name, f"{name} reach")
        # the printed factor squared times the variance: 1e150² × 1e150 overflowed to inf
        bound = _largest(part.factors) ** 2 * _largest(part.variances)
        if bound > WORKED_RANGE:
            reach = f"{bound:.2g}" if bound < float("inf") else "past float64's largest"
            refuse("factors", f"(factor)² × variance can reach {reach},")
        # every variance is divided by the first: one below 1e-150 makes the ratios overflow
        # (1e150 / 5e-324 is past float64's largest)
        small = [v for v in _flat(part.variances) if 0 < v < 1 / WORKED_RANGE]
        if small:
            raise SpecFieldError((*at, "variances"), f"a variance of {min(small):.3g} is "
                                 f"below {1 / WORKED_RANGE:.0e}: the ratios Var(d)/Var("
                                 f"{part.dims[0] if part.dims else 1}) would overflow or lose "
                                 "every digit in float64; use larger numbers (or 0)")
        # a factor whose square underflows makes its scaled variance exactly 0 (5e-324² = 0)
        tiny = [f for f in _flat(part.factors) if 0 < f < 1 / WORKED_RANGE]
        if tiny:
            raise SpecFieldError((*at, "factors"), f"a factor of {min(tiny):.3g} is below "
                                 f"{1 / WORKED_RANGE:.0e}: its square underflows float64, so "
                                 "the scaled variance it gives would be exactly 0; use a larger "
                                 "factor (or 0)")
    elif part.kind == "attention":
        products = [("embeddings", "w_q"), ("embeddings", "w_k"), ("embeddings", "w_v"),
                    ("q", "k")]
        score = _largest(part.scores)
        if score > WORKED_RANGE:
            refuse("scores", "scores reach")
        for a, b in products:
            ma, mb = getattr(part, a), getattr(part, b)
            if ma is None or mb is None:
                continue
            width = max(len(row) for row in ma)
            bound = _largest(ma) * _largest(mb) * width
            if bound > WORKED_RANGE:
                refuse(b, f"products of {a} and {b} can reach {bound:.2g},")
            if (a, b) == ("q", "k"):
                score = max(score, bound)
        d_k = part.d_k or (max(len(row) for row in part.k) if part.k else 1)
        divisor = d_k ** 0.5 if part.scale == "sqrt" else float(part.scale)
        if score / divisor > WORKED_RANGE:
            refuse("scale", f"scores ÷ {divisor:.3g} reach")


# Timing: each attention part draws a weights figure, WORKED_PART seconds (fitted with the
# study's rate; changelog 2026-11-26); its cost estimate counts numbers, not figures.
WORKED_PART = 0.15


def figure_seconds(spec: Any) -> float:
    """Seconds the weights figures add to a spec's estimate."""
    attention = sum(getattr(p, "kind", "") == "attention" for p in spec.parts)
    return WORKED_PART * int(attention)
