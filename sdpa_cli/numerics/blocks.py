"""Run logical blocks on a thread pool and fold their results strictly in block order."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
A = TypeVar("A")


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
    them (what `fold` keeps is up to the caller: keep summaries, not values). An `executor`
    (e.g. a process pool or a Dask client's) runs the blocks instead of local threads; the
    caller owns it and its life.
    """
    acc = initial
    if executor is not None:
        return _fold_on(executor, n_blocks, work, fold, acc, 2 * max(workers, 1))
    if workers <= 1 or n_blocks <= 1:
        for b in range(n_blocks):
            acc = fold(acc, work(b))
        return acc
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sdpa-block") as pool:
        return _fold_on(pool, n_blocks, work, fold, acc, 2 * workers)


def _fold_on(pool: Executor, n_blocks: int, work: Callable[[int], T], fold: Callable[[A, T], A],
             acc: A, window: int) -> A:
    """Submit blocks in order, at most `window` in flight, folding each as it is due."""
    pending: deque[Future[T]] = deque()
    submitted = 0
    try:
        while submitted < n_blocks or pending:
            while submitted < n_blocks and len(pending) < window:
                pending.append(pool.submit(work, submitted))
                submitted += 1
            acc = fold(acc, pending.popleft().result())
    except BaseException:
        for f in pending:
            f.cancel()
        raise
    return acc
