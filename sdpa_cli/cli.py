"""The `sdpa` command line: the tool commands by hand, one derived command per study."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import click

from sdpa_cli import __version__
from sdpa_cli.options import ValueCommand, batch_options, ci_settings
from sdpa_cli.studies import STUDIES


class Main(click.Group):
    """sdpa's commands: the studies of the registry first, built only when asked for (so
    `sdpa --help` imports no study, numpy or pydantic), then the tool commands."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*STUDIES, *super().list_commands(ctx)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in STUDIES:
            # Lazy on purpose (start-up time): a study command loads its study only when
            # it is the one being run or helped.
            commands = importlib.import_module("sdpa_cli.commands")
            return commands.build(cmd_name)  # type: ignore[no-any-return]
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The list of commands, short helps read from the registry (no study imported)."""
        rows = [(name, summary) for name, summary in STUDIES.items()]
        rows += [(name, cmd.get_short_help_str(limit=formatter.width))
                 for name, cmd in self.commands.items() if not cmd.hidden]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=Main, context_settings={"help_option_names": ["-h", "--help"],
                                         "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="sdpa", message="%(prog)s %(version)s")
def cli() -> None:
    """Measure, show and check why attention divides QKᵀ by √d_k.

    \b
    Start here:
      sdpa variance --dims 3 100 1000
      sdpa run                      every spec in experiments/, into outputs/
    """


PATHS_ARG = click.argument("targets", metavar="[PATH ...]", nargs=-1,
                           type=click.Path(path_type=Path))


@cli.command("run", cls=ValueCommand,
             short_help="Run every spec (default: experiments/) into outputs/.")
@PATHS_ARG
@batch_options
def run_cmd(targets: tuple[Path, ...], out: Path | None, check: bool, fail_fast: bool,
            fmt: str, no_plots: bool, svg: bool, quiet: bool, workers: int | None,
            dpi: int | None, scheduler: str | None, keyword: str | None, last_failed: bool,
            force: bool, **ci: Any) -> int:
    """Run every spec in the given files and folders (default: experiments/).

    Every spec is validated before anything runs; then each runs into DIR/<name>/, a failed
    spec does not stop the others, and DIR/index.md and DIR/report.html show them all.

    \b
    Examples:
      sdpa run
      sdpa run experiments/variance --check
      sdpa run --out /tmp/batch --workers 2 --fail-fast
    """
    from sdpa_cli import batch
    from sdpa_cli.options import default_workers
    from sdpa_cli.report import Settings

    settings = Settings(root=out or Path("outputs"), fmt=fmt, plots=not no_plots, svg=svg,
                        check=check, quiet=quiet, workers=workers or default_workers(), dpi=dpi,
                        scheduler=scheduler,
                        **ci_settings(ci, batch_folder=out or Path("outputs")))
    return batch.run_batch(list(targets), settings, fail_fast=fail_fast, keyword=keyword,
                           last_failed=last_failed, force=force)


@cli.command("compare", short_help="Compare two run folders or two batch folders.")
@click.argument("a", metavar="A", type=click.Path(path_type=Path))
@click.argument("b", metavar="B", type=click.Path(path_type=Path))
@click.option("--tolerance", type=click.FloatRange(0, min_open=True), default=4.0,
              show_default=True, metavar="K",
              help="Monte Carlo quantities agree when |A − B| ≤ K standard errors.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown"]),
              default="table", show_default=True,
              help="table: a summary on stderr; json/markdown: every quantity on stdout.")
@click.option("--exact", is_flag=True,
              help="Byte for byte instead: every file but the manifests must be identical.")
@click.option("-q", "--quiet", is_flag=True, help="No summary on stderr.")
def compare_cmd(a: Path, b: Path, tolerance: float, fmt: str, exact: bool,
                quiet: bool) -> int:
    """Compare two run folders (or two batch folders): parameters, quantities, figures.

    Exit 0 when every Monte Carlo quantity agrees within K standard errors and every
    deterministic one is equal (with --exact: every file is identical), 1 otherwise.

    \b
    Examples:
      sdpa compare outputs/day74-dims /tmp/other/day74-dims
      sdpa compare batch1 batch2 --exact
      sdpa compare old new --tolerance 3 --format markdown
    """
    from sdpa_cli import compare

    return compare.run(a, b, tolerance=tolerance, fmt=fmt, exact_mode=exact, quiet=quiet)


@cli.command("validate", cls=ValueCommand, short_help="Check specs without running anything.")
@PATHS_ARG
@click.option("-q", "--quiet", is_flag=True, help="Print nothing when all is well.")
def validate_cmd(targets: tuple[Path, ...], quiet: bool) -> int:
    """Check specs without running anything (exit 2 and one line per problem if bad).

    \b
    Examples:
      sdpa validate
      sdpa validate my-notes.yaml experiments/variance
    """
    from sdpa_cli import batch

    return batch.run_validate(list(targets), quiet=quiet)
