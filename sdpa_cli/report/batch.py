"""A batch's index.md and self-contained report.html, and its summary on stderr / stdout."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from rich.table import Table as RichTable
from rich.text import Text

from sdpa_cli.framework.result import json_header
from sdpa_cli.report import collect, html_report, provenance, writers
from sdpa_cli.report.collect import INDEX_TITLE, Entry, by_document
from sdpa_cli.report.formatting import audit_number
from sdpa_cli.report.html_report import FOLD
from sdpa_cli.report.outcomes import STATUSES, Outcome
from sdpa_cli.report.runfolder import write_batch
from sdpa_cli.report.terminal import console
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
    parts = [f"{n} {status}" for status, n in sorted(counts.items())]
    return f"{len(outcomes)} experiments: " + ", ".join(parts)


# --- index.md ----------------------------------------------------------------------------


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def index_md(items: Sequence[Entry]) -> str:
    """The batch folder's experiments in Markdown, in the documents' order."""
    lines = [INDEX_TITLE, "", '<a id="top"></a>', "",
             provenance.headline(items) + ", in the order of the documents they reproduce.",
             "", "## Contents", ""]
    for key, heading, group in by_document(items):
        lines.append(f"- [{heading}](#{key})")
        for e in group:
            r = e.result
            checks = f"{sum(c.passed for c in r.checks)}/{len(r.checks)} checks" if r else ""
            bad, ok = provenance.findings(r)
            facts = ", ".join(x for x in (e.status, checks,
                                          f"{bad} mismatched ({ok} accepted)" if bad else "")
                              if x)
            lines.append(f"  - [{_md(e.title or e.name)}](#{e.anchor}) ({facts})")
    s = provenance.audit_summary(items)
    lines += ["", "## Audit of the documents' printed numbers", "",
              f"{s.checked} printed numbers checked in {s.experiments} experiments: {s.matched} "
              f"match, {len(s.mismatches)} mismatch ({s.accepted} accepted as known findings, "
              f"{len(s.mismatches) - s.accepted} not accepted).", ""]
    if s.mismatches:
        lines += ["| document | checked | mismatch | accepted |", "|---|---|---|---|"]
        lines += [f"| {_md(doc)} | {n} | {bad} | {ok} |" for doc, n, bad, ok in s.per_document]
        lines.append("")
        table = ["| document | experiment | where | printed → computed | why |",
                 "|---|---|---|---|---|"]
        table += [f"| {_md(doc)} | [{e.name}](#{e.anchor}) | {_md(a.source)}: "
                  f"{_md(a.quantity)} | {_md(a.printed)} → "
                  f"{audit_number(a.computed, a.tolerance, a.printed)} | "
                  f"{_md(a.note or a.accepted or 'not accepted')} |"
                  for e, doc, a in s.mismatches]
        lines += [*writers.fold_table(f"The {len(s.mismatches)} mismatches", table, FOLD), ""]
    for key, heading, group in by_document(items):
        lines += [f'<a id="{key}"></a>', "", f"## {heading}", ""]
        for e in group:
            lines += [f'<a id="{e.anchor}"></a>', ""]
            if e.status in ("error", "skipped", "unreadable"):
                lines += [f"**{e.status}**" + (f": {e.error}" if e.error else ""), ""]
            if e.result is None:
                lines += [f"### {e.title or e.name}", ""]
            else:
                figures = [f"{e.name}/{f}" for f in e.figures]
                lines += writers.result_markdown(e.result, level=3, figures=figures, fold=FOLD)
            where = (f"run folder: [{e.name}/]({e.name}/) (resolved spec: "
                     f"[spec.yaml]({e.name}/spec.yaml))" if e.result else
                     f"spec: `{e.spec_file or '—'}`")
            lines += ["", f"{where} · status: **{e.status}** · [back to top](#top)", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


# --- writing -----------------------------------------------------------------------------


def write(outcomes: Sequence[Outcome], root: Path) -> list[Entry]:
    """index.md and report.html describing every run folder now in `root` (this batch's
    and earlier ones), with this batch's errors; returns what they describe."""
    root.mkdir(parents=True, exist_ok=True)
    items = collect.entries(root, outcomes)
    # Through the batch manifest: replaces index.md and report.html only if sdpa wrote them.
    write_batch(root, {
        "index.md": index_md(items).encode("utf-8", "backslashreplace"),
        "report.html": html_report.report_html(items, root).encode("utf-8", "backslashreplace"),
    })
    return items


def refresh(folder: Path) -> bool:
    """After a study command replaced `folder`: if its parent holds a batch report sdpa
    wrote, rebuild that report so it stays true. Returns whether it did."""
    root = folder.parent
    if not collect.is_batch_folder(root):
        return False
    write((), root)
    return True


def failures(o: Outcome) -> list[dict[str, str]]:
    """Each failed check of a spec with its detail (a kept folder's from its results.json)."""
    checks = o.result.checks if o.result is not None else \
        recorded(o.folder)[0] if o.kept and o.folder is not None else ()
    return [{"check": c.name, "detail": c.detail} for c in checks if not c.passed]


def summary_json(outcomes: Sequence[Outcome], root: Path) -> str:
    doc = {
        **json_header(),
        "passed": all(o.status == "passed" for o in outcomes),
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
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def show_summary(outcomes: Sequence[Outcome], root: Path, *, check: bool,
                 described: int | None = None, wrote: bool = True) -> None:
    con = console()
    table = RichTable(title=_headline(outcomes), title_justify="left", header_style="bold")
    for header in ("experiment", "study", "status", "checks", "findings", "seconds"):
        table.add_column(header, justify="right" if header in ("seconds",) else "left")
    for o in outcomes:
        r = o.result
        checks = f"{sum(c.passed for c in r.checks)}/{len(r.checks)}" if r else "—"
        bad, ok = provenance.findings(r)
        style = {"passed": "green", "failed": "red", "error": "bold red"}.get(o.status, "dim")
        status = Text(o.status + (" (unchanged, kept)" if o.kept else ""), style=style)
        table.add_row(_name(o), o.planned.spec.study, status, checks,
                      f"{bad} ({ok} accepted)", f"{o.seconds:.1f}")
    con.print(table)
    for o in outcomes:
        if o.status == "error":
            con.print(Text(f"error  {_name(o)}: {o.error}", style="bold red"))
        elif o.status == "failed" and o.result is not None:
            for c in o.result.checks:
                if not c.passed:
                    con.print(Text(f"failed {_name(o)}: {c.name}: {c.detail}", style="red"))
    failed = any(o.status == "failed" for o in outcomes)
    if failed and not check:
        con.print(Text("(failed checks do not change the exit code without --check)",
                       style="dim"))
    more = "" if described is None or described == len(outcomes) else (
        f" (they describe all {described} run folders there)")
    if not wrote:
        con.print(Text("--no-write: nothing was written", style="dim"))
        return
    con.print(Text(f"wrote {root / 'index.md'} and {root / 'report.html'}{more}", style="dim"))
