"""The topic pages that ship with sdpa (`sdpa help TOPIC`, and report.html's reference section):
the shared ones in sdpa_cli/docs/, a study's own page in its package (studies/<name>/<topic>.md);
where they are, their titles, and their text as a reader sees it."""

from __future__ import annotations

import io
import re
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
    """A page's title: its first line without the heading's #."""
    return path.read_text(encoding="utf-8").splitlines()[0].lstrip("# ")


class _Verbatim(CodeBlock):
    """A code block as written: no padding, never wrapped (a wrapped command or table of
    output reads wrong); a line wider than the terminal runs on, as `git help` shows one."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(str(self.text).rstrip("\n"), style="cyan", no_wrap=True, overflow="ignore")


# A comment, or code (a block or a span, kept whole): a comment inside code is its text.
_COMMENT = re.compile(r"(?P<code>```.*?```|`[^`\n]*`)|<!--.*?-->", re.S)


def markdown(page: str) -> Markdown:
    """A topic page as rich renders it for a terminal: the comments that say which command
    made each number dropped, paragraphs and lists wrapped to the width, tables fitted
    (their columns fold), code blocks verbatim (with any comment a page's code shows)."""
    text = _COMMENT.sub(lambda m: m["code"] or "", page)
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
