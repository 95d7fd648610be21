"""An attention step recomputed from the document's own printed inputs of that step (the
audit's second check): exp(printed score), Σ printed exps, printed weight × v, …"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from sdpa_cli.framework.audit import pick, split_quantity
from sdpa_cli.framework.causes import Key, Replay, Replayer
from sdpa_cli.framework.derive import reading_unit
from sdpa_cli.numerics.formula import spread_of
from sdpa_cli.spec.common import Printed
from sdpa_cli.studies.worked_example.steps import PartRun

Fn = Callable[[Sequence[float]], float]


def attention_replayer(runs: dict[str, PartRun]) -> Replayer:
    """The replayer of every attention part: each step from its printed inputs (an input the
    document never prints comes from the exact chain, and is then not an input)."""

    def replayer(key: Key, printed: Callable[[Key], Printed | None]) -> Replay | None:
        part, quantity = key
        run = runs.get(part)
        if run is None or run.part.kind != "attention":
            return None
        return _step(run, part, quantity, printed)

    return replayer


class _Inputs:
    """The inputs of one replayed step: printed where the document prints them."""

    def __init__(self, run: PartRun, part: str, printed: Callable[[Key], Printed | None]):
        self.qty, self.part, self.printed = run.quantities, part, printed
        self.values: list[float] = []
        self.units: list[float] = []
        self.keys: list[Key] = []
        self.any_printed = False

    def add(self, name: str, *idx: int) -> int:
        quantity = name + "".join(f"[{i}]" for i in idx)
        p = self.printed((self.part, quantity))
        exact = pick(_listed(self.qty.get(name)), idx)
        if p is not None:
            self.values.append(p.value)
            # the readings the print allows, as for every replay (framework.derive)
            self.units.append(reading_unit(p, float(exact)) if isinstance(exact, int | float)
                              else p.unit)
            self.keys.append((self.part, quantity))
            self.any_printed = True
        else:
            if not isinstance(exact, int | float):
                raise KeyError(quantity)
            self.values.append(float(exact))
            self.units.append(0.0)
        return len(self.values) - 1

    def divisor(self) -> int:
        """The document's divisor: its printed √d_k, else the spec's `scale:` (the divisor
        the document wrote), else √d_k exactly."""
        p = self.printed((self.part, "sqrt_d_k"))
        if p is not None:
            return self.add("sqrt_d_k")
        div = self.qty.get("printed.divisor")
        if isinstance(div, int | float):
            self.values.append(float(div))
            self.units.append(Printed.parse(repr(float(div))).unit)
            self.keys.append((self.part, "sqrt_d_k"))
            self.any_printed = True
            return len(self.values) - 1
        self.values.append(float(self.qty["sqrt_d_k"]))
        self.units.append(0.0)
        return len(self.values) - 1

    def replay(self, fn: Fn) -> Replay | None:
        if not self.any_printed:
            return None
        try:  # a printed number far out of range (exp of 1e6) has no replay
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                value = fn(self.values)
        except (OverflowError, ValueError, ZeroDivisionError):
            return None
        if not math.isfinite(value):
            return None
        return Replay(value, tuple(self.keys), spread_of(fn, self.values, self.units))


def _listed(value: object) -> object:
    return value.tolist() if isinstance(value, np.ndarray) else value


def _width(run: PartRun, name: str) -> int:
    arr = np.asarray(run.quantities[name])
    return int(arr.shape[-1])


def _step(run: PartRun, part: str, quantity: str,
          printed: Callable[[Key], Printed | None]) -> Replay | None:
    name, idx = split_quantity(quantity)
    ins = _Inputs(run, part, printed)
    try:
        if name == "scores" and len(idx) == 2 and "products" in run.quantities:
            i, j = idx
            at = [ins.add("products", i, j, t) for t in range(_width(run, "products"))]
            return ins.replay(lambda x: sum(x[a] for a in at))
        if name == "scaled_scores" and len(idx) == 2:
            s, d = ins.add("scores", *idx), ins.divisor()
            return ins.replay(lambda x: x[s] / x[d])
        if name in ("exp_scaled_scores", "exp_scores") and len(idx) == 2:
            s = ins.add("scaled_scores" if name == "exp_scaled_scores" else "scores", *idx)
            return ins.replay(lambda x: math.exp(x[s]))
        if name in ("exp_scaled_sums", "exp_sums") and len(idx) == 1:
            terms = "exp_scaled_scores" if name == "exp_scaled_sums" else "exp_scores"
            at = [ins.add(terms, idx[0], j) for j in range(_width(run, terms))]
            return ins.replay(lambda x: sum(x[a] for a in at))
        if name in ("weights", "unscaled_weights") and len(idx) == 2:
            return _weight(run, part, ins, name, idx, printed)
        if name == "output_terms" and len(idx) == 3:
            i, j, t = idx
            w = ins.add("weights", i, j)
            v = float(np.asarray(run.quantities["v"])[j, t])
            return ins.replay(lambda x: x[w] * v)
        if name == "output" and len(idx) == 2:
            i, t = idx
            n = _width(run, "weights")
            keys = [(part, f"output_terms[{i}][{j}][{t}]") for j in range(n)]
            if any(printed(k) is not None for k in keys):
                at = [ins.add("output_terms", i, j, t) for j in range(n)]
                return ins.replay(lambda x: sum(x[a] for a in at))
            vs = np.asarray(run.quantities["v"])[:, t]
            at = [ins.add("weights", i, j) for j in range(n)]
            return ins.replay(lambda x: sum(x[a] * float(vs[j]) for j, a in enumerate(at)))
    except KeyError:
        return None
    return None


def _weight(run: PartRun, part: str, ins: _Inputs, name: str, idx: tuple[int, ...],
            printed: Callable[[Key], Printed | None]) -> Replay | None:
    i, j = idx
    exp_name, sum_name, score_name = (
        ("exp_scaled_scores", "exp_scaled_sums", "scaled_scores") if name == "weights"
        else ("exp_scores", "exp_sums", "scores"))
    if printed((part, f"{exp_name}[{i}][{j}]")) is not None or \
            printed((part, f"{sum_name}[{i}]")) is not None:
        e, s = ins.add(exp_name, i, j), ins.add(sum_name, i)
        return ins.replay(lambda x: x[e] / x[s])
    n = _width(run, score_name)
    at = [ins.add(score_name, i, c) for c in range(n)]

    def soft(x: Sequence[float]) -> float:
        row = np.array([x[a] for a in at])
        ex = np.exp(row - row.max())
        return float(ex[j] / ex.sum())

    return ins.replay(soft)
