"""Run folders built beside their target and swapped in whole, so none is ever half-written."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import json
import os
import re
import secrets
import shutil
import signal
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sdpa_cli import process
from sdpa_cli.errors import InputError, Problem, RunError, name_problem
from sdpa_cli.io import environment
from sdpa_cli.report import manifest
from sdpa_cli.report.ownfiles import LEFTOVER

MARKER = manifest.NAME  # a run folder sdpa may replace holds its own, matching manifest
BATCH_FILES = ("index.md", "report.html")  # what a batch writes into its folder, besides runs
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
    """Delay SIGINT, SIGTERM and the other signals sdpa ends on (entry.ENDING: SIGHUP, …)
    until the block ends, so the swap (two renames where the atomic exchange is unavailable)
    is never cut in half."""
    held = {signal.SIGINT, *(getattr(signal, n) for n in ("SIGTERM", "SIGHUP", "SIGUSR1",
                                                           "SIGUSR2", "SIGALRM")
                             if hasattr(signal, n))}
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


def _remove(path: Path) -> None:
    """Remove a temporary entry sdpa made: a folder, a file, or a symlink (never followed)."""
    if path.is_symlink() or not path.is_dir():
        with contextlib.suppress(OSError):
            path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def make_folders(path: Path) -> None:
    """mkdir -p without recursion: Path.mkdir(parents=True) and os.makedirs call themselves
    once per missing level, and a path 2000 folders deep (within PATH_MAX) ended in
    RecursionError. Each missing level is made in turn from the deepest one that exists."""
    missing = []
    here = path
    while not here.is_dir():
        if os.path.lexists(here) or here == here.parent:
            break  # a file (or a dangling link) in the way: mkdir below says so
        missing.append(here)
        here = here.parent
    for folder in reversed(missing):
        folder.mkdir(exist_ok=True)
    if not path.is_dir():
        path.mkdir(exist_ok=True)  # raises the OSError that names what is in the way


def real_target(target: Path) -> Path:
    """Where a run folder really goes: a symlinked `--out` (or outputs/NAME) keeps its link,
    and the folder it points to is the one replaced."""
    return Path(os.path.realpath(target)) if target.is_symlink() else target


def clean_stale(target: Path) -> None:
    """Remove temporary folders that killed runs left beside `target`; if a kill struck
    between the two renames of the fallback swap, put the previous folder back."""
    parent = target.parent
    if not parent.is_dir():
        return
    pattern = re.compile(rf"^\.{re.escape(target.name)}\.(tmp|old)-(\d+)-[0-9a-f]{{8}}$")
    for entry in parent.iterdir():
        m = pattern.match(entry.name)
        if not m or _pid_alive(int(m[2])):
            continue
        # The name alone proves nothing: a user's folder may carry it. An old run folder is
        # one sdpa wrote (its manifest matches); a temporary one holds only files sdpa
        # writes into run folders. Anything else is left where it is.
        if m[1] == "old":
            if manifest.run_folder_problem(entry):
                continue
            if not os.path.lexists(target):
                os.rename(entry, target)
                continue
        elif not _half_written_run(entry):
            continue
        _remove(entry)


# The files sdpa writes straight into a batch folder through a temporary sibling.
_OWN_FILES = frozenset((*BATCH_FILES, manifest.BATCH_NAME, ".sdpa-lastfailed.json"))


def clean_leftovers(root: Path) -> None:
    """Remove what killed runs left in a batch folder (SIGKILL, or a signal sdpa does not
    handle), only where it is provably sdpa's: its writer is dead, it is this user's, and it is
    a run folder holding only sdpa's files (clean_stale), a regular file named after one of
    the batch's own files, or a write probe holding sdpa's four bytes."""
    try:
        names = [e.name for e in os.scandir(root)]
    except OSError:
        return
    for name in names:
        m = LEFTOVER.match(name)
        if m is None or _pid_alive(int(m["pid"])):
            continue
        entry = root / name
        try:
            info = os.lstat(entry)
        except OSError:
            continue
        if info.st_uid != os.getuid():
            continue
        if stat.S_ISDIR(info.st_mode) and m["what"] in ("tmp", "old"):
            clean_stale(root / m["name"])
        elif stat.S_ISREG(info.st_mode) and (
                (m["what"] == "tmp" and m["name"] in _OWN_FILES)
                or (m["what"] == "probe" and info.st_size == 4 and entry.read_bytes() == b"sdpa")):
            with contextlib.suppress(OSError):
                entry.unlink()


# The files a run folder is built from (report.write_run), and figures.
_RUN_FILE = re.compile(r"^(results\.json|table\.csv|table\.md|spec\.yaml|params\.yaml|"
                       r"metrics\.json|manifest\.json|[A-Za-z0-9_-]+\.(png|svg))$")


def _half_written_run(entry: Path) -> bool:
    """Whether `entry` can be a temporary run folder a killed sdpa left: a real folder of
    this user holding nothing but regular files with the names sdpa writes."""
    try:
        info = os.lstat(entry)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            return False
        with os.scandir(entry) as it:
            return all(e.is_file(follow_symlinks=False) and _RUN_FILE.match(e.name)
                       for e in it)
    except OSError:
        return False


def check_replaceable(target: Path, what: str) -> None:
    """Refuse (exit 2, nothing written) to replace anything sdpa did not make: a folder is
    replaced only when it is empty or its manifest is sdpa's and matches its files. The one
    check of a run folder's target: `--out`, outputs/NAME and the API's Result.save."""
    why = name_problem(str(target))  # a NUL or lone surrogate fails every call below
    if why:
        raise InputError(Problem(why, flag=what))
    environment.check_path(target, what)  # before any call that would fail on it
    here = Path.cwd().resolve()
    try:
        resolved = target.resolve()
    except (RuntimeError, OSError):  # a loop of symbolic links (L -> L, a -> b -> a)
        raise InputError(Problem(f"{target} is a loop of symbolic links; point it at a folder "
                                 "or remove it", flag=what)) from None
    if resolved == here or resolved in here.parents:
        raise InputError(Problem(f"{target} is the current folder or holds it; a run folder "
                                 "is replaced whole, so name a folder inside it", flag=what))
    for parent in target.parents:
        if parent.exists() and not parent.is_dir():
            raise InputError(Problem(f"{parent} is a file, not a folder", flag=what))
    around = manifest.run_folder_around(real_target(target))
    if around is not None:
        raise InputError(Problem(f"{target} lies inside the sdpa run folder {around}; a folder "
                                 "made there would change that run: choose a folder outside "
                                 "it", flag=what))
    if target.is_symlink() and not target.exists():
        raise InputError(Problem(f"{target} is a symbolic link to {os.readlink(target)}, which "
                                 "does not exist; point it at a folder or remove it", flag=what))
    if target.exists() and not target.is_dir():
        raise InputError(Problem(f"{target} exists and is not a folder", flag=what))
    real = real_target(target)
    if real.is_dir() and any(real.iterdir()):
        why = manifest.run_folder_problem(real)
        if why:
            raise InputError(Problem(
                f"{target} is not an sdpa run folder: {why}; sdpa replaces only folders it "
                "wrote, so choose another folder or move this one away yourself", flag=what))
        why = manifest.own_fields_problem(real)
        if why:  # sdpa's files, but a manifest that no longer vouches for them
            raise InputError(Problem(
                f"{target}/{why}; the run folder is damaged and sdpa neither keeps nor "
                "replaces it: move it away or delete it", flag=what))


def check_batch(root: Path, what: str) -> None:
    """Refuse (exit 2, before any work) a batch folder whose index.md or report.html sdpa did
    not write; everything else in it that is not a run folder is left alone."""
    why = name_problem(str(root))
    if why:
        raise InputError(Problem(why, flag=what))
    environment.check_path(root, what, sibling=False)
    if root.exists() and not root.is_dir():
        raise InputError(Problem(f"{root} exists and is not a folder", flag=what))
    around = manifest.run_folder_around(root, itself=True)
    if around is not None:
        where = "is" if around == Path(os.path.abspath(root)) else f"lies inside {around},"
        raise InputError(Problem(f"{root} {where} an sdpa run folder; a batch writes its run "
                                 "folders and index.md into its folder, which would change "
                                 "that run: choose another folder", flag=what))
    why = manifest.batch_file_problem(root, BATCH_FILES) if root.is_dir() else ""
    if why:
        raise InputError(Problem(f"{root}: {why}; sdpa replaces only files it wrote, so choose "
                                 "another folder or move them away yourself", flag=what))


def write_batch(root: Path, files: dict[str, bytes],
                experiments: Sequence[str] | None = None,
                summary: dict[str, Any] | None = None) -> None:
    """Write a batch folder's own files and its manifest (sdpa-batch.json, which also lists
    the run folders the report describes and the totals it shows, `summary`), each through a
    temporary sibling; the renames happen together with SIGINT/SIGTERM held."""
    process.check()
    make_folders(root)
    clean_leftovers(root)
    why = manifest.batch_file_problem(root, tuple(files))
    if why:  # it was checked before the run: someone wrote these files meanwhile
        raise RunError(f"{root}: {why}; left untouched")
    doc = manifest.batch_document_from({n: data for n, data in files.items()}, experiments,
                                       summary)
    staged = {**files, manifest.BATCH_NAME:
              (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")}
    temps: list[tuple[Path, Path]] = []
    try:
        for name, data in staged.items():
            tmp = root / f".{name}{_TMP}{os.getpid()}-{secrets.token_hex(4)}"
            temps.append((tmp, root / name))
            tmp.write_bytes(data)
        with _signals_held():
            for tmp, final in temps:
                os.replace(tmp, final)
    except OSError as e:
        raise RunError(f"cannot write {root}: {e.strerror or e}") from None
    finally:
        for tmp, _ in temps:
            with contextlib.suppress(OSError):
                tmp.unlink()


# The machine's state (a full or read-only disk, a failing device): exit 1, as any failed
# write. Any other failure means the path named can hold no run folder (/proc/x, a folder of
# someone else's): bad input, exit 2, naming the flag that named it.
_STATE = (errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EIO)


def preflight(target: Path, flag: str | None = None) -> None:
    """Fail fast, before any computing, if the run folder cannot be written: exit 2 naming
    `flag` (--out, output folder) when the path can hold no files, exit 1 when the disk
    cannot take them now."""
    probe = target.parent / f".{target.name}.probe-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        make_folders(target.parent)
        probe.write_bytes(b"sdpa")
    except OSError as e:
        message = f"cannot write in {target.parent}: {e.strerror or e}"
        if flag is not None and e.errno not in _STATE:
            raise InputError(Problem(message, flag=flag)) from None
        raise RunError(message) from None
    finally:
        with contextlib.suppress(OSError):  # a read-only file system refuses even this
            probe.unlink(missing_ok=True)


class RunFolder:
    """`with RunFolder(target) as tmp:` write into tmp, then `commit()` swaps it in.

    Leaving the block without commit (an error, Ctrl-C) removes tmp; the previous folder at
    `target` is untouched either way until the single atomic exchange.
    """

    def __init__(self, target: Path) -> None:
        self.shown = target  # as the user named it, for messages
        self.target = real_target(target)
        self.tmp = self.target.parent / (
            f".{self.target.name}{_TMP}{os.getpid()}-{secrets.token_hex(4)}")
        self.committed = False

    def __enter__(self) -> Path:
        process.check()  # a Ctrl-C that a library swallowed ends the run here
        try:
            make_folders(self.target.parent)
            clean_stale(self.target)
            self.tmp.mkdir()
        except OSError as e:
            raise RunError(f"cannot create the run folder {self.shown}: "
                           f"{e.strerror or e}") from None
        except BaseException:
            # Ctrl-C or SIGTERM right after mkdir: __exit__ will not run for a failed
            # __enter__, so remove the folder here.
            _remove(self.tmp)
            raise
        return self.tmp

    def commit(self) -> None:
        process.check()  # interrupted: the previous folder stays, this one is removed
        with _signals_held():
            self._swap()

    def _swap(self) -> None:
        # Checked again now: a file the user put in the folder during the run must survive,
        # and so must a file (or anything else not a folder) that took the target's name.
        if os.path.lexists(self.target) and not self.target.is_dir():
            raise RunError(f"{self.shown} exists and is not a folder; it was left untouched")
        if self.target.is_dir() and any(self.target.iterdir()):
            why = manifest.run_folder_problem(self.target)
            if why:
                raise RunError(f"{self.shown} changed during the run and is no longer an sdpa "
                               f"run folder ({why}); it was left untouched")
        try:
            if os.path.lexists(self.target):
                if _exchange(self.tmp, self.target):
                    _remove(self.tmp)  # now holds the old run
                else:
                    old = self.target.parent / (
                        f".{self.target.name}{_OLD}{os.getpid()}-{secrets.token_hex(4)}")
                    os.rename(self.target, old)
                    os.rename(self.tmp, self.target)
                    _remove(old)
            else:
                os.rename(self.tmp, self.target)
        except OSError as e:
            raise RunError(f"cannot move the run into {self.shown}: {e.strerror or e}") from None
        self.committed = True

    def __exit__(self, *exc: object) -> None:
        if not self.committed:
            _remove(self.tmp)


def write_atomic(path: Path, data: bytes, *, follow: bool = False) -> None:
    """Write a file through a temporary sibling and os.replace; on any failure, Ctrl-C
    included, the sibling is removed.

    With `follow` (a path the user named: --junit-xml, --codequality), a symbolic link is
    kept and the file it points to is written, and a device, FIFO or socket there
    (/dev/null, /dev/stdout) is written in place, never swapped for a regular file, which
    would destroy the device node; a FIFO nobody reads is refused, not waited for. Without
    it (sdpa's own files), whatever holds the name is replaced, never followed."""
    info = None
    if follow:
        path = Path(os.path.realpath(path)) if path.is_symlink() else path
        with contextlib.suppress(OSError):
            info = os.lstat(path)
    if info is not None and not stat.S_ISREG(info.st_mode):
        if stat.S_ISDIR(info.st_mode):
            raise RunError(f"cannot write {path}: it is a folder")
        write_special(path, data, append=False)
        return
    tmp = path.parent / f".{path.name}{_TMP}{os.getpid()}-{secrets.token_hex(4)}"
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as e:
        raise RunError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def write_special(path: Path | str, data: bytes, *, append: bool) -> None:
    """Write to an existing path in place (or append, making the file if missing), never
    blocking: a FIFO without a reader is an error (ENXIO), not a hang. Errors become
    RunError (exit 1)."""
    flags = os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
    flags |= (os.O_APPEND | os.O_CREAT) if append else 0
    try:
        fd = os.open(path, flags, 0o666)
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.set_blocking(fd, True)  # a reader is there: let it take its time
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
    except OSError as e:
        why = "a FIFO nobody reads" if e.errno == errno.ENXIO else (e.strerror or str(e))
        raise RunError(f"cannot write {path}: {why}") from None
