"""The topic pages that ship with sdpa (`sdpa help TOPIC`, and report.html's reference section):
the shared ones in sdpa_cli/docs/, a study's own page in its package (studies/<name>/<topic>.md);
where they are, their titles, and their text as a reader sees it."""

from __future__ import annotations

import io
import re
import textwrap
from pathlib import Path
from typing import ClassVar

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markdown import CodeBlock, Markdown, MarkdownElement, TableElement
from rich.table import Table
from rich.text import Text

from sdpa_cli import studies

DOCS = Path(__file__).parent.parent / "docs"


def study_pages() -> dict[str, Path]:
    """Each study package's own page (studies/<name>/<topic>.md), read from the registry's
    folders without importing any study."""
    found: dict[str, Path] = {}
    for folder in reversed(list(studies.__path__)):  # the first folder wins
        found.update({p.stem: p for p in Path(folder).glob("*/*.md")})
    return found


def pages() -> dict[str, Path]:
    """Every topic page by name (its file's stem), in name order: the shared pages of docs/
    and the studies' own (tests/test_docs.py holds their names apart)."""
    found = {**study_pages(), **{p.stem: p for p in DOCS.glob("*.md")}}
    return dict(sorted(found.items()))


def title(path: Path) -> str:
    """A page's title as a reader sees it: its first line without the heading's # and
    without the backticks of inline code (`sdpa gradients` is shown as sdpa gradients)."""
    return path.read_text(encoding="utf-8").splitlines()[0].lstrip("# ").replace("`", "")


class _Verbatim(CodeBlock):
    """A code block as written, no padding; a line wider than the terminal is broken at a
    space, never mid-word (code_lines), so nothing runs past the edge."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = code_lines(str(self.text).rstrip("\n"), options.max_width,
                           shell=self.lexer_name in SHELLS)
        yield Text("\n".join(lines), style="cyan", no_wrap=True, overflow="ignore")


# Code blocks whose lines are shell commands: a command broken in two ends its first part in
# " \\", so what the terminal shows still pastes as one command.
SHELLS = ("sh", "bash", "shell", "console")
_COMMENT = re.compile(r"^(?P<code>.*?\S)(?P<gap> {2,})(?P<hash>#+ ?)(?P<text>.*)$")
_COMMAND = re.compile(r"^\s*(\$ )?(sdpa|python3?|pip|\.venv/bin/|pytest|ruff|mypy|git) ")


def code_lines(text: str, width: int, *, shell: bool = False) -> list[str]:
    """A code block's lines, each at most `width` columns where spaces allow: a trailing
    comment is wrapped under its own column, each part starting with its `#`; a command is
    broken before a word, its first part ending in " \\" and the rest indented four; any
    other line (a message, YAML) breaks with the rest indented two more than the line."""
    out: list[str] = []
    for line in text.split("\n"):
        if cell_len(line) <= width:
            out.append(line)
            continue
        indent = len(line) - len(line.lstrip(" "))
        comment = _COMMENT.match(line)
        if line.lstrip().startswith("#"):  # a comment line: its words wrapped, each "# "
            out += _comment(" " * indent, line.lstrip().split(" ", 1)[0] + " ",
                            line.lstrip().partition(" ")[2], width)
            continue
        if comment and cell_len(comment["code"]) <= width - 24:  # beside the code
            column = len(comment["code"]) + len(comment["gap"])
            lines = _comment(" " * column, comment["hash"], comment["text"], width)
            out += [line[:column] + lines[0].lstrip(" "), *lines[1:]]
            continue
        if comment and cell_len(comment["code"]) <= width:  # above the code
            out += _comment(" " * indent, comment["hash"], comment["text"], width)
            out.append(comment["code"])
            continue
        command = shell or bool(_COMMAND.match(line))
        more = " " * (indent + (4 if command else 2))
        parts = textwrap.wrap(line.strip(), width - (2 if command else 0),
                              initial_indent=" " * indent, subsequent_indent=more,
                              break_long_words=False, break_on_hyphens=False)
        if command:
            parts = [p + " \\" for p in parts[:-1]] + parts[-1:]
        out += parts or [line]
    return out


def _comment(lead: str, mark: str, text: str, width: int) -> list[str]:
    """A comment's words at `lead`, each line starting with `mark` ("# ")."""
    parts = textwrap.wrap(text, max(width - len(lead) - len(mark), 20),
                          break_long_words=False, break_on_hyphens=False)
    return [lead + mark + part for part in parts or [""]]


# A comment, or code (a block or a span, kept whole): a comment inside code is its text.
_HIDDEN = re.compile(r"(?P<code>```.*?```|`[^`\n]*`)|<!--.*?-->", re.S)


def markdown(page: str) -> Markdown:
    """A topic page as rich renders it for a terminal: the comments that say which command
    made each number dropped, paragraphs and lists wrapped to the width, tables fitted
    (their columns fold), code blocks verbatim (with any comment a page's code shows)."""
    text = _HIDDEN.sub(lambda m: m["code"] or "", page)
    return _Page(re.sub(r"\n{3,}", "\n\n", text), hyperlinks=False)


class _Fitted(TableElement):
    """A table as rich draws it when every column can hold its longest word; narrower than
    that it folds into one record per row (each cell after its header), never a word cut."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        heads = [c.content for c in self.header.row.cells] if self.header and \
            self.header.row else []
        rows = [[c.content for c in row.cells] for row in self.body.rows] if self.body else []
        longest = [max((cell_len(w) for text in column for w in text.plain.split()), default=0)
                   for column in zip(heads, *rows, strict=False)]
        for row in rows:
            for text in row:
                text.overflow = "fold"  # a long path wraps, never ends in …
        for table in super().__rich_console__(console, options):
            if isinstance(table, Table):  # no column narrower than its longest word
                for column, width in zip(table.columns, longest, strict=False):
                    column.min_width = width
                if _drawn_width(table, options.max_width) <= options.max_width:
                    yield table
                    return
        for row in rows:
            for i, text in enumerate(row):
                head = heads[i].plain if i < len(heads) else ""
                yield Text(f"{head}: " if head else "", style="bold").append_text(text)
            yield Text("")


def _drawn_width(table: Table, width: int) -> int:
    """The widest line of `table` drawn at `width` columns (wider when it cannot fit)."""
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None).print(table, crop=False)
    return max((cell_len(line.rstrip()) for line in buf.getvalue().splitlines()), default=0)


class _Page(Markdown):
    """rich's Markdown with code blocks kept verbatim and tables fitted or folded."""

    elements: ClassVar[dict[str, type[MarkdownElement]]] = {
        **Markdown.elements, "fence": _Verbatim, "code_block": _Verbatim,
        "table_open": _Fitted}


def plain(page: str, width: int = 80) -> str:
    """markdown(page) as plain text at `width` columns (no colour, no trailing spaces): what
    `sdpa help TOPIC` prints into a pipe or a file."""
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, force_terminal=False,
            highlight=False, emoji=False).print(markdown(page), crop=False)
    return "\n".join(line.rstrip() for line in buf.getvalue().splitlines()).strip("\n") + "\n"
