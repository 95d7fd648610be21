"""What the saturation studies found, one plain sentence per rule, decided from the rows alone."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from sdpa_cli.framework.common import plain

Row = Mapping[str, Any]


def _num(x: float) -> str:
    """A value or an axis position in a sentence: d_k, n and multipliers stay whole."""
    return plain(x, whole=True)


def _move(a: float, b: float, se_a: float | None = None, se_b: float | None = None) -> str:
    """'rises', 'falls' or 'stays level': a change counts when it is beyond 3 combined
    standard errors (Monte Carlo values) or 1% (exact values)."""
    if se_a is not None and se_b is not None:
        margin = 3.0 * math.hypot(se_a, se_b)
    else:
        margin = 0.01 * max(abs(a), abs(b))
    if b > a + margin:
        return "rises"
    if b < a - margin:
        return "falls"
    return "stays level"


def _ends(rows: Sequence[Row], key: str, axis: str) -> tuple[Row, Row] | None:
    """The rows at the smallest and the largest value of `axis` that have `key` measured."""
    have = [r for r in rows if r.get(key) is not None and r.get(axis) is not None]
    if len(have) < 2:
        return None
    first, last = min(have, key=lambda r: r[axis]), max(have, key=lambda r: r[axis])
    return (first, last) if first[axis] != last[axis] else None


def _groups(rows: Sequence[Row], by: tuple[str, ...]) -> dict[tuple[Any, ...], list[Row]]:
    out: dict[tuple[Any, ...], list[Row]] = {}
    for r in rows:
        out.setdefault(tuple(r.get(k) for k in by), []).append(r)
    return out


def _sweep(rows: Sequence[Row], key: str, what: str, axis: str, axis_name: str,
           by: tuple[str, ...], label: str) -> list[str]:
    """For each group (a rule, a number of keys): how `key` moves along `axis`."""
    out = []
    for group, mine in _groups(rows, by).items():
        ends = _ends(mine, key, axis)
        if ends is None:
            continue
        a, b = ends
        se = key + "_se"
        move = _move(a[key], b[key], a.get(se), b.get(se))
        name = label.format(*group)
        out.append(f"{name}: {what} {move} from {_num(a[key])} at {_at(axis_name, a[axis])} "
                   f"to {_num(b[key])} at {_at(axis_name, b[axis])}.")
    return out


def _at(axis_name: str, value: float) -> str:
    return f"×{_num(value)}" if axis_name == "×" else f"{axis_name} = {_num(value)}"


def findings(source: str, rows: Sequence[Row], *, jacobian: bool,
             peaks: Sequence[Row] = ()) -> tuple[str, ...]:
    """The sentences printed after the table (`found:`) and written to table.md."""
    key = "frobenius" if jacobian else "max_prob"
    what = "‖J‖_F" if jacobian else "the largest weight"
    mean_what = "the mean " + what.removeprefix("the ")
    if source == "explicit":
        if rows and "scaling" in rows[0]:  # rules: along the multiplier if it varies
            swept = _sweep(rows, key, what, "scale", "×", ("scaling",), "{}")
            return tuple(swept or _rules_side_by_side(rows, key, what))
        return tuple(_sweep(rows, key, what, "scale", "×", (), "the scores"))
    if source == "leading":
        return tuple(_sweep(rows, key, what, "keys", "n", ("scaling",), "{}"))
    if source == "vectors":
        mean = "mean_frobenius" if jacobian else "mean_max_prob"
        many_dims = len({r["dim"] for r in rows}) > 1
        axis, name, by = (("dim", "d_k", ("scaling", "keys")) if many_dims
                          else ("keys", "n", ("scaling", "dim")))
        label = "{} (n = {})" if many_dims else "{} (d_k = {})"
        return tuple(_sweep(rows, mean, mean_what, axis, name, by, label))
    # N(0, s²) scores: along s for each n, and where ‖J‖_F peaks.
    mean = "mean_frobenius" if jacobian else "mean_max_prob"
    # where a peak was located, it says more than the two ends of the s grid do
    peaked = {p["keys"] for p in peaks}
    out = _sweep([r for r in rows if r["keys"] not in peaked], mean, mean_what, "score_std",
                 "s", ("keys",), "n = {}")
    for p in peaks:
        if p.get("at_edge"):
            out.append(f"n = {p['keys']}: ‖J‖_F is largest at the edge of the s grid "
                       f"(s = {_num(p['s_star'])}): no peak inside it.")
            continue
        se = f" ± {_num(p['s_star_se'])}" if p.get("s_star_se") is not None else ""
        edge = _num(math.sqrt(2 * math.log(p["keys"])))
        out.append(f"n = {p['keys']}: ‖J‖_F peaks at s* = {_num(p['s_star'])}{se} and "
                   f"falls on both sides (√(2 ln n) = {edge}).")
    return tuple(out)


def _rules_side_by_side(rows: Sequence[Row], key: str, what: str) -> list[str]:
    """Explicit scores under several rules at one multiplier: the rules side by side."""
    parts = [f"{r['scaling']} {_num(r[key])}" for r in rows if r.get(key) is not None]
    return [f"{what}: " + ", ".join(parts) + "."] if parts else []
