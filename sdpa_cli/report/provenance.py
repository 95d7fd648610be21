"""What a batch report says about itself: counts, the audit summary, versions, commit, seeds."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import sdpa_cli
from sdpa_cli import __version__
from sdpa_cli.framework.causes import grouped, tally
from sdpa_cli.framework.claims import verdicts
from sdpa_cli.framework.documents import DOCUMENTS, label
from sdpa_cli.framework.result import AuditEntry, Result
from sdpa_cli.report.collect import Entry, git_commit
from sdpa_cli.report.formatting import audit_number


@dataclass(frozen=True)
class RootLine:
    """One printed line of a document wrong on its own (or inconsistent), as the reports list
    it: where, printed → computed, its cause, how many values inherit it."""

    entry: Entry
    first: AuditEntry  # the line's first wrong number (source, cause, material, accepted)
    printed: str  # every wrong number of the line, as printed
    computed: str  # and as computed (to the printed precision)
    heirs: int


def root_lines(items: Sequence[Entry]) -> list[RootLine]:
    """The documents' root errors, experiment by experiment, each printed line once."""
    return [RootLine(e, roots[0], " ".join(r.printed for r in roots),
                     " ".join(audit_number(r.computed, r.tolerance, r.printed) for r in roots),
                     len(heirs))
            for e in items if e.result is not None for roots, heirs in grouped(e.result.audit)]


def findings(result: Result | None) -> tuple[int, int]:
    """(mismatches, of which accepted) in a result's audit."""
    if result is None:
        return 0, 0
    bad = [a for a in result.audit if a.status == "mismatch"]
    return len(bad), sum(1 for a in bad if a.accepted)


def root_errors(result: Result | None) -> tuple[int, int]:
    """(root errors, values inheriting them) in a result's audit: printed lines with an
    error of their own or an inconsistency, and the numbers carried from them."""
    if result is None:
        return 0, 0
    t = tally(result.audit)
    return t.own + t.inconsistent, t.carried


def headline(items: Sequence[Entry]) -> str:
    counts = Counter(e.status for e in items)
    parts = [f"{n} {status}" for status, n in sorted(counts.items())]
    noun = "experiment" if len(items) == 1 else "experiments"
    return f"{len(items)} {noun}" + (": " + ", ".join(parts) if parts else "")


@dataclass(frozen=True)
class DocumentCount:
    """One document's row of the per-document table: its printed numbers and its claims."""

    document: str  # as every line names it (documents.label)
    checked: int = 0
    mismatched: int = 0
    accepted: int = 0
    claims: dict[str, int] = field(default_factory=dict)  # verdict → claims (each once)


@dataclass(frozen=True)
class AuditSummary:
    experiments: int  # experiments with at least one printed number
    checked: int
    matched: int
    accepted: int
    mismatches: tuple[tuple[Entry, str, AuditEntry], ...]  # (experiment, document, entry)
    # every one of the five documents, in their order (a document no run audits too), then
    # any other source the specs cite, each by the one name it has everywhere
    per_document: tuple[DocumentCount, ...] = ()


def document_name(a: AuditEntry, e: Entry) -> str:
    """The document an audit entry itself quotes, by label(): one of the five, another work
    a spec cites ("Nakanishi 2025 (arXiv:…), Figure 1"), else its experiment's document."""
    head, sep, _ = a.source.partition(", ")
    if label(head.strip()) != head.strip() or sep:
        return label(head.strip())
    return label(e.source.split(",")[0].strip()) if e.source else e.name


def audit_summary(items: Sequence[Entry]) -> AuditSummary:
    checked = matched = accepted = audited = 0
    bad: list[tuple[Entry, str, AuditEntry]] = []
    docs: dict[str, list[int]] = {d.label: [0, 0, 0] for d in DOCUMENTS}
    every: list[AuditEntry] = []
    for e in items:
        if e.result is None or not e.result.audit:
            continue
        audited += 1
        every += e.result.audit
        for a in e.result.audit:
            if a.kind != "number":
                continue
            doc = document_name(a, e)
            tally = docs.setdefault(doc, [0, 0, 0])
            checked += 1
            tally[0] += 1
            if a.status == "mismatch":
                bad.append((e, doc, a))
                accepted += bool(a.accepted)
                tally[1] += 1
                tally[2] += bool(a.accepted)
            else:
                matched += 1
    claims: dict[str, Counter[str]] = {}
    for v in verdicts([a for a in every if a.kind == "claim"]):
        claims.setdefault(label(v.document), Counter())[v.status] += 1
    for doc in claims:
        docs.setdefault(doc, [0, 0, 0])
    per_doc = tuple(DocumentCount(doc, c[0], c[1], c[2], dict(claims.get(doc, {})))
                    for doc, c in docs.items())
    return AuditSummary(audited, checked, matched, accepted, tuple(bad), per_doc)


@dataclass(frozen=True)
class Provenance:
    sdpa: str  # the version writing the report
    commit: str | None  # of the sdpa source, when it is a git checkout
    run_sdpa: tuple[str, ...]  # versions that wrote the run folders
    versions: dict[str, str]  # the libraries most run folders were made with
    mixed: str  # run folders made with other versions, named, or ""
    seeds: tuple[tuple[Entry, object], ...]


def collect(items: Sequence[Entry]) -> Provenance:
    sets: Counter[tuple[tuple[str, str], ...]] = Counter()
    per: dict[str, tuple[tuple[str, str], ...]] = {}
    for e in items:
        found = e.manifest.get("versions")
        if isinstance(found, dict):
            key = tuple(sorted((str(k), str(v)) for k, v in found.items() if v))
            sets[key] += 1
            per[e.name] = key
    common = max(sets.items(), key=lambda kv: (kv[1], kv[0]))[0] if sets else ()
    others = sorted(name for name, key in per.items() if key != common)
    run_sdpa = sorted({str(e.manifest["sdpa_version"]) for e in items
                       if e.manifest.get("sdpa_version")})
    seeds = tuple((e, e.result.spec.get("seed")) for e in items
                  if e.result is not None and e.result.spec.get("seed") is not None)
    return Provenance(__version__, git_commit(Path(sdpa_cli.__file__).resolve().parent),
                      tuple(run_sdpa), dict(common), ", ".join(others), seeds)


def claims_text(counts: dict[str, int]) -> str:
    """`4 holds, 1 fails` in the verdicts' order, or — when no claim of it is judged."""
    from_order = ("holds", "partly", "fails", "untested")
    return ", ".join(f"{counts[v]} {v}" for v in from_order if counts.get(v)) or "—"
