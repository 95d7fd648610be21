"""Benchmark: one training step of the train study against the time of its matrix products alone.

Run: PYTHONPATH=. OPENBLAS_NUM_THREADS=1 python tests/bench_train.py
Prints, per (d_k, sequence rows n): the step time (batch drawn, forward, backward, Adam update),
the time of the same step's matrix products alone (as 2-D GEMMs: the least any implementation
must spend), the ratio (target ≤ 1.5), and the machine's load average (the machine is shared).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

import numpy as np

from sdpa_cli.numerics import recall
from sdpa_cli.numerics.scaling import Scaling

BATCH = 32
REPEATS = 7


def best_of(fn: Callable[[], object], inner: int) -> float:
    """Median over REPEATS of the mean time of `inner` calls (seconds per call)."""
    fn()
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t0) / inner)
    return statistics.median(times)


def step_fn(task: recall.Task) -> Callable[[], object]:
    rng = np.random.default_rng(0)
    params = recall.init_params(task, rng)
    opt = recall.Optimiser("adam", 1e-3)
    scaling = Scaling.parse("sqrt")
    names = recall.trained_names(task)

    def step() -> object:
        b = recall.draw_batch(task, BATCH, rng)
        _, grads = recall.loss_and_grads(params, b, scaling, task)
        opt.step(params, {n: grads[n] for n in names})
        return None

    return step


def products_fn(task: recall.Task) -> Callable[[], object]:
    """The step's matrix products and nothing else, on arrays of the same shapes."""
    rng = np.random.default_rng(1)
    n, dm, dk, v, b = task.pairs + 1, task.d_model, task.d_k, task.vocab, BATCH
    x2 = rng.standard_normal((b * n, dm))
    w = [rng.standard_normal((dm, dk)) for _ in range(3)]
    q, k, val = (rng.standard_normal((b, n, dk)) for _ in range(3))
    p = rng.standard_normal((b, n, n))
    out = rng.standard_normal((b, dk))
    ro = rng.standard_normal((dk, v))
    dl = rng.standard_normal((b, v))
    d2 = rng.standard_normal((b * n, dk))

    def products() -> object:
        for wi in w:  # Q, K, V
            x2 @ wi
        q @ np.swapaxes(k, -1, -2)  # scores
        p @ val  # weights × values
        out @ ro  # readout
        dl @ ro.T  # ∂L/∂out
        out.T @ dl  # ∂L/∂readout
        np.swapaxes(p, -1, -2) @ val  # ∂L/∂V
        val @ np.swapaxes(val, -1, -2)  # ∂L/∂P
        p @ k  # ∂L/∂Q
        np.swapaxes(p, -1, -2) @ q  # ∂L/∂K
        for _ in range(3):  # ∂L/∂W_Q, W_K, W_V as one GEMM each
            x2.T @ d2
        for wi in w:  # ∂L/∂X (only learned embeddings need it; the layer forms it anyway)
            d2 @ wi.T
        return None

    return products


def main() -> None:
    load = os.getloadavg()
    print(f"machine load average (1, 5, 15 min): {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"on {os.cpu_count()} cores; BLAS threads: "
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    print(f"batch {BATCH}, vocab 16, d_model 64, Adam, fixed embeddings\n")
    print(f"{'d_k':>5} {'n':>4} {'step ms':>9} {'products ms':>12} {'ratio':>6}")
    grid = [(d, 8) for d in (16, 64, 256, 1024)] + [(64, p) for p in (32, 128)]
    for d_k, pairs in grid:
        task = recall.Task(vocab=max(16, pairs), pairs=pairs, d_model=64, d_k=d_k)
        inner = max(3, int(2000 / (d_k * (pairs + 1)) + 3))
        t_step = best_of(step_fn(task), inner)
        t_prod = best_of(products_fn(task), inner)
        print(f"{d_k:>5} {pairs + 1:>4} {t_step * 1e3:>9.3f} {t_prod * 1e3:>12.3f} "
              f"{t_step / t_prod:>6.2f}")


if __name__ == "__main__":
    main()
