"""Progress on stderr: live bars (specs, blocks) on a terminal, plain lines otherwise. A batch
shows both bars; a single study command (`Progress.blocks_only`) only the blocks bar."""

from __future__ import annotations

import sys
import threading
from typing import Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.progress import Progress as RichProgress
from rich.text import Text

from sdpa_cli.report.terminal import console

_STYLE = {"passed": "green", "failed": "red", "error": "bold red", "skipped": "dim"}


class Progress:
    def __init__(self, total: int, *, quiet: bool = False, specs: bool = True,
                 blocks: str = "  blocks") -> None:
        self.total = total
        self.specs = specs  # False: no specs bar (one study), the blocks bar alone
        self.blocks_label = blocks
        self.quiet = quiet
        self.con = console()
        self.live = sys.stderr.isatty() and not quiet
        self.bar: RichProgress | None = None
        self.task: TaskID | None = None
        self.i = 0
        self.label = ""
        self.blocks: TaskID | None = None
        self.lock = threading.Lock()
        self.planned = self.completed = 0

    def __enter__(self) -> Progress:
        if self.live:
            self.bar = RichProgress(TextColumn("{task.description}"), BarColumn(),
                                    MofNCompleteColumn(), TimeElapsedColumn(),
                                    console=self.con, transient=True)
            self.bar.__enter__()
            if self.specs:
                self.task = self.bar.add_task("starting", total=self.total)
            # Blocks (and sweep cells) of the specs running, as they complete: a long spec
            # moves this bar while the one above waits for the spec to end. Hidden until the
            # first tick, so a study without blocks shows nothing.
            self.blocks = self.bar.add_task(self.blocks_label, total=None, visible=False)
        return self

    @classmethod
    def blocks_only(cls, label: str, *, quiet: bool = False) -> Progress:
        """The blocks bar alone, for one study command: transient, so it is gone before the
        study's table prints. Live only on a terminal, and not with -q (`quiet`)."""
        return cls(1, quiet=quiet, specs=False, blocks=label)

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def start(self, i: int, name: str, study: str) -> None:
        self.i = i
        self.label = f"[{i + 1}/{self.total}] {study} {name}"
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, description=self.label)

    def done(self, status: str, seconds: float, error: str | None) -> None:
        if self.quiet:
            return
        line = Text(f"{self.label} ")
        line.append(status, style=_STYLE.get(status, ""))
        line.append(f" ({seconds:.1f}s)", style="dim")
        if error:
            line.append(f": {error}", style="red")
        if self.bar is not None and self.task is not None:
            self.bar.console.print(line)
            self.bar.advance(self.task)
        else:
            self.con.print(line)

    def tick(self, planned: int, done: int) -> None:
        """Blocks added to the plan, blocks completed (any thread; a live bar only)."""
        if self.bar is None or self.blocks is None:
            return
        with self.lock:
            self.planned += planned
            self.completed += done
            self.bar.update(self.blocks, total=self.planned, completed=self.completed,
                            visible=True)
