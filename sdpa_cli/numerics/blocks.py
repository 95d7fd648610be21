"""Run logical blocks on a thread pool and fold their results strictly in block order."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
A = TypeVar("A")


def fold_blocks(
    n_blocks: int,
    work: Callable[[int], T],
    fold: Callable[[A, T], A],
    initial: A,
    workers: int = 1,
) -> A:
    """fold(…fold(fold(initial, work(0)), work(1))…, work(n−1)), whatever `workers` is.

    Blocks run concurrently (NumPy's generators and reductions release the GIL), but each
    result is folded only after every earlier one, so the floating-point rounding, and hence
    every digit of the answer, does not depend on the number of threads. At most
    2 × workers blocks are in flight, so the blocks' own memory is bounded for any number of
    them (what `fold` keeps is up to the caller: keep summaries, not values).
    """
    acc = initial
    if workers <= 1 or n_blocks <= 1:
        for b in range(n_blocks):
            acc = fold(acc, work(b))
        return acc
    window = 2 * workers
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sdpa-block") as pool:
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
