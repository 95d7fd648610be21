"""The audit: each printed number of a document against the recomputed value.

Tolerance rule. A number printed with k decimals stands for anything that rounds to it, so it
matches when |documented − computed| ≤ half a unit of its last digit (16.05 → ±0.005,
94.7% → ±0.0005). Printed with "≈" it may be off by a whole unit. A spec may set an explicit
`tolerance` (absolute) or `rel_tolerance` for claims that are not roundings, such as "≈ 16.33"
said of a different number. For a Monte Carlo quantity the tolerance is at least k standard
errors of the estimate, since a document's random draw cannot be replayed exactly.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sdpa_cli.framework.result import AuditEntry, Check
from sdpa_cli.numerics.scaling import Scaling
from sdpa_cli.spec.common import Documented, Printed

# lookup(entry, quantity) -> (computed value, standard error or None)
Lookup = Callable[[Documented, str], tuple[float | None, float | None]]

_INDEX = re.compile(r"\[(\d+)\]")


def split_quantity(quantity: str) -> tuple[str, tuple[int, ...]]:
    """'weights[1][2]' → ('weights', (1, 2))."""
    name = quantity.split("[", 1)[0]
    return name, tuple(int(i) for i in _INDEX.findall(quantity))


def tolerance_for(
    printed: Printed, entry: Documented, computed: float | None, se: float | None, k: float
) -> tuple[float, str]:
    if entry.tolerance is not None:
        tol, basis = entry.tolerance, "given"
    elif entry.approx or printed.approx:
        tol, basis = printed.unit, "≈: one unit of the last digit"
    else:
        tol, basis = printed.unit / 2.0, "half a unit of the last digit"
    if entry.rel_tolerance is not None and computed is not None:
        rel = entry.rel_tolerance * abs(computed)
        if rel > tol:
            tol, basis = rel, f"{entry.rel_tolerance:g} of the computed value"
    if se is not None and math.isfinite(se) and k * se > tol:
        tol, basis = k * se, f"{k:g} standard errors (Monte Carlo)"
    return tol, basis


def compare(
    entry: Documented, printed: Printed, quantity: str, computed: float | None,
    se: float | None, k: float, document: str,
) -> AuditEntry:
    tol, basis = tolerance_for(printed, entry, computed, se, k)
    ok = (
        computed is not None
        and math.isfinite(computed)
        and abs(printed.value - computed) <= tol * (1 + 1e-9) + 1e-300
    )
    names_file = _names_file(entry)
    source = entry.where if names_file or not document else f"{document}, {entry.where}"
    if entry.cites:
        source = f"{entry.cites}, {entry.where}"
    return AuditEntry(
        source=source,
        quantity=quantity,
        documented=printed.value,
        computed=computed,
        status="match" if ok else "mismatch",
        printed=printed.text,
        tolerance=tol,
        basis=basis,
        accepted=entry.accepted,
        note=entry.note,
        line=printed_line(entry),
        cites=entry.cites,
    )


def printed_line(entry: Documented) -> str:
    """The printed line a number is on: where the document prints it and, in a table, the
    row (a histogram's range, −6 to +6, is one line; two rows of one column are two)."""
    at = ", ".join(f"{k}={entry.row[k]}" for k in sorted(entry.row))
    return entry.where + (f" [{at}]" if at else "")


def _names_file(entry: Documented) -> bool:
    """An entry may quote another document than the spec's own: it then names the file."""
    return re.match(r"^\S+\.(txt|md|ipynb)\b", entry.where) is not None


def quotes_elsewhere(entry: Documented) -> bool:
    """Does the entry quote another document than its spec's own (`cites:`, or a `where:`
    that names the file)?"""
    return entry.cites is not None or _names_file(entry)


def flatten(value: Any, quantity: str, at: tuple[int, ...] = ()
            ) -> Iterable[tuple[str, Printed, tuple[int, ...]]]:
    """('weights[0]', [p, q]) → ('weights[0][0]', p, (0,)), ('weights[0][1]', q, (1,)): one
    per number, with its position inside the value."""
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield from flatten(item, f"{quantity}[{i}]", (*at, i))
    else:
        yield quantity, value, at


def run_audit(
    entries: Sequence[Documented], lookup: Lookup, k: float, document: str, *, start: int = 0
) -> tuple[AuditEntry, ...]:
    """One AuditEntry per printed number (lists are compared element by element); each
    records the index of its entry in the spec's `documented:` (entries[0] is `start`)."""
    out = []
    for j, entry in enumerate(entries, start):
        for quantity, printed, at in flatten(entry.value, entry.quantity):
            computed, se = lookup(entry, quantity)
            a = compare(entry, printed, quantity, computed, se, k, document)
            out.append(dataclasses.replace(a, entry=j, element=at))
    return tuple(out)


def audit_pairs(
    entries: Sequence[Documented], lookup: Lookup, k: float, document: str
) -> list[tuple[str, Documented, AuditEntry]]:
    """(part, entry, AuditEntry) per printed number, for the root causes (framework.causes)."""
    out = []
    for a in run_audit(entries, lookup, k, document):
        entry = entries[a.entry or 0]  # run_audit sets the index of every entry it makes
        out.append((entry.part or "", entry, a))
    return out


def audit_check(audit: Sequence[AuditEntry]) -> Check | None:
    """The check that `--check` sees: no unaccepted mismatch and no stale acceptance."""
    audit = [a for a in audit if a.kind == "number"]  # a claim's verdict is a finding
    if not audit:
        return None
    bad = [a for a in audit if a.unaccepted]
    stale = [a for a in audit if a.stale]
    found = sum(a.status == "mismatch" for a in audit)
    if not bad and not stale:
        detail = f"{len(audit)} documented numbers: {len(audit) - found} match"
        if found:
            detail += f", {found} known findings accepted"
        return Check("audit", True, detail)
    parts = []
    if bad:
        parts.append(f"{len(bad)} unaccepted mismatch(es): " + "; ".join(
            f"{a.quantity} printed {a.printed}, computed {_fmt(a.computed)}" for a in bad[:5]))
    if stale:
        parts.append(f"{len(stale)} accepted finding(s) now match (remove `accepted:`): "
                     + ", ".join(a.quantity for a in stale[:5]))
    return Check("audit", False, " | ".join(parts))


def _fmt(x: float | None) -> str:
    return "nothing" if x is None else f"{x:.6g}"


# --- lookups over table rows ------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0)
    return str(a) == str(b)


def find_rows(rows: Sequence[Mapping[str, Any]], selector: Mapping[str, Any]
              ) -> list[Mapping[str, Any]]:
    return [r for r in rows if all(k in r and _same(r[k], v) for k, v in selector.items())]


def pick(value: Any, indices: tuple[int, ...]) -> Any:
    for i in indices:
        if not isinstance(value, list | tuple) or i >= len(value):
            return None
        value = value[i]
    return value


def canonical(entry: Documented) -> Documented:
    """A copy whose `row: scaling:` uses the canonical label (e.g. 'temperature:8')."""
    label = entry.row.get("scaling")
    if isinstance(label, str):
        try:
            row = {**entry.row, "scaling": Scaling.parse(label).label}
        except ValueError:
            return entry
        return entry.model_copy(update={"row": row})
    return entry


def selector_problem(rows: Sequence[Mapping[str, Any]], entry: Documented,
                     fields: Iterable[str]) -> str | None:
    """Why an entry cannot be looked up in rows of this shape (None when it can)."""
    name, _ = split_quantity(entry.quantity)
    fields = list(fields)
    if name not in fields:
        return f"no quantity {name!r}; one of {', '.join(fields)}"
    found = find_rows(rows, entry.row)
    if len(found) == 1:
        return None
    keys = sorted({k for r in rows for k in r})
    if not found:
        shown = ", ".join(f"{k}: {v}" for k, v in entry.row.items()) or "nothing"
        return f"no row has {shown} (rows are told apart by {', '.join(keys)})"
    return f"{len(found)} rows match; add keys to `row:` to pick one"
