"""Progress on stderr: live bars (specs, blocks) on a terminal, plain lines otherwise. A batch
shows both bars; a single study command (`Progress.blocks_only`) only the blocks bar. Each
finished spec prints one line with the batch's elapsed and remaining time (a plain line, so a
log gets one line per spec and no carriage-return residue); the remaining time is the cost
model's plan for the specs still to run at the pace measured so far (Progress.left)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
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

from sdpa_cli.report.eta import minutes
from sdpa_cli.report.outcomes import STYLE
from sdpa_cli.report.terminal import console

# After this many specs have run, the time left follows their measured pace alone.
FIRST_SPECS = 3


class Progress:
    def __init__(self, total: int, *, quiet: bool = False, specs: bool = True,
                 blocks: str = "  blocks", estimates: Sequence[float] = ()) -> None:
        self.total = total
        # Estimated seconds of each spec (report.eta; 0 for a kept one), for the time left.
        self.estimates = list(estimates)
        self.began = time.monotonic()
        self.spent = self.expected = 0.0  # seconds taken and estimated by specs that ran
        self.ran = 0  # how many specs ran (a kept one did not)
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
            self.bar = RichProgress(TextColumn("{task.description}", markup=False), BarColumn(),
                                    MofNCompleteColumn(), TimeElapsedColumn(),
                                    TextColumn("{task.fields[left]}", markup=False),
                                    console=self.con, transient=True)
            self.bar.__enter__()
            if self.specs:
                self.task = self.bar.add_task("starting", total=self.total,
                                              left=self.left_text(0))
            # Blocks (and sweep cells) of the specs running, as they complete: a long spec
            # moves this bar while the one above waits for the spec to end. Hidden until the
            # first tick, so a study without blocks shows nothing.
            self.blocks = self.bar.add_task(self.blocks_label, total=None, visible=False,
                                            left="")
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
        # The finished line names the spec alone (its name identifies it); the bar, which
        # has room, names its study too.
        self.label = f"[{i + 1}/{self.total}] {name}"
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, description=f"[{i + 1}/{self.total}] {study} {name}")

    def left(self, after: int) -> float | None:
        """Estimated seconds still to go once specs 0 … after−1 are done: the plan (the cost
        model's estimates of the specs still to run) times this machine's pace (the seconds
        the specs run so far took per second they were estimated). The first specs' pace is
        weighed against half the plan, a weight that is gone once FIRST_SPECS have run: one
        slow first spec barely moves the estimate, and from then on it follows the measured
        rate (a batch on a machine 3.4× busier than the plan's said "~0:10 left" with
        minutes to go when the plan kept half its weight throughout). None without
        estimates."""
        if not self.estimates:
            return None
        rest = sum(self.estimates[after:])
        prior = 0.5 * sum(self.estimates) * max(0.0, 1.0 - self.ran / FIRST_SPECS)
        if self.expected + prior <= 0:
            return rest
        return rest * (self.spent + prior) / (self.expected + prior)

    def left_text(self, after: int) -> str:
        left = self.left(after)
        return "" if left is None or left <= 0 else f"~{minutes(left)} left"

    def done(self, status: str, seconds: float, error: str | None, *,
             kept: bool = False, why: str | None = None) -> None:
        """One line per finished spec (the same on a terminal and in a log): its status, its
        time or that it was kept unchanged, and the batch's time so far and still to go."""
        i = self.i
        if not kept and i < len(self.estimates):
            self.spent += seconds
            self.expected += self.estimates[i]
            self.ran += 1
        if self.quiet:
            return
        line = Text(f"{self.label} ")
        line.append(status, style=STYLE.get(status, ""))
        times = ["unchanged, kept" if kept else f"{seconds:.1f}s"]
        if self.specs and self.estimates:
            times.append(f"{minutes(time.monotonic() - self.began)} elapsed")
            left = self.left(i + 1)
            if left is not None and left > 0 and i + 1 < self.total:
                # a spec still to run takes some time: never "~0:00 left" while one waits
                times.append(f"~{minutes(max(left, 1.0))} left")
        more = f"; {', '.join(times[1:])}" if times[1:] else ""
        line.append(f" ({times[0]}{more})", style="dim")
        if error:
            line.append(f": {error}", style="red")
        elif why:  # a skipped spec: what was missing
            line.append(f": {why}", style="dim")
        if self.bar is not None and self.task is not None:
            self.bar.console.print(line)
            self.bar.advance(self.task)
            self.bar.update(self.task, left=self.left_text(i + 1))
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

