"""Reports over several worked examples: the --list listing and the --all batch summary."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from sdpa_cli.framework.result import Result, json_header
from sdpa_cli.report import terminal, write_stdout, writers


@dataclass(frozen=True)
class Listed:
    """One example as --list shows it."""
    name: str
    description: str
    source: str
    path: str
    problem: str | None = None  # why the spec does not load, if it does not


def listing_document(entries: Sequence[Listed], fmt: str) -> str:
    """--list as JSON, CSV, Markdown, or aligned text for a person (all on stdout)."""
    keys = ("name", "description", "source", "path")
    if fmt == "json":
        docs = [{k: getattr(e, k) for k in (*keys, "problem")} for e in entries]
        return json.dumps({**json_header(), "examples": docs}, indent=2,
                          ensure_ascii=False) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(keys)
        for e in entries:
            writer.writerow([getattr(e, k) for k in keys])
        return out.getvalue()
    if fmt == "markdown":
        lines = ["| name | description | source |", "|---|---|---|"]
        lines += [f"| {e.name} | {e.problem or e.description} | {e.source} |" for e in entries]
        return "\n".join(lines) + "\n"
    width = max((len(e.name) for e in entries), default=4)
    lines = []
    for e in entries:
        what = e.description if not e.problem else f"INVALID: {e.problem}"
        lines.append(f"{e.name.ljust(width)}  {what}")
        if e.source:
            lines.append(f"{' ' * width}  source: {e.source}")
    return "\n".join(lines) + "\n"


def show_listing(entries: Sequence[Listed], fmt: str) -> None:

    write_stdout(listing_document(entries, fmt))


def batch_document(results: Sequence[Result], fmt: str) -> str | None:
    """What --all puts on stdout: one document holding every example."""
    if fmt == "json":
        doc = {**json_header(), "examples": [r.to_json() for r in results],
               "passed": all(r.passed for r in results)}
        return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if fmt == "csv":
        # One table: every example's rows, each led by the example's name.
        parts = [writers.table_csv(r).splitlines() for r in results]
        header = parts[0][0] if parts and parts[0] else ""
        lines = [f"example,{header}"]
        for r, rows in zip(results, parts, strict=True):
            lines += [f"{r.name},{row}" for row in rows[1:]]
        return "\n".join(lines) + "\n"
    if fmt == "markdown":
        return "\n---\n\n".join(writers.table_md(r) for r in results)
    return None


def summary_table(results: Sequence[tuple[Result, Path | None]]) -> RichTable:
    out = RichTable(title="Worked examples", title_justify="left", header_style="bold")
    for header in ("example", "source", "audited", "match", "mismatch", "accepted", "checks",
                   "folder"):
        out.add_column(header, justify="right" if header in ("audited", "match", "mismatch",
                                                             "accepted") else "left")
    for r, folder in results:
        found = [a for a in r.audit if a.status == "mismatch"]
        accepted = [a for a in found if a.accepted]
        unaccepted = len(found) - len(accepted)
        failed = [c for c in r.checks if not c.passed]
        out.add_row(
            r.name, r.source.split(",")[0], str(len(r.audit)),
            str(len(r.audit) - len(found)),
            Text(str(len(found)), style="bold red" if unaccepted else "yellow" if found else ""),
            str(len(accepted)),
            Text("passed" if not failed else f"{len(failed)} failed",
                 style="green" if not failed else "bold red"),
            str(folder) if folder is not None else "(not written)",
        )
    return out


def show_batch(results: Sequence[tuple[Result, Path | None]], *, check: bool,
               out: Console | None = None) -> None:
    """The --all report on stderr: one summary row per example, then what failed."""
    con = out or terminal.console()
    con.print(summary_table(results))
    total = sum(len(r.audit) for r, _ in results)
    found = sum(a.status == "mismatch" for r, _ in results for a in r.audit)
    con.print(Text(f"{len(results)} examples, {total} documented numbers audited, {found} "
                   "mismatches (accepted findings included)", style="dim"))
    for r, _ in results:
        for c in r.checks:
            if not c.passed:
                con.print(Text(f"  FAIL {r.name}: {c.name}: {c.detail}", style="red"))
    if not check and any(not r.passed for r, _ in results):
        con.print(Text("  (exit code stays 0 without --check)", style="dim"))
