"""Reusable click pieces: list flags that take space-separated values, and the common flags."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from sdpa_cli import process
from sdpa_cli.errors import InputError, Problem, control_name, is_control, one_line
from sdpa_cli.io.environment import path_problem
from sdpa_cli.report.ci_files import report_path_problem
from sdpa_cli.report.manifest import BATCH_NAME
from sdpa_cli.report.runfolder import BATCH_FILES
from sdpa_cli.runner.arguments import DPI, WORKERS
from sdpa_cli.spec.yamlio import OutOfRange, scalar

_NUMBER = re.compile(
    r"^[-+−]?(?:(?:\d[\d_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|\.?inf|\.?Inf|\.?INF)$")


def _is_option(token: str) -> bool:
    """An option (`--out`, `-q`) or `--`, never a value; a negative number is a value."""
    return token == "--" or (token.startswith("-") and not _NUMBER.match(token))


def _is_value(token: str, *, positional_given: bool = False) -> bool:
    """Does this token continue a list after its first value? Words and numbers (also
    negative) do; options do not. A token with a folder part (…/x, /abs) or a spec's .yaml
    suffix ends the list, since it is the command's SPEC or MODEL, but only while that
    positional argument is still to come: once it was given, a path is a value too
    (`sdpa inspect MODEL --text docs/a.md docs/b.md`)."""
    if _is_option(token):
        return False
    return positional_given or not (token.endswith((".yaml", ".yml")) or "/" in token)


def gather_lists(args: list[str], list_opts: set[str],
                 value_opts: frozenset[str] = frozenset()) -> list[str]:
    """['--dims', '3', '100', '1000'] → ['--dims', '3,100,1000'].

    Commas keep working (`--dims 3,100,1000`) and mix with spaces (`--dims 3,100 1000`). The
    first token after a list flag is always its value when it is no option (`--text
    /abs/notes.txt`, `--text docs/a.md`); `value_opts` (flags that take one value) tell the
    command's positional argument apart from flag values.
    """
    out: list[str] = []
    positional = False
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            out.extend(args[i:])
            break
        if token in list_opts:
            values = []
            j = i + 1
            if j < len(args) and not _is_option(args[j]):
                values.append(args[j])
                j += 1
            while j < len(args) and _is_value(args[j], positional_given=positional):
                values.append(args[j])
                j += 1
            out.append(token)
            if values:
                out.append(",".join(values))
            i = j
            continue
        out.append(token)
        if token in value_opts:  # its value is no positional argument
            if i + 1 < len(args):
                out.append(args[i + 1])
            i += 2
            continue
        positional = positional or not _is_option(token)
        i += 1
    return out


def _control(token: str) -> str | None:
    """The first control character in a token, shown as 0xNN, or None."""
    for ch in token:
        if is_control(ch):
            return control_name(ch)
    return None


def check_values(command: click.Command, args: list[str]) -> None:
    """Refuse, before click parses, a flag whose value is missing, empty, or the next flag
    (`--out --no-plots` must not make a folder called --no-plots), and any argument that
    holds a control character (it would be echoed to the terminal)."""
    options = [p for p in command.params if isinstance(p, click.Option)]
    names = {o for p in options for o in (*p.opts, *p.secondary_opts)}
    takes_value = {o: p for p in options if not p.is_flag and not p.count for o in p.opts}
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            break
        flag, eq, inline = token.partition("=")
        if eq and flag in takes_value:
            values = [inline]
        elif token in takes_value:
            values = args[i + 1:i + 2]
            if not values or values[0] in names or (values[0].startswith("--")) or (
                    isinstance(takes_value[token].type, ListType) and _is_option(values[0])):
                raise click.UsageError(f"{token} needs a value")
            i += 1
        else:
            bad = _control(token)
            if bad:
                raise click.UsageError(f"{one_line(token)}: the argument holds the control "
                                       f"character {bad}; remove it")
            i += 1
            continue
        flag = flag if eq else token
        if not values[0].strip():
            raise click.UsageError(f"{flag} needs a value (got an empty one)")
        bad = _control(values[0])
        if bad:
            raise click.UsageError(f"{flag}: the value holds the control character {bad}; "
                                   "remove it")
        if flag == "--format" and values[0] != "table" and process.stdout_closed():
            raise click.UsageError(f"--format {values[0]}: stdout is closed, so the document "
                                   "would go nowhere; leave stdout open or use --format table")
        i += 1


class ValueCommand(click.Command):
    """A command whose flags never swallow the next flag or take an empty value."""
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        check_values(self, list(args))
        return super().parse_args(ctx, args)


class StudyCommand(ValueCommand):
    """A command whose list options read every value up to the next option."""
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        check_values(self, list(args))
        options = [p for p in self.params if isinstance(p, click.Option)]
        list_opts = {opt for p in options if isinstance(p.type, ListType) for opt in p.opts}
        value_opts = frozenset(opt for p in options if not p.is_flag and not p.count
                               and not isinstance(p.type, ListType) for opt in p.opts)
        return click.Command.parse_args(self, ctx,
                                        gather_lists(list(args), list_opts, value_opts))


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


class _Short:
    """A number flag whose value is refused, before int()/float() sees it, when it is longer
    than any number in range could be: click would echo all 5000 digits of it, and Python
    refuses to parse more than 4300. A float beyond float64's range (1e400) would become inf."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None
                ) -> Any:
        if isinstance(value, str) and len(value.strip()) > 32:
            self.fail(f"{_short(value.strip())} is not a number in range", param, ctx)  # type: ignore[attr-defined]
        out = super().convert(value, param, ctx)  # type: ignore[misc]
        if isinstance(out, float) and not math.isfinite(out):
            self.fail(f"{value} is not a finite number", param, ctx)  # type: ignore[attr-defined]
        return out


class IntRange(_Short, click.IntRange):
    """click.IntRange with short refusals of overlong values."""


class FloatRange(_Short, click.FloatRange):
    """click.FloatRange with short refusals of overlong and infinite values."""


class SpecOption(click.Option):
    """A flag that sets the spec field of the same name (`--d-model` sets `d_model`): the
    CLI's overrides and the flag named in an error message are read from these, so no list
    restates what the decorators say."""


def list_option(*names: str, help: str, metavar: str = "V [V ...]") -> Callable:
    return click.option(*names, cls=SpecOption, type=LIST, default=None, metavar=metavar,
                        help=help)


def value_option(*names: str, help: str, metavar: str = "X") -> Callable:
    return click.option(*names, cls=SpecOption, default=None, metavar=metavar, help=help)


def flag_of(param: click.Parameter) -> str:
    """The long spelling of an option (`--d-model`), as error messages name it."""
    return max(param.opts, key=len)


def spec_overrides(ctx: click.Context) -> tuple[dict[str, Any], dict[str, str]]:
    """The spec fields given on the command line (typed like YAML values) and the flag
    behind each, read from the command's own SpecOptions."""
    overrides: dict[str, Any] = {}
    flags: dict[str, str] = {}
    for param in ctx.command.params:
        if not isinstance(param, SpecOption) or param.name is None:
            continue
        value = ctx.params.get(param.name)
        if isinstance(value, tuple):  # a list flag given more than once: one list
            value = [item for part in value for item in part] or None
        if value is None:
            continue
        if isinstance(value, bool):  # a switch
            overrides[param.name] = value
            flags[param.name] = flag_of(param)
            continue
        items = value if isinstance(value, list) else [value]
        typed = []
        for i, item in enumerate(items):
            try:
                typed.append(scalar(item))
            except OutOfRange as e:
                where = f"{param.name}[{i}]" if isinstance(value, list) else param.name
                said = str(e) if str(e).startswith("a whole number") else f"{_short(item)} {e}"
                raise InputError(Problem(said, flag=flag_of(param), field=where)) from None
        overrides[param.name] = typed if isinstance(value, list) else typed[0]
        flags[param.name] = flag_of(param)
    return overrides, flags


def _short(text: str, limit: int = 24) -> str:
    """A flag's value for a one-line message: a 5000-digit number is shown by its ends."""
    return text if len(text) <= limit else f"{text[:10]}…{text[-6:]} ({len(text)} characters)"


def default_workers() -> int:
    return max(1, min(8, os.cpu_count() or 1))


def _out(help: str = "Run folder to write (default: outputs/<name>).") -> Callable:
    # What a run or batch folder may be is said once, by runfolder.check_replaceable and
    # check_batch (the Python API's save() uses the same check); click's own test would word
    # the same refusal another way.
    return click.option("--out", "out", type=click.Path(path_type=Path, readable=False),
                        default=None,
                        metavar="DIR", help=help)


def _format(choices: tuple[str, ...] = ("table", "json", "csv", "markdown"),
            help: str = "table: the result for people on stdout; json/csv/markdown: that "
                        "document on stdout in its place, and nothing else there.") -> Callable:
    return click.option("--format", "fmt", type=click.Choice(list(choices)), default="table",
                        show_default=True, help=help)


def _no_plots(help: str = "Skip figures (matplotlib is not loaded).") -> Callable:
    return click.option("--no-plots", is_flag=True, help=help)


def _svg() -> Callable:
    return click.option("--svg", is_flag=True, help="Also write each figure as SVG.")


def _dpi() -> Callable:
    return click.option("--dpi", type=IntRange(*DPI), default=None, metavar="N",
                        help="PNG resolution in pixels per inch (default 110, for screens; "
                             "300 for print).")


def _check(help: str = "Exit 1 when a check or an unaccepted audit finding fails.") -> Callable:
    return click.option("--check", is_flag=True, help=help)


def _quiet(help: str = "No table or progress; a failure still prints one line.") -> Callable:
    return click.option("-q", "--quiet", is_flag=True, help=help)


def _workers(default: Any = default_workers) -> Callable:
    return click.option("--workers", type=IntRange(*WORKERS), default=default, metavar="N",
                        show_default="CPU count, at most 8",
                        help="Threads drawing blocks; results are identical for any value.")


def _scheduler() -> Callable:
    return click.option(
        "--scheduler", default=None, metavar="ADDRESS",
        help="Run the blocks on a Dask cluster: tcp://HOST:PORT, or local:N to start N worker "
             "processes here (default: $SDPA_SCHEDULER, else local threads). Same digits "
             "either way. Needs pip install 'sdpa[dask]'.")


def _wide() -> Callable:
    return click.option("--wide", is_flag=True,
                        help="Show every table column, however wide the terminal.")


def _explain() -> Callable:
    return click.option("--explain", is_flag=True,
                        help="Also print the theory's exact forms and their terms.")


def _apply(f: Callable, decorators: list[Callable]) -> Callable:
    for decorator in reversed(decorators):
        f = decorator(f)
    return f


# The settings every study command shares, by parameter name (report.Settings fields).
SETTINGS = ("out", "fmt", "no_plots", "svg", "dpi", "check", "quiet", "workers", "wide",
            "explain", "scheduler")


def ci_options(f: Callable) -> Callable:
    """What CI reads (issue 12): JUnit XML, annotations, code quality; and --no-write."""
    return _apply(f, [
        click.option("--junit-xml", "junit_xml", type=click.Path(dir_okay=False), default=None,
                     metavar="FILE", help="Also write a JUnit XML report (one testsuite per "
                                          "spec, one testcase per check and audited number)."),
        click.option("--annotations", type=click.Choice(["github", "none"]), default=None,
                     help="Print ::error lines for failures and append a summary to "
                          "$GITHUB_STEP_SUMMARY (default: github when GITHUB_ACTIONS=true)."),
        click.option("--codequality", type=click.Path(dir_okay=False), default=None,
                     metavar="FILE", help="Also write GitLab's code-quality JSON report."),
        click.option("--no-write", is_flag=True,
                     help="Compute, print and exit with the right code; write no run folder."),
    ])


CI_SETTINGS = ("junit_xml", "annotations", "codequality", "no_write")


def ci_settings(params: dict[str, Any], *, run_folder: Path | None = None,
                batch_folder: Path | None = None) -> dict[str, Any]:
    """report.Settings fields from the CI flags a command was given. A report aimed inside
    the run folder the command writes, inside any sdpa run folder, or over a batch folder's
    own files is refused here, before anything runs."""
    junit, quality = params.get("junit_xml"), params.get("codequality")
    for flag, given in (("--junit-xml", junit), ("--codequality", quality)):
        if not given:
            continue
        target = Path(os.path.realpath(given))  # where a link leads is where it is written
        why = path_problem(Path(given)) or report_path_problem(Path(given), flag)
        if not why and run_folder is not None and target.parent in (
                run_folder.absolute(), Path(os.path.realpath(run_folder))):
            why = f"{run_folder} is the run folder this command writes; write the report " \
                  "outside it"
        if not why and batch_folder is not None and target.parent in (
                batch_folder.absolute(), Path(os.path.realpath(batch_folder))) and \
                target.name in (*BATCH_FILES, BATCH_NAME):
            why = f"{target.name} is one of the batch folder's own files; choose another name"
        if why:  # before anything runs: nothing is computed or written
            raise InputError(Problem(why, flag=flag))
    return {"junit_xml": Path(junit) if junit else None,
            "annotations": params.get("annotations"),
            "codequality": Path(quality) if quality else None,
            "write": not params.get("no_write", False)}


def common_options(f: Callable) -> Callable:
    """Flags every study command shares: where and how results are shown, the threads used
    (never a number of the results), and the seed."""
    return ci_options(_apply(f, [
        _out(), _format(), _no_plots(), _svg(), _dpi(), _check(), _quiet(), _workers(),
        _scheduler(), _wide(), _explain(),
        value_option("--seed", metavar="N", help="Seed entropy (recorded; default: fresh).")]))


def batch_options(f: Callable) -> Callable:
    """`sdpa run`'s flags: the same settings, said for a batch folder."""
    return _apply(f, [
        _out("Batch folder: one run folder per spec, index.md, report.html "
             "(default: outputs/)."),
        _check("Exit 1 when any spec's checks or audit fail."),
        click.option("--fail-fast", is_flag=True, help="Stop at the first spec that fails."),
        _format(("table", "json"), "table: the batch's summary for people on stdout; json: "
                "a summary of the batch on stdout in its place."),
        _no_plots("Skip figures (the report has none either)."), _svg(), _dpi(),
        _quiet("No progress or summary; a failure still prints one line."),
        _workers(None), _scheduler(),
        click.option("-k", "keyword", metavar="EXPR", default=None,
                     help="Only specs whose name or study matches EXPR (pytest's -k: "
                          "substrings with and / or / not and parentheses), e.g. "
                          "-k 'variance and not dims'."),
        click.option("--last-failed", "--lf", "last_failed", is_flag=True,
                     help="Only the specs that failed in the last batch written to DIR "
                          "(all of them when none failed)."),
        click.option("--force", is_flag=True,
                     help="Rerun every spec; by default a run folder whose manifest records "
                          "the same spec, sdpa code, library versions and figure settings "
                          "is kept."),
        ci_options,
    ])
