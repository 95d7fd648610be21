"""Fit a table to the terminal: keep the columns that carry the story, never cut a number."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sdpa_cli.framework.result import Column

# Columns that name a row (d, n, scaling, …) are always kept; after them, columns are kept
# by priority (lower first), and columns without one by their position in the table.
KEY_FORMATS = ("int", "text")


@dataclass(frozen=True)
class Fitted:
    """The columns to show, in table order, and the headers of those left out."""

    shown: tuple[int, ...]
    hidden: tuple[str, ...]


def rank(columns: Sequence[Column]) -> list[int]:
    """Column indices, most important first."""
    def key(i: int) -> tuple[int, int, int]:
        c = columns[i]
        if c.priority is not None:
            return (0 if c.priority == 0 else 1, c.priority, i)
        return (0 if c.fmt in KEY_FORMATS and i < 3 else 1, 50, i)
    return sorted(range(len(columns)), key=key)


def fit(columns: Sequence[Column], width: int, measure: Callable[[Sequence[int]], int]
        ) -> Fitted:
    """Add columns in order of importance while the rendered table (measured by `measure`,
    given column indices in table order) fits in `width`, stopping at the first that does
    not. The most important column is always shown, so a table is never empty; a column
    that does not fit is left out whole, never truncated."""
    order = rank(columns)
    chosen: list[int] = [order[0]] if order else []
    for i in order[1:]:
        trial = sorted([*chosen, i])
        if measure(trial) > width:
            break  # a less important column never displaces a more important one
        chosen = trial
    hidden = tuple(columns[i].header for i in range(len(columns)) if i not in chosen)
    return Fitted(tuple(chosen), hidden)
