"""A batch's index.md (a summary with links) and report.html, and its summary on stdout."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table as RichTable
from rich.text import Text

from sdpa_cli.errors import json_safe
from sdpa_cli.framework.causes import claim_coverage, counts, tally
from sdpa_cli.framework.claims import verdicts
from sdpa_cli.framework.documents import cite, document_of, label
from sdpa_cli.framework.result import AuditEntry, json_header
from sdpa_cli.report import answer, collect, html_report, provenance, writers
from sdpa_cli.report.collect import INDEX_TITLE, Entry, by_document
from sdpa_cli.report.formatting import get_commands, skip_reason
from sdpa_cli.report.html_report import FOLD
from sdpa_cli.report.outcomes import STATUSES, STYLE, Outcome
from sdpa_cli.report.runfolder import make_folders, write_batch
from sdpa_cli.report.terminal import result_console
from sdpa_cli.report.unchanged import recorded


def _name(o: Outcome) -> str:
    return o.planned.target.name


def _counts(outcomes: Sequence[Outcome]) -> dict[str, int]:
    out: dict[str, int] = {}
    for o in outcomes:
        out[o.status] = out.get(o.status, 0) + 1
    return out


def _headline(outcomes: Sequence[Outcome]) -> str:
    counts = _counts(outcomes)
    # passed, failed, error, skipped: the statuses' own order ("40 passed, 1 skipped")
    parts = [f"{counts[s]} {s}" for s in STATUSES if counts.get(s)]
    kept = sum(o.kept for o in outcomes)
    what = "experiment" if len(outcomes) == 1 else "experiments"
    return f"{len(outcomes)} {what}: " + ", ".join(parts) + (
        f" ({kept} unchanged, kept)" if kept else "")


# --- index.md ----------------------------------------------------------------------------


def _md(text: str) -> str:
    return writers.md_text(text)


def index_md(items: Sequence[Entry]) -> str:
    """The batch folder's summary in Markdown, in the documents' order: each experiment's
    verdict and findings with links to its run folder, where its full detail stays
    (table.md: every table, check and audited number; the figures)."""
    lines = [INDEX_TITLE, "", '<a id="top"></a>', "",
             provenance.headline(items) + ", in the order of the documents they reproduce. "
             "Each links to its run folder's table.md, which holds its tables, checks and "
             "audit; report.html shows the same with the figures.", ""]
    s = provenance.audit_summary(items)
    every = [a for e in items if e.result is not None for a in e.result.audit]
    lines += answer.answer_md(items)
    lines += ["## The documents audited", "", f"{audit_headline(every)}.", "",
              f"{s.checked} printed numbers checked in {s.experiments} experiments: {s.matched} "
              f"match, {len(s.mismatches)} mismatch ({s.accepted} accepted as known findings, "
              f"{len(s.mismatches) - s.accepted} not accepted).", ""]
    lines += ["| document | printed numbers checked | mismatch | accepted | claims judged |",
              "|---|---|---|---|---|"]
    lines += [f"| {_md(d.document)} | {d.checked} | {d.mismatched} | {d.accepted} | "
              f"{provenance.claims_text(d.claims)} |" for d in s.per_document]
    lines.append("")
    roots = _root_rows(items)
    if roots:
        lines += ["### Root errors of the documents", "",
                  "Printed lines wrong on their own or inconsistent; the values that inherit "
                  "each are counted beside it (each run folder's table.md lists them).", "",
                  "| document | experiment | where | printed → computed | cause | inherited |",
                  "|---|---|---|---|---|---|", *roots, ""]
    lines += _claims_md(items, every)
    for key, heading, group in by_document(items):
        lines += [f'<a id="{key}"></a>', "", f"## {heading}", ""]
        for e in group:
            lines += [f'<a id="{e.anchor}"></a>', "", *_entry_md(e), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


_WORST_FIRST = {"fails": 0, "partly": 1, "holds": 2, "untested": 3}


def _claims_md(items: Sequence[Entry], audit: Sequence[AuditEntry]) -> list[str]:
    """Each claim of the documents once, worst first: its verdict (fragile where a fair
    threshold flips it) and the experiments that judged it, the deciding ones first; what
    each rests on is in their table.md."""
    found = sorted(verdicts(audit), key=lambda v: (_WORST_FIRST.get(v.status, 9),
                                                    label(v.document)))
    if not found:
        return []
    anchors = {e.name: e.anchor for e in items}
    rows = [f"| **{v.status}**{' (fragile)' if v.fragile else ''} | {_md(label(v.document))} "
            f"| {_md(v.claim)} | " + ", ".join(
                f"[{_md(n)}](#{anchors[n]})" if n in anchors else _md(n) for n in v.specs)
            + " |" for v in found]
    table = ["| verdict | document | claim (in sdpa's words) | experiments |",
             "|---|---|---|---|", *rows]
    return ["### The documents' claims, each once", "",
            f"claims: {claim_coverage(audit)}; each experiment's table.md gives the measurement "
            "and premise behind each verdict.", "",
            *writers.fold_table("The documents' claims", table, FOLD), ""]


def _entry_md(e: Entry) -> list[str]:
    """One experiment: its title linked to its detail, verdict, findings, figures."""
    r = e.result
    title = _md(e.title or e.name)
    checks = f"{sum(c.passed for c in r.checks)}/{len(r.checks)} checks" if r else ""
    n_roots, heirs = provenance.root_errors(r)
    errors = (f"{n_roots} root error{'s' if n_roots != 1 else ''}"
              + (f" (+{heirs} inherited)" if heirs else "")) if n_roots else ""
    facts = ", ".join(x for x in (f"**{e.status}**", checks, errors) if x)
    head = f"### [{title}]({e.name}/table.md)" if r else f"### {title}"
    out = [head, "", facts + (f": {_md(e.error)}" if e.error else "")]
    if r is None:
        return [*out, "", f"spec: {writers.md_code(str(e.spec_file or '—'))} · "
                "[back to top](#top)"]
    if e.source:
        out[-1] += f" · reproduces {_md(cite(e.source))}"
    if r.skipped is not None:
        out += ["", f"- nothing was measured: {_md(r.skipped)}"]
    out += [""] + [f"- {_md(t)}" for t in r.findings]
    failed = [c for c in r.checks if not c.passed]
    out += [f"- failed check {_md(c.name)}: {_md(c.detail)}" for c in failed]
    if e.figures:
        out += ["", "figures: " + ", ".join(f"[{f}]({e.name}/{f})" for f in e.figures)]
    return [*out, "", f"run folder: [{e.name}/]({e.name}/) · [back to top](#top)"]


def _root_rows(items: Sequence[Entry]) -> list[str]:
    return [f"| {_md(label(r.first.source.partition(', ')[0]))} | [{r.entry.name}]"
            f"(#{r.entry.anchor}) | {_md(r.first.source.partition(', ')[2] or r.first.source)}"
            f" | {_md(r.printed)} → {_md(r.computed)} | {_md(r.first.cause or '')} | "
            f"{r.heirs} |" for r in provenance.root_lines(items)]


# --- writing -----------------------------------------------------------------------------


def write(outcomes: Sequence[Outcome], root: Path) -> list[Entry]:
    """index.md and report.html describing the batch's run folders now in `root` (this
    batch's and the earlier batches' listed there, collect.members), with this batch's
    errors; returns what they describe."""
    make_folders(root)
    chosen = collect.members(root, outcomes)
    items = collect.entries(root, outcomes, chosen)
    # Through the batch manifest: replaces index.md and report.html only if sdpa wrote them.
    write_batch(root, {
        "index.md": index_md(items).encode("utf-8", "backslashreplace"),
        "report.html": html_report.report_html(items, root).encode("utf-8", "backslashreplace"),
    }, experiments=sorted(chosen) if chosen is not None else [e.name for e in items],
        summary=batch_totals(items))
    return items


def batch_totals(items: Sequence[Entry]) -> dict[str, Any]:
    """What index.md and report.html total, for sdpa-batch.json: the audit's counts (root
    errors first; each claim once) and each claim's one verdict with the runs behind it."""
    audit = [a for e in items if e.result is not None for a in e.result.audit]
    return {"audit": counts(audit),
            "claims": [{"document": v.document, "claim": v.claim, "status": v.status,
                        "fragile": v.fragile, "runs": list(v.specs), "why": v.why or None}
                       for v in verdicts(audit)]}


def refresh(folder: Path) -> bool:
    """After a study command replaced `folder`: if its parent holds a batch report sdpa
    wrote and that report describes `folder`, rebuild it so it stays true. A scratch run
    beside the batch's folders is not described there and changes nothing. Returns whether
    it rebuilt the report."""
    root = folder.parent
    if not collect.is_batch_folder(root):
        return False
    chosen = collect.members(root)
    if chosen is not None and folder.name not in chosen:
        return False
    write((), root)
    return True


def joined(folder: Path, *, source: str, from_flags: bool, replaced: bool,
           hint: bool = True) -> str:
    """What a study command's run did to the batch report beside it, which describes this
    folder (refresh): the report now shows this run in its place. A run from flags (or one
    the documents do not own) is said to be such, so nobody mistakes it for the spec's."""
    where = f"updated {folder.parent / 'index.md'} and report.html"
    if document_of(source) is not None and not from_flags:
        return where + (f" ({folder.name} replaced there)" if replaced else "")
    what = "this run from flags" if from_flags else "this run"
    return (f"{where}: {folder.name} there is now {what}"
            + (" (run the batch again to restore it)" if hint and replaced else ""))


def failures(o: Outcome) -> list[dict[str, str]]:
    """Each failed check of a spec with its detail (a kept folder's from its results.json)."""
    checks = o.result.checks if o.result is not None else \
        recorded(o.folder)[0] if o.kept and o.folder is not None else ()
    return [{"check": c.name, "detail": c.detail} for c in checks if not c.passed]


def _audit_of(o: Outcome) -> tuple[AuditEntry, ...]:
    if o.result is not None:
        return o.result.audit
    return recorded(o.folder)[1] if o.kept and o.folder is not None else ()


def audit_headline(audit: Sequence[AuditEntry]) -> str:
    """'documents: 14 errors of their own, 3 inconsistencies …; claims: 9 holds, …'."""
    text = f"documents: {tally(audit).headline('their')}"
    if any(a.kind == "claim" for a in audit):
        text += f"; claims: {claim_coverage(audit)}"
    return text


def summary_json(outcomes: Sequence[Outcome], root: Path) -> str:
    doc = {
        **json_header(),
        # a skipped spec measured nothing and failed nothing (`--require-models` fails it)
        "passed": all(o.status in ("passed", "skipped") for o in outcomes),
        "audit": counts([a for o in outcomes for a in _audit_of(o)]),
        "folder": str(root),
        "counts": {s: sum(o.status == s for o in outcomes) for s in STATUSES}
        | {"kept": sum(o.kept for o in outcomes)},
        "seconds": round(sum(o.seconds for o in outcomes), 3),
        "experiments": [
            {
                "name": _name(o),
                "study": o.planned.spec.study,
                "file": str(o.planned.file),
                "status": o.status,
                "kept": o.kept,
                "error": o.error,
                "checks_failed": [f["check"] for f in failures(o)],
                "failures": failures(o),
                "findings": provenance.findings(o.result)[0],
                "seconds": round(o.seconds, 3),
                "folder": str(o.planned.target),
            }
            for o in outcomes
        ],
    }
    return json_safe(json.dumps(doc, indent=2, ensure_ascii=False)) + "\n"  # kept runs' text


# One symbol per status, so the experiment's name keeps the width at 80 columns.
MARK = {"passed": "✓", "failed": "✗", "error": "!", "skipped": "–"}
LEGEND = ("✓ passed, ✗ a check failed, ! could not run, – skipped; = unchanged since its "
          "folder was written, kept; root errors: printed lines of the documents wrong on "
          "their own or inconsistent (+ the values that inherit them)")


def _roots(roots: int, heirs: int) -> Text:
    if not roots:
        return Text("0", style="dim")
    return Text(f"{roots} (+{heirs})" if heirs else str(roots), style="yellow")


def summary_table(outcomes: Sequence[Outcome]) -> RichTable:
    """One line per spec: the name whole (never cut), the rest as symbols and counts; only
    the study's name gives way on a narrow terminal."""
    rows = []
    for o in outcomes:
        r = o.result
        checks = f"{sum(c.passed for c in r.checks)}/{len(r.checks)}" if r else "—"
        style = STYLE.get(o.status, "dim")
        mark = Text(MARK.get(o.status, "?"), style=style)
        if o.kept:
            mark.append("=", style="dim")
        seconds = Text("kept", style="dim") if o.kept else Text(f"{o.seconds:.1f}")
        rows.append((Text(_name(o)), Text(o.planned.spec.study), mark, Text(checks),
                     _roots(*provenance.root_errors(r)), seconds))
    table = RichTable(title=_headline(outcomes), title_justify="left", header_style="bold",
                      box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    headers = ("experiment", "study", "", "checks", "root errors", "seconds")
    for i, header in enumerate(headers):
        widest = max([len(header), *(row[i].cell_len for row in rows)])
        if header == "study":  # the one column that may give way (ends in …)
            table.add_column(header, no_wrap=True, overflow="ellipsis", min_width=6)
        else:
            table.add_column(header, no_wrap=True, min_width=widest,
                             justify="right" if i >= 3 else "left")
    for row in rows:
        table.add_row(*row)
    return table


def show_summary(outcomes: Sequence[Outcome], root: Path, *, check: bool,
                 described: int | None = None, wrote: bool = True) -> None:
    """The batch's result for people, on stdout: the audit's headline, a line per spec, what
    failed or was skipped and how to get what was missing (said once, here at the end)."""
    con = result_console()
    audit = [a for o in outcomes for a in _audit_of(o)]
    if audit:  # the documents' root errors and the claims' coverage lead
        con.print(Text(audit_headline(audit), style="bold"))
    con.print(summary_table(outcomes))
    con.print(Text(LEGEND, style="dim"))
    for o in outcomes:
        if o.status == "error":
            con.print(Text(f"error  {_name(o)}: {o.error}", style="bold red"))
        elif o.status == "skipped" and o.result is not None:
            con.print(Text(f"skipped {_name(o)}: {skip_reason(o.result.skipped or '')[0]}",
                           style="dim"))
        elif o.status == "failed" and o.result is not None:
            for c in o.result.checks:
                if not c.passed:
                    con.print(Text(f"failed {_name(o)}: {c.name}: {c.detail}", style="red"))
    failed = any(o.status == "failed" for o in outcomes)
    if failed and not check:
        con.print(Text("(failed checks do not change the exit code without --check)",
                       style="dim"))
    con.print(Text(wrote_line(outcomes, root, described, wrote), style="dim"))
    hows = [skip_reason(o.result.skipped)[1] for o in outcomes
            if o.status == "skipped" and o.result is not None and o.result.skipped]
    for how in get_commands(hows):  # what was missing, and the one way to get it: last
        con.print(Text(f"get what the skipped specs need with: {how}", style="bold"))


def wrote_line(outcomes: Sequence[Outcome], root: Path, described: int | None,
               wrote: bool) -> str:
    """What the batch wrote: index.md and report.html (and how many run folders they
    describe, when more than this batch's), or that --no-write wrote nothing."""
    if not wrote:
        return "--no-write: nothing was written"
    more = "" if described is None or described == len(outcomes) else (
        f" (they describe all {described} run folders there)")
    return f"wrote {root / 'index.md'} and {root / 'report.html'}{more}"
