"""Run logical blocks on a thread pool (or an executor) and fold results strictly in order."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
A = TypeVar("A")

# Most consecutive blocks one executor task runs. A block is a few milliseconds of work and
# a Dask task costs about a millisecond of scheduling and a round trip, so a cluster gets
# runs of blocks; each block still comes back on its own and is folded on its own.
MAX_BLOCKS_PER_TASK = 16


def fold_blocks(
    n_blocks: int,
    work: Callable[[int], T],
    fold: Callable[[A, T], A],
    initial: A,
    workers: int = 1,
    executor: Executor | None = None,
) -> A:
    """fold(…fold(fold(initial, work(0)), work(1))…, work(n−1)), whatever `workers` is.

    Blocks run concurrently (NumPy's generators and reductions release the GIL), but each
    result is folded only after every earlier one, so the floating-point rounding, and hence
    every digit of the answer, does not depend on the number of threads. At most
    2 × workers blocks are in flight, so the blocks' own memory is bounded for any number of
    them (what `fold` keeps is up to the caller: keep summaries, not values).

    An `executor` (a process pool, a Dask cluster's: sdpa_cli.executors) runs the blocks
    instead of local threads; the caller owns it and its life. If it has a `slots` attribute
    (a cluster's threads), runs of consecutive blocks go out as one task, about four tasks
    per slot, and 2 × slots tasks are kept in flight; the fold is the same block by block.
    `work` then must pickle (cloudpickle, for Dask) and travels with every task: it should
    capture specs and small arrays only.
    """
    acc = initial
    if executor is not None:
        slots = getattr(executor, "slots", 0)
        slots = slots if isinstance(slots, int) and slots > 0 else 0
        per_task = min(MAX_BLOCKS_PER_TASK, max(1, n_blocks // (4 * slots))) if slots else 1
        window = 2 * max(workers, slots, 1)
        return _fold_on(executor, n_blocks, work, fold, acc, window, per_task)
    if workers <= 1 or n_blocks <= 1:
        for b in range(n_blocks):
            acc = fold(acc, work(b))
        return acc
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sdpa-block") as pool:
        return _fold_on(pool, n_blocks, work, fold, acc, 2 * workers, 1)


def run_blocks(work: Callable[[int], T], start: int, stop: int) -> list[T]:
    """Blocks start … stop − 1, in order: one task's worth (module level, so it pickles)."""
    return [work(b) for b in range(start, stop)]


def _fold_on(pool: Executor, n_blocks: int, work: Callable[[int], T], fold: Callable[[A, T], A],
             acc: A, window: int, per_task: int) -> A:
    """Submit runs of `per_task` blocks in order, at most `window` tasks in flight, folding
    each block as it is due; on any error the tasks not yet started are cancelled."""
    pending: deque[Future[list[T]]] = deque()
    submitted = 0
    try:
        while submitted < n_blocks or pending:
            while submitted < n_blocks and len(pending) < window:
                stop = min(n_blocks, submitted + per_task)
                pending.append(pool.submit(run_blocks, work, submitted, stop))
                submitted = stop
            for result in pending.popleft().result():
                acc = fold(acc, result)
    except BaseException:
        for f in pending:
            f.cancel()
        raise
    return acc
