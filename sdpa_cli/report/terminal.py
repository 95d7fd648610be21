"""Human output: a run's result on stdout, progress and warnings on stderr; rich tables for
results, checks and audit findings."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel as RichPanel
from rich.segment import Segment
from rich.table import Table as RichTable
from rich.text import Text

from sdpa_cli import process  # noqa: F401 - registers the sdpa-people error handler
from sdpa_cli.errors import RunError, printable
from sdpa_cli.framework.causes import claim_coverage, grouped, tally
from sdpa_cli.framework.common import plain
from sdpa_cli.framework.documents import cite, label
from sdpa_cli.framework.result import AuditEntry, Result, Table
from sdpa_cli.report.fit import fit
from sdpa_cli.report.formatting import cell, skip_reason, verdict_word


class SafeConsole(Console):
    """A console that prints what it is given as text: no markup (`[/x]` in a title is not a
    closing tag, `[link=…]` no hyperlink), no emoji codes, and every character of the text it
    renders passed through errors.printable, so a control character from a file or a name
    (an escape sequence in a tampered results.json, a folder name) is shown as \\x1b, never
    sent. rich's own styles and cursor moves are added after, and stay."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("markup", False)
        kwargs.setdefault("emoji", False)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def _render_buffer(self, buffer: object) -> str:
        clean = (segment if segment.control else
                 Segment(printable(segment.text), segment.style, segment.control)
                 for segment in buffer)  # type: ignore[attr-defined]
        return super()._render_buffer(clean)


def _tty(stream: object) -> bool:
    try:
        return bool(getattr(stream, "isatty", lambda: False)())
    except (ValueError, OSError):  # closed
        return False


def width_for(stream: object) -> int | None:
    """The columns to lay out for `stream`: None (rich asks the terminal) when it is one;
    else COLUMNS when given, else the width of the terminal the other stream goes to (`sdpa
    variance | less` is read in that terminal), else 140 (a CI log: wide and plain)."""
    if _tty(stream):
        return None
    columns = os.environ.get("COLUMNS", "")
    # ASCII digits, at most 5 of them: "²" passes isdigit() but not int(), and 5000 digits
    # pass neither Python's parsing limit nor any terminal
    if columns.isascii() and columns.isdigit() and len(columns) <= 5 and int(columns) > 20:
        return int(columns)
    for other in (sys.stderr, sys.stdout):
        if other is not stream and _tty(other):
            try:
                return os.get_terminal_size(other.fileno()).columns
            except (OSError, ValueError):
                continue
    return 140


def console(file=None) -> Console:
    """A console on `file` (stderr when None: progress, warnings); plain when it is not a
    terminal, laid out at width_for(file)."""
    stream = file or sys.stderr
    is_tty = _tty(stream)
    return SafeConsole(file=stream, width=width_for(stream), highlight=False, soft_wrap=False,
                       force_terminal=None if is_tty else False)


class _Stdout:
    """sys.stdout for a run's human result: a reader that left early (`sdpa … | head -3`)
    is not an error (the rest is discarded quietly, as write_stdout does for a document);
    another failure (/dev/full) is one line and exit 1."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self.stream.write(for_people(text, self.encoding))
            except OSError as e:
                self._failed(e)
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.stream.flush()
            except OSError as e:
                self._failed(e)

    def _failed(self, e: OSError) -> None:
        self.gone = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self.stream.fileno())
        os.close(devnull)
        if not isinstance(e, BrokenPipeError):
            raise RunError(f"cannot write to stdout: {e.strerror or e} (the run folder, if "
                           "any, is written)") from None

    def isatty(self) -> bool:
        return _tty(self.stream)

    def fileno(self) -> int:
        return int(self.stream.fileno())

    @property
    def encoding(self) -> str:
        return str(getattr(self.stream, "encoding", "utf-8") or "utf-8")


def for_people(text: str, encoding: str) -> str:
    """Text a person reads, in what `encoding` can hold: sdpa's symbols spelt in ASCII where
    it cannot (√ as sqrt, σ as sigma: process.ASCII), as stderr's are. stdout escapes for
    documents (\\u00b7 keeps JSON exact); a result for people on stdout is spelt out."""
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return text.encode(encoding, "sdpa-people").decode(encoding)
    except LookupError:
        pass
    return text


def result_console() -> Console:
    """Where a run's human result goes: stdout, as pytest, git and hyperfine put theirs
    (progress, warnings and errors stay on stderr)."""
    stream = _Stdout(sys.stdout)
    tty = stream.isatty()
    return SafeConsole(file=stream, width=width_for(sys.stdout), highlight=False,
                       soft_wrap=False, force_terminal=None if tty else False)


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
    probe = SafeConsole(width=100_000, file=io.StringIO(), color_system=None)
    return probe.measure(table).maximum


def _where(a: AuditEntry) -> str:
    """Where in the document, without the document's file name (printed once above)."""
    head, _, rest = a.source.partition(", ")
    return rest if rest and "." in head else a.source


def _places(entries: Sequence[AuditEntry]) -> str:
    counts: dict[str, int] = {}
    for a in entries:
        counts[_where(a)] = counts.get(_where(a), 0) + 1
    return "; ".join(f"{w} ({n})" for w, n in counts.items())


def show_audit(con: Console, entries: Sequence[AuditEntry]) -> None:
    """The audit root errors first: the headline, each root error (a printed line) with the
    values that inherit it, what differs by rounding only, and the matches counted."""
    numbers = [a for a in entries if a.kind == "number"]
    if numbers:
        con.print(Text(f"audit: {tally(numbers).headline()}", style="bold"))
        files = sorted({a.source.partition(", ")[0] for a in numbers
                        if "." in a.source.partition(", ")[0]})
        if len(files) == 1:
            con.print(Text(f"  in {label(files[0])}", style="dim"))
    grid = RichTable(box=None, show_header=False, pad_edge=False, padding=(0, 1, 0, 0))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for roots, heirs in grouped(numbers):
        first = roots[0]
        name = first.quantity.split("[", 1)[0] if len(roots) > 1 else first.quantity
        printed = " ".join(a.printed for a in roots)
        computed = " ".join(plain(a.computed, whole=True) if a.computed is not None else "-"
                            for a in roots)
        text = Text(f"{_where(first)}: {name} printed {printed}, computed {computed}")
        if first.material:
            text.append(f"\nmaterial: changes {first.material}", style="yellow")
        why = first.note or first.accepted
        if why:
            text.append(f"\n{why}", style="dim")
        if heirs:
            text.append(f"\ninherited by {len(heirs)} value{'s' if len(heirs) != 1 else ''}: "
                        f"{_places(heirs)}", style="dim")
        grid.add_row(Text(f"  {first.cause}", style="bold red" if not first.accepted
                          else "yellow"), text)
    rounding = [a for a in numbers if a.cause == "rounding"]
    if rounding:
        grid.add_row(Text("  rounding", style="dim"),
                     Text(f"{len(rounding)} right for their rounded printed inputs: "
                          f"{_places(rounding)}", style="dim"))
    in_groups = {id(h) for _, heirs in grouped(numbers) for h in heirs}
    for a in numbers:
        if a.cause == "carried" and id(a) not in in_groups:
            grid.add_row(Text("  carried", style="dim"),
                         Text(f"{_where(a)}: {a.quantity} from {a.from_}", style="dim"))
    matched = sum(a.status == "match" for a in numbers)
    if matched:
        grid.add_row(Text("  match", style="green"),
                     Text(f"{matched} printed number{'s' if matched != 1 else ''} (every "
                          "entry in table.md and results.json)", style="dim"))
    if grid.row_count:
        con.print(grid)
    claims = [a for a in entries if a.kind == "claim"]
    if claims:
        show_claims(con, claims)


def show_claims(con: Console, claims: Sequence[AuditEntry]) -> None:
    """Each claim of a document this run judges: its verdict, where, and the measurement (or
    why untested), wrapped under the claim rather than under the verdict."""
    con.print(Text(f"claims: {claim_coverage(claims)}", style="bold"))
    style = {"holds": "green", "partly": "yellow", "fails": "bold red", "untested": "dim"}
    grid = RichTable(box=None, show_header=False, pad_edge=False, padding=(0, 1, 0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for a in claims:
        lines = [a.measurement if a.status != "untested" else f"untested: {a.reason}"]
        if a.note:
            lines.append(a.note)
        if a.premise:
            lines.append(f"premise {a.premise}")
        if a.robustness:
            lines.append(a.robustness)
        grid.add_row(Text(verdict_word(a), style=style.get(a.status, "")),
                     Text.assemble(a.quantity, (f" ({_where(a)})", "dim"), "\n",
                                   ("\n".join(x for x in lines if x), "dim")))
    con.print(grid)


def show_table(con: Console, table: Table, *, wide: bool = False, heading: str = "") -> None:
    """A table fitted to the console's width, and a line naming what did not fit. A title
    that repeats the heading printed just above it is left out."""
    rendered, hidden = rich_table(table, con.width, wide=wide)
    if table.title == heading:
        rendered.title = None
    if wide:  # every column at its natural width; a narrow terminal wraps the lines
        natural = SafeConsole(file=con.file, width=max(con.width, measure(rendered)),
                              color_system=con.color_system, force_terminal=con.is_terminal,
                              no_color=con.no_color, highlight=False)
        natural.print(rendered)
    else:
        con.print(rendered)
    if hidden:
        con.print(Text(f"not shown: {', '.join(hidden)} (see --wide, or table.md)",
                       style="dim"))


def show(result: Result, folder: Path | None, *, out: Console | None = None,
         check: bool = False, wide: bool = False, explain: bool = False,
         after: Sequence[str] = ()) -> None:
    """The whole human report of one run: plain-language expectations (the exact theory
    under --explain), panels, tables, what the data shows, checks, seed and files, then the
    `after` lines (what else the run updated), and last how to get what a skip missed."""
    con = out or console()
    con.print(Text(result.title, style="bold"))
    if result.source:
        con.print(Text(f"source: {cite(result.source)}", style="dim"))
    for line in result.expect:
        con.print(Text(f"expect: {line}", style="cyan"))
    if explain or not result.expect:
        for line in result.theory:
            con.print(Text(f"theory: {line}", style="cyan"))
    if result.skipped is not None:
        show_skipped(con, result, check=check)
        if folder is not None:
            con.print(Text(written(folder), style="dim"))
        for line in after:
            con.print(Text(line))
        how = skip_reason(result.skipped)[1]
        if how:  # the way to get what was missing: once, the last line
            con.print(Text(f"get it with: {how}", style="bold"))
        return
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
        show_audit(con, result.audit)
    for finding in result.findings:
        con.print(Text(f"found: {finding}", style="bold"))
    for note in result.notes:
        con.print(Text(f"note: {note}", style="dim"))
    failed = [c for c in result.checks if not c.passed]
    if result.checks:
        summary = f"checks: {len(result.checks) - len(failed)}/{len(result.checks)} passed"
        if result.unchecked:
            summary += f"; {len(result.unchecked)} heuristic rows apart, not checks:"
        con.print(Text(summary, style="green" if not failed else "bold red"))
        for line in result.unchecked:
            con.print(Text(f"  heuristic, not a check: {line}", style="yellow"))
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
    for line in after:
        con.print(Text(line))


# What `--check` does with a run that measured nothing (sdpa help ci): it has nothing to check,
# so the exit code stays 0, as pytest's skips do; a spec that must measure (inspect's
# `require_models`, `--require-models` on `sdpa run`) fails its check instead.
SKIP_CHECK = ("--check: nothing was measured, so nothing was checked; the exit code stays 0 "
              "(--require-models makes a missing model a failed check)")


def show_skipped(con: Console, result: Result, *, check: bool) -> None:
    """A run that measured nothing: that word, why, and how to get what was missing."""
    why = skip_reason(result.skipped or "")[0]
    con.print(Text(f"skipped: nothing was measured: {why}", style="yellow"))
    failed = [c for c in result.checks if not c.passed]
    for c in failed:  # a spec that had to measure: its check fails
        con.print(Text(f"FAIL {c.name}: nothing was measured", style="bold red"))
    if check and not failed:
        con.print(Text(SKIP_CHECK, style="dim"))


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
