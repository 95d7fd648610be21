"""What a variance spec costs: random numbers drawn, memory held, bytes written."""

from __future__ import annotations

from typing import Any

from sdpa_cli.spec.limits import Cost, Loc, table_cost


def cost(spec: Any) -> Cost:
    """The variance study's estimate (its declaration's cost; refused over budget)."""
    per_pair = (lambda d: 3) if spec.method == "exact" else (lambda d: 2 * d)
    draws = sum(spec.pairs * per_pair(d) for d in spec.dims)
    rows = len(spec.dims) * len(spec.scalings)
    work, memory, output = table_cost(rows, draws)
    field: Loc = ("dims",) if len(spec.dims) * 2 > spec.pairs else ("pairs",)
    return Cost(work, memory, output, rows, field,
                "lower pairs or the number of dims, or use method: exact",
                ("dims",), "dims × scalings", "give fewer dims")
