"""Typed rows: a table's row keys are its row type's fields, PART groups written in place."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from sdpa_cli import loader as spec_mod
from sdpa_cli import registry
from sdpa_cli.framework.context import RunContext
from sdpa_cli.framework.result import PART, as_row, internal, row_fields
from sdpa_cli.studies.saturation import saturation_rows as sr


@dataclass(frozen=True)
class _A:
    a: int


@dataclass(frozen=True)
class _B:
    b: int
    a: int


@dataclass(frozen=True)
class _Row:
    key: _A | _B = field(metadata=PART)
    x: float
    hidden: bool = internal(False)


def test_part_fields_are_written_in_place_and_a_union_lists_every_member_field() -> None:
    assert row_fields(_Row) == ("a", "b", "x")
    assert list(as_row(_Row(_B(b=2, a=1), 0.5))) == ["b", "a", "x"]
    assert as_row(_Row(_A(a=1), 0.5)) == {"a": 1, "x": 0.5}


def _rows(study: str, **overrides):
    spec = spec_mod.load(None, study=study, overrides=overrides)
    result = registry.get(study).run(spec, RunContext(workers=1, figures=False))
    return result


@pytest.mark.parametrize(("study", "overrides", "row_type"), [
    ("softmax-sweep", {"dims": [8, 16], "keys": [4], "trials": 50, "seed": 1,
                       "scalings": ["none", "softcap:5"], "additive": 8}, sr.SweepVectorRow),
    ("softmax-sweep", {"score_stds": [0.5, 2.0], "keys": [4], "trials": 50, "seed": 1},
     sr.SweepGaussianRow),
    ("jacobian", {"dims": [8, 16], "keys": [4], "trials": 50, "seed": 1}, sr.JacobianVectorRow),
    ("jacobian", {"score_stds": [0.5, 1.0, 2.0], "keys": [4], "trials": 50, "seed": 1},
     sr.JacobianGaussianRow),
    ("jacobian", {"margin": 2.0, "keys": [4, 8], "dim": 16}, sr.LeadingRow),
])
def test_every_row_carries_its_types_fields_in_order(study, overrides, row_type) -> None:
    result = _rows(study, **overrides)
    assert result.rows and all(tuple(r) == row_fields(row_type) for r in result.rows)


def test_softcap_score_law_is_reported_not_checked() -> None:
    result = _rows("softmax-sweep", dims=[8], keys=[4], trials=50, seed=1,
                   scalings=["softcap:5"])
    (check,) = [c for c in result.checks if "softcap" in c.name]
    assert check.passed and "not checked" in check.detail
