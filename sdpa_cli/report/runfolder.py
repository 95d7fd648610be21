"""Run folders built beside their target and swapped in whole, so none is ever half-written."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import secrets
import shutil
import signal
from pathlib import Path

from sdpa_cli.errors import InputError, Problem, RunError

MARKER = "manifest.json"  # a folder holding one is a run folder sdpa may replace
_TMP = ".tmp-"
_OLD = ".old-"


def _libc_renameat2():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return fn


_RENAMEAT2 = _libc_renameat2()
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2); False where unsupported."""
    if _RENAMEAT2 is None:
        return False
    rc = _RENAMEAT2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


@contextlib.contextmanager
def _signals_held():
    """Delay SIGINT/SIGTERM until the block ends, so the swap (two renames where the atomic
    exchange is unavailable) is never cut in half."""
    held = {signal.SIGINT, signal.SIGTERM}
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    except (AttributeError, ValueError, OSError):  # not the main thread, or no POSIX
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(target: Path) -> None:
    """Remove temporary folders that killed runs left beside `target`; if a kill struck
    between the two renames of the fallback swap, put the previous folder back."""
    parent = target.parent
    if not parent.is_dir():
        return
    for entry in parent.iterdir():
        name = entry.name
        for tag in (_TMP, _OLD):
            prefix = f".{target.name}{tag}"
            if not name.startswith(prefix):
                continue
            pid_text = name[len(prefix):].split("-", 1)[0]
            if not pid_text.isdigit() or _pid_alive(int(pid_text)):
                continue
            if tag == _OLD and not target.exists():
                os.rename(entry, target)
            else:
                shutil.rmtree(entry, ignore_errors=True)


def check_replaceable(target: Path, what: str) -> None:
    """Refuse to replace a folder that sdpa did not make (exit 2, nothing written)."""
    here = Path.cwd().resolve()
    resolved = target.resolve()
    if resolved == here or resolved in here.parents:
        raise InputError(Problem(f"{target} is the current folder or holds it; a run folder "
                                 "is replaced whole, so name a folder inside it", flag=what))
    for parent in target.parents:
        if parent.exists() and not parent.is_dir():
            raise InputError(Problem(f"{parent} is a file, not a folder", flag=what))
    if target.exists() and not target.is_dir():
        raise InputError(Problem(f"{target} exists and is not a folder", flag=what))
    if target.is_dir() and any(target.iterdir()) and not (target / MARKER).is_file():
        raise InputError(Problem(
            f"{target} exists and is not an sdpa run folder (no {MARKER}); choose another "
            "folder or empty it", flag=what))


def preflight(target: Path) -> None:
    """Fail fast (exit 1), before any computing, if the run folder cannot be written."""
    probe = target.parent / f".{target.name}.probe-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"sdpa")
    except OSError as e:
        raise RunError(f"cannot write in {target.parent}: {e.strerror or e}") from None
    finally:
        with contextlib.suppress(OSError):  # a read-only file system refuses even this
            probe.unlink(missing_ok=True)


class RunFolder:
    """`with RunFolder(target) as tmp:` write into tmp, then `commit()` swaps it in.

    Leaving the block without commit (an error, Ctrl-C) removes tmp; the previous folder at
    `target` is untouched either way until the single atomic exchange.
    """

    def __init__(self, target: Path) -> None:
        self.target = target
        self.tmp = target.parent / f".{target.name}{_TMP}{os.getpid()}-{secrets.token_hex(4)}"
        self.committed = False

    def __enter__(self) -> Path:
        try:
            self.target.parent.mkdir(parents=True, exist_ok=True)
            clean_stale(self.target)
            self.tmp.mkdir()
        except OSError as e:
            raise RunError(f"cannot create the run folder {self.target}: "
                           f"{e.strerror or e}") from None
        except BaseException:
            # Ctrl-C or SIGTERM right after mkdir: __exit__ will not run for a failed
            # __enter__, so remove the folder here.
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        return self.tmp

    def commit(self) -> None:
        with _signals_held():
            self._swap()

    def _swap(self) -> None:
        try:
            if self.target.exists():
                if _exchange(self.tmp, self.target):
                    shutil.rmtree(self.tmp, ignore_errors=True)  # now holds the old run
                else:
                    old = self.target.parent / (
                        f".{self.target.name}{_OLD}{os.getpid()}-{secrets.token_hex(4)}")
                    os.rename(self.target, old)
                    os.rename(self.tmp, self.target)
                    shutil.rmtree(old, ignore_errors=True)
            else:
                os.rename(self.tmp, self.target)
        except OSError as e:
            raise RunError(f"cannot move the run into {self.target}: {e.strerror or e}") from None
        self.committed = True

    def __exit__(self, *exc: object) -> None:
        if not self.committed:
            shutil.rmtree(self.tmp, ignore_errors=True)


def write_atomic(path: Path, data: bytes) -> None:
    """Write a file through a temporary sibling and os.replace."""
    tmp = path.parent / f".{path.name}{_TMP}{os.getpid()}-{secrets.token_hex(4)}"
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise RunError(f"cannot write {path}: {e.strerror or e}") from None
