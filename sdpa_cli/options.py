"""Reusable click pieces: list flags that take space-separated values, and the common flags."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import click

_NUMBER = re.compile(
    r"^[-+−]?(?:(?:\d[\d_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|\.?inf|\.?Inf|\.?INF)$")


def _is_value(token: str) -> bool:
    """Does this token continue a list? Words and numbers (also negative) do; options and
    spec paths (…/x, *.yaml) do not."""
    if token == "--":
        return False
    if token.startswith("-") and not _NUMBER.match(token):
        return False
    return not (token.endswith((".yaml", ".yml")) or "/" in token)


def gather_lists(args: list[str], list_opts: set[str]) -> list[str]:
    """['--dims', '3', '100', '1000'] → ['--dims', '3,100,1000'].

    Commas keep working (`--dims 3,100,1000`) and mix with spaces (`--dims 3,100 1000`).
    """
    out: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            out.extend(args[i:])
            break
        if token in list_opts:
            values = []
            j = i + 1
            while j < len(args) and _is_value(args[j]):
                values.append(args[j])
                j += 1
            out.append(token)
            if values:
                out.append(",".join(values))
            i = j
            continue
        out.append(token)
        i += 1
    return out


class StudyCommand(click.Command):
    """A command whose list options read every value up to the next option."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        list_opts = {
            opt for p in self.params if isinstance(p, click.Option) and
            isinstance(p.type, ListType) for opt in p.opts
        }
        return super().parse_args(ctx, gather_lists(list(args), list_opts))


class ListType(click.ParamType):
    """A comma-joined list; items stay text and are typed like YAML values later."""

    name = "LIST"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None
                ) -> list[str]:
        if isinstance(value, list):
            return value
        items = [v.strip() for v in str(value).split(",")]
        if any(not v for v in items):
            self.fail(f"empty item in {value!r}", param, ctx)
        return items


LIST = ListType()


def list_option(*names: str, help: str, metavar: str = "V [V ...]") -> Callable:
    return click.option(*names, type=LIST, default=None, metavar=metavar, help=help)


def value_option(*names: str, help: str, metavar: str = "X") -> Callable:
    return click.option(*names, default=None, metavar=metavar, help=help)


def default_workers() -> int:
    return max(1, min(8, os.cpu_count() or 1))


SCHEDULER_OPTION = click.option(
    "--scheduler", default=None, metavar="ADDRESS",
    help="Run the blocks on a Dask cluster: tcp://HOST:PORT, or local:N to start N worker "
         "processes here (default: $SDPA_SCHEDULER, else local threads). Same digits either "
         "way. Needs pip install 'sdpa[dask]'.")

DPI_OPTION = click.option("--dpi", type=click.IntRange(30, 1200), default=None, metavar="N",
                          help="PNG resolution in pixels per inch (default 110, for screens; "
                               "300 for print).")


def common_options(f: Callable) -> Callable:
    """Flags every study command shares: where and how results are shown, the threads used
    (never a number of the results), and the seed."""
    decorators = [
        click.option("--out", "out", type=click.Path(file_okay=False), default=None,
                     metavar="DIR", help="Run folder to write (default: outputs/<name>)."),
        click.option("--format", "fmt", type=click.Choice(["table", "json", "csv", "markdown"]),
                     default="table", show_default=True,
                     help="table: report on stderr only; json/csv/markdown: that document on "
                          "stdout and nothing else there."),
        click.option("--no-plots", is_flag=True, help="Skip figures (matplotlib is not loaded)."),
        click.option("--svg", is_flag=True, help="Also write each figure as SVG."),
        DPI_OPTION,
        click.option("--check", is_flag=True,
                     help="Exit 1 when a check or an unaccepted audit finding fails."),
        click.option("-q", "--quiet", is_flag=True, help="No report on stderr."),
        click.option("--workers", type=click.IntRange(1, 64), default=default_workers,
                     show_default="CPU count, at most 8",
                     help="Threads drawing blocks; results are identical for any value."),
        SCHEDULER_OPTION,
        value_option("--seed", metavar="N", help="Seed entropy (recorded; default: fresh)."),
    ]
    for decorator in reversed(decorators):
        f = decorator(f)
    return f
