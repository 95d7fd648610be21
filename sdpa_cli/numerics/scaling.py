"""Scaling rules for attention scores: factor = 1/(T·d^p), or cosine (normalise, then ÷τ)."""

from __future__ import annotations

import math
from dataclasses import dataclass

# Named rules and the (power, temperature) they stand for. "sqrt-half" is the document's
# ÷√(d/2) alternative: 1/√(d/2) = 1/((1/√2)·d^½).
_NAMED: dict[str, tuple[float, float]] = {
    "none": (0.0, 1.0),
    "sqrt": (0.5, 1.0),
    "linear": (1.0, 1.0),
    "sqrt-half": (0.5, 1.0 / math.sqrt(2.0)),
}
_FORMULA = {
    "none": "q·k",
    "sqrt": "q·k/√d",
    "linear": "q·k/d",
    "sqrt-half": "q·k/√(d/2)",
}
GRAMMAR = "none, sqrt, linear, sqrt-half, temperature:T, power:P, cosine or cosine:TAU"


@dataclass(frozen=True)
class Scaling:
    """One scaling rule; `label` is its canonical spelling in specs, flags and tables."""

    label: str
    power: float = 0.0  # divide by d**power
    temperature: float = 1.0  # and by this constant (τ for cosine)
    cosine: bool = False  # normalise q and k to unit length before the dot product

    def factor(self, d: int | float) -> float:
        """The multiplier applied to q·k (or to cos(q, k) for the cosine rule)."""
        if self.cosine:
            return 1.0 / self.temperature
        return 1.0 / (self.temperature * float(d) ** self.power)

    @property
    def formula(self) -> str:
        """A short human formula such as q·k/√d."""
        if self.label in _FORMULA:
            return _FORMULA[self.label]
        if self.cosine:
            return f"cos(q,k)/{_num(self.temperature)}"
        if self.power == 0.0:
            return f"q·k/{_num(self.temperature)}"
        return f"q·k/d^{_num(self.power)}"

    @classmethod
    def parse(cls, text: str) -> Scaling:
        """Parse a rule such as 'sqrt' or 'temperature:8'; raise ValueError with the grammar."""
        raw = str(text).strip()
        word, sep, arg = raw.partition(":")
        word = word.strip().lower()
        if word in _NAMED and not sep:
            power, temperature = _NAMED[word]
            return cls(label=word, power=power, temperature=temperature)
        if word == "cosine":
            tau = _positive(arg, "cosine:TAU") if sep else 1.0
            return cls(label=f"cosine:{_num(tau)}" if sep else "cosine", temperature=tau,
                       cosine=True)
        if word in ("temperature", "t") and sep:
            t = _positive(arg, "temperature:T")
            return cls(label=f"temperature:{_num(t)}", temperature=t)
        if word == "power" and sep:
            p = _finite(arg, "power:P")
            return cls(label=f"power:{_num(p)}", power=p)
        raise ValueError(f"unknown scaling {raw!r}; use {GRAMMAR}")


def _num(x: float) -> str:
    """Shortest spelling of a number for labels: 8 not 8.0, 0.125 as is."""
    return f"{x:g}" if float(x) == float(f"{x:g}") else repr(float(x))


def _finite(arg: str, what: str) -> float:
    try:
        value = float(arg)
    except ValueError:
        raise ValueError(f"{what} needs a number, got {arg.strip()!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{what} needs a finite number, got {arg.strip()!r}")
    return value


def _positive(arg: str, what: str) -> float:
    value = _finite(arg, what)
    if value <= 0:
        raise ValueError(f"{what} needs a number > 0, got {arg.strip()!r}")
    return value
