"""Each hole the contract had (issue 36), as a fault planted in a throwaway copy of the recipe's
study: the check that should catch it does, and says what is wrong in the study's terms. On
the contract before issue 36 every one of these faults passed (or was blamed on the wrong
thing)."""

from __future__ import annotations

import contract
import pytest
import recipe
import test_docs


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    folder = recipe.install(tmp_path / "pkgs", monkeypatch)
    yield folder
    recipe.forget()


def _plant(folder, file: str, old: str, new: str) -> None:
    path = folder / file
    text = path.read_text()
    assert text.count(old) == 1, (file, old)
    path.write_text(text.replace(old, new))
    recipe.forget()


def _caught(check, *words: str, example: int = 0) -> str:
    with pytest.raises(AssertionError) as e:
        check(contract.Runs("tiny", example))
    said = str(e.value)
    for word in words:
        assert word in said, said
    return said


def test_the_unplanted_recipe_keeps_every_check(tiny):
    for i in (0, 1):
        r = contract.Runs("tiny", i)
        for check in contract.CHECKS:
            check(r)


# (the edits planted in run.py, the check that must catch them, what its message must say)
HOLES = [
    pytest.param([('Column("mean_se", "se", priority=0)', 'Column("mean_sd", "se", priority=0)')],
                 contract.check_every_column_of_every_table_is_in_its_rows,
                 ["table 'tiny': column 'mean_sd' is in no row (did you mean 'mean_se'?)"],
                 id="a typo in a main-table column key"),
    pytest.param([('Column("z", "z", "f2", priority=0)', 'Column("z", "z", "2f", priority=0)')],
                 contract.check_every_column_of_every_table_is_in_its_rows, ["format '2f'"],
                 id="an unknown column format"),
    pytest.param([("block_generator(spec.entropy, (i, b))", "block_generator(74, (i, b))")],
                 contract.check_another_seed_gives_other_draws,
                 ["give the same digits in every table: the study ignores the spec's seed"],
                 id="a study that ignores the seed"),
    pytest.param([("table = tuple(as_row(r) for r in rows)",
                   'table = tuple({**as_row(r), "median": 0.0} for r in rows)')],
                 contract.check_rows_are_of_declared_row_types,
                 ["field 'median' is in no declared row type", "closest declared: TinyRow"],
                 id="an extra row field"),
    pytest.param([("table = tuple(as_row(r) for r in rows)",
                   'table = tuple({k: v for k, v in as_row(r).items() if k != "z"}'
                   " for r in rows)")],
                 contract.check_rows_are_of_declared_row_types, ["missing 'z'"],
                 id="a missing row field"),
    pytest.param([("return float(x.sum()), float(x @ x)", "return x.sum(), x @ x")],
                 contract.check_rows_are_of_declared_row_types,
                 ["mean is numpy.float64, declared float", "convert it"],
                 id="a NumPy scalar in a float field"),
    pytest.param([("TinyRow(draws=n,", "TinyRow(draws=str(n),")],
                 contract.check_results_fit_the_schemas, ["is not of type 'integer'"],
                 id="a row value of the wrong type against the study's schema"),
    pytest.param([("ctx.workers, ctx.executor, ctx.tick)", "ctx.workers, ctx.executor)")],
                 contract.check_progress_ticks_every_task_it_plans,
                 ["a run that draws must tick its tasks: pass ctx.tick to fold_blocks"],
                 id="a run that does not tick"),
    pytest.param([('"se": [r.mean_se for r in rows]})] if ctx.figures else []',
                   '"se": [r.mean_se for r in rows]})]')],
                 contract.check_figures_only_when_wanted_and_of_declared_kinds,
                 ["figure data under --no-plots"], id="figure data under --no-plots"),
]


@pytest.mark.parametrize("edits, check, words", HOLES)
def test_the_contract_catches_the_planted_fault(tiny, edits, check, words):
    for old, new in edits:
        _plant(tiny, "run.py", old, new)
    _caught(check, *words)


def test_unseeded_draws_are_blamed_on_the_seed_not_the_executor(tiny):
    _plant(tiny, "run.py", "x = block_generator(spec.entropy, (i, b)).standard_normal(",
           "x = np.random.default_rng().standard_normal(")
    _plant(tiny, "run.py", "import math\n", "import math\n\nimport numpy as np\n")
    for check in (contract.check_the_same_seed_gives_the_same_digits,
                  contract.check_threads_and_an_executor_change_no_digit):
        said = _caught(check, "two runs of the same spec and seed differ",
                       "a draw is not seeded from the spec")
        assert "executor" not in said.split(":")[1]


# --- the study checks, each a rule a contributor once found only through the whole quick tier


def _study_caught(check, *words: str) -> str:
    with pytest.raises(AssertionError) as e:
        check("tiny")
    said = str(e.value)
    for word in words:
        assert word in said, said
    return said


def test_the_unplanted_recipe_keeps_every_study_check_but_its_listing(tiny):
    for check in contract.STUDY_CHECKS:
        if check is not contract.check_the_pages_list_it:
            check("tiny")
    if "| `sdpa tiny` |" in test_docs.README.read_text(encoding="utf-8"):
        contract.check_the_pages_list_it("tiny")  # a copy where the recipe's step ran
    else:  # the pages were not regenerated for the planted study: the check says how
        _study_caught(contract.check_the_pages_list_it, "README.md's region `study_table()` "
                      "is stale", "write it with `python tests/generate.py`")


def test_a_default_on_its_page_is_listed_as_an_input(tiny):
    _plant(tiny, "tiny.md", "<!-- inputs: 4.0 -->\n", "")
    _study_caught(contract.check_its_page_prints_no_bare_number, "tiny.md prints 4.0",
                  "<!-- inputs: 4.0 -->")


def test_a_stale_schema_names_the_generate_command(tiny):
    path = tiny / "results.schema.json"  # as before a field was added to the row type
    path.write_text(path.read_text().replace('"mean_se"', '"se"'))
    _study_caught(contract.check_its_schema_is_current, "results.schema.json in its package "
                  "is stale", "`python tests/generate.py`")


def test_a_field_whose_flag_every_command_has_is_named_with_the_fix(tiny):
    _plant(tiny, "spec.py", "    se_tolerance: SeTolerance = 4.0\n",
           "    se_tolerance: SeTolerance = 4.0\n"
           "    out: Int = Field(1, description='How many draws go out.')\n")
    _study_caught(contract.check_its_flags_are_its_own, "--out is the flag of",
                  "flags={'out': Flag(name=...)}")


def test_an_example_that_costs_too_much_is_named_as_dominating(tiny):
    _plant(tiny, "__init__.py", '{"sizes": [200_000]}', '{"sizes": [100_000_000]}')
    _study_caught(contract.check_its_share_of_the_quick_tier_is_small,
                  "examples[1] dominates", "more than 2 s", "the default rate")
