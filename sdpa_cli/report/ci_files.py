"""Where a CI report (JUnit XML, code quality) may go, and writing it there whole."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sdpa_cli.errors import RunError
from sdpa_cli.io.jsonio import JsonError, load_json
from sdpa_cli.report import manifest
from sdpa_cli.report.runfolder import BATCH_FILES, make_folders, write_atomic

# What sdpa's own reports look like, so that a report sdpa wrote before may be replaced and
# nothing else: junit.junit_xml's first bytes and last, annotate.codequality's issues.
JUNIT_HEAD = b'<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="sdpa"'
JUNIT_TAILS = (b"</testsuites>\n", b"/>\n")
MAX_CODEQUALITY = 64 * 1024**2


def report_path_problem(path: Path, flag: str) -> str:
    """Why a CI report may not go to `path` (inside an sdpa run folder, over a batch file,
    over a file sdpa did not write): judged where the name is and where it leads, since the
    report is written through a symbolic link (a link to another run's results.json would
    overwrite it)."""
    real = Path(os.path.realpath(path))
    why = manifest.report_path_problem(path, BATCH_FILES)
    if not why and real != path.absolute():
        why = manifest.report_path_problem(real, BATCH_FILES)
        if why:
            why = f"{path} leads to {real}: {why}"
    if not why and not _ours(real, flag):
        shown = str(path) if real == path.absolute() else f"{path} (which leads to {real})"
        why = (f"{shown} holds a file sdpa did not write (not an sdpa "
               f"{'JUnit XML' if flag == '--junit-xml' else 'code-quality'} report); sdpa "
               "never overwrites what it did not write: name a new file, or remove it yourself")
    return why


def _ours(path: Path, flag: str) -> bool:
    """True when nothing is there to lose: no file, an empty file, a device or FIFO (written in
    place), or a report of the kind `flag` writes that sdpa wrote."""
    try:
        info = os.stat(path)
    except OSError:
        return True  # nothing there (or nothing reachable: the write will say why)
    if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
        return True
    try:
        with path.open("rb") as f:
            if flag == "--junit-xml":
                head = f.read(len(JUNIT_HEAD))
                f.seek(max(0, info.st_size - 16))
                return head == JUNIT_HEAD and f.read().endswith(JUNIT_TAILS)
            if info.st_size > MAX_CODEQUALITY:
                return False
            doc = load_json(f.read(), what="a code-quality report", file=str(path))
    except (OSError, JsonError):
        return False
    return isinstance(doc, list) and all(
        isinstance(d, dict) and str(d.get("check_name", "")).startswith("sdpa-") and
        isinstance(d.get("fingerprint"), str) for d in doc)


def write_report(path: Path, text: str, flag: str) -> None:
    """Write a report where `flag` asks (its folder is made if missing), atomically, through
    a device or symlink the user named rather than over it."""
    why = report_path_problem(path, flag)
    if why:  # checked before the run too (options.ci_settings); the run may have made it one
        raise RunError(f"{flag}: {why}")
    try:
        make_folders(path.parent)
        write_atomic(path, text.encode("utf-8"), follow=True)
    except OSError as e:
        raise RunError(f"{flag}: cannot write {path}: {e.strerror or e}") from None
    except RunError as e:
        raise RunError(f"{flag}: {e}") from None
