"""Numbers, matrices and dot-product expansions as a teacher writes them on a board.

A worked example's steps are content the study computes (the issue asks for every entry of
QKᵀ as "2×1 + 1×0 + 3×2 = 8"), so they are composed here, in the study layer, as plain
lines; the report layer only frames them (rich panel, Markdown block, HTML <pre>). Table
cells elsewhere use report.formatting instead.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np


def num(x: float | None) -> str:
    """A short exact-looking number: 8, 0.14, 4.6188, -15; 'overflow' for ±inf."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if math.isinf(x):
        return "overflow"
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.6g}"


def cell(x: float, whole: bool = True) -> str:
    """A matrix cell: four decimals, tiny or huge values in e-notation; integers as such when
    `whole` (a matrix of integers reads as the document writes it)."""
    if math.isinf(x):
        return "overflow"
    if whole and float(x).is_integer() and abs(x) < 1e12:
        return str(int(x))
    if x == 0 or 1e-4 <= abs(x) < 1e7:
        return f"{x:.4f}"
    return f"{x:.3e}"


def cells(xs: Iterable[float]) -> list[str]:
    """Cells of one matrix or vector: integers only if every finite entry is one."""
    values = [float(x) for x in xs]
    whole = all(x.is_integer() for x in values if math.isfinite(x))
    return [cell(x, whole) for x in values]


def _operand(x: float) -> str:
    text = num(x)
    return f"({text})" if text.startswith("-") else text


def expansion(a: np.ndarray, b: np.ndarray, total: float, limit: int = 12) -> str:
    """'2×1 + 1×0 + 3×2 = 8' (long sums keep their first terms and say how many)."""
    terms = [f"{_operand(x)}×{_operand(y)}" for x, y in zip(a, b, strict=True)]
    if len(terms) > limit:
        terms = [*terms[:3], f"… ({len(a)} terms)"]
    return " + ".join(terms) + f" = {num(total)}"


def matrix_lines(m: np.ndarray, rows: Sequence[str], cols: Sequence[str],
                 extra: tuple[str, np.ndarray] | None = None) -> list[str]:
    """A labelled, right-aligned matrix (with an optional last column such as row sums)."""
    m = np.atleast_2d(m)
    flat = cells(m.ravel())
    body = [flat[r * m.shape[1]:(r + 1) * m.shape[1]] for r in range(m.shape[0])]
    head = list(cols)
    if extra is not None:
        head.append(extra[0])
        for r, x in zip(body, cells(extra[1]), strict=True):
            r.append(x)
    label_w = max(len(r) for r in rows)
    widths = [max(len(head[c]), *(len(r[c]) for r in body)) for c in range(len(head))]
    lines = [" " * label_w + "  " + "  ".join(h.rjust(w) for h, w in zip(head, widths,
                                                                            strict=True))]
    for label, r in zip(rows, body, strict=True):
        lines.append(label.ljust(label_w) + "  " + "  ".join(
            x.rjust(w) for x, w in zip(r, widths, strict=True)))
    return lines


def vector(xs: Iterable[float]) -> str:
    return "[" + ", ".join(cells(xs)) + "]"
