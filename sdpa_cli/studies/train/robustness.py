"""How far each training outcome, and each claim's verdict, moves under a 1e-12 nudge."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from sdpa_cli.framework.result import Column
from sdpa_cli.studies.train import recall
from sdpa_cli.studies.train.rows import ClaimRow, RobustnessRow

# Relative size of the nudge: about 4500 float64 ulps of a weight, far below any rounding a
# different BLAS kernel or thread count makes over a run, so a verdict it flips is fragile.
PERTURB = 1e-12
NUDGE_FLIP = "with the 1e-12 nudge"  # how a claim's robustness says the nudge flipped it

COLUMNS = (
    *Column.rule_keys(),
    Column("optimiser", "opt.", "text", priority=0),
    Column("lr", "lr", priority=2),
    Column("final_loss", "loss", priority=0),
    Column("final_loss_perturbed", "nudged", priority=0),
    Column("loss_change", "change", "e", priority=0),
    Column("steps_to_target", "steps", "int", priority=1),
    Column("steps_to_target_perturbed", "nudged", "int", priority=1),
)

def rows(pairs: Mapping[tuple[int, str, str, float], tuple[recall.TrainLog, recall.TrainLog]],
         target: float) -> list[RobustnessRow]:
    out = []
    for (dim, scaling, opt, lr), (plain, nudged) in pairs.items():
        a, b = plain.last("loss"), nudged.last("loss")
        change = abs(b - a) / abs(a) if a is not None and b is not None and a else None
        out.append(RobustnessRow(dim, scaling, opt, lr, a, b, change,
                                 recall.steps_to_reach(plain, target),
                                 recall.steps_to_reach(nudged, target)))
    return out

def mark_fragile(claims: Sequence[ClaimRow], nudged: Sequence[ClaimRow]) -> list[ClaimRow]:
    """Each claim with its robustness: `robust` when the nudged runs give the same verdict,
    `fragile` (and the nudged verdict) when they do not."""
    out = []
    for c, n in zip(claims, nudged, strict=True):
        same = c.verdict == n.verdict
        nudge = "robust" if same else f"fragile: {NUDGE_FLIP}, {n.verdict}"
        if c.robustness.startswith("fragile"):  # a threshold inside its range flips it too
            nudge = c.robustness + ("" if same else f"; {NUDGE_FLIP}, {n.verdict}")
        out.append(dataclasses.replace(c, robustness=nudge))
    return out

def sentence(table: Sequence[RobustnessRow], claims: Sequence[ClaimRow]) -> str:
    """The found: line: how far the nudge moved the final losses, and which verdicts flip."""
    changes = [r.loss_change for r in table if r.loss_change is not None]
    moved = [r for r in table if r.steps_to_target != r.steps_to_target_perturbed]
    fragile = [c for c in claims if c.robustness.startswith("fragile")]
    worst = max(table, key=lambda r: r.loss_change or 0.0) if changes else None
    parts = [f"robustness: a {PERTURB:g} relative nudge of the initial weights moved the "
             f"final loss by a median of {_pct(float(np.median(changes)))} and at most "
             f"{_pct(max(changes))}" + (f" ({worst.scaling}, {worst.optimiser}, d_k = "
                                        f"{worst.dim})" if worst else "")
             if changes else "robustness: no configuration finished without diverging"]
    if moved:
        parts.append(f"steps to target changed in {len(moved)} of {len(table)} configurations")
    flipped = [c for c in claims if NUDGE_FLIP in c.robustness]
    barred = [c for c in fragile if c not in flipped]
    parts.append(f"{len(flipped)} of {len(claims)} claim verdicts flip under it" if flipped
                 else f"no claim verdict flips under it ({len(claims)} the same)")
    if barred:
        parts.append(f"{len(barred)} other{'s are' if len(barred) > 1 else ' is'} fragile "
                     "to its own bar (a fair threshold flips it)")
    return "; ".join(parts) + "."

def _pct(x: float) -> str:
    return f"{100 * x:.2g}%" if x >= 1e-4 else f"{x:.1e} of itself"
