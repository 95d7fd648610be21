"""Run logical blocks on a thread pool (or an executor) and fold results strictly in order."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

T = TypeVar("T")
A = TypeVar("A")

# Most consecutive blocks one executor task runs. A block is a few milliseconds of work and
# a Dask task costs about a millisecond of scheduling and a round trip, so a cluster gets
# runs of blocks; each block still comes back on its own and is folded on its own.
MAX_BLOCKS_PER_TASK = 16

# Progress: tick(planned, done) adds blocks to the plan or counts blocks completed. Called
# from executor threads too; it must be thread-safe and must not touch any result.
Tick = Callable[[int, int], None]


@dataclass(frozen=True)
class Job(Generic[T, A]):
    """One fold of blocks: fold(…fold(initial, work(0))…, work(n_blocks − 1))."""

    n_blocks: int
    work: Callable[[int], T]
    fold: Callable[[A, T], A]
    initial: A


def fold_blocks(
    n_blocks: int,
    work: Callable[[int], T],
    fold: Callable[[A, T], A],
    initial: A,
    workers: int = 1,
    executor: Executor | None = None,
    tick: Tick | None = None,
) -> A:
    """fold(…fold(fold(initial, work(0)), work(1))…, work(n−1)), whatever `workers` is.

    Blocks run concurrently (NumPy's generators and reductions release the GIL), but each
    result is folded only after every earlier one, so the floating-point rounding, and hence
    every digit of the answer, does not depend on the number of threads. At most
    2 × workers blocks are in flight, so the blocks' own memory is bounded for any number of
    them (what `fold` keeps is up to the caller: keep summaries, not values).

    An `executor` (a process pool, a Dask cluster's: sdpa_cli.runner.executors) runs the blocks
    instead of local threads; the caller owns it and its life. If it has a `slots` attribute
    (a cluster's threads), runs of consecutive blocks go out as one task, about four tasks
    per slot, and 2 × slots tasks are kept in flight; the fold is the same block by block.
    `work` then must pickle (cloudpickle, for Dask) and travels with every task: it should
    capture specs and small arrays only.
    """
    acc: A = fold_jobs([Job(n_blocks, work, fold, initial)], workers, executor, tick)[0]
    return acc


# Arrays of float64, as block work returns them: under strict mypy a bare np.ndarray is
# ndarray[Any, dtype[Any]], and its arithmetic is Any, so a fold written over it returns Any.
Floats = NDArray[np.float64]


def add(acc: Floats, part: Floats) -> Floats:
    """The fold of blocks that each return sums of the same shape (Σx, Σx², … per row or
    per rule): `fold_blocks(blocks, work, add, np.zeros(shape), …)`, typed for strict mypy."""
    return acc + part


def fold_jobs(jobs: Sequence[Job[Any, Any]], workers: int = 1,
              executor: Executor | None = None, tick: Tick | None = None) -> list[Any]:
    """Every job folded exactly as fold_blocks folds it alone, their blocks sharing one
    window: job 0's blocks go out first, then job 1's, so the independent cells of a sweep
    keep all threads (or a cluster) busy instead of waiting for each other's last block."""
    if tick is not None:
        tick(sum(j.n_blocks for j in jobs), 0)
    accs = [j.initial for j in jobs]
    slots = getattr(executor, "slots", 0) if executor is not None else 0
    slots = slots if isinstance(slots, int) and slots > 0 else 0
    if executor is None and (workers <= 1 or sum(j.n_blocks for j in jobs) <= 1):
        for i, j in enumerate(jobs):
            for b in range(j.n_blocks):
                accs[i] = j.fold(accs[i], j.work(b))
                if tick is not None:
                    tick(0, 1)
        return accs
    tasks: list[tuple[int, int, int]] = []  # (job, first block, stop), in logical order
    for i, j in enumerate(jobs):
        per_task = min(MAX_BLOCKS_PER_TASK, max(1, j.n_blocks // (4 * slots))) if slots else 1
        tasks.extend((i, b, min(j.n_blocks, b + per_task))
                     for b in range(0, j.n_blocks, per_task))
    window = 2 * max(workers, slots, 1)
    if executor is not None:
        return _fold_on(executor, jobs, tasks, accs, window, tick)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sdpa-block") as pool:
        return _fold_on(pool, jobs, tasks, accs, window, tick)


def run_blocks(work: Callable[[int], T], start: int, stop: int) -> list[T]:
    """Blocks start … stop − 1, in order: one task's worth (module level, so it pickles)."""
    return [work(b) for b in range(start, stop)]


def _fold_on(pool: Executor, jobs: Sequence[Job[Any, Any]], tasks: list[tuple[int, int, int]],
             accs: list[Any], window: int, tick: Tick | None) -> list[Any]:
    """Submit the tasks in order, at most `window` in flight, folding each block into its
    job as it is due; on any error the tasks not yet started are cancelled."""
    pending: deque[tuple[int, Future[list[Any]]]] = deque()
    submitted = 0
    try:
        while submitted < len(tasks) or pending:
            while submitted < len(tasks) and len(pending) < window:
                i, start, stop = tasks[submitted]
                future = pool.submit(run_blocks, jobs[i].work, start, stop)
                if tick is not None:  # counted as they complete, whatever the fold waits for
                    future.add_done_callback(_ticker(tick, stop - start))
                pending.append((i, future))
                submitted += 1
            i, future = pending.popleft()
            for result in future.result():
                accs[i] = jobs[i].fold(accs[i], result)
    except BaseException:
        for _, f in pending:
            f.cancel()
        raise
    return accs


def _ticker(tick: Tick, blocks: int) -> Callable[[Future[Any]], None]:
    def done(f: Future[Any]) -> None:
        if not f.cancelled() and f.exception() is None:
            tick(0, blocks)
    return done
