"""How long specs will take: each study's cost estimate (Study.cost) turned into seconds."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from sdpa_cli import registry

# Seconds per spec = fixed + work × per_step, per study, with `work` the elementary steps of
# the study's cost estimate (Study.cost, the same estimate that guards against runaway
# specs). Fitted by least squares (in relative error) to each spec's median wall time over
# four full `sdpa run` batches on this project's 2-core machine, 2 threads, shared with other
# sessions (load average 2.5 to 8), then rounded: sdpa_cli/docs/changelog.md (2026-11-25) has
# the runs and how far each spec strays; sdpa_cli/docs/timing.md shows the rates and a rerun.
# `fixed` is mostly the figures; per_step is in nanoseconds.
RATES: dict[str, tuple[float, float]] = {
    # depth: fitted to its two shipped specs timed alone (load 2.6-3.6; changelog 2026-11-25)
    "depth": (1.5, 0.65),
    "gradients": (1.4, 2.6),
    "jacobian": (2.3, 6.8),
    "softmax-sweep": (1.4, 9.8),
    "train": (0.0, 0.32),
    "variance": (2.0, 54.0),
    "worked-example": (0.1, 0.0),
}
DEFAULT_RATE = (1.5, 10.0)  # a study measured by nobody yet: the middle of the others
# The Gaussian Jacobian searches s* per n (golden section, about 20 evaluations on fixed
# draws), work the cost estimate leaves out: nanoseconds per trial × key × evaluation.
SEARCH_NS = 116.0
SEARCH_EVALUATIONS = 20
# A worked example's attention part draws a weights figure: seconds each.
WORKED_PART = 0.85


def seconds(spec: Any) -> float:
    """The estimated wall time of one spec on a 2-core machine like the one measured."""
    study = registry.get(spec.study)
    fixed, per_step = RATES.get(spec.study, DEFAULT_RATE)
    work = study.cost(spec).work
    extra = 0.0
    if spec.study == "jacobian" and getattr(spec, "score_source", None) == "gaussian":
        extra = SEARCH_NS * 1e-9 * SEARCH_EVALUATIONS * spec.trials * sum(spec.key_list)
    if spec.study == "worked-example":
        extra = WORKED_PART * sum(getattr(p, "kind", "") == "attention" for p in spec.parts)
    return fixed + per_step * 1e-9 * work + extra


def cores() -> int:
    return os.cpu_count() or 1


def headline(estimates: Sequence[float], kept: int) -> str:
    """`35 specs, about 2 min 10 s on 2 cores (12 unchanged, kept)` before a batch starts."""
    n = len(estimates)
    what = f"{n} spec{'s' if n != 1 else ''}"
    total = sum(estimates)
    kept_text = f" ({kept} unchanged, kept)" if kept else ""
    if kept == n:
        return f"{what}, all unchanged since their folders were written: kept"
    return f"{what}, about {clock(total)} on {cores()} cores{kept_text}"


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
