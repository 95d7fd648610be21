"""How sdpa words a change: one significance rule and one materiality bar for every study.

A direction word ("rises", "falls") needs a change that is both significant (beyond 3
combined standard errors for a Monte Carlo value; any change for an exact one) and material
(at least MATERIAL of the larger end's size). A significant change below the bar is "nearly
level" with its size beside it; an insignificant one "stays level". The bar is a reader's,
not a statistician's: a 2% drift that is 4 standard errors wide is real, and still says
nothing about whether a rule stops saturation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MATERIAL = 0.10  # a change is material when it is at least 10% of the larger end's size
SIGNIFICANT_SE = 3.0  # a Monte Carlo change is significant beyond 3 combined standard errors


@dataclass(frozen=True)
class Move:
    """How a value moves between two ends of a sweep."""

    word: str  # "rises", "falls", "is nearly level" or "stays level"
    relative: float  # (b − a) / max(|a|, |b|)
    significant: bool
    material: bool

    @property
    def percent(self) -> str:
        return f"{100 * self.relative:+.0f}%" if abs(self.relative) >= 0.005 else \
            f"{100 * self.relative:+.1f}%"


def move(a: float, b: float, se_a: float | None = None, se_b: float | None = None) -> Move:
    """The word for a change from a to b (see the module docstring)."""
    size = max(abs(a), abs(b))
    rel = (b - a) / size if size > 0 else 0.0
    if se_a is not None and se_b is not None:
        significant = abs(b - a) > SIGNIFICANT_SE * math.hypot(se_a, se_b)
    else:
        significant = abs(b - a) > 1e-12 * size
    material = abs(rel) >= MATERIAL
    if significant and material:
        word = "rises" if b > a else "falls"
    elif significant:
        word = "is nearly level"
    else:
        word = "stays level"
    return Move(word, rel, significant, material)
