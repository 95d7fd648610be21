"""The contract every registered study keeps, one check at a time (scikit-learn's
check_estimator is the model): a check takes one example of one study, run several ways, and
raises AssertionError naming the study and what is wrong; a study check (STUDY_CHECKS) takes
the study as a whole: its page, schema, listings, flags and share of the quick tier.
tests/test_contract.py runs every check on every example and every study check on every
registered study (`pytest tests/test_contract.py -k NAME`: all of one study's, in seconds);
tests/test_contract_holes.py plants each fault in a throwaway study and sees its check catch
it, with the right words."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from typing import Any

import conftest
import jsonschema
import referencing
import test_docs
from conftest import Counter, example_spec

from sdpa_cli import registry, schemas
from sdpa_cli.framework import rowtypes, schema
from sdpa_cli.framework.context import RunContext
from sdpa_cli.framework.result import Result, Table
from sdpa_cli.io import topics
from sdpa_cli.report import eta, writers
from sdpa_cli.runner import loader

# How far a study's cost estimate may be from what its run writes (output bytes) and how many
# rows it makes: an estimate is a guard against runs of hours, not a forecast, but one that is
# off by more than this no longer guards anything.
COST_FACTOR = 20
# The seed of the contract's second seed run: far from the examples' own (11, 12, …).
OTHER_SEED = 1011
# Column formats report.formatting knows: a typo would fall back to the default silently.
FORMATS = re.compile(r"^(int|g|e|pct|text|list|f\d)$")


class Runs:
    """One example of one study, each run made when a check first asks for it: in line
    with a progress counter, again the same way, with another seed, with 2 threads and no
    figures, and through a concurrent.futures executor (the seam Dask plugs into)."""

    def __init__(self, name: str, i: int) -> None:
        self.name, self.i = name, i
        self.study = registry.get(name)  # a broken declaration fails here, in every check
        self.spec = example_spec(name, i)
        self.counter = Counter()

    def _run(self, ctx: RunContext, spec: Any = None) -> Result:
        return self.study.run(self.spec if spec is None else spec, ctx)

    @cached_property
    def serial(self) -> Result:
        return self._run(RunContext(workers=1, tick=self.counter))

    @cached_property
    def again(self) -> Result:
        return self._run(RunContext(workers=1))

    @cached_property
    def other_seed(self) -> Result:
        return self._run(RunContext(workers=1), example_spec(self.name, self.i, OTHER_SEED))

    @cached_property
    def threads(self) -> Result:
        return self._run(RunContext(workers=2, figures=False))

    @cached_property
    def executor(self) -> Result:
        with ThreadPoolExecutor(2) as pool:
            return self._run(RunContext(executor=pool))

    @property
    def draws(self) -> bool:
        """Does this example draw random numbers (its spec takes a seed)?"""
        return self.study.spec.needs_seed(dict(self.study.examples[self.i]))


_CACHE: dict[tuple[str, int], Runs] = {}


def runs(name: str, i: int) -> Runs:
    """The example's runs, shared by every check of this test session."""
    if (name, i) not in _CACHE:
        _CACHE[name, i] = Runs(name, i)
    return _CACHE[name, i]


def _tables(r: Result) -> tuple[Table, ...]:
    return (r.table, *r.tables)


def _numbers(r: Result) -> tuple[Any, ...]:
    """Everything a run measured, without its figures: tables, checks and audit."""
    return tuple(t.rows for t in _tables(r)), r.checks, r.audit


def _first_difference(a: Result, b: Result) -> str:
    for ta, tb in zip(_tables(a), _tables(b), strict=False):
        for k, (ra, rb) in enumerate(zip(ta.rows, tb.rows, strict=False)):
            for key in ra:
                if ra.get(key) != rb.get(key):
                    return f"table {ta.name!r} row {k} {key}: {ra.get(key)!r} then " \
                        f"{rb.get(key)!r}"
    return "its checks or audit"


def _unseeded(r: Runs) -> str | None:
    if _numbers(r.serial) == _numbers(r.again):
        return None
    differ = _first_difference(r.serial, r.again)
    return (f"{r.name}: two runs of the same spec and seed differ ({differ})"
            ": a draw is not seeded from the spec; draw through "
            "numerics.rng.block_generator(spec.entropy, key) inside fold_blocks' blocks")


def check_the_same_seed_gives_the_same_digits(r: Runs) -> None:
    why = _unseeded(r)
    assert why is None, why


def check_another_seed_gives_other_draws(r: Runs) -> None:
    if not r.draws:
        return  # nothing random: the seed is not even drawn
    assert tuple(t.rows for t in _tables(r.serial)) != \
        tuple(t.rows for t in _tables(r.other_seed)), (
        f"{r.name}: seeds {r.spec.seed} and {OTHER_SEED + r.i} give the same digits in every "
        "table: the study ignores the spec's seed; draw from spec.entropy "
        "(numerics.rng.block_generator)")


def _same_files(a: Result, b: Result) -> bool:
    return writers.results_json(a) == writers.results_json(b) and \
        writers.table_csv(a) == writers.table_csv(b)


def check_threads_and_an_executor_change_no_digit(r: Runs) -> None:
    why = _unseeded(r)  # unseeded draws would differ anyway: say that, not "the executor"
    assert why is None, why
    assert _same_files(r.serial, r.executor), \
        f"{r.name}: the executor changed a digit ({_first_difference(r.serial, r.executor)})" \
        ": pass ctx.executor to fold_blocks and fold in block order"
    assert _numbers(r.serial) == _numbers(r.threads), \
        f"{r.name}: 2 threads changed a digit ({_first_difference(r.serial, r.threads)})" \
        ": pass ctx.workers to fold_blocks and fold in block order"


def check_progress_ticks_every_task_it_plans(r: Runs) -> None:
    r.serial  # noqa: B018 - the run that ticks the counter
    c = r.counter
    assert c.done == c.planned, f"{r.name}: planned {c.planned} tasks, ticked {c.done}"
    if r.draws:  # it draws: the bar has tasks to show
        assert c.planned > 0, f"{r.name}: a run that draws must tick its tasks: pass " \
            "ctx.tick to fold_blocks"


def check_figures_only_when_wanted_and_of_declared_kinds(r: Runs) -> None:
    assert not r.threads.figures, f"{r.name}: figure data under --no-plots " \
        "(build figures only when ctx.figures)"
    for figure in r.serial.figures:
        assert figure.kind in r.study.figures, f"{r.name}: figure kind {figure.kind!r} is " \
            f"not declared (figures= declares {', '.join(r.study.figures)})"
        assert callable(r.study.renderer(figure.kind))


def _generic_validator() -> Any:
    resources = [(schemas.load(n)["$id"], referencing.Resource.from_contents(schemas.load(n)))
                 for n in schemas.NAMES]
    doc = schemas.load("result")
    return jsonschema.validators.validator_for(doc)(
        doc, registry=referencing.Registry().with_resources(resources))


def check_results_fit_the_schemas(r: Runs) -> None:
    doc = json.loads(writers.results_json(r.serial))
    assert doc["study"] == r.name, f"{r.name}: results.json says study {doc['study']!r}"
    path = schema.shipped(r.study)
    assert path.is_file(), f"{r.name}: its package ships no {path.name}; write it with " \
        f"`python tests/test_study_schemas.py --write {r.name}`"
    own = json.loads(path.read_text(encoding="utf-8"))
    for name, validator in (("sdpa_cli/schemas/result.json", _generic_validator()),
                            (path.name, jsonschema.validators.validator_for(own)(own))):
        error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
        assert error is None, f"{r.name}: results.json does not fit {name}: at " \
            f"{error.json_path}: {error.message}"


def check_rows_are_of_declared_row_types(r: Runs) -> None:
    assert r.serial.rows, f"{r.name}: no rows"
    for table in _tables(r.serial):
        for k, row in enumerate(table.rows):
            why = rowtypes.row_problem(row, r.study.rows)
            assert why is None, f"{r.name}: table {table.name!r} row {k}: {why}"


def check_every_column_of_every_table_is_in_its_rows(r: Runs) -> None:
    for table in _tables(r.serial):  # the main table too
        keys = {k for row in table.rows for k in row}
        for column in table.columns:
            assert FORMATS.match(column.fmt), f"{r.name}: table {table.name!r}: column " \
                f"{column.key!r} has format {column.fmt!r}; one of int, g, e, pct, text, " \
                "list, or fN (N decimals, e.g. f2)"
            if table.rows and column.key not in keys:
                close = difflib.get_close_matches(column.key, keys, n=1)
                hint = f"did you mean {close[0]!r}?" if close else \
                    f"its rows have {', '.join(sorted(keys))}"
                raise AssertionError(f"{r.name}: table {table.name!r}: column {column.key!r} "
                                     f"is in no row ({hint})")


def check_the_cost_estimate_is_honest(r: Runs) -> None:
    cost = r.study.cost(r.spec)
    written = len(writers.results_json(r.serial)) + len(writers.table_csv(r.serial))
    rows = max(len(t.rows) for t in _tables(r.serial))
    assert written <= cost.output * COST_FACTOR, f"{r.name}: wrote {written} B, estimated " \
        f"{cost.output} B"
    assert rows <= max(cost.rows, 1) * COST_FACTOR, f"{r.name}: {rows} rows, estimated " \
        f"{cost.rows}"


CHECKS: tuple[Callable[[Runs], None], ...] = (
    check_the_same_seed_gives_the_same_digits,
    check_another_seed_gives_other_draws,
    check_threads_and_an_executor_change_no_digit,
    check_progress_ticks_every_task_it_plans,
    check_figures_only_when_wanted_and_of_declared_kinds,
    check_results_fit_the_schemas,
    check_rows_are_of_declared_row_types,
    check_every_column_of_every_table_is_in_its_rows,
    check_the_cost_estimate_is_honest,
)


# --- the study as a whole -----------------------------------------------------------------

# What one study may add to the quick tier (about a minute on 2 cores for eight studies), in
# seconds its cost estimate and rate give on one thread, beyond the fixed part every run has
# (figures, files): each example runs EXAMPLE_RUNS times here (the same seed twice, another
# seed, 2 threads, an executor) and the study's cheapest shipped spec under
# conftest.QUICK_WORK SPEC_RUNS times (tests/test_batch.py twice, test_figures.py,
# test_json_schemas.py). The estimate is no timing: `pytest --durations=10` shows the truth.
QUICK_SECONDS = 2.0
EXAMPLE_RUNS = 5
SPEC_RUNS = 4
GENERATE = "`python tests/generate.py`"


def check_its_page_prints_no_bare_number(name: str) -> None:
    study = registry.get(name)
    page = topics.study_pages().get(study.topic)
    if page is None:
        return  # a shared page (sdpa_cli/docs/): tests/test_docs.py lints it
    bare = test_docs.bare_numbers(page.read_text(encoding="utf-8"))
    assert not bare, f"{name}: {page.name} prints {', '.join(bare)} outside a region a test " \
        "reruns: a measured number goes in a <!-- gen: ... --> or <!-- output: ... --> " \
        "region (tests/docgen.py); an input or a definition (a default such as 0.43, a " \
        f"threshold) is listed at the top of the page: <!-- inputs: {' '.join(bare)} -->"


def check_its_schema_is_current(name: str) -> None:
    study = registry.get(name)
    path = schema.shipped(study)
    assert path.is_file() and path.read_text(encoding="utf-8") == schema.text(study), \
        f"{name}: {path.name} in its package is {'stale' if path.is_file() else 'missing'} " \
        f"(it derives from its row types): write it with {GENERATE}"


def check_the_pages_list_it(name: str) -> None:
    registry.get(name)  # a broken declaration says so here too
    for page in test_docs.FROM_REGISTRY:
        for kind, code, kept in test_docs.from_registry(page):
            assert test_docs.fresh(kind, code) == kept, f"{name}: {page}'s region `{code}` " \
                f"is stale (a new study or shipped spec changes it): write it with {GENERATE}"


def check_its_flags_are_its_own(name: str) -> None:
    from sdpa_cli.cli.commands import build

    seen: dict[str, str] = {}
    for param in build(name).params:
        for opt in (*param.opts, *param.secondary_opts):
            assert opt not in seen, f"{name}: {opt} is the flag of {param.name!r} and of " \
                f"{seen[opt]!r} (a flag shared by every study command): name the field's " \
                f"flag in the declaration, flags={{{param.name!r}: Flag(name=...)}}"
            seen[opt] = str(param.name)


def check_its_share_of_the_quick_tier_is_small(name: str) -> None:
    study = registry.get(name)
    fixed = (study.rate or eta.DEFAULT_RATE).fixed
    cases = [(f"examples[{i}]", EXAMPLE_RUNS, example_spec(name, i))
             for i in range(len(study.examples))]
    if name in conftest.QUICK_SPEC:
        path = conftest.QUICK_SPEC[name]
        cases.append((str(path.relative_to(conftest.ROOT)), SPEC_RUNS, loader.load(path)))
    shares = sorted(((runs * (eta.seconds(spec, 1) - fixed), what, runs)
                     for what, runs, spec in cases), key=lambda c: c[0], reverse=True)
    total = sum(s for s, _, _ in shares)
    said = "; ".join(f"{what} {s:.2g} s ({runs} runs)" for s, what, runs in shares)
    assert total <= QUICK_SECONDS, f"{name}: its runs in the quick tier would take about " \
        f"{total:.2g} s of work, more than {QUICK_SECONDS:g} s (its cost estimate × " \
        f"{'its rate' if study.rate else 'the default rate'}): {said}. {shares[0][1]} " \
        "dominates: an example needs only a few blocks; the quick tier runs the cheapest " \
        f"shipped spec under {conftest.QUICK_WORK:.0e} steps (give a cheaper one, or keep " \
        f"the big one in experiments/{name}/slow/, run only when named)"


STUDY_CHECKS: tuple[Callable[[str], None], ...] = (
    check_its_page_prints_no_bare_number,
    check_its_schema_is_current,
    check_the_pages_list_it,
    check_its_flags_are_its_own,
    check_its_share_of_the_quick_tier_is_small,
)
