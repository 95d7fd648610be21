"""How long specs will take: each study's cost estimate (Study.cost) turned into seconds."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from sdpa_cli import registry
from sdpa_cli.framework.declaration import Rate

# Seconds per spec = fixed + work × per_step (+ what the cost estimate leaves out), from the
# study's declaration (Study.rate, framework/declaration.Rate), with `work` the elementary steps
# of the study's cost estimate (Study.cost, the same estimate that guards against runaway
# specs), for one thread; more threads share the work part (speedup). The rates were fitted by
# least squares (in relative error) to each shipped spec's CPU time in one 1-worker batch (CPU
# time: what an idle machine's wall time is, measured even on a shared machine) by
# `python tests/bench_batch.py --workers 1 --fit`, then rounded; the changelog has the run.
# `fixed` is mostly the figures and files; per_step is in nanoseconds.
DEFAULT_RATE = Rate(1.0, 5.0)  # a study measured by nobody yet: the middle of the others
# Each thread beyond the first adds this share of one thread's speed to a spec's blocks, fitted
# to the default batch timed with 1 and 2 workers on an idle machine (the changelog has the
# run): training's small matrix products hold the GIL, so its threads barely overlap.
PARALLEL = 0.15


def seconds(spec: Any, workers: int | None = None) -> float:
    """The estimated wall time of one spec with `workers` threads (None: --workers' default)
    on an idle machine like the one measured."""
    return rate_part(spec, workers) + _extra(spec) / speedup(workers)


def rate_part(spec: Any, workers: int | None = None) -> float:
    """The part of seconds() the study's rate gives: fixed + per_step × work, the work
    shared by the threads (speedup); the fixed part (figures, files) is one thread's."""
    study = registry.get(spec.study)
    rate = study.rate or DEFAULT_RATE
    return rate.fixed + rate.per_step * 1e-9 * study.cost(spec).work / speedup(workers)


def speedup(workers: int | None = None) -> float:
    """How much faster the blocks of a spec run on `workers` threads than on one: each
    thread beyond the first adds PARALLEL of one, up to the machine's cores."""
    used = min(workers if workers is not None else min(8, cores()), cores())
    return 1.0 + PARALLEL * (max(used, 1) - 1)


def _extra(spec: Any) -> float:
    """Work the cost estimate leaves out (the study's Rate.extra), in seconds on one thread."""
    rate = registry.get(spec.study).rate or DEFAULT_RATE
    return rate.extra(spec) if rate.extra is not None else 0.0


def cores() -> int:
    return os.cpu_count() or 1


def headline(estimates: Sequence[float], kept: int, workers: int | None = None) -> str:
    """`35 specs, about 2 min 10 s on 2 cores (12 unchanged, kept)` before a batch starts
    (`… with 1 worker on 2 cores` when fewer workers than cores are used)."""
    n = len(estimates)
    what = f"{n} spec{'s' if n != 1 else ''}"
    total = sum(estimates)
    kept_text = f" ({kept} unchanged, kept)" if kept else ""
    if kept == n:
        return f"{what}, all unchanged since their folders were written: kept"
    fewer = workers is not None and workers < cores()
    used = f" with {workers} worker{'s' if workers != 1 else ''}" if fewer else ""
    return f"{what}, about {clock(total)}{used} on {cores()} cores{kept_text}"


def clock(seconds: float) -> str:
    """12 s, 1 min 05 s, 1 h 02 min: a duration a person reads at a glance."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def minutes(seconds: float) -> str:
    """0:08, 5:48, 1:02:05: elapsed and remaining time in progress lines."""
    s = max(0, round(seconds))
    h, m, sec = s // 3600, s % 3600 // 60, s % 60
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"
