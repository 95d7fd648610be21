"""Arithmetic as a document wrote it ("6.89 / 3", "(0.707)**2 * 17.33"): its value, and how
far the rounding of its printed numbers can move it."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping, Sequence


def spread_of(fn: Callable[[Sequence[float]], float], values: Sequence[float],
              units: Sequence[float]) -> float:
    """Σ |f(x + u_i/2 e_i) − f(x)|: the first-order reach of the inputs' rounding."""
    base = fn(values)
    total = 0.0
    for i, u in enumerate(units):
        moved = list(values)
        moved[i] += u / 2.0
        try:
            total += abs(fn(moved) - base)
        except (ValueError, ZeroDivisionError, OverflowError):
            return math.inf
    return total


_OPS: Mapping[type, Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.Pow: operator.pow,
}
_FUNCS: Mapping[str, Callable[[float], float]] = {"sqrt": math.sqrt, "exp": math.exp,
                                                  "ln": math.log}


def formula_problem(text: str) -> str | None:
    """Why a `replay:` formula cannot be read (None when it can)."""
    try:
        evaluate(text)
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError) as exc:
        return str(exc) or "not arithmetic"
    return None


def evaluate(text: str) -> tuple[float, float]:
    """A `replay:` formula's value (numbers, + − × ÷ **, sqrt, exp, ln) and the spread its
    literal numbers' rounding allows (each number read as printed: 6.89 → ±0.005)."""
    tree = ast.parse(text.replace("×", "*").replace("÷", "/").replace("−", "-"), mode="eval")
    literals: list[tuple[float, float]] = []

    def collect(node: ast.AST) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) \
                and not isinstance(node.value, bool):
            raw = ast.get_source_segment(text, node) or repr(node.value)
            unit = last_digit(raw)
            literals.append((float(node.value), unit))
        for child in ast.iter_child_nodes(node):
            collect(child)

    collect(tree.body)
    order = [0]

    def run(node: ast.AST, values: Sequence[float]) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) \
                and not isinstance(node.value, bool):
            v = values[order[0]]
            order[0] += 1
            return v
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left = run(node.left, values)
            return _OPS[type(node.op)](left, run(node.right, values))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -run(node.operand, values)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in _FUNCS and len(node.args) == 1 and not node.keywords:
            return _FUNCS[node.func.id](run(node.args[0], values))
        raise ValueError("only numbers, + - * / **, sqrt, exp and ln")

    def fn(values: Sequence[float]) -> float:
        order[0] = 0
        return float(run(tree.body, values))

    values = [v for v, _ in literals]
    return fn(values), spread_of(fn, values, [u for _, u in literals])


def last_digit(raw: str) -> float:
    """The unit of a written number's last digit: '6.89' → 0.01; whole numbers ('3', an
    exponent, a count) and scientific notation are read as exact (0)."""
    mantissa = raw.lower().split("e", 1)
    if len(mantissa) > 1:
        return 0.0
    frac = mantissa[0].split(".", 1)
    return 10.0 ** -len(frac[1]) if len(frac) > 1 else 0.0
