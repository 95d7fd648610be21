"""The `sdpa` command line: the tool commands by hand, one derived command per study."""

from __future__ import annotations

import difflib
import importlib
from typing import Any

import click

from sdpa_cli import __version__
from sdpa_cli.studies import STUDIES

# The commands that are not studies (sdpa_cli/cli/tools.py), with their short helps.
TOOLS: dict[str, str] = {
    "run": "Run every spec (default: experiments/) into outputs/.",
    "compare": "Compare two run folders or two batch folders.",
    "validate": "Check specs without running anything.",
    "help": "Show a topic page of the reference (sdpa help lists them).",
}


def _later(module: str) -> Any:
    """A module of the commands, imported only when its command runs or shows its help.
    The one place the command line imports late, on purpose: `sdpa --help` and a bad flag
    stay fast, and a study command loads only its own study."""
    return importlib.import_module(module)


class Main(click.Group):
    """sdpa's commands: the studies of the registry first, built only when asked for (so
    `sdpa --help` imports no study, numpy or pydantic), then the tool commands."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*STUDIES, *TOOLS]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in STUDIES:
            command: click.Command = _later("sdpa_cli.cli.commands").build(cmd_name)
            return command
        if cmd_name in TOOLS:
            tools = _later("sdpa_cli.cli.tools")
            tool: click.Command = getattr(tools, cmd_name, None) or getattr(tools, f"{cmd_name}_")
            return tool
        return None

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        """A misspelled command gets a did-you-mean, as a misspelled flag or spec name does."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as e:
            name = args[0] if args else ""
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=1, cutoff=0.6)
            if not close or self.get_command(ctx, name) is not None:
                raise
            raise click.UsageError(f"No such command {name!r} (did you mean {close[0]!r}?); "
                                   "`sdpa --help` lists them.", e.ctx) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The list of commands, short helps read from the registry (nothing imported)."""
        with formatter.section("Commands"):
            formatter.write_dl([*STUDIES.items(), *TOOLS.items()])


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
