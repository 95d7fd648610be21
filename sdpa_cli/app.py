"""The recipe every study command follows: spec → study → run folder and report → exit code."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from sdpa_cli import report, spec, studies


def run_study(
    study: str,
    spec_path: Path | None,
    *,
    overrides: dict[str, Any],
    flags: dict[str, str],
    settings: report.Settings,
    argv: list[str] | None = None,
) -> int:
    """Load and validate everything first (exit 2 before any work), then run and report."""
    resolved = spec.load(spec_path, study=study, overrides=overrides, flags=flags,
                         default_name=study)
    studies.check_documented(resolved, str(spec_path) if spec_path else None)
    target = report.target_for(resolved.name or study, settings)
    started = time.time()
    result = studies.module(study).run(resolved, workers=settings.workers)
    folder = report.write_run(result, settings, target=target,
                              argv=argv if argv is not None else sys.argv, started=started)
    report.emit(result, settings, folder)
    return report.exit_code(result, settings)
