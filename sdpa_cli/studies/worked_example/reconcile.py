"""The audit of a worked example: which documented number is which quantity, and why a
mismatch is what it is."""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from sdpa_cli.framework.audit import flatten, pick, split_quantity
from sdpa_cli.framework.result import AuditEntry
from sdpa_cli.spec.common import Documented, Printed
from sdpa_cli.studies.worked_example.board import num
from sdpa_cli.studies.worked_example.parts import compute
from sdpa_cli.studies.worked_example.spec import WorkedExampleSpec
from sdpa_cli.studies.worked_example.steps import BARE_VARIANCE, PREFIXES, WEIGHT_ROW, PartRun

# --- the whole example ----------------------------------------------------------------------


def part_of(spec: WorkedExampleSpec, entry: Documented) -> str | None:
    if entry.part is not None:
        return entry.part
    return spec.parts[0].name if len(spec.parts) == 1 else None


def _shape_text(value: Any) -> str:
    arr = np.asarray(value, dtype=float) if value is not None else None
    if arr is None or arr.ndim == 0:
        return "one number"
    return "×".join(str(s) for s in arr.shape)


def documented_problem(spec: WorkedExampleSpec, entry: Documented) -> str | None:
    """Why an entry names no existing part, quantity or entry (None when it does)."""
    names = [p.name for p in spec.parts]
    if entry.row:
        return "worked examples pick a number by part: and quantity:, not row:"
    part_name = part_of(spec, entry)
    if part_name is None:
        return f"name the part (part: …): one of {', '.join(names)}"
    if part_name not in names:
        close = difflib.get_close_matches(part_name, names, n=1, cutoff=0.5)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"no part named {part_name!r}{hint}; parts: {', '.join(names)}"
    run = runs_for(spec)[part_name]
    name, _ = split_quantity(entry.quantity)
    qty = run.quantities
    if BARE_VARIANCE.match(name) and f"{name}.population" in qty:
        if isinstance(entry.value, list):
            return f"{name} is one number; document one value"
        return None
    if name not in qty:
        close = difflib.get_close_matches(name, list(qty), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        plain = ", ".join(n for n in qty if "." not in n)
        dotted = sorted({re.sub(r"^(printed|from_weights)\..*", r"\1.*", n)
                         for n in qty if "." in n})
        return (f"no quantity {name!r} in {run.part.kind} part {part_name!r}{hint}; "
                f"quantities: {plain}" + (f"; also {', '.join(dotted)}" if dotted else ""))
    for quantity, _printed, _at in flatten(entry.value, entry.quantity):
        _, idx = split_quantity(quantity)
        value = pick(_listed(qty[name]), idx)
        if not isinstance(value, int | float):
            return (f"{quantity} does not name one number: {name} is "
                    f"{_shape_text(qty[name])}")
    return None


def _listed(value: Any) -> Any:
    """NumPy to nested lists (±inf stay floats; the audit turns them into 'nothing')."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def runs_for(spec: WorkedExampleSpec) -> dict[str, PartRun]:
    """The computed parts of a spec, by name: computed on first use, then kept on the spec
    (checking its documented entries and running it read the same replay)."""
    if spec._computed is None:
        spec._computed = {r.part.name: r for r in compute(spec)}
    runs: dict[str, PartRun] = spec._computed
    return runs


def resolve_bare(entry: Documented, qty: dict[str, Any]) -> Documented:
    """'variance.scores' (the document does not say which) → the closer of population and
    sample, named, with the other value in the note."""
    name, _ = split_quantity(entry.quantity)
    if not BARE_VARIANCE.match(name) or f"{name}.population" not in qty or \
            isinstance(entry.value, list):
        return entry
    printed = entry.value
    pop, sample = qty[f"{name}.population"], qty.get(f"{name}.sample")
    kind, other = "population", sample
    if sample is not None and abs(sample - printed.value) < abs(pop - printed.value):
        kind, other = "sample", pop
    other_kind = "sample" if kind == "population" else "population"
    other_text = "undefined" if other is None else f"{other:.4g}"
    why = (f"the document does not say population or sample; compared with the closer, "
           f"{kind} ({other_kind}: {other_text})")
    note = f"{why}. {entry.note}" if entry.note else why
    return entry.model_copy(update={"quantity": f"{name}.{kind}", "note": note})


def make_lookup(runs: dict[str, PartRun], spec: WorkedExampleSpec
                ) -> Callable[[Documented, str], tuple[float | None, float | None]]:
    def lookup(entry: Documented, quantity: str) -> tuple[float | None, float | None]:
        part = part_of(spec, entry)
        run = runs.get(part or "")
        if run is None:
            return None, None
        name, idx = split_quantity(quantity)
        value = pick(_listed(run.quantities.get(name)), idx)
        if not isinstance(value, int | float) or not math.isfinite(value):
            return None, None
        return float(value), None

    return lookup


def explain_by_printed_divisor(a: AuditEntry, run: PartRun) -> AuditEntry:
    """A finding that the document's own divisor reproduces says so in its note."""
    if a.status != "mismatch" or "printed.divisor" not in run.quantities:
        return a
    name, idx = split_quantity(a.quantity)
    if name.startswith(PREFIXES) or f"printed.{name}" not in run.quantities:
        return a
    alt = pick(_listed(run.quantities[f"printed.{name}"]), idx)
    if not isinstance(alt, float) or abs(alt - a.documented) > a.tolerance * (1 + 1e-9):
        return a
    div = num(run.quantities["printed.divisor"])
    why = f"÷ {div} (the document's divisor) gives {alt:.6g}, which matches"
    return dataclasses.replace(a, note=f"{a.note}; {why}" if a.note else why)


def sum_findings(spec: WorkedExampleSpec) -> list[str]:
    """Printed rows of softmax weights that cannot sum to 1, whatever the rounding."""
    out = []
    for entry in spec.documented:
        name, _ = split_quantity(entry.quantity)
        if not WEIGHT_ROW.match(name) or not isinstance(entry.value, list) or \
                any(isinstance(v, list) for v in entry.value):
            continue
        vals: list[Printed] = entry.value
        total = sum(v.value for v in vals)
        slack = sum(v.unit if (v.approx or entry.approx) else v.unit / 2 for v in vals)
        if abs(total - 1.0) > slack * (1 + 1e-9):
            shown = ", ".join(v.text for v in vals)
            out.append(f"{entry.where}: the printed weights [{shown}] sum to {total:.4g}; "
                       f"softmax weights sum to 1, and rounding can move the sum by at most "
                       f"{slack:.3g}")
    return out
