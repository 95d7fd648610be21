"""The vector score source's grid, shared by softmax-sweep and jacobian: every (d_k, n) cell
drawn at once, and each cell's checks of the score law."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sdpa_cli.framework.context import RunContext
from sdpa_cli.framework.result import Check
from sdpa_cli.numerics.sampling import PairLaw
from sdpa_cli.studies.saturation import score_cells as shared
from sdpa_cli.studies.saturation import score_draws as draws
from sdpa_cli.studies.saturation.saturation_rows import ScoreLaw
from sdpa_cli.studies.saturation.spec import SaturationFields


@dataclass(frozen=True)
class GridCell:
    """One (d_k, n) cell of the grid, and its additive cell when the spec asks for one."""

    dim: int
    keys: int
    cell: draws.Cell
    additive: draws.Cell | None


def draw_grid(spec: SaturationFields, ctx: RunContext, law: PairLaw, unit: float, *,
              threshold: float | None, jacobian: bool, keep_first: bool) -> list[GridCell]:
    """Every cell in (d_k, n) order, drawn together so that their blocks share the threads or
    the cluster (the same digits as drawing them one by one)."""
    grid = [(i, d, j, n) for i, d in enumerate(spec.dim_list)
            for j, n in enumerate(spec.key_list)]
    jobs = []
    for i, d, j, n in grid:
        jobs.append(draws.vector_job(spec, law, d, n, draws.variants_for(spec, d, unit, n),
                                     (i, j), threshold=threshold, jacobian=jacobian,
                                     keep_first=keep_first))
        if spec.additive:
            jobs.append(draws.additive_job(spec, law, d, n, (i, j), threshold=threshold,
                                           jacobian=jacobian))
    cells = iter(draws.run_cells(jobs, ctx))
    return [GridCell(d, n, next(cells), next(cells) if spec.additive else None)
            for _i, d, _j, n in grid]


def grid_checks(spec: SaturationFields, g: GridCell, laws: Sequence[ScoreLaw],
                additive: ScoreLaw | None) -> list[Check]:
    """The cell's checks of the score law (its rules' rows, `laws`), and the additive row's
    when its theory is known."""
    k = spec.se_tolerance
    checks = shared.cell_checks(spec, g.dim, g.keys, laws, k)
    if additive is not None and additive.theory_score_var is not None:
        checks.append(replace(shared.score_check(f"d={g.dim} n={g.keys} additive", additive, k),
                              fields=("additive",)))
    return checks
