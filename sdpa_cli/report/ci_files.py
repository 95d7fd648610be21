"""Where a CI report (JUnit XML, code quality) may go, and writing it there whole."""

from __future__ import annotations

from pathlib import Path

from sdpa_cli.errors import RunError
from sdpa_cli.report import manifest
from sdpa_cli.report.runfolder import BATCH_FILES, write_atomic


def report_path_problem(path: Path) -> str:
    """Why a CI report may not go to `path` (inside an sdpa run folder, over a batch file)."""
    return manifest.report_path_problem(path, BATCH_FILES)


def write_report(path: Path, text: str, flag: str) -> None:
    """Write a report where `flag` asks (its folder is made if missing), atomically, through
    a device or symlink the user named rather than over it."""
    why = report_path_problem(path)
    if why:  # checked before the run too (options.ci_settings); the run may have made it one
        raise RunError(f"{flag}: {why}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text.encode("utf-8"), follow=True)
    except OSError as e:
        raise RunError(f"{flag}: cannot write {path}: {e.strerror or e}") from None
    except RunError as e:
        raise RunError(f"{flag}: {e}") from None
