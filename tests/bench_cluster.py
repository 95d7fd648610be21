"""Benchmark: one heavy spec on local threads and on a Dask LocalCluster of 2 processes.

Run: PYTHONPATH=. python tests/bench_cluster.py [--spec PATH] [--scale 4 | --quick] [--slots 64]
     PYTHONPATH=. python tests/bench_cluster.py --sizes
Not a test (pytest does not collect it). Prints the machine's load, the times (2 threads,
1 thread, the cluster) with each run's minor page faults, an empty task's round trip (the
cluster's own cost per task), tasks and bytes moved, and a model of a `--slots`-core cluster
built from the measured task times. --quick runs the spec at a tenth of its trials (about
30 s on an idle 2-core machine); SDPA_BENCH_TINY=1 at a fiftieth (the docs test, which
compares only the output's shape, sets it). --sizes prints, without timing anything, what one
block of the variance engine returns (pickled), which depends only on the code and the seed.
"""

from __future__ import annotations

import argparse
import heapq
import logging
import os
import pickle
import resource
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

from sdpa_cli import process, registry  # noqa: E402
from sdpa_cli.framework.context import RunContext  # noqa: E402
from sdpa_cli.numerics import blocks  # noqa: E402
from sdpa_cli.numerics.blocks import fold_blocks  # noqa: E402
from sdpa_cli.report import writers  # noqa: E402
from sdpa_cli.runner import executors  # noqa: E402
from sdpa_cli.runner import loader as spec_mod  # noqa: E402

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


def faults() -> int:
    """Minor page faults of this process so far (its threads included)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def run(spec: Any, ctx: RunContext) -> tuple[float, str]:
    began = time.perf_counter()
    result = registry.get(spec.study).run(spec, ctx)
    return time.perf_counter() - began, writers.results_json(result)


class _Sized(Exception):
    """Not an error: carries one block's pickled size out of simulate_dots."""

    def __init__(self, size: int) -> None:
        self.size = size


def block_sizes(d: int, cosine: bool) -> tuple[int, int]:
    """Pairs per block, and the pickled size of what one block of the variance engine returns
    for dimension d once the exact-quantile sample is full (the variance study's law, unit
    and histogram range; seed 0)."""
    from sdpa_cli.numerics import theory
    from sdpa_cli.numerics.sampling import PairLaw, plan_blocks
    from sdpa_cli.studies.variance import engine
    from sdpa_cli.studies.variance import run as variance

    law = PairLaw("normal")
    rows = plan_blocks(d, 1, "direct").rows
    late = -(-engine.SAMPLE_CAP // rows)  # the first block that adds nothing to the sample
    mom = theory.dot_moments(law.kind, d, law.m, law.rho)
    scale = variance._scale(law, mom)
    lo, hi = variance._range(law, d, mom)

    def size_of_one(n_blocks: int, work: Callable[[int], Any], *_: Any, **__: Any) -> Any:
        raise _Sized(len(pickle.dumps(work(late), protocol=5)))

    real = engine.fold_blocks
    engine.fold_blocks = size_of_one  # type: ignore[assignment]
    try:
        engine.simulate_dots(law, d, (late + 1) * rows, entropy=0, key=(0,),
                             dot_range=(lo / scale, hi / scale), cosine=cosine, scale=scale)
    except _Sized as sized:
        return rows, sized.size
    finally:
        engine.fold_blocks = real  # type: ignore[assignment]
    raise AssertionError("simulate_dots no longer folds through engine.fold_blocks")


def sizes() -> None:
    from sdpa_cli.numerics.sampling import CHUNK
    from sdpa_cli.studies.variance import engine

    print("variance engine, what one block returns (pickled) once the sample is full")
    print(f"{'d':>7} {'pairs per block':>16} {'raw draws':>10} {'returned':>9} "
          f"{'with cosines':>13}")
    for d in (3, 100, 1_000, 65_536):
        rows, plain = block_sizes(d, cosine=False)
        _, with_cos = block_sizes(d, cosine=True)
        raw = 2 * rows * d * 8  # q and k, float64
        print(f"{d:>7,} {rows:>16,} {raw / 1e6:>7.1f} MB {plain / 1e3:>6.1f} kB "
              f"{with_cos / 1e3:>10.1f} kB")
    print(f"a block draws {2 * CHUNK:,} numbers; the first blocks also carry the sample, up "
          f"to\n{engine.SAMPLE_CAP:,} values ({engine.SAMPLE_CAP * 8 / 1e6:.1f} MB) per stream")


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
    ap.add_argument("--quick", action="store_true", help="a tenth of the spec's trials")
    ap.add_argument("--slots", type=int, default=64, help="cores of the modelled cluster")
    ap.add_argument("--sizes", action="store_true", help="one block's pickled sizes only")
    a = ap.parse_args()
    if a.sizes:
        sizes()
        return
    base = spec_mod.load(a.spec)
    trials = getattr(base, "trials", None)
    factor = 0.02 if os.environ.get("SDPA_BENCH_TINY") else 0.1 if a.quick else a.scale
    spec = spec_mod.load(a.spec, overrides={"trials": max(1, round(trials * factor))}
                         if trials else {})
    load = os.getloadavg()
    print(f"spec {a.spec.name}, {getattr(spec, 'trials', '-')} trials (×{factor:g})")
    print(f"{os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          "(1, 5, 15 min)")

    heap = process.keep_freed_memory()  # as sdpa's main() does
    print(f"glibc heap kept for reuse (mallopt): {heap}")
    before = faults()
    t_threads, doc_threads = run(spec, RunContext(workers=2))
    f_threads, before = faults() - before, faults()
    print(f"local threads (2)          {t_threads:7.2f} s   {f_threads} minor page faults")
    t_one, doc_one = run(spec, RunContext(workers=1))
    f_one = faults() - before
    assert doc_one == doc_threads
    print(f"local thread (1)           {t_one:7.2f} s   {f_one} minor page faults; "
          f"2 threads ×{t_one / t_threads:.2f}")

    args_slots = a.slots
    rec = Recording(args_slots)
    undo = grouping(rec.tally)
    try:
        t_serial, doc_serial = run(spec, RunContext(workers=1, executor=rec))
    finally:
        undo()
    assert doc_serial == doc_threads
    tl = rec.tally
    print(f"one thread, recorded       {t_serial:7.2f} s   {tl.tasks} tasks of "
          f"{tl.blocks} blocks (as for {args_slots} slots)")

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
    print(f"LocalCluster (2 processes) {t_cluster:7.2f} s   {tc.tasks} tasks of "
          f"{tc.blocks} blocks, {t_start:.1f} s to start it")
    print("results.json identical on 2 threads, 1 thread and the cluster")
    # The cluster's own cost per task is the empty task's round trip. (cluster − threads)
    # per task is not an overhead: it mixes in everything else that differs (processes vs
    # threads, the machine's load), and can be negative; shown for what it is (no "+" sign,
    # so that the page's shape comparison sees one number either way).
    print(f"overhead per task: {per_noop * 1e3:.2f} ms (an empty task's round trip, "
          f"{n} in a row)")
    print(f"(cluster − 2 threads) / tasks: {(t_cluster - t_threads) / tc.tasks * 1e3:.1f} ms "
          "(processes against threads, and load)")
    print(f"per block: {tl.sent / tl.blocks / 1e3:.1f} kB out (the pickled work function), "
          f"{tl.returned / tl.blocks / 1e3:.1f} kB back; {(tl.sent + tl.returned) / 1e6:.1f} MB "
          "in all")
    est = model(tl.cells, args_slots, per_noop)
    busiest = max(len(c) for c in tl.cells)
    print(f"model of {args_slots} slots: {est:.1f} s ({len(tl.cells)} groups of tasks one after "
          f"another, at most\n{busiest} tasks in one; {sum(map(sum, tl.cells)):.1f} "
          "core-seconds of work)")
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
