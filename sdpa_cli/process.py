"""Process-wide guards: Ctrl-C at any moment is exit 130, and stdio never crashes sdpa."""

from __future__ import annotations

import codecs
import contextlib
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any

EXIT_INTERRUPTED = 130
_MESSAGE = b"sdpa: interrupted\n"

# --- Ctrl-C ---------------------------------------------------------------------------------
#
# Three phases. Before `arm()` (imports, start-up) and after `disarm()` (exit, flushing),
# nothing is half-written and no clean-up is due, so SIGINT ends the process at once with
# exit 130 and one line. While armed, the handler raises KeyboardInterrupt so that run folders
# and temporary files are cleaned up by the code that made them, and entry.run turns it into
# exit 130. The flag stays set, so an interrupt that a library swallowed (a KeyboardInterrupt
# inside a weakref callback, or during an import that turns it into ImportError) is still
# honoured at the next checkpoint, and further Ctrl-Cs do not cut the clean-up short.

_pending = threading.Event()
_armed = False


def _die() -> None:
    with contextlib.suppress(OSError):
        os.write(2, _MESSAGE)
    os._exit(EXIT_INTERRUPTED)


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    if _pending.is_set():
        return
    _pending.set()
    if not _armed:
        _die()
    raise KeyboardInterrupt


def _unraisable(hook: Any) -> Any:
    def quiet(info: Any) -> None:
        # "Exception ignored in …: KeyboardInterrupt": the flag is set, the checkpoints act.
        if isinstance(info.exc_value, KeyboardInterrupt) or _pending.is_set():
            _pending.set()
            return
        hook(info)

    return quiet


def install() -> None:
    """Take over SIGINT as early as sdpa's own code runs (main thread only). A SIGINT that
    the parent told us to ignore (nohup, background jobs) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return
    signal.signal(signal.SIGINT, _on_sigint)
    if not getattr(sys.unraisablehook, "_sdpa", False):
        hook = _unraisable(sys.unraisablehook)
        setattr(hook, "_sdpa", True)  # noqa: B010 (a marker on a function object)
        sys.unraisablehook = hook


def arm() -> None:
    """From here on, Ctrl-C raises KeyboardInterrupt where the program is."""
    global _armed
    _armed = True


def disarm() -> None:
    """The run is over: output is flushed, and a later Ctrl-C just ends the process."""
    global _armed
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()
    _armed = False


def pending() -> bool:
    """Has Ctrl-C been pressed (even if something swallowed the KeyboardInterrupt)?"""
    return _pending.is_set()


def check() -> None:
    """A checkpoint: raise KeyboardInterrupt if Ctrl-C was pressed and swallowed."""
    if _pending.is_set():
        raise KeyboardInterrupt


# --- stdio ------------------------------------------------------------------------------

# ASCII spellings of sdpa's symbols, for a terminal whose encoding cannot print them
# (PYTHONIOENCODING=ascii, LC_ALL=C without UTF-8 mode). No quote or backslash among them.
ASCII = {
    "√": "sqrt", "÷": "/", "·": "*", "×": "x", "−": "-", "–": "-", "—": "-", "…": "...",
    "≥": ">=", "≤": "<=", "≈": "~", "≠": "!=", "±": "+/-", "→": "->", "←": "<-", "∞": "inf",
    "σ": "sigma", "μ": "mu", "τ": "tau", "ρ": "rho", "χ": "chi", "Σ": "Sum", "∑": "Sum",
    "λ": "lambda", "ε": "eps", "α": "alpha", "β": "beta", "θ": "theta", "π": "pi",
    "ᵀ": "^T", "⁻": "^-", "½": "1/2",
    "‖": "||", "∘": "o", "′": "'", "‘": "'", "’": "'", "“": "'", "”": "'", "•": "*",
    "✓": "ok", "✗": "x", "█": "#", "▏": "|", "━": "-", "─": "-", "│": "|", "┃": "|",
    "\u00a0": " ",
    **{chr(0x2080 + i): f"_{i}" for i in range(10)},  # subscripts ₀…₉
    **{ch: f"^{i}" for i, ch in enumerate("⁰¹²³⁴⁵⁶⁷⁸⁹")},
}


def _escape(ch: str) -> str:
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # a byte of a name that was not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _for_people(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    piece = exc.object[exc.start:exc.end]
    return "".join(ASCII.get(ch) or _escape(ch) for ch in piece), exc.end


def _for_documents(exc: UnicodeError) -> tuple[str, int]:
    # stdout carries JSON/CSV/Markdown: \uXXXX keeps a JSON string valid and exact.
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    piece = exc.object[exc.start:exc.end]
    return "".join(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else _escape(ch)
                   for ch in piece), exc.end


codecs.register_error("sdpa-people", _for_people)
codecs.register_error("sdpa-documents", _for_documents)

_stdout_closed = False


def stdout_closed() -> bool:
    """Was stdout closed when sdpa started (`sdpa … >&-`)?"""
    return _stdout_closed


def setup_streams() -> None:
    """Run once at start. A closed fd 0, 1 or 2 gets /dev/null, so that no file sdpa opens
    later lands on it (and a print would write into that file); stdout and stderr fall back
    to ASCII spellings and escapes instead of failing on what they cannot encode."""
    global _stdout_closed
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            _stdout_closed = _stdout_closed or fd == 1
            with contextlib.suppress(OSError):
                new = os.open(os.devnull, os.O_RDWR)
                if new != fd:
                    os.dup2(new, fd)
                    os.close(new)
    if sys.stdout is None:
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - lives as long as the process
        _stdout_closed = True
    if sys.stderr is None:
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    for stream, errors in ((sys.stdout, "sdpa-documents"), (sys.stderr, "sdpa-people")):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors=errors)  # type: ignore[union-attr]


# --- freed memory -----------------------------------------------------------------------------
#
# glibc hands freed memory back to the kernel (and maps large arrays afresh) above thresholds
# it adapts to the largest array seen, so NumPy temporaries of a few MB were faulted in again
# on every use: 1 100 minor faults per training step at d_k = 256 (half the step's time,
# tests/bench_train.py), and 2.4 million for a 1 000-trial phase diagram, where the faults of
# two threads serialise on the process's memory-map lock, so 2 threads ran slower than 1.
# Fixed thresholds keep those pages for reuse: memory stays at its peak (+5% for the training
# spec), and no digit changes. Dask's nanny gives the worker processes of `local:N` the same
# values through their environment (executors.keep_heap).

HEAP_ENVIRON = {"MALLOC_TRIM_THRESHOLD_": 1 << 27, "MALLOC_MMAP_THRESHOLD_": 1 << 26}
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


def keep_freed_memory() -> bool:
    """HEAP_ENVIRON's thresholds for this process through glibc's mallopt; False (nothing
    done) on another libc, or when the user set either variable: their tuning wins."""
    import ctypes
    import ctypes.util

    if not sys.platform.startswith("linux") or any(k in os.environ for k in HEAP_ENVIRON):
        return False
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):  # musl and others: no mallopt, nothing to tune
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_TRIM_THRESHOLD, HEAP_ENVIRON["MALLOC_TRIM_THRESHOLD_"])) and \
        bool(mallopt(_M_MMAP_THRESHOLD, HEAP_ENVIRON["MALLOC_MMAP_THRESHOLD_"]))
