"""One contract over every registered study, fed by the small examples its declaration gives."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jsonschema
import pytest
import referencing
from conftest import Counter, example_spec, study_examples

from sdpa_cli import registry, schemas
from sdpa_cli.framework.context import RunContext
from sdpa_cli.framework.result import Result, row_fields
from sdpa_cli.report import writers

# How far a study's cost estimate may be from what its run writes (output bytes) and how many
# rows it makes: an estimate is a guard against runs of hours, not a forecast, but one that is
# off by more than this no longer guards anything.
COST_FACTOR = 20


CASES = study_examples()



@pytest.fixture(scope="module")
def runs() -> dict[tuple[str, int], dict[str, Any]]:
    """Each example run four ways: in line with a progress counter, with 2 threads and no
    figures, and through a concurrent.futures executor (the seam Dask plugs into)."""
    out = {}
    with ThreadPoolExecutor(2) as pool:
        for param in CASES:
            name, i = param.values
            study, spec = registry.get(name), example_spec(name, i)
            counter = Counter()
            out[name, i] = {
                "spec": spec,
                "counter": counter,
                "serial": study.run(spec, RunContext(workers=1, tick=counter)),
                "threads": study.run(spec, RunContext(workers=2, figures=False)),
                "executor": study.run(spec, RunContext(executor=pool)),
            }
    return out


def _same_digits(a: Result, b: Result) -> bool:
    return writers.results_json(a) == writers.results_json(b) and \
        writers.table_csv(a) == writers.table_csv(b)


@pytest.mark.parametrize("name, i", CASES)
def test_the_same_digits_in_line_with_threads_and_through_an_executor(runs, name, i):
    got = runs[name, i]
    assert _same_digits(got["serial"], got["executor"]), f"{name}: the executor changed a digit"
    assert got["serial"].tables == got["threads"].tables, f"{name}: threads changed a digit"
    assert got["serial"].checks == got["threads"].checks


@pytest.mark.parametrize("name, i", CASES)
def test_progress_ticks_every_task_it_plans(runs, name, i):
    counter = runs[name, i]["counter"]
    assert counter.done == counter.planned, f"{name}: planned {counter.planned}, " \
        f"ticked {counter.done}"
    study = registry.get(name)
    if study.spec.needs_seed(dict(study.examples[i])):  # it draws: the bar has tasks to show
        assert counter.planned > 0, f"{name}: a run that draws must tick its tasks"


@pytest.mark.parametrize("name, i", CASES)
def test_no_figure_data_without_figures_and_every_kind_is_declared(runs, name, i):
    study = registry.get(name)
    assert not runs[name, i]["threads"].figures, f"{name}: figure data under --no-plots"
    for figure in runs[name, i]["serial"].figures:
        assert figure.kind in study.figures, f"{name}: figure kind {figure.kind!r} is not " \
            "declared"
        assert callable(study.renderer(figure.kind))


def _validator() -> Any:
    resources = [(schemas.load(n)["$id"], referencing.Resource.from_contents(schemas.load(n)))
                 for n in schemas.NAMES]
    schema = schemas.load("result")
    return jsonschema.validators.validator_for(schema)(
        schema, registry=referencing.Registry().with_resources(resources))


@pytest.mark.parametrize("name, i", CASES)
def test_results_fit_the_schema_and_name_their_study(runs, name, i):
    doc = json.loads(writers.results_json(runs[name, i]["serial"]))
    _validator().validate(doc)
    assert doc["study"] == name, f"{name}: results.json says study {doc['study']!r}"


def _in_order(keys: tuple[str, ...], fields: tuple[str, ...]) -> bool:
    it = iter(fields)
    return all(k in it for k in keys)


@pytest.mark.parametrize("name, i", CASES)
def test_rows_are_of_a_declared_row_type_and_every_column_is_in_them(runs, name, i):
    study, result = registry.get(name), runs[name, i]["serial"]
    shapes = [row_fields(t) for t in study.rows]
    assert result.rows, f"{name}: no rows"
    for row in result.rows:  # a row may leave out a column its source has no value for
        assert any(_in_order(tuple(row), shape) for shape in shapes), \
            f"{name}: a row with fields {tuple(row)} is of no declared row type"
    for table in result.tables:
        keys = {k for row in table.rows for k in row}
        for column in table.columns:
            assert not table.rows or column.key in keys, \
                f"{name}: table {table.name!r}: column {column.key!r} is in no row"


@pytest.mark.parametrize("name, i", CASES)
def test_the_cost_estimate_is_honest_within_a_stated_factor(runs, name, i):
    got = runs[name, i]
    cost = registry.get(name).cost(got["spec"])
    written = len(writers.results_json(got["serial"])) + len(writers.table_csv(got["serial"]))
    rows = max([len(got["serial"].rows)] + [len(t.rows) for t in got["serial"].tables])
    assert written <= cost.output * COST_FACTOR, f"{name}: wrote {written} B, estimated " \
        f"{cost.output} B"
    assert rows <= max(cost.rows, 1) * COST_FACTOR, f"{name}: {rows} rows, estimated {cost.rows}"
