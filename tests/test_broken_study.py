"""One study's mistake stays in that study (issue 36): a broken declaration, a figure kind its
declaration does not list, or a package that does not import is that study's author error
(its file and line, the study, the field, the fix; exit 2, nothing run), and every other
command, `sdpa run -k` of other specs, the test session's fixtures and the other studies'
contract checks go on. Planted in a throwaway copy of the recipe's study."""

from __future__ import annotations

import conftest
import contract
import pytest
import recipe
from conftest import write_spec

import sdpa_cli
from sdpa_cli import registry
from sdpa_cli.framework.declaration import DeclarationError

VARIANCE = "study: variance\ndims: [3]\npairs: 200\nseed: 1\n"
TINY = "study: tiny\nsizes: [100]\nseed: 1\n"


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    folder = recipe.install(tmp_path / "pkgs", monkeypatch)
    yield folder
    recipe.forget()


@pytest.fixture
def broken(tiny):
    """The recipe's study with a typo in a Figure's kind in run.py (the declaration is
    right): on the command line it used to run whole, then fail with `internal error:
    KeyError` when the figure was drawn, its results discarded."""
    path = tiny / "run.py"
    path.write_text(path.read_text().replace('Figure("means", "tiny.means"',
                                             'Figure("means", "tiny.mean"'))
    recipe.forget()
    return tiny


def test_a_figure_kind_typo_is_refused_at_registration_with_its_line(broken):
    with pytest.raises(DeclarationError) as e:
        registry.get("tiny")
    said = str(e.value)
    assert e.value.study == "tiny" and e.value.field == "figures"
    assert e.value.file.endswith("tiny/run.py") and e.value.line, said
    assert "Figure kind 'tiny.mean' is not declared (did you mean 'tiny.means'?)" in said
    assert registry.declared("tiny") is None and registry.declared("variance") is not None


def test_its_command_says_so_in_one_line_and_runs_nothing(broken, sdpa, workdir):
    r = sdpa("tiny", "--sizes", "100")
    assert r.code == 2, r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "internal error" not in r.err, r.err
    assert "study 'tiny': figures: Figure kind 'tiny.mean' is not declared" in lines[0]
    assert not (workdir / "outputs").exists()
    r = sdpa("tiny", "--help")
    assert r.code == 2 and "Figure kind 'tiny.mean'" in r.err


def test_other_commands_and_the_command_list_go_on(broken, sdpa):
    assert sdpa("variance", "--dims", "3", "--pairs", "200", "--no-plots", "-q").code == 0
    listed = sdpa("--help")
    assert listed.code == 0 and "tiny" in listed.out


def test_a_batch_runs_what_k_selects_and_refuses_the_broken_studys_specs(broken, sdpa,
                                                                         workdir):
    specs = workdir / "specs"
    specs.mkdir()
    write_spec(specs, "var.yaml", VARIANCE)
    write_spec(specs, "small-tiny.yaml", TINY)
    r = sdpa("run", str(specs), "-k", "var", "--no-plots", "-q")
    assert r.code == 0, r.err
    assert (workdir / "outputs" / "var" / "results.json").is_file()
    for argv in (("run", str(specs), "--no-plots", "-q"), ("validate", str(specs))):
        r = sdpa(*argv)
        assert r.code == 2, r.err
        assert "small-tiny.yaml: study: its study cannot be used: " in r.err, r.err
        assert "Figure kind 'tiny.mean' is not declared" in r.err and "internal" not in r.err


def test_the_python_api_raises_the_authors_error(broken):
    with pytest.raises(DeclarationError, match=r"Figure kind 'tiny\.mean'"):
        sdpa_cli.tiny(sizes=[100])


def test_a_package_that_does_not_import_is_its_authors_error(tiny, sdpa):
    path = tiny / "run.py"
    path.write_text(path.read_text().replace("from sdpa_cli.numerics.rng import block_generator",
                                             "from sdpa_cli.numerics.rng import block_generater"))
    recipe.forget()
    with pytest.raises(DeclarationError) as e:
        registry.get("tiny")
    assert e.value.field == "package" and e.value.file.endswith("tiny/run.py"), str(e.value)
    assert "ImportError" in str(e.value) and "block_generater" in str(e.value)
    r = sdpa("tiny")
    assert r.code == 2 and "internal error" not in r.err


def test_the_test_sessions_fixtures_go_on_and_the_contract_is_per_study(broken, tmp_path):
    shipped = tmp_path / "experiments"
    for study, text in (("variance", VARIANCE), ("tiny", TINY)):
        (shipped / study).mkdir(parents=True)
        write_spec(shipped / study, f"{study}-spec.yaml", text)
    # conftest picks each study's cheapest shipped spec at import: a broken one is skipped
    assert conftest._cheapest_of_each_study(shipped) == {
        "variance": shipped / "variance" / "variance-spec.yaml"}
    cases = {p.values for p in conftest.study_examples()}
    assert ("tiny", conftest.BROKEN) in cases
    assert {("variance", 0), ("variance", 1)} <= cases
    with pytest.raises(DeclarationError, match=r"Figure kind 'tiny\.mean'"):
        contract.Runs("tiny", conftest.BROKEN)
    r = contract.Runs("jacobian", 0)
    for check in contract.CHECKS:  # another study's contract still holds
        check(r)
