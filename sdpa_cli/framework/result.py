"""What a study returns: rows, checks, audit findings and figure data, ready to render."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, get_args, get_type_hints

from sdpa_cli import __version__


@dataclass(frozen=True)
class Column:
    """One column of a table: the row key, its header, and how to show its numbers."""
    key: str
    header: str
    # "int", "g" (5 significant digits), "e" (scientific), "pct" (a share in percent),
    # "text", "list", "fN" (N decimals: "f2" for a z-score); the contract test knows these
    fmt: str = "g"
    # Which columns a narrow terminal keeps: 0 always, then 1, 2, …; None: by position
    # (the first columns that name a row count as 0). Files always carry every column.
    priority: int | None = None
    # Prose (a claim, its evidence): a narrow terminal wraps it rather than leaving it out
    # or leaving out the short columns beside it (report.terminal).
    wrap: bool = False

    @classmethod
    def rule_keys(cls, dim: str = "d_k") -> tuple[Column, Column]:
        """The two columns that key a table of one row per (d_k, scaling rule), as most
        studies' tables start: `dim` headed `dim`, and `scaling`, both kept on every terminal."""
        return cls("dim", dim, "int", priority=0), cls("scaling", "scaling", "text", priority=0)


def internal(default: Any) -> Any:
    """A typed-row field the study uses but never writes to a file (not a JSON field)."""
    return field(default=default, metadata={"json": False})


# `x: Group = field(metadata=PART)`: a typed-row field holding a group of columns (a frozen
# dataclass of its own), written in its place as those columns, so rows of several kinds
# share a group wherever it falls. A plain field() call, so type checkers see no default.
PART: Mapping[str, Any] = MappingProxyType({"part": True})


def row_fields(row_type: type) -> tuple[str, ...]:
    """The JSON fields of a typed row, in order: its table's CSV header and row keys."""
    out: list[str] = []
    for f in fields(row_type):
        if not f.metadata.get("json", True):
            continue
        if not f.metadata.get("part"):
            out.append(f.name)
            continue
        hint = get_type_hints(row_type)[f.name]
        # a union of groups (A | B): every field a row of this type may carry, in order
        for group in get_args(hint) or (hint,):
            out.extend(name for name in row_fields(group) if name not in out)
    return tuple(out)


def as_row(row: Any) -> dict[str, Any]:
    """A typed row (frozen dataclass) as the mapping a Table holds."""
    out: dict[str, Any] = {}
    for f in fields(row):
        if not f.metadata.get("json", True):
            continue
        value = getattr(row, f.name)
        if f.metadata.get("part"):
            out.update(as_row(value))
        else:
            out[f.name] = value
    return out


@dataclass(frozen=True)
class Table:
    name: str
    title: str
    columns: tuple[Column, ...]
    rows: tuple[Mapping[str, Any], ...]
    # False for a table too long to read in a terminal (one row per matrix entry): the
    # terminal names the files that hold it; CSV, Markdown and JSON carry it whole.
    terminal: bool = True


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str
    # The spec fields this check is about, most specific first, as messages name fields
    # ("scalings[1]", "dims[0]"): CI annotations put a failure on the first one the spec
    # file writes (a default has no line). Empty: the spec as a whole.
    fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class AuditEntry:
    """A number the document prints beside the recomputed truth."""
    source: str  # document and where in it
    quantity: str
    documented: float
    computed: float | None
    status: str  # "match" or "mismatch"
    printed: str  # the number exactly as printed
    tolerance: float
    basis: str  # how the tolerance was set
    accepted: str | None = None  # why a known mismatch is accepted
    note: str | None = None
    # Which `documented:` entry of the spec printed this number (its index), and where in
    # that entry's value when the value is a list: CI annotations put a mismatch there.
    entry: int | None = None
    element: tuple[int, ...] = ()
    kind: str = "number"  # "number" (a printed number) or "claim" (a statement)
    # A mismatch's root cause: "own", "carried" (with `from_`), "rounding", "inconsistent".
    cause: str | None = None
    from_: str | None = None  # the printed value a carried (or inconsistent) entry follows
    root: str | None = None  # the root error it inherits from, "quantity @ where"
    replayed: float | None = None  # the value the document's own printed inputs give
    # How far the rounding of those printed inputs can move `replayed` (first order): a
    # replay reproduces the print when |documented − replayed| ≤ tolerance + this.
    replay_spread: float | None = None
    material: str | None = None  # the conclusion a root error flips (JSON material: true)
    # A claim's measurement, the spec that measured it and its uncertainty (± one se).
    measurement: str | None = None
    spec_name: str | None = None
    uncertainty: float | None = None
    reason: str | None = None  # why a claim is untested
    # A claim's premise as measured (reported beside the verdict, never part of it), how its
    # threshold verdicts move across their stated ranges ("robust …", "fragile: …"), and
    # whether this run decides the claim when several judge it (False: beyond its setting).
    premise: str | None = None
    robustness: str | None = None
    decides: bool = True
    # The printed line a number is on (its `where:` and table row): a printed row, matrix or
    # range is one error however many numbers it holds. `cites`: the publication it quotes
    # when that is not one of the documents (its errors are not the documents' own).
    line: str | None = None
    cites: str | None = None

    @property
    def fragile(self) -> bool:
        """A claim whose verdict flips inside a stated threshold range."""
        return bool(self.robustness) and str(self.robustness).startswith("fragile")

    @property
    def label(self) -> str:
        """How other entries name this one: quantity @ where (without the document)."""
        return f"{self.quantity} @ {self.source.split(', ', 1)[-1]}"

    @property
    def is_root(self) -> bool:
        """A root error: wrong on its own or inconsistent; a mismatch with no cause (an
        entry written before causes were classified) counts as its own error."""
        return self.kind == "number" and self.status == "mismatch" and \
            self.cause in (None, "own", "inconsistent")

    @property
    def unaccepted(self) -> bool:
        return self.status == "mismatch" and not self.accepted

    @property
    def stale(self) -> bool:
        """An accepted finding that no longer reproduces: the acceptance should go."""
        return self.status == "match" and bool(self.accepted)


@dataclass(frozen=True)
class Figure:
    """Data for one figure; the report layer's renderer `kind` draws it to `name`.png."""
    name: str
    kind: str
    title: str
    data: Mapping[str, Any]
    caption: str = ""  # what to look at in it (not the title again); reports show it below


@dataclass(frozen=True)
class Panel:
    """A titled block of monospaced lines, e.g. one step of a worked example."""
    title: str
    lines: tuple[str, ...]
    style: str = "plain"  # "plain", "ok" or "warn" (a finding the reader should see)


@dataclass(frozen=True)
class Result:
    study: str
    name: str
    title: str
    source: str
    description: str
    spec: Mapping[str, Any]  # the resolved spec, JSON-ready
    table: Table
    checks: tuple[Check, ...] = ()
    audit: tuple[AuditEntry, ...] = ()
    theory: tuple[str, ...] = ()  # the closed forms the measurements stand beside
    # What the data shows, in plain words, decided from the rows (shown after the table).
    findings: tuple[str, ...] = ()
    # What theory predicts, in plain words (the terminal shows these; `theory` under --explain).
    expect: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    figures: tuple[Figure, ...] = ()
    tables: tuple[Table, ...] = ()  # further tables (after the main one)
    panels: tuple[Panel, ...] = ()  # step-by-step blocks shown before the tables
    # Comparisons with a heuristic (or a limit not reached): shown and counted apart from the
    # checks, never as one.
    unchecked: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)  # more JSON fields, e.g. steps
    # Nothing was measured (a model that is not on this machine): why, and how to get what
    # was missing. A skipped run is neither passed nor failed.
    skipped: str | None = None

    @property
    def rows(self) -> tuple[Mapping[str, Any], ...]:
        return self.table.rows

    @property
    def passed(self) -> bool:
        """No check failed (a skipped run fails none; its `status` says it measured nothing)."""
        return all(c.passed for c in self.checks)

    @property
    def status(self) -> str:
        """The run's one word everywhere (progress, summary, JSON, JUnit, report): failed (a
        check failed), skipped (nothing measured) or passed."""
        if not self.passed:
            return "failed"
        return "skipped" if self.skipped is not None else "passed"

    def to_json(self) -> dict[str, Any]:
        """The results.json document; NaN and infinities become null."""
        doc: dict[str, Any] = {
            **json_header(),
            "study": self.study,
            "name": self.name,
            "title": self.title,
            "source": self.source,
            "spec": self.spec,
            "rows": list(self.rows),
            "checks": [{**vars(c), "fields": list(c.fields)} for c in self.checks],
            "audit": [
                {
                    "source": a.source,
                    "quantity": a.quantity,
                    "documented": a.documented,
                    "computed": a.computed,
                    "status": a.status,
                    "printed": a.printed,
                    "tolerance": a.tolerance,
                    "basis": a.basis,
                    "accepted": a.accepted,
                    "note": a.note,
                    "entry": a.entry,
                    "element": list(a.element),
                    **audit_extra(a),
                }
                for a in self.audit
            ],
            "passed": self.passed,
            "status": self.status,
            **({"skipped": self.skipped} if self.skipped is not None else {}),
            "theory": list(self.theory),
            **({"findings": list(self.findings)} if self.findings else {}),
            **({"unchecked": list(self.unchecked)} if self.unchecked else {}),
            "notes": list(self.notes),
        }
        for t in self.tables:
            doc.setdefault("tables", {})[t.name] = list(t.rows)
        doc.update(self.extra)
        doc["layout"] = self._layout()
        cleaned: dict[str, Any] = clean(doc)
        return cleaned

    def _layout(self) -> dict[str, Any]:
        """How the result is shown (columns, panels, figure captions), so a report can be
        rebuilt from results.json alone, long after the run."""
        return {
            "description": self.description,
            "expect": list(self.expect),
            "panels": [vars(p) for p in self.panels],
            "tables": [_table_layout(t) for t in (self.table, *self.tables)],
            "figures": [{"name": f.name, "kind": f.kind, "title": f.title,
                         "caption": f.caption} for f in self.figures],
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Result:
        """A Result read back from results.json, for reports: figures carry no data; a file
        written before `layout` existed gets plain columns named after its row keys."""
        layout = doc.get("layout") or {}
        more = doc.get("tables") or {}
        shapes = layout.get("tables") or [{"name": ""}, *({"name": n} for n in more)]
        tables = [_table_from(shapes[0], doc.get("rows") or [])]
        tables += [_table_from(s, more.get(s.get("name", "")) or []) for s in shapes[1:]]
        known = {"study", "name", "title", "source", "spec", "rows", "checks", "audit", "passed",
                 "theory", "findings", "notes", "tables", "layout", "schema_version",
                 "unchecked", "status", "skipped",
                 "sdpa_version"}
        return cls(
            study=str(doc.get("study", "")), name=str(doc.get("name", "")),
            title=str(doc.get("title") or doc.get("name", "")),
            source=str(doc.get("source", "")), description=str(layout.get("description", "")),
            spec=doc.get("spec") or {}, table=tables[0], tables=tuple(tables[1:]),
            checks=tuple(Check(**{**c, "fields": tuple(c.get("fields") or ())})
                         for c in doc.get("checks") or []),
            audit=tuple(audit_from_json(a) for a in doc.get("audit") or []),
            theory=tuple(doc.get("theory") or []), findings=tuple(doc.get("findings") or []),
            unchecked=tuple(doc.get("unchecked") or []),
            expect=tuple(layout.get("expect") or []), notes=tuple(doc.get("notes") or []),
            figures=tuple(Figure(f["name"], f.get("kind", ""), f.get("title", ""), {},
                                 f.get("caption", "")) for f in layout.get("figures") or []),
            panels=tuple(Panel(p["title"], tuple(p["lines"]), p.get("style", "plain"))
                         for p in layout.get("panels") or []),
            extra={k: v for k, v in doc.items() if k not in known},
            skipped=_skip_reason(doc),
        )


def _skip_reason(doc: Mapping[str, Any]) -> str | None:
    """Why a run measured nothing: `skipped` (older sdpa's files kept it among the extra
    fields under the same name)."""
    reason = doc.get("skipped")
    return str(reason) if reason is not None else None


def _table_layout(t: Table) -> dict[str, Any]:
    return {"name": t.name, "title": t.title, "terminal": t.terminal,
            "columns": [vars(c) for c in t.columns]}


def _table_from(shape: Mapping[str, Any], rows: list[Mapping[str, Any]]) -> Table:
    columns = shape.get("columns")
    if columns is None:  # no layout: every row key, in first-seen order
        keys: list[str] = []
        for row in rows:
            keys.extend(k for k in row if k not in keys)
        columns = [{"key": k, "header": k} for k in keys]
    return Table(str(shape.get("name", "")), str(shape.get("title") or shape.get("name", "")),
                 tuple(Column(**c) for c in columns), tuple(rows),
                 bool(shape.get("terminal", True)))


SCHEMA_VERSION = 1  # of every JSON document sdpa prints (sdpa_cli/schemas/*.json)


def json_header() -> dict[str, Any]:
    """The fields that open every JSON document: which shape, which sdpa wrote it."""
    version: str = __version__
    return {"schema_version": SCHEMA_VERSION, "sdpa_version": version}


def clean(value: Any) -> Any:
    """JSON-safe copy: NumPy scalars to Python, NaN/±inf to None, tuples to lists."""
    if isinstance(value, Mapping):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, str):  # NumPy scalars and arrays
        return clean(value.tolist())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return value


def audit_extra(a: AuditEntry) -> dict[str, Any]:
    """The JSON fields of an entry beyond the number comparison (DESIGN.md section 6)."""
    out: dict[str, Any] = {"kind": a.kind}
    if a.kind == "number":
        out["cause"] = a.cause
        out["from"] = a.from_
        if a.root is not None:
            out["root"] = a.root
        if a.replayed is not None:
            out["replayed"] = a.replayed
            out["replay_spread"] = a.replay_spread
        if a.is_root:
            out["material"] = a.material is not None
            if a.material is not None:
                out["conclusion"] = a.material
        if a.line is not None:
            out["line"] = a.line
        if a.cites is not None:
            out["cites"] = a.cites
    else:
        out.update({"measurement": a.measurement, "spec": a.spec_name,
                    "uncertainty": a.uncertainty, "reason": a.reason,
                    "premise": a.premise, "robustness": a.robustness,
                    "fragile": a.fragile, "decides": a.decides})
    return out


def audit_from_json(doc: Mapping[str, Any]) -> AuditEntry:
    """An AuditEntry read back from results.json (older sdpa's files too)."""
    known = set(AuditEntry.__dataclass_fields__)
    data = {k: v for k, v in doc.items() if k in known and k not in ("material", "fragile")}
    data["from_"] = doc.get("from")
    data["spec_name"] = doc.get("spec")
    data["material"] = doc.get("conclusion") if doc.get("material") else None
    data["element"] = tuple(doc.get("element") or ())
    return AuditEntry(**data)
