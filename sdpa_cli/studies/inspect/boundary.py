"""Calls into the Rust-backed model libraries (tokenizers, safetensors), guarded: their own
exception types and their panics become one line naming the file (InputError, exit 2)."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from sdpa_cli.errors import InputError, Problem, SdpaError, whole

T = TypeVar("T")
PANIC = b"panicked at"


def is_panic(e: BaseException) -> bool:
    """pyo3's PanicException derives from BaseException, so `except Exception` misses it."""
    return type(e).__name__ == "PanicException"


@contextlib.contextmanager
def _stderr_held(panicked: list[bool]) -> Iterator[None]:
    """File descriptor 2 sent to a scratch file for the call: a Rust panic prints its own
    report there (past sys.stderr, and past any `except`), which would make sdpa's one line
    several. Whatever else was written meanwhile (another thread's progress) is passed on
    afterwards; the panic's report, from its first line on, is dropped."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no stderr to hold: call as is
        yield
        return
    try:
        with tempfile.TemporaryFile() as scratch:
            os.dup2(scratch.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
                scratch.seek(0)
                text = scratch.read()
                if panicked[0] and PANIC in text:  # the report opens with a blank line
                    text = text[:text.rfind(b"\n", 0, text.index(PANIC)) + 1]
                    text = text if text.strip() else b""
                with contextlib.suppress(OSError):
                    os.write(2, text)
    finally:
        os.close(saved)


def guarded(path: Path | str, call: Callable[[], T],
            library: str = "the tokenizers library") -> T:
    """call() into a Rust-backed library; any exception of its own, or a panic, is one line
    naming `path` (sdpa's own errors and Ctrl-C pass through)."""
    panicked = [False]
    try:
        with _stderr_held(panicked):
            try:
                return call()
            except BaseException as e:
                panicked[0] = is_panic(e)
                raise
    except (SdpaError, KeyboardInterrupt, SystemExit):
        raise
    except MemoryError:
        raise InputError(Problem(f"{library} ran out of memory on it",
                                 file=str(path))) from None
    except BaseException as e:
        if not (isinstance(e, Exception) or is_panic(e)):
            raise
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        how = " (it panicked)" if is_panic(e) else ""
        raise InputError(Problem(f"{library} failed on it{how}: {whole(first, 160)}",
                                 file=str(path))) from None
