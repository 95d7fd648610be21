"""Human output on stderr: rich tables for results, checks and audit findings."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.panel import Panel as RichPanel
from rich.table import Table as RichTable
from rich.text import Text

from sdpa_cli.framework.result import AuditEntry, Result, Table
from sdpa_cli.report.fit import fit
from sdpa_cli.report.formatting import audit_number, cell


def console(file=None) -> Console:
    """A stderr console; wide and plain when stderr is not a terminal (CI logs)."""
    stream = file or sys.stderr
    is_tty = hasattr(stream, "isatty") and stream.isatty()
    columns = os.environ.get("COLUMNS", "")
    # ASCII digits, at most 5 of them: "²" passes isdigit() but not int(), and 5000 digits
    # pass neither Python's parsing limit nor any terminal
    given = columns.isascii() and columns.isdigit() and len(columns) <= 5
    width = None if is_tty else (int(columns) if given and int(columns) > 20 else 140)
    return Console(file=stream, width=width, highlight=False, soft_wrap=False,
                   force_terminal=None if is_tty else False)


# The width a prose column (Column.wrap) counts for when a table is fitted to the terminal.
WRAP_WIDTH = 16


def rich_table(table: Table, width: int | None = None, *, wide: bool = False
               ) -> tuple[RichTable, tuple[str, ...]]:
    """The table as rich renders it, and the headers of the columns left out so that it
    fits `width` (none are left out when `wide` or when the width is unknown)."""
    cells = [[cell(dict(row), c) for c in table.columns] for row in table.rows]

    def build(shown: Sequence[int], measuring: bool = False) -> RichTable:
        out = RichTable(title=table.title, title_justify="left", header_style="bold")
        for i in shown:
            c = table.columns[i]
            # a prose column counts WRAP_WIDTH when fitting, and then wraps in what is left
            out.add_column(c.header, justify="left" if c.fmt == "text" else "right",
                           no_wrap=c.fmt != "list" and not c.wrap,
                           max_width=WRAP_WIDTH if c.wrap and measuring else None)
        for row in cells:
            out.add_row(*(row[i] for i in shown))
        return out

    every = range(len(table.columns))
    if wide or width is None:
        return build(every), ()
    fitted = fit(table.columns, width, lambda shown: measure(build(shown, measuring=True)))
    return build(fitted.shown), fitted.hidden


def measure(table: RichTable) -> int:
    """The width the table takes when nothing constrains it."""
    probe = Console(width=100_000, file=io.StringIO(), color_system=None)
    return probe.measure(table).maximum


def audit_table(entries: tuple[AuditEntry, ...]) -> RichTable:
    out = RichTable(title="Audit of the document's numbers", title_justify="left",
                    header_style="bold")
    for header in ("where", "quantity", "printed", "computed", "status"):
        out.add_column(header, overflow="fold",
                       justify="right" if header in ("printed", "computed") else "left")
    for a in entries:
        if a.status == "match":
            status = Text("match", style="green")
        else:
            status = Text("mismatch" + (" (accepted)" if a.accepted else ""),
                          style="yellow" if a.accepted else "bold red")
        out.add_row(a.source, a.quantity, a.printed, audit_number(a.computed, a.tolerance),
                    status)
    return out


def show_table(con: Console, table: Table, *, wide: bool = False, heading: str = "") -> None:
    """A table fitted to the console's width, and a line naming what did not fit. A title
    that repeats the heading printed just above it is left out."""
    rendered, hidden = rich_table(table, con.width, wide=wide)
    if table.title == heading:
        rendered.title = None
    if wide:  # every column at its natural width; a narrow terminal wraps the lines
        natural = Console(file=con.file, width=max(con.width, measure(rendered)),
                          color_system=con.color_system,  # type: ignore[arg-type]
                          force_terminal=con.is_terminal, no_color=con.no_color,
                          highlight=False)
        natural.print(rendered)
    else:
        con.print(rendered)
    if hidden:
        con.print(Text(f"not shown: {', '.join(hidden)} (see --wide, or table.md)",
                       style="dim"))


def show(result: Result, folder: Path | None, *, out: Console | None = None,
         check: bool = False, wide: bool = False, explain: bool = False) -> None:
    """The whole human report of one run: plain-language expectations (the exact theory
    under --explain), panels, tables, what the data shows, checks, seed and files."""
    con = out or console()
    con.print(Text(result.title, style="bold"))
    if result.source:
        con.print(Text(f"source: {result.source}", style="dim"))
    for line in result.expect:
        con.print(Text(f"expect: {line}", style="cyan"))
    if explain or not result.expect:
        for line in result.theory:
            con.print(Text(f"theory: {line}", style="cyan"))
    for panel in result.panels:
        border = {"ok": "green", "warn": "yellow"}.get(panel.style, "blue")
        con.print(RichPanel(Text("\n".join(panel.lines)), title=panel.title,
                            title_align="left", border_style=border, expand=False))
    if result.table.terminal:
        show_table(con, result.table, wide=wide, heading=result.title)
    else:
        con.print(Text(f"{result.table.title}: {len(result.table.rows)} rows in table.csv, "
                       "table.md and results.json", style="dim"))
    for t in result.tables:
        if t.terminal:  # a table the study marks as not for the terminal says why in a note
            show_table(con, t, wide=wide)
    if result.audit:
        con.print(audit_table(result.audit))
        # One line per explanation: the entries of a printed row that share it are named
        # together rather than repeating the same sentence once per number.
        explained: list[tuple[str, list[str]]] = []
        for a in result.audit:
            if a.status == "mismatch" and (a.note or a.accepted):
                why = a.note or a.accepted or ""
                if explained and explained[-1][0] == why:
                    explained[-1][1].append(a.quantity)
                else:
                    explained.append((why, [a.quantity]))
        for why, quantities in explained:
            con.print(Text(f"  {', '.join(quantities)}: {why}", style="dim"))
    for finding in result.findings:
        con.print(Text(f"found: {finding}", style="bold"))
    for note in result.notes:
        con.print(Text(f"note: {note}", style="dim"))
    failed = [c for c in result.checks if not c.passed]
    if result.checks:
        summary = f"checks: {len(result.checks) - len(failed)}/{len(result.checks)} passed"
        con.print(Text(summary, style="green" if not failed else "bold red"))
        for c in failed:
            con.print(Text(f"  FAIL {c.name}: {c.detail}", style="red"))
        if failed and not check:
            con.print(Text("  (exit code stays 0 without --check)", style="dim"))
    seed = result.spec.get("seed")
    if seed is not None:
        con.print(Text(f"seed {seed} (give --seed {seed} to repeat this run exactly)",
                       style="dim"))
    if folder is not None:
        con.print(Text(written(folder), style="dim"))


def written(folder: Path) -> str:
    """`wrote DIR/: results.json, …; figures: a.png, b.png` from what the folder holds."""
    try:
        names = sorted(p.name for p in folder.iterdir() if p.is_file())
    except OSError:
        return f"wrote {folder}"
    figures = [n for n in names if n.endswith((".png", ".svg"))]
    files = [n for n in names if n not in figures]
    text = f"wrote {folder}/: {', '.join(files)}"
    return text + (f"; figures: {', '.join(figures)}" if figures else "")
