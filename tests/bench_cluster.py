"""Benchmark: one heavy spec on local threads and on a Dask LocalCluster of 2 processes.

Run: PYTHONPATH=. python tests/bench_cluster.py [--spec PATH] [--scale 4] [--slots 64]
Not a test (pytest does not collect it). Prints the times (2 threads, 1 thread, the cluster),
an empty task's round trip (the cluster's own cost per task), tasks and bytes moved, and a
model of a `--slots`-core cluster built from the measured task times.
"""

from __future__ import annotations

import argparse
import heapq
import logging
import os
import pickle
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# As sdpa's main() does: one BLAS thread per process (its own threads or processes run the
# blocks); set before NumPy loads so threads and cluster compete on equal terms.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import cloudpickle  # noqa: E402

from sdpa_cli import executors, registry  # noqa: E402
from sdpa_cli import loader as spec_mod  # noqa: E402
from sdpa_cli.framework.context import RunContext  # noqa: E402
from sdpa_cli.numerics import blocks  # noqa: E402
from sdpa_cli.numerics.blocks import fold_blocks  # noqa: E402
from sdpa_cli.report import writers  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Tally:
    """What went out to and came back from the executor, task by task."""

    tasks: int = 0
    blocks: int = 0
    sent: int = 0  # pickled (function, arguments) per task
    returned: int = 0  # pickled results
    cells: list[list[float]] = field(default_factory=list)  # task seconds, per fold_jobs call


class Recording(Executor):
    """Runs each task in line, timing it and sizing what a cluster would move; `slots` makes
    fold_blocks group blocks exactly as it would for a cluster of that many threads."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.tally = Tally()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        _work, start, stop = args
        t = self.tally
        t.tasks += 1
        t.blocks += stop - start
        t.sent += len(cloudpickle.dumps((fn, args)))
        began = time.perf_counter()
        result = fn(*args, **kwargs)
        t.cells[-1].append(time.perf_counter() - began)
        t.returned += len(pickle.dumps(result, protocol=5))
        f: Future[Any] = Future()
        f.set_result(result)
        return f


class Counting(Executor):
    """Passes tasks to a cluster's executor, counting tasks and blocks."""

    def __init__(self, inner: executors.ClusterExecutor) -> None:
        self.inner, self.tasks, self.blocks = inner, 0, 0

    @property
    def slots(self) -> int:
        return self.inner.slots

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.tasks += 1
        self.blocks += args[2] - args[1]
        return self.inner.submit(fn, *args, **kwargs)


def run(spec: Any, ctx: RunContext) -> tuple[float, str]:
    began = time.perf_counter()
    result = registry.get(spec.study).run(spec, ctx)
    return time.perf_counter() - began, writers.results_json(result)


def grouping(tally: Tally) -> Callable[[], None]:
    """Start a new group of task times at every fold_jobs call (its cells share a window;
    one call's results are all needed before the study goes on); returns the undo."""
    fold_on = blocks._fold_on

    def grouped(*a: Any, **kw: Any) -> Any:
        tally.cells.append([])
        return fold_on(*a, **kw)

    blocks._fold_on = grouped
    return lambda: setattr(blocks, "_fold_on", fold_on)


def model(cells: list[list[float]], slots: int, overhead: float) -> float:
    """Wall time on `slots` threads: fold_jobs calls one after another (each waits for its
    last task), tasks in order on the first free slot, each `overhead` longer."""
    total = 0.0
    for tasks in cells:
        free = [0.0] * min(slots, len(tasks))
        end = 0.0
        for seconds in tasks:
            start = heapq.heappop(free)
            end = max(end, start + seconds + overhead)
            heapq.heappush(free, start + seconds + overhead)
        total += end
    return total


def noop(_: int) -> int:
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--spec", type=Path,
                    default=ROOT / "experiments" / "jacobian" / "phase-diagram.yaml")
    ap.add_argument("--scale", type=int, default=4, help="multiply the spec's trials")
    ap.add_argument("--slots", type=int, default=64, help="cores of the modelled cluster")
    a = ap.parse_args()
    base = spec_mod.load(a.spec)
    trials = getattr(base, "trials", None)
    spec = spec_mod.load(a.spec, overrides={"trials": trials * a.scale} if trials else {})
    print(f"spec {a.spec.name}, trials ×{a.scale} = {getattr(spec, 'trials', '-')}; "
          f"load {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} cores")

    heap = executors.keep_heap_here()  # as sdpa's main() does
    print(f"glibc heap kept for reuse (mallopt): {heap}")
    t_threads, doc_threads = run(spec, RunContext(workers=2))
    print(f"local threads (2):          {t_threads:8.2f} s")
    t_one, doc_one = run(spec, RunContext(workers=1))
    assert doc_one == doc_threads
    print(f"local thread (1):           {t_one:8.2f} s  (2 threads: ×{t_one / t_threads:.2f})")

    args_slots = a.slots
    rec = Recording(args_slots)
    undo = grouping(rec.tally)
    try:
        t_serial, doc_serial = run(spec, RunContext(workers=1, executor=rec))
    finally:
        undo()
    assert doc_serial == doc_threads
    tl = rec.tally
    print(f"one thread, recorded:       {t_serial:8.2f} s  ({tl.tasks} tasks of "
          f"{tl.blocks} blocks, as grouped for {args_slots} slots)")

    from distributed import Client, LocalCluster

    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "error")
    began = time.perf_counter()
    executors.keep_heap()  # as `--scheduler local:N` does
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=logging.CRITICAL)
    client = Client(cluster)
    t_start = time.perf_counter() - began
    try:
        counting = Counting(executors.ClusterExecutor(client, cluster.scheduler_address))
        t_cluster, doc_cluster = run(spec, RunContext(workers=1, executor=counting))
        ex = counting.inner
        assert doc_cluster == doc_threads, "cluster result differs from local threads"
        n = 400
        began = time.perf_counter()
        fold_blocks(n, noop, lambda acc, _: acc, 0, 1, ex)  # 400 one-block tasks
        per_noop = (time.perf_counter() - began) / n
    finally:
        client.close()
        cluster.close()
    tc = counting
    print(f"LocalCluster (2 processes): {t_cluster:8.2f} s  (+{t_start:.1f} s to start it; "
          f"{tc.tasks} tasks of {tc.blocks} blocks); identical results.json")
    # The cluster's own cost per task is the empty task's round trip. (cluster − threads)
    # per task is not an overhead: it mixes in everything else that differs (processes vs
    # threads, the machine's load), and can be negative; shown signed, for what it is.
    print(f"overhead per task: {per_noop * 1e3:.2f} ms (an empty task's round trip, "
          f"{n} in a row); (cluster − 2 threads) / tasks = "
          f"{(t_cluster - t_threads) / tc.tasks * 1e3:+.1f} ms")
    print(f"bytes per block: {tl.sent / tl.blocks / 1e3:.1f} kB out (the pickled work "
          f"function, per task / blocks), {tl.returned / tl.blocks / 1e3:.1f} kB back; "
          f"total {(tl.sent + tl.returned) / 1e6:.1f} MB for {tl.blocks} blocks")
    est = model(tl.cells, args_slots, per_noop)
    busiest = max(len(c) for c in tl.cells)
    print(f"model of {args_slots} slots: {est:.1f} s ({len(tl.cells)} groups of tasks run one "
          f"after another, at most {busiest} tasks in one; compute "
          f"{sum(map(sum, tl.cells)):.1f} core-seconds)")


if __name__ == "__main__":
    main()
