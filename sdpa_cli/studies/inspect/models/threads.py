"""BLAS threads for inspect: the forward's large products on every core, the rest on one."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

try:  # optional (the models extra): without it BLAS keeps the thread count it started with
    from threadpoolctl import ThreadpoolController
except ImportError:  # pragma: no cover - the models extra installs it
    ThreadpoolController = None

# The BLAS thread count is one per process, not per thread; a lock keeps two runs in one
# process (the Python API) from setting it under each other.
_LOCK = threading.RLock()
_STATE: dict[str, Any] = {}


def _controller() -> Any:
    if ThreadpoolController is None:
        return None
    if "ctl" not in _STATE:  # scans the loaded libraries once (a few milliseconds)
        _STATE["ctl"] = ThreadpoolController()
    return _STATE["ctl"]


def available() -> bool:
    """Whether sdpa can set BLAS's thread count after NumPy loaded (threadpoolctl)."""
    return _controller() is not None


@contextmanager
def blas_threads(count: int) -> Iterator[None]:
    """BLAS (and OpenMP) run `count` threads inside the block, whatever the environment set;
    without threadpoolctl the count stays as the process started (sdpa's main sets 1)."""
    ctl = _controller()
    if ctl is None:
        yield
        return
    with _LOCK, ctl.limit(limits=max(1, count), user_api="blas"):
        yield


# Multiply-adds below which a product runs on one thread. OpenBLAS splits products from 2^18,
# but on a machine whose other core is busy a second thread adds tens of milliseconds a call
# (products of 2^20 to 2^26 cost 25-33 ms on two threads against 0.1-9 ms on one); at 2^28
# one thread takes about 40 ms, and the second can pay for itself only beyond that.
SMALL = 1 << 28


@contextmanager
def for_product(macs: int) -> Iterator[None]:
    """One BLAS thread inside the block when its products are small (macs each), else the
    count the caller set; every statistic of a head is such a small product."""
    if macs >= SMALL or _controller() is None:
        yield
        return
    with blas_threads(1):
        yield
