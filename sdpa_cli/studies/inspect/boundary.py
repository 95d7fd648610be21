"""Calls into tokenizers, safetensors and gguf guarded, and weights checked finite, at the read."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from sdpa_cli.errors import InputError, Problem, SdpaError, whole

T = TypeVar("T")
A = TypeVar("A", bound="np.ndarray[Any, Any]")
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


def finite(values: A, path: Path | str, name: str, rows: Any = None) -> A:
    """`values` as read from tensor `name` of `path`, refused (one line naming the tensor and
    the first row at fault) when any is NaN or ±inf: NaN would end the forward in an SVD
    that does not converge. Two reductions, no copy (NaN propagates through min and max).
    `rows`: the row ids `values` holds, when only some rows were read."""
    if values.size == 0:
        return values
    lo, hi = values.min(), values.max()
    if np.isfinite(lo) and np.isfinite(hi):
        return values
    flat = np.asarray(values).reshape(values.shape[0] if values.ndim else 1, -1)
    at = int(np.flatnonzero(~np.isfinite(flat).all(axis=1))[0])
    row = int(np.asarray(rows).reshape(-1)[at]) if rows is not None else at
    where = f" (row {row})" if values.ndim > 1 else ""
    what = "NaN" if np.isnan(flat[at]).any() else "±inf"
    raise InputError(Problem(f"tensor {name!r} holds {what}{where}; sdpa measures finite "
                             "weights only", file=str(path)))
