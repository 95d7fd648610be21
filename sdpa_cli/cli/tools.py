"""The commands that are not studies: run, compare, validate and help."""

from __future__ import annotations

import difflib
import os
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from sdpa_cli.cli.options import (
    FloatRange,
    ValueCommand,
    batch_options,
    ci_settings,
    default_workers,
)
from sdpa_cli.errors import InputError, Problem
from sdpa_cli.io import topics
from sdpa_cli.report import Settings
from sdpa_cli.report import comparison as compare_mod
from sdpa_cli.report.examples import piped_width
from sdpa_cli.runner import batch

PATHS_ARG = click.argument("targets", metavar="[PATH ...]", nargs=-1,
                           type=click.Path(path_type=Path))


@click.command("run", cls=ValueCommand)
@PATHS_ARG
@batch_options
@click.option("--require-models", "require_models", is_flag=True,
              help="A spec whose model is not on this machine fails its check (exit 1 with "
                   "--check) instead of being skipped.")
def run(targets: tuple[Path, ...], out: Path | None, check: bool, fail_fast: bool,
            fmt: str, no_plots: bool, svg: bool, quiet: bool, workers: int | None,
            dpi: int | None, scheduler: str | None, keyword: str | None, last_failed: bool,
            force: bool, require_models: bool, **ci: Any) -> int:
    """Run every spec in the given files and folders (default: experiments/).

    Every spec is validated before anything runs; then each runs into DIR/<name>/, a failed
    spec does not stop the others, and DIR/index.md and DIR/report.html show them all.

    \b
    Examples:
      sdpa run
      sdpa run experiments/variance --check
      sdpa run --out /tmp/batch --workers 2 --fail-fast
    """
    settings = Settings(root=out or Path("outputs"), fmt=fmt, plots=not no_plots, svg=svg,
                        check=check, quiet=quiet, workers=workers or default_workers(), dpi=dpi,
                        scheduler=scheduler,
                        **ci_settings(ci, batch_folder=out or Path("outputs")))
    return batch.run_batch(list(targets), settings, fail_fast=fail_fast, keyword=keyword,
                           last_failed=last_failed, force=force,
                           require_models=require_models)


@click.command("compare")
@click.argument("a", metavar="A", type=click.Path(path_type=Path))
@click.argument("b", metavar="B", type=click.Path(path_type=Path))
@click.option("--tolerance", type=FloatRange(0, min_open=True), default=4.0,
              show_default=True, metavar="K",
              help="Monte Carlo quantities agree when |A − B| ≤ K standard errors.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown"]),
              default="table", show_default=True,
              help="table: a summary on stderr; json/markdown: every quantity on stdout.")
@click.option("--exact", is_flag=True,
              help="Byte for byte instead: every file but the manifests must be identical.")
@click.option("-q", "--quiet", is_flag=True, help="No summary on stderr.")
def compare(a: Path, b: Path, tolerance: float, fmt: str, exact: bool,
                quiet: bool) -> int:
    """Compare two run folders (or two batch folders): parameters, quantities, figures.

    Exit 0 when both sides hold the same runs and every Monte Carlo quantity agrees within
    K standard errors and every deterministic one is equal (with --exact: every file is
    identical); 1 when a run differs or is on one side only (the last line says which);
    2 for bad input.

    \b
    Examples:
      sdpa compare outputs/day74-dims /tmp/other/day74-dims
      sdpa compare batch1 batch2 --exact
      sdpa compare old new --tolerance 3 --format markdown
    """
    return compare_mod.run(a, b, tolerance=tolerance, fmt=fmt, exact_mode=exact, quiet=quiet)


@click.command("validate", cls=ValueCommand)
@PATHS_ARG
@click.option("-q", "--quiet", is_flag=True, help="Print nothing when all is well.")
def validate(targets: tuple[Path, ...], quiet: bool) -> int:
    """Check specs without running anything (exit 2 and one line per problem if bad).

    \b
    Examples:
      sdpa validate
      sdpa validate my-notes.yaml experiments/variance
    """
    return batch.run_validate(list(targets), quiet=quiet)


@click.command("help")
@click.argument("topic", required=False)
def help_(topic: str | None) -> int:
    """Show a topic page (the reference that ships with sdpa), or list the topics.

    \b
    Examples:
      sdpa help
      sdpa help adding-a-study
    """
    pages = topics.pages()
    if topic is None:  # each title wrapped under its own column, at the terminal's width
        width = max(map(len, pages), default=0)
        columns = shutil.get_terminal_size().columns if sys.stdout.isatty() else piped_width()
        for name, path in pages.items():
            click.echo("\n".join(textwrap.wrap(
                topics.title(path), max(columns, width + 24), break_on_hyphens=False,
                initial_indent=f"  {name:<{width}}  ", subsequent_indent=" " * (width + 4))))
        click.echo("\nsdpa help TOPIC prints one.")
        return 0
    if topic not in pages:
        close = difflib.get_close_matches(topic, list(pages), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InputError(Problem(f"no help topic {topic!r}{hint}; `sdpa help` lists them"))
    page = pages[topic].read_text(encoding="utf-8")
    if not sys.stdout.isatty():  # a pipe or a file: plain text at COLUMNS (else 80) columns
        click.echo(topics.plain(page, piped_width()), nl=False)
        return 0
    # A terminal: rendered (headings, lists wrapped, tables fitted) through a pager, as `git
    # help` does; less quits at once when the page fits one screen, and keeps the colours.
    os.environ.setdefault("LESS", "-FRX")
    con = Console(highlight=False, emoji=False)
    with con.pager(styles=True):
        con.print(topics.markdown(page), crop=False)
    return 0

