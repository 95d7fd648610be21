"""Everything a run shows and writes: run folders, tables, figures, CI reports, the batch report.

The names below are the ones the runners use (they live in report.output)."""

from sdpa_cli.report.output import (
    Settings,
    check_batch,
    context,
    document,
    emit,
    figure_files,
    finish_ci,
    ready,
    target_for,
    write_run,
    write_stdout,
)

__all__ = ["Settings", "check_batch", "context", "document", "emit", "figure_files",
           "finish_ci", "ready", "target_for", "write_run", "write_stdout"]
