"""Study: the documents' worked examples replayed exactly, and their numbers audited.

steps (replay of an attention part) → panels (the board) and parts (other part kinds) →
reconcile (documented numbers ↔ quantities) → run (here): one Result."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from sdpa_cli.framework.audit import audit_check, run_audit
from sdpa_cli.framework.context import SERIAL, RunContext
from sdpa_cli.framework.result import AuditEntry, Check, Figure, Panel, Result, Table, as_row
from sdpa_cli.studies.worked_example.reconcile import (
    documented_problem,
    explain_by_printed_divisor,
    make_lookup,
    part_of,
    resolve_bare,
    runs_for,
    sum_findings,
)
from sdpa_cli.studies.worked_example.spec import COMMON_FIELDS, FIELDS_BY_KIND, WorkedExampleSpec
from sdpa_cli.studies.worked_example.steps import COLUMNS, PartRun

__all__ = ["documented_problem", "run"]


def run(spec: WorkedExampleSpec, ctx: RunContext = SERIAL) -> Result:
    """Replay every part, audit every documented number (tiny exact work: no blocks)."""
    runs = runs_for(spec)
    audit: list[AuditEntry] = []
    lookup = make_lookup(runs, spec)
    for j, entry in enumerate(spec.documented):
        part = part_of(spec, entry)
        run_ = runs.get(part or "")
        resolved = resolve_bare(entry, run_.quantities) if run_ else entry
        for a in run_audit([resolved], lookup, 1.0, spec.document, start=j):
            a = explain_by_printed_divisor(a, run_) if run_ else a
            if len(spec.parts) > 1:  # the same quantity exists in every part: say whose
                a = dataclasses.replace(a, quantity=f"{part}/{a.quantity}")
            audit.append(a)
    where = {p.name: i for i, p in enumerate(spec.parts)}
    checks = [dataclasses.replace(_sanity(r), fields=(f"parts[{where[r.part.name]}]",))
              for r in runs.values() if r.part.kind == "attention"]
    check = audit_check(audit)
    if check:
        checks.append(check)
    rows = [as_row(row) for r in runs.values() for row in r.rows]
    panels = [p for r in runs.values() for p in r.panels]
    notes = [n for r in runs.values() for n in r.notes]
    sums = sum_findings(spec)
    notes += sums
    if sums:
        panels.append(Panel("printed weights that cannot be softmax outputs", tuple(sums),
                            style="warn"))
    figures = _figures(runs) if ctx.figures else []
    first = next((r for r in runs.values() if r.part.kind == "attention"), None)
    extra = {
        "steps": _jsonable(first.steps) if first else {},
        "parts": {name: {"kind": r.part.kind, "description": r.part.description,
                         "steps": _jsonable(r.steps),
                         "quantities": _jsonable(r.quantities)} for name, r in runs.items()},
    }
    return Result(
        study="worked-example",
        name=spec.name or "worked-example",
        title=spec.title or "Worked example",
        source=spec.source,
        description=spec.description,
        spec=_spec_json(spec),
        table=Table("steps", "Every computed entry (long format)", COLUMNS, tuple(rows),
                    terminal=False),
        checks=tuple(checks),
        audit=tuple(audit),
        theory=_theory(runs.values()),
        notes=tuple(notes),
        figures=tuple(figures),
        panels=tuple(panels),
        extra=extra,
    )


def _jsonable(values: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in values.items():
        if isinstance(v, np.ndarray):
            out[k] = v.tolist()
        elif isinstance(v, float | int) or v is None:
            out[k] = v
    return out


def _spec_json(spec: WorkedExampleSpec) -> dict[str, Any]:
    """The resolved spec; each part keeps only the fields of its kind."""
    doc = spec.model_dump(mode="json")
    doc["parts"] = [
        {k: v for k, v in p.items() if k in COMMON_FIELDS or
         (k in FIELDS_BY_KIND[p["kind"]] and (v is not None or k == "d_k"))}
        for p in doc["parts"]
    ]
    return doc


def _sanity(r: PartRun) -> Check:
    """Identities the steps must satisfy whatever the inputs (a guard on the numerics)."""
    q = r.quantities
    worst = max(float(np.abs(q[w].sum(axis=-1) - 1.0).max())
                for w in ("weights", "unscaled_weights"))
    ratio_ok = math.isclose(q["variance.scaled_scores.population"] * q["d_k"],
                            q["variance.scores.population"], rel_tol=1e-9, abs_tol=1e-300)
    ok = worst <= 1e-12 and ratio_ok
    return Check(f"{r.part.name}: identities", ok,
                 f"softmax rows sum to 1 (worst |Σ−1| = {worst:.1e}); Var(QKᵀ/√d_k) = "
                 f"Var(QKᵀ)/d_k {'holds' if ratio_ok else 'FAILS'}")


def _theory(runs: Iterable[PartRun]) -> tuple[str, ...]:
    kinds = {r.part.kind for r in runs}
    lines = []
    if "attention" in kinds:
        lines += [
            "Attention(Q, K, V) = softmax(QKᵀ/√d_k)·V; softmax(z)_i = e^(z_i)/Σ_j e^(z_j) row "
            "by row, so every row of weights sums to 1.",
            "Dividing every score by c divides their variance by c²: ÷√d_k divides it by d_k.",
        ]
    if kinds & {"attention", "variance"}:
        lines.append("Population variance divides the squared deviations by N, sample variance "
                     "by N − 1; a documented variance that says neither is compared with the "
                     "closer, and the audit names which.")
    if "scaling-arithmetic" in kinds:
        lines.append("iid components: Var(q·k) = d·σ⁴, so (1/√d)²·Var(q·k) = σ⁴ at every d.")
    if "cost" in kinds:
        lines.append("Per layer: 3·n·d² (Q, K, V) + n²·d (QKᵀ) + n²·d (weights·V) + n·d² (W_O) "
                     "multiply-adds: O(n²·d + n·d²), quadratic in n only once n > d.")
    return tuple(lines)


# Panels of the weights figure: one per attention part, in the document's order. A page
# holds a few; a spec of 1500 parts took minutes and a canvas of gigapixels to draw, so at
# most this many are drawn and the caption says so (table.md has every part).
FIGURE_MAX_PARTS = 8


def _figures(runs: dict[str, PartRun]) -> tuple[Figure, ...]:
    panels = [r.figure for r in runs.values() if r.figure is not None]
    if not panels:
        return ()
    caption = ("Compare each row without and with scaling: dividing the scores spreads the "
               "weight over more keys.")
    if len(panels) > FIGURE_MAX_PARTS:
        caption += (f" The first {FIGURE_MAX_PARTS} of the {len(panels)} attention examples "
                    "are drawn; table.md has every one.")
        panels = panels[:FIGURE_MAX_PARTS]
    return (Figure("weights", "worked.weights",
                   "Attention weights without and with scaling", {"parts": panels},
                   caption=caption),)
