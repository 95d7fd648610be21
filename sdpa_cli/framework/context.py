"""What a study's run may know about how it is run (never a number of its results)."""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass

from sdpa_cli.numerics.blocks import Tick


@dataclass(frozen=True)
class RunContext:
    """Passed to every study's `run`; no field here may change a digit of the Result."""

    # Local threads drawing blocks (numerics.blocks.fold_blocks); 1 runs them in line.
    workers: int = 1
    # False when nothing will draw figures (--no-plots): a study may skip figure-only work.
    figures: bool = True
    # A concurrent.futures-style executor for the blocks (a Dask client's executor, a process
    # pool); None means local threads. Reaches fold_blocks unchanged.
    executor: Executor | None = None
    # Progress on a terminal: tick(blocks planned, blocks completed), from any thread. None
    # when nobody watches (not a terminal, -q); it sees counts only, never values.
    tick: Tick | None = None


SERIAL = RunContext()  # the default: one thread, figures wanted
