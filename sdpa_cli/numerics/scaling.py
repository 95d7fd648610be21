"""Scaling rules for attention scores (÷T·d^p, cosine, qknorm, softcap, logn, μP) and scores."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

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
    "qknorm": "LN(q)·LN(k)/√d",
    "qknorm:rms": "RMS(q)·RMS(k)/√d",
}
# μP's reference implementation multiplies q·k by 8/d, which equals 1/√d at d = 64.
MUP_CONSTANT = 8.0
GRAMMAR = ("none, sqrt, linear, sqrt-half, temperature:T, power:P, cosine, cosine:TAU, qknorm, "
           "qknorm:rms, softcap:C, logn:S, linear:C, mup or mup:C")
NORMS = ("layer", "rms")

Array = NDArray[np.float64]


@dataclass(frozen=True)
class Scaling:
    """One scaling rule; `label` is its canonical spelling in specs, flags and tables.

    Scores are factor(d, n)·(x·y) where x, y are q, k as drawn, unit vectors (cosine) or
    per-vector normalised ones (norm); a cap C then maps s to C·tanh(s/C).
    """

    label: str
    power: float = 0.0  # divide by d**power
    temperature: float = 1.0  # and by this constant (τ for cosine; 1/C for linear:C and mup)
    cosine: bool = False  # normalise q and k to unit length before the dot product
    norm: str | None = None  # "layer" (qknorm) or "rms" (qknorm:rms): |q̂|² = d before ÷√d
    cap: float | None = None  # softcap:C: C·tanh(s/C) after the factor
    log_n: float | None = None  # logn:S: the factor is S·ln n (n = number of keys)

    def factor(self, d: int | float, n: int | None = None) -> float:
        """The multiplier on q·k (on q̂·k̂ for qknorm, on cos(q, k) for cosine) before any cap."""
        if self.log_n is not None:
            if n is None:
                raise ValueError(f"{self.label} needs the number of keys n")
            return float(self.log_n * math.log(n))
        if self.cosine:
            return 1.0 / self.temperature
        try:
            return 1.0 / (self.temperature * math.pow(float(d), self.power))
        except (OverflowError, ZeroDivisionError):
            # T·d^P itself overflows or vanishes (power:1e300, power:-1e300, d = 3): the
            # factor is 0 or inf, never an exception; the studies' guards
            # (spec.limits.check_factors) refuse such a rule by name before anything runs.
            log_f = -(math.log(self.temperature) + self.power * math.log(float(d)))
            return math.inf if log_f > 0 else 0.0

    @property
    def needs_n(self) -> bool:
        """Whether the factor depends on the number of keys (logn)."""
        return self.log_n is not None

    @property
    def formula(self) -> str:
        """A short human formula such as q·k/√d (numbers to at most 6 significant digits)."""
        if self.label in _FORMULA:
            return _FORMULA[self.label]
        if self.cosine:
            return f"cos(q,k)/{_short(self.temperature)}"
        if self.cap is not None:
            return f"{_short(self.cap)}·tanh(q·k/(√d·{_short(self.cap)}))"
        if self.log_n is not None:
            return f"{_short(self.log_n)}·ln(n)·q·k"
        if self.power == 1.0 and self.temperature != 1.0:  # linear:C, mup: C·q·k/d
            return f"{_short(1.0 / self.temperature)}·q·k/d"
        return _power_formula(self.power, self.temperature)

    @classmethod
    def parse(cls, text: str) -> Scaling:
        """Parse a rule such as 'sqrt' or 'softcap:50'; raise ValueError with the grammar."""
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
        if word == "qknorm":
            kind = arg.strip().lower() if sep else "layer"
            if kind not in NORMS:
                raise ValueError(f"qknorm takes ':rms' or nothing, got {raw!r}")
            return cls(label="qknorm" if kind == "layer" else "qknorm:rms", power=0.5, norm=kind)
        if word == "softcap" and sep:
            c = _positive(arg, "softcap:C")
            return cls(label=f"softcap:{_num(c)}", power=0.5, cap=c)
        if word == "logn" and sep:
            s = _positive(arg, "logn:S")
            return cls(label=f"logn:{_num(s)}", log_n=s)
        if word in ("linear", "mup") and (sep or word == "mup"):
            c = _positive(arg, f"{word}:C") if sep else MUP_CONSTANT
            return cls(label=f"{word}:{_num(c)}" if sep else "mup", power=1.0, temperature=1.0 / c)
        raise ValueError(f"unknown scaling {raw!r}; use {GRAMMAR}")


def prepare(x: Array, rule: Scaling) -> Array:
    """q or k (…×d) as the rule dots it: unit vectors (cosine), LayerNorm/RMSNorm (|x̂|² = d),
    or unchanged. A zero vector (or a constant one under LayerNorm) maps to zeros, not NaN."""
    x = np.asarray(x, dtype=np.float64)
    if rule.cosine:
        scale = np.sqrt(np.einsum("...i,...i->...", x, x))[..., None]
    elif rule.norm is not None:
        if rule.norm == "layer":
            x = x - x.mean(axis=-1, keepdims=True)
        scale = np.sqrt(np.mean(x * x, axis=-1, keepdims=True))
    else:
        return x
    out: Array = np.divide(x, scale, out=np.zeros_like(x), where=scale > 0)
    return out


def finish(raw: Array, rule: Scaling, d: int | float, n: int | None = None) -> Array:
    """Scores from raw dot products of prepared vectors: × factor(d, n), then the cap if any."""
    s = np.asarray(raw, dtype=np.float64) * rule.factor(d, n)
    if rule.cap is not None:
        s = rule.cap * np.tanh(s / rule.cap)
    return s


def rule_scores(q: Array, k: Array, rule: Scaling) -> Array:
    """Scores of queries q (…×d) against keys k (…×n×d) under a rule: an …×n array.

    n (for logn) is k's second-to-last axis; one einsum, no d-sized temporaries beyond the
    normalised copies of q and k."""
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    if k.ndim < 2 or q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q (…×d) and k (…×n×d) disagree: {q.shape} vs {k.shape}")
    raw = np.einsum("...d,...nd->...n", prepare(q, rule), prepare(k, rule))
    return finish(raw, rule, q.shape[-1], k.shape[-2])


def apply_to_scores(scores: Array, rule: Scaling, d: int | float | None = None) -> Array:
    """A rule applied to an explicit score vector (last axis = keys, n = its length): the scores
    are taken as q·k at d = 1 unless d is given; normalising rules need q and k, not scores."""
    if rule.cosine or rule.norm is not None:
        raise ValueError(f"{rule.label} normalises q and k, so it cannot rescale given scores")
    s = np.asarray(scores, dtype=np.float64)
    return finish(s, rule, 1.0 if d is None else d, s.shape[-1])


def _short(x: float) -> str:
    """A number for formulas: at most 6 significant digits, written as √m when it is one."""
    x = float(x)
    square = x * x
    whole = round(square)
    if x > 0 and whole >= 2 and abs(square - whole) <= 1e-12 * square and \
            not math.isclose(x, round(x), rel_tol=1e-12):
        return f"√{whole}"
    return f"{x:.6g}"


def _power_formula(power: float, temperature: float) -> str:
    """q·k ÷ (T·d^p) spelled readably: √d·(q·k) for p = −½, q·k/(8·√d), never d^-0.5."""
    d_part = {0.5: "√d", 1.0: "d", -0.5: "√d", -1.0: "d"}.get(power, f"d^{_short(abs(power))}")
    if power == 0.0:
        return "q·k" if temperature == 1.0 else f"q·k/{_short(temperature)}"
    if power < 0:
        front = d_part if temperature == 1.0 else f"{_short(1.0 / temperature)}·{d_part}"
        return f"{front}·(q·k)"
    if temperature == 1.0:
        return f"q·k/{d_part}"
    return f"q·k/({_short(temperature)}·{d_part})"


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
