"""Reports over several worked examples: the --list listing and the --all batch summary."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from sdpa_cli.errors import one_line
from sdpa_cli.framework.causes import tally
from sdpa_cli.framework.documents import cite, label
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


def listing_document(entries: Sequence[Listed], fmt: str, width: int | None = None) -> str:
    """--list as JSON, CSV, Markdown, or aligned text for a person (all on stdout); the text
    wrapped under its own column to `width` (a terminal's; None: one line per field)."""
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
        md = writers.md_text  # descriptions and sources come from local spec files
        lines += [f"| {md(e.name)} | {md(e.problem or e.description)} | {md(e.source)} |"
                  for e in entries]
        return "\n".join(lines) + "\n"
    names = max((len(e.name) for e in entries), default=4)
    indent = " " * (names + 2)
    lines = []
    for e in entries:
        what = e.description if not e.problem else f"INVALID: {e.problem}"
        for first, text in ((e.name.ljust(names) + "  ", what),
                            (indent, f"source: {cite(e.source)}" if e.source else "")):
            if not text:
                continue
            if width is None or width <= len(indent) + 20:
                lines.append(first + text)
            else:  # wrapped under the column, never mid-word at the terminal's edge
                lines += textwrap.wrap(text, width, initial_indent=first,
                                       subsequent_indent=indent, break_on_hyphens=False)
    return "\n".join(one_line(line) for line in lines) + "\n"


def show_listing(entries: Sequence[Listed], fmt: str) -> None:
    """--list on stdout: the text wrapped at the terminal's width, or at COLUMNS (else 80)
    in a pipe, where a person reads it through `less` or `head`."""
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else piped_width()
    write_stdout(listing_document(entries, fmt, width))


def piped_width() -> int:
    """The width for text into a pipe: COLUMNS when it is a plausible width, else 80."""
    given = os.environ.get("COLUMNS", "")
    ok = given.isascii() and given.isdigit() and len(given) <= 4 and int(given) >= 40
    return int(given) if ok else 80


def batch_document(results: Sequence[Result], fmt: str) -> str | None:
    """What --all puts on stdout: one document holding every example."""
    if fmt == "json":
        doc = {**json_header(), "examples": [writers.with_counts(r) for r in results],
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
    """One line per example: its name whole (the column that must survive 80 columns), the
    document by its number, the audit root errors first: errors of its own and
    inconsistencies (per printed line), the values that inherit them, rounding-only
    differences, matches; the folders are named once below."""
    out = RichTable(title="Worked examples", title_justify="left", header_style="bold",
                    box=box.SIMPLE_HEAD, pad_edge=False)
    out.add_column("example", no_wrap=True,
                   min_width=max((len(r.name) for r, _ in results), default=7))
    out.add_column("doc", no_wrap=True)
    # own: errors of its own; inc.: inconsistencies (printed lines); inh.: values inheriting
    # them; round: rounding only (the line under the table says it in words)
    for header in ("own", "inc.", "inh.", "round", "match", "checks"):
        out.add_column(header, justify="right", no_wrap=True)
    for r, _ in results:
        t = tally(r.audit)
        unaccepted = any(a.unaccepted for a in r.audit)
        failed = [c for c in r.checks if not c.passed]
        out.add_row(
            r.name, document_number(r.source),
            Text(str(t.own), style="bold red" if unaccepted else "yellow" if t.own else ""),
            Text(str(t.inconsistent), style="yellow" if t.inconsistent else ""),
            str(t.carried), str(t.rounding), f"{t.matched}/{t.numbers}",
            Text("✓" if not failed else f"✗ {len(failed)}",
                 style="green" if not failed else "bold red"),
        )
    return out


def document_number(source: str) -> str:
    """`001` for a source in `001_409455fed8d25d77.txt`, else the file name as given."""
    file = source.split(",")[0].strip()
    head = file.split("_", 1)[0]
    return head if head.isdigit() and file.endswith(".txt") else file


def folders_line(results: Sequence[tuple[Result, Path | None]]) -> str | None:
    """Where the examples' run folders are: their common parent, said once."""
    folders = [f for _, f in results if f is not None]
    if not folders:
        return "nothing written (--no-write)" if results else None
    parents = {f.parent for f in folders}
    if len(parents) == 1:
        return f"wrote {len(folders)} run folders in {folders[0].parent}/: one per example"
    return "wrote " + ", ".join(str(f) for f in folders)


def show_batch(results: Sequence[tuple[Result, Path | None]], *, check: bool,
               out: Console | None = None) -> None:
    """The --all report (on stdout): one summary row per example, then what failed."""
    con = out or terminal.console()
    con.print(summary_table(results))
    sources = sorted({label(r.source.split(",")[0]) for r, _ in results})
    if sources:
        con.print(Text("doc: " + ", ".join(sources), style="dim"))
    every = [a for r, _ in results for a in r.audit]
    con.print(Text(f"{len(results)} examples: {tally(every).headline('their')} "
                   "(errors counted per printed line, inherited values per number)",
                   style="dim"))
    for r, _ in results:
        for c in r.checks:
            if not c.passed:
                con.print(Text(f"  FAIL {r.name}: {c.name}: {c.detail}", style="red"))
    if not check and any(not r.passed for r, _ in results):
        con.print(Text("  (exit code stays 0 without --check)", style="dim"))
    where = folders_line(results)
    if where:
        con.print(Text(where, style="dim"))
