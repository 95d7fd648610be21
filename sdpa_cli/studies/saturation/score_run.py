"""How softmax-sweep and jacobian run: the spec's score source makes its part, one Result."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sdpa_cli.framework.context import RunContext
from sdpa_cli.framework.result import Check, Column, Figure, Result, Table, as_row
from sdpa_cli.studies.saturation import keys_axis, score_text
from sdpa_cli.studies.saturation import rule_tables as rtab
from sdpa_cli.studies.saturation.spec import SaturationFields


@dataclass
class Part:
    """What a score source made: the main table's rows, columns and title, and the checks,
    figures, sentences and further tables that go with it."""

    rows: Sequence[Mapping[str, Any]]
    columns: tuple[Column, ...]
    title: str
    checks: list[Check] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    peaks: Sequence[Mapping[str, Any]] = ()  # jacobian's Gaussian source: where ‖J‖_F peaks


Source = Callable[[Any, RunContext], Part]


def run(spec: SaturationFields, ctx: RunContext, *, study: str, table: str, jacobian: bool,
        leading_title: str, explicit: Source, vectors: Source, gaussian: Source) -> Result:
    """The study's Result from the part its spec's score source makes; the leading-key
    family (exact) is the same in both studies."""
    source = spec.score_source
    if source == "leading":
        leading = rtab.leading_rows(spec)
        part = Part([as_row(r) for r in leading], rtab.LEADING_COLUMNS, leading_title,
                    figures=[rtab.leading_figure(spec, leading)])
    else:
        part = {"explicit": explicit, "vectors": vectors, "gaussian": gaussian}[source](spec, ctx)
    return score_text.assembled(spec, ctx, study=study, table=table, title=part.title,
                                columns=part.columns, rows=part.rows, checks=part.checks,
                                notes=part.notes, figures=part.figures, tables=part.tables,
                                jacobian=jacobian, peaks=part.peaks)


def vectors_part(spec: SaturationFields, rows: Sequence[Mapping[str, Any]],
                 columns: tuple[Column, ...], what: str, *, checks: list[Check],
                 figures: list[Figure], d_quantities: Sequence[str], jacobian: bool) -> Part:
    """A random-vector sweep's part: its rows, checks and figures, then the slope tables of
    its coordinate checks with theirs."""
    tables, more_checks, more_figures = keys_axis.coordinate_checks(
        spec, rows, d_quantities=d_quantities, d_columns=rtab.SLOPE_COLUMNS,
        jacobian=jacobian, se_tolerance=spec.se_tolerance)
    return Part(rows, columns, keys_axis.table_title(what, spec), checks + more_checks,
                figures + more_figures, tables=tables)
