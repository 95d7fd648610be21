"""The `sdpa` program around the click commands: exit codes, one-line errors, signals, stdio."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import click

from sdpa_cli import process
from sdpa_cli.cli.group import cli
from sdpa_cli.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, InputError, SdpaError, one_line
from sdpa_cli.io import environment


class Terminated(BaseException):
    """SIGTERM (or another signal that would end the process: SIGHUP when the terminal
    closes, SIGUSR1/2, SIGALRM), turned into an exception so that temporary folders are
    cleaned up; the exit code is 128 + the signal's number, as the shell reports a kill."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(signum)
        self.signum = signum


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated(signum)


# Signals whose default action ends the process at once, leaving a `.tmp-` run folder behind:
# each ends sdpa as SIGTERM does, through the clean-up. (SIGINT has its own handling.)
ENDING = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2",
                                                   "SIGALRM") if hasattr(signal, name))
_SAID = {getattr(signal, "SIGHUP", None): "hung up"}


# click echoes a refused value whole ("'1000…0' is not one of 'github', 'none'"): a value of
# 5000 characters would make a line of 5000. Any word this long is shown by its ends.
_LONG_WORD = re.compile(r"[^\s'\"`;,()]{61,}")  # quotes and punctuation stay outside


def _shorten(match: re.Match[str]) -> str:
    word = match.group(0)
    return f"{word[:24]}…{word[-12:]} ({len(word)} characters)"


def _click_line(e: click.ClickException) -> str:
    ctx = getattr(e, "ctx", None)
    if isinstance(e, click.MissingParameter) and e.param is not None and ctx is not None:
        # click's own message for a missing argument is empty here ("b: "): name it, and
        # show the usage line that says what goes where.
        opts = getattr(e.param, "opts", None) or ["?"]
        what = (e.param.metavar or (e.param.name or "").upper()) \
            if isinstance(e.param, click.Argument) else opts[-1]
        usage = " ".join([ctx.command_path, *ctx.command.collect_usage_pieces(ctx)])
        short = ctx.command.get_short_help_str(limit=200).rstrip(".")
        help_ = f": {short[:1].lower()}{short[1:]}" if short else ""
        return f"{ctx.command_path}: missing {what} (usage: {usage}{help_})"
    if isinstance(e, click.BadParameter) and e.param is not None:
        opts = getattr(e.param, "opts", None) or [e.param.name or "value"]
        text = f"{opts[-1] if opts[-1].startswith('--') else opts[0]}: {e.message}"
    else:
        text = " ".join(e.format_message().split())
        if ctx is not None and ctx.command_path:
            text = f"{ctx.command_path}: {text}"
    return _LONG_WORD.sub(_shorten, text)


def _flag_value(args: list[str], flag: str) -> str | None:
    """The last value given to `flag` (`--flag V` or `--flag=V`) in raw arguments."""
    value = None
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith(f"{flag}="):
            value = a.split("=", 1)[1]
    return value


def _annotate_bad_input(e: SdpaError, args: list[str]) -> None:
    """Under GitHub Actions (or --annotations github) a bad spec is also an ::error line and a
    line of the step summary; --codequality FILE lists it for GitLab."""
    if not isinstance(e, InputError):
        return
    choice = _flag_value(args, "--annotations")
    codequality = _flag_value(args, "--codequality")
    if any(p.flag == "--codequality" for p in e.problems):
        codequality = None  # the problem is where that report would go: write nothing there
    from sdpa_cli.report import ci

    try:
        ci.bad_input(e.problems, annotate=choice if choice in ("github", "none") else None,
                     codequality=Path(codequality) if codequality else None)
    except SdpaError as err:  # the report could not be written: one more line, same exit
        for line in err.lines():
            _say(line)


def wrapped(line: str, width: int) -> str:
    """An error line broken at word boundaries to fit `width` columns (continuations indented
    two spaces); a word wider than that stays whole. A terminal would break it mid-word."""
    if len(line) <= width:
        return line
    parts = textwrap.wrap(line, width, subsequent_indent="  ", break_long_words=False,
                          break_on_hyphens=False)
    return "\n".join(parts) if parts else line


def _say(line: str) -> None:
    """One message line on stderr: on a terminal, wrapped to its width at word boundaries;
    in a log or a pipe, kept whole (one problem, one line, for whoever parses it)."""
    try:
        tty = sys.stderr.isatty()
    except (ValueError, OSError):  # closed or odd: write it as it is
        tty = False
    click.echo(wrapped(line, shutil.get_terminal_size().columns) if tty else line, err=True)


def _drop_impossible_sizes(environ: dict[str, str] | os._Environ[str] = os.environ) -> None:
    """Forget a COLUMNS or LINES no terminal could have: rich reads both wherever it makes a
    console, and int() fails on "²" (isdigit() passes it) and on 5000 digits."""
    for name in ("COLUMNS", "LINES"):
        value = environ.get(name)
        if value is not None and not (value.isascii() and value.isdigit() and len(value) <= 5):
            del environ[name]


def _stdout_failed(e: OSError) -> bool:
    """Was it stdout that failed (a full /dev/full, a reader that left) while help, --version
    or a topic page was printed? Those go through click.echo to stdout, which keeps its own
    text stream, so the failing call is looked for in the traceback: click.echo without
    err=True. A failed stdout is then pointed at /dev/null, so nothing is written twice."""
    tb = e.__traceback__
    to_stdout = False
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "echo" and frame.f_globals.get("__name__") == "click.utils" \
                and not frame.f_locals.get("err"):
            to_stdout = True
        tb = tb.tb_next
    if not to_stdout:
        return False
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return True


def run(args: list[str]) -> int:
    """Run sdpa with these arguments and return the exit code (errors become one line)."""
    try:  # before NumPy and matplotlib read the environment (nor any CI report is written)
        environment.check()
    except SdpaError as e:
        for line in e.lines():
            _say(line)
        return e.exit_code
    _drop_impossible_sizes()
    try:
        result = cli.main(args=args, prog_name="sdpa", standalone_mode=False)
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.exceptions.NoArgsIsHelpError as e:  # bare `sdpa`: the help, laid out
        if e.ctx is not None:
            try:
                click.echo(e.ctx.get_help())
            except OSError as err:
                return _stdout_error(err)
        return 0
    except click.exceptions.Abort:
        click.echo("sdpa: interrupted", err=True)
        return EXIT_INTERRUPTED
    except click.ClickException as e:
        _say(one_line(_click_line(e)))
        return EXIT_BAD_INPUT if isinstance(e, click.UsageError) else e.exit_code
    except SdpaError as e:
        for line in e.lines():
            _say(line)
        _annotate_bad_input(e, args)
        return e.exit_code
    except KeyboardInterrupt:
        click.echo("sdpa: interrupted", err=True)
        return EXIT_INTERRUPTED
    except Terminated as e:
        name = signal.Signals(e.signum).name
        said = _SAID.get(e.signum) or ("terminated" if e.signum == signal.SIGTERM
                                       else f"terminated by {name}")
        click.echo(f"sdpa: {said}", err=True)
        return 128 + e.signum
    except OSError as e:  # help, --version, a listing: anything printed to a stdout that fails
        return _stdout_error(e) if _stdout_failed(e) else _internal(e)
    except Exception as e:  # a bug: say so in one line, keep the traceback for SDPA_DEBUG
        return _internal(e)
    return result if isinstance(result, int) else 0


def _stdout_error(e: OSError) -> int:
    """stdout failed: one line and exit 1 (/dev/full), or nothing (a reader that left early,
    `sdpa --help | head`)."""
    _stdout_failed(e)  # points stdout at /dev/null
    if isinstance(e, BrokenPipeError):
        return 0
    click.echo(f"sdpa: cannot write to stdout: {e.strerror or e}", err=True)
    return 1


def _internal(e: Exception) -> int:
    """A bug: one line (the traceback with SDPA_DEBUG=1), exit 1; a Ctrl-C that a library
    turned into another error is still an interruption."""
    if process.pending():  # Ctrl-C that a library turned into another error (ImportError)
        click.echo("sdpa: interrupted", err=True)
        return EXIT_INTERRUPTED
    if os.environ.get("SDPA_DEBUG"):
        raise e
    _say(one_line(f"sdpa: internal error: {type(e).__name__}: {e} "
                  "(set SDPA_DEBUG=1 for the traceback)"))
    return 1


def main(argv: list[str] | None = None) -> None:
    process.install()
    process.setup_streams()
    # --workers is how many cores sdpa uses: its own worker threads, each with one BLAS
    # thread (BLAS threads inside each would multiply with them, and a small product on two
    # threads costs many times its CPU); only inspect's forward raises BLAS to --workers
    # (studies/inspect/models/threads.py). One BLAS thread also fixes how matmul sums. Set before
    # NumPy loads (the CLI imports it lazily), whatever the environment said.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    # OpenBLAS's idle threads spin about 2^28 cycles after each product before they sleep:
    # on a busy machine that spinning takes the core the work needs (2^4: sleep at once)
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    process.keep_freed_memory()  # 2 threads were slower than 1 without it (see there)
    for signum in ENDING:  # a signal the parent set to be ignored (nohup) stays ignored
        if signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, _on_sigterm)
    process.arm()
    try:
        code = run(sys.argv[1:] if argv is None else list(argv))
    except KeyboardInterrupt:  # between arming and run()'s own handlers
        code = EXIT_INTERRUPTED
        click.echo("sdpa: interrupted", err=True)
    if process.pending() and code != EXIT_INTERRUPTED:  # swallowed by a library
        code = EXIT_INTERRUPTED
        click.echo("sdpa: interrupted", err=True)
    try:
        sys.stdout.flush()
    except OSError as e:  # the reader left (see report.write_stdout), or /dev/full
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if not isinstance(e, BrokenPipeError):
            click.echo(f"sdpa: cannot write to stdout: {e.strerror or e}", err=True)
            code = code or 1
    process.disarm()
    if code == EXIT_INTERRUPTED:
        # Everything is cleaned up and flushed. Exit here: CPython 3.11 remembers a Ctrl-C
        # that hit code run by eval() (namedtuple, during an import) even though it was
        # handled, and its normal exit would then kill the process with -SIGINT instead.
        os._exit(code)
    # The run is over and flushed. Python's finalization puts SIGINT back to its default
    # action, so a Ctrl-C in those last milliseconds killed the process by the signal (-2,
    # no message) after a batch that had finished: ignore it instead, and exit with the code
    # the run earned. (SIGTERM still ends a finalization that hangs.)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code)
