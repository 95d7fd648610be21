"""The recipe of sdpa_cli/docs/adding-a-study.md, followed word for word: its package registered
in this process and run by every route, each declaration mistake an error naming the study and
the field before anything runs, and (slow tier) the whole recipe written into a copy of the
project, where the quick tier, ruff and mypy pass and `git status` shows only its files."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import contract
import pytest
import recipe
import test_docs
from conftest import ROOT

from sdpa_cli import registry
from sdpa_cli.cli.entry import run as sdpa_main
from sdpa_cli.framework.declaration import DeclarationError


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """The page's package in a temporary folder, registered as sdpa_cli.studies.tiny."""
    folder = recipe.install(tmp_path / "pkgs", monkeypatch)
    yield folder
    recipe.forget()


def test_the_page_gives_every_file_of_the_package_its_spec_and_its_test():
    assert set(recipe.files()) == {
        "sdpa_cli/studies/tiny/__init__.py", "sdpa_cli/studies/tiny/spec.py",
        "sdpa_cli/studies/tiny/run.py", "sdpa_cli/studies/tiny/figures.py",
        "sdpa_cli/studies/tiny/tiny.md", "experiments/tiny/tiny-demo.yaml",
        "tests/test_tiny.py"}
    assert recipe.registry_line()[0] == "sdpa_cli/studies/__init__.py"


def test_the_study_runs_from_its_command_a_batch_and_the_report(tiny, tmp_path, monkeypatch,
                                                                  capsys):
    monkeypatch.chdir(tmp_path)
    assert sdpa_main(["tiny", "--sizes", "500", "70000", "--seed", "3", "--out", "one",
                      "-q"]) == 0
    doc = json.loads((tmp_path / "one" / "results.json").read_text())
    assert doc["study"] == "tiny" and [r["draws"] for r in doc["rows"]] == [500, 70000]
    assert (tmp_path / "one" / "means.png").is_file()
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "t.yaml").write_text(recipe.files()["experiments/tiny/tiny-demo.yaml"],
                                  encoding="utf-8")
    assert sdpa_main(["run", str(specs), "--out", "batch", "-q", "--check"]) == 0
    html = (tmp_path / "batch" / "report.html").read_text()
    assert "sdpa help tiny</a>" in html and (tmp_path / "batch" / "t" / "results.json").is_file()
    capsys.readouterr()
    assert sdpa_main(["tiny", "--help"]) == 0
    assert "How many numbers each row draws" in capsys.readouterr().out
    assert sdpa_main(["help", "tiny"]) == 0
    assert "The mean of normal draws" in capsys.readouterr().out


def _plant(folder: Path, file: str, old: str, new: str) -> None:
    path = folder / file
    text = path.read_text()
    assert text.count(old) == 1, (file, old)
    path.write_text(text.replace(old, new))


@pytest.fixture
def length(tmp_path, monkeypatch):
    """tests/data/length-study.md's package, registered as sdpa_cli.studies.length."""
    folder = recipe.install(tmp_path / "pkgs", monkeypatch, "length", recipe.LENGTH)
    yield folder
    recipe.forget("length")


def test_a_realistic_study_from_the_recipe_keeps_every_rule_but_its_listing(length):
    for i in range(len(registry.get("length").examples)):
        r = contract.Runs("length", i)
        for check in contract.CHECKS:
            check(r)
    for check in contract.STUDY_CHECKS:
        if check is contract.check_the_pages_list_it and not _listed("length"):
            # the pages are written by the recipe's generate step (the slow test's copy)
            with pytest.raises(AssertionError, match=r"python tests/generate\.py"):
                check("length")
        else:
            check("length")


def _listed(name: str) -> bool:
    """Is the study in the README's table (a copy of the project where it was added)?"""
    return f"| `sdpa {name}` |" in test_docs.README.read_text(encoding="utf-8")


def test_a_field_s_takes_the_flag_its_declaration_names(length, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert sdpa_main(["length", "--lengths", "8", "32", "--queries", "20", "--ssmax-s", "0.5",
                      "--seed", "1", "--out", "one", "-q"]) == 0
    doc = json.loads((tmp_path / "one" / "results.json").read_text())
    assert doc["spec"]["s"] == 0.5
    assert (tmp_path / "one" / "by_length.png").is_file()  # two panels made with ncols=2
    capsys.readouterr()
    assert sdpa_main(["length", "--s", "0.5"]) == 2
    assert "No such option '--s'" in capsys.readouterr().err
    assert sdpa_main(["length", "--help"]) == 0
    assert "--ssmax-s S" in capsys.readouterr().out


def test_an_error_of_a_run_from_flags_names_the_flag_the_declaration_gives(tiny, capsys):
    _plant(tiny, "__init__.py", '    topic="tiny",\n',
           '    topic="tiny",\n    flags={"sizes": Flag(name="draws")},\n')
    _plant(tiny, "__init__.py", "import Study", "import Flag, Study")
    # a rule of the whole spec names its fields in brackets: from flags alone, the flags
    _plant(tiny, "spec.py", "        refuse_repeats(",
           "        if sum(self.sizes) > 10**6:\n"
           "            raise SpecFieldError((), 'too many draws in all (sizes)')\n"
           "        refuse_repeats(")
    recipe.forget()
    assert sdpa_main(["tiny", "--draws", "100", "1", "--no-plots"]) == 2
    assert capsys.readouterr().err == "--draws: sizes[1]: 1 draws: give 2 to 1000000000\n"
    assert sdpa_main(["tiny", "--draws", "600000", "600000", "--no-plots"]) == 2
    assert capsys.readouterr().err == "sdpa tiny: too many draws in all (--draws)\n"
    assert sdpa_main(["tiny", "--sizes", "100"]) == 2
    assert "No such option '--sizes'" in capsys.readouterr().err


@pytest.mark.parametrize("old, new, field", [
    ('"figures:draw_means"', '"figures:draw_mean"', "figures['tiny.means']"),
    ('"figures:draw_means"', '"figure:draw_means"', "figures['tiny.means']"),
    ('examples=({"sizes": [10, 1000]},', 'examples=({"sizez": [10, 1000]},', "examples[0]"),
    ('examples=({"sizes": [10, 1000]},', 'examples=({"sizes": [1]},', "examples[0]"),
    ('    examples=({"sizes": [10, 1000]}, {"sizes": [200_000]}),\n', "    examples=(),\n",
     "examples"),
    ('    topic="tiny",\n', '    topic="tiny",\n    flags={"size": Flag("N")},\n', "flags.size"),
    ('topic="tiny"', 'topic="tyni"', "topic"),
    ('    topic="tiny",\n', '    topic="tiny",\n    flags={"sizes": Flag(name="--n")},\n',
     "flags.sizes"),
    ('    topic="tiny",\n', '    topic="tiny",\n    flags={"sizes": Flag(name="Sizes")},\n',
     "flags.sizes"),
    ('    topic="tiny",\n', '    topic="tiny",\n    flags={"se_tolerance": Flag(name="sizes")},\n',
     "flags.se_tolerance"),
])
def test_a_mistake_in_the_declaration_is_an_error_at_registration(tiny, old, new, field):
    _plant(tiny, "__init__.py", old, new)
    if "Flag(" in new:
        _plant(tiny, "__init__.py", "import Study", "import Flag, Study")
    recipe.forget()
    with pytest.raises(DeclarationError) as e:
        registry.get("tiny")
    assert e.value.study == "tiny" and e.value.field == field, str(e.value)
    assert e.value.file and e.value.file.endswith("tiny/__init__.py") and e.value.line, str(e.value)


def test_a_declaration_without_run_needs_a_run_module_that_defines_it(tiny):
    # `run` and `documented_problem` left out are the run module's; one it lacks is named
    assert registry.get("tiny").name == "tiny" and registry.get("tiny").run.__name__ == "run"
    _plant(tiny, "run.py", "def run(spec: TinySpec", "def go(spec: TinySpec")
    recipe.forget()
    with pytest.raises(DeclarationError) as e:
        registry.get("tiny")
    assert e.value.field == "run" and e.value.file.endswith("tiny/__init__.py"), str(e.value)
    assert "sdpa_cli.studies.tiny.run defines no run(): write it there, or give run= the " \
           "function" in e.value.message and e.value.line


@pytest.mark.parametrize("old, new, field", [
    ('study: Literal["tiny"] = "tiny"', 'study: Literal["tiny2"] = "tiny2"', "spec.study"),
    ("    se_tolerance: SeTolerance = 4.0\n", "", "spec.se_tolerance"),
    ('\n                             description="How many numbers each row draws '
     '(default 100 10000).")', ")", "spec.sizes"),
])
def test_a_spec_that_contradicts_its_declaration_is_an_error_at_registration(tiny, old, new,
                                                                           field):
    _plant(tiny, "spec.py", old, new)
    recipe.forget()
    with pytest.raises(DeclarationError) as e:
        registry.get("tiny")
    assert e.value.field == field, str(e.value)


@pytest.mark.parametrize("old, new, said", [
    ('lower=("sizes",)', 'lower=("sizes", "draws")', "sizes holds no 'draws'"),
    ('lower=("sizes",)', 'lower=("size",)', "'size' is no field of TinySpec (did you mean "
     "'sizes'?)"),
    ('rows_field=("sizes",)', 'rows_field=("sizes", 9)', "sizes holds no 9"),
    ('lower=("sizes",)', "lower=()", "it is empty"),
])
def test_a_cost_that_points_at_no_place_in_the_spec_is_an_error_at_registration(tiny, old,
                                                                                new, said):
    # Cost.lower is one location (the line a refusal names), not the fields to lower
    _plant(tiny, "spec.py", old, new)
    recipe.forget()
    with pytest.raises(DeclarationError) as e:
        registry.get("tiny")
    assert e.value.field == "cost" and said in e.value.message, str(e.value)
    assert "it is one location in the spec" in e.value.message


def test_each_declaration_message_says_what_to_do(tiny):
    _plant(tiny, "__init__.py", '"figures:draw_means"', '"figures:draw_mean"')
    recipe.forget()
    with pytest.raises(DeclarationError) as e:
        registry.get("tiny")
    line = str(e.value)
    assert re.match(r".*tiny/__init__\.py:\d+: study 'tiny': figures\['tiny.means'\]: ", line)
    assert "defines no draw_mean() (did you mean 'draw_means'?)" in line


# --- the whole recipe in a copy of the project (slow: it runs the quick tier there) -------


def _git(folder: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True,
                          check=True, env={**os.environ, "GIT_AUTHOR_NAME": "t",
                                           "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                                           "GIT_COMMITTER_EMAIL": "t@t"})
    return done.stdout


def _copy_of_the_project(to: Path) -> Path:
    """The project's files as they are now (tracked and new ones git does not ignore), in a
    fresh repository with one commit."""
    listed = _git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, to / name)
    _git(to, "init", "-q")
    _git(to, "add", "-A")
    _git(to, "commit", "-q", "-m", "the project before the new study")
    return to


def _in(folder: Path, *argv: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    # the copy's own sdpa_cli first; its pytest's temporary folders inside this test's own
    env = {**os.environ, "PYTHONPATH": str(folder), "COLUMNS": "80",
           "PYTEST_DEBUG_TEMPROOT": str(folder.parent)}
    env.pop("SDPA_CHECK_BATCH", None)
    return subprocess.run(list(argv), cwd=folder, capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)


def _outside_the_registry_regions(text: str) -> str:
    """A page without the text of its FROM_REGISTRY regions (what generate.py may rewrite)."""
    codes = {c for cs in test_docs.FROM_REGISTRY.values() for c in cs}
    text = test_docs.GEN.sub(lambda m: "" if m["code"].strip() in codes else m.group(0), text)
    return test_docs.OUTPUT.sub(lambda m: "" if m["cmd"] in codes else m.group(0), text)


STUDY_FILES = ("sdpa_cli/studies/{0}/__init__.py", "sdpa_cli/studies/{0}/figures.py",
               "sdpa_cli/studies/{0}/results.schema.json", "sdpa_cli/studies/{0}/run.py",
               "sdpa_cli/studies/{0}/spec.py", "sdpa_cli/studies/{0}/{0}.md",
               "tests/test_{0}.py")
GENERATED = ("README.md", "sdpa_cli/docs/commands.md", "sdpa_cli/docs/timing.md")


@pytest.mark.slow
def test_the_recipe_in_a_copy_passes_every_check_and_touches_only_its_files(tmp_path):
    """The page's tiny word for word, and tests/data/length-study.md (a realistic study
    written from the page) beside it, in a copy of the project: the page's generate step,
    then the study checks, the quick tier, the slow tier's page checks of every page they
    touch, ruff and mypy pass, and git shows only their files and what the step wrote."""
    project = _copy_of_the_project(tmp_path / "project")
    recipe.write_into(project)
    recipe.write_into(project, recipe.LENGTH)
    py = sys.executable
    for argv in recipe.generate_commands():  # the page's step, as written
        assert argv[0] == "python", argv
        made = _in(project, py, *argv[1:])
        assert made.returncode == 0, made.stdout + made.stderr
        assert set(re.findall(r"^wrote (\S+)$", made.stdout, re.M)) == {
            *GENERATED, "sdpa_cli/studies/tiny/results.schema.json",
            "sdpa_cli/studies/length/results.schema.json"}, made.stdout
    # length's page quotes a measured number from a region: filled as step 5 says
    made = _in(project, py, "tests/test_docs.py", "--write", "length")
    assert made.returncode == 0, made.stderr
    assert "<!-- /gen -->" in (project / "sdpa_cli/studies/length/length.md").read_text()
    status = sorted(_git(project, "status", "--porcelain", "--untracked-files=all").splitlines())
    assert status == sorted([
        *(f" M {path}" for path in (*GENERATED, "sdpa_cli/studies/__init__.py")),
        *(f"?? {path.format(name)}" for name in ("tiny", "length") for path in STUDY_FILES),
        "?? experiments/tiny/tiny-demo.yaml", "?? experiments/length/length-demo.yaml"])
    assert "2\t0\tsdpa_cli/studies/__init__.py" in _git(project, "diff", "--numstat")
    for page in GENERATED:  # only their generated regions changed
        before = (ROOT / page).read_text(encoding="utf-8")
        after = (project / page).read_text(encoding="utf-8")
        assert after != before and _outside_the_registry_regions(after) == \
            _outside_the_registry_regions(before), page
    # the studies are really there: the copy's sdpa, not this one
    for name, spec in (("tiny", "tiny-demo"), ("length", "length-demo")):
        shown = _in(project, py, "-m", "sdpa_cli", name, spec, "--no-plots", "-q",
                    "--format", "json")
        assert shown.returncode == 0 and json.loads(shown.stdout)["study"] == name, shown.stderr
    checks = _in(project, py, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                 "tests/test_contract.py", "-k", "tiny or length")  # the page's seconds check
    assert checks.returncode == 0, checks.stdout[-3000:]
    ruff = _in(project, py, "-m", "ruff", "check", "sdpa_cli", "tests")
    assert ruff.returncode == 0, ruff.stdout + ruff.stderr
    mypy = _in(project, py, "-m", "mypy")
    assert mypy.returncode == 0, mypy.stdout + mypy.stderr
    # the quick tier's modules that read the registry, the shipped specs or the pages (a new
    # study reaches no other test): half the modules, a minute less of CI
    reach = re.compile(r"registry|STUDIES|study_pages|shipped_experiments|EXPERIMENTS|topics|"
                       r"README|generate")
    touched = sorted({str(p.relative_to(project)) for p in (project / "tests").glob("test_*.py")
                      if reach.search(p.read_text(encoding="utf-8"))}
                     | {"tests/test_tiny.py", "tests/test_length.py"})
    assert "tests/test_contract.py" in touched
    quick = _in(project, py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *touched,
                timeout=2400)  # minutes on an idle machine; a shared one takes longer
    assert quick.returncode == 0, quick.stdout[-3000:] + quick.stderr[-2000:]
    assert re.search(r"\d+ passed", quick.stdout)
    for name in ("tiny", "length"):
        collected = _in(project, py, "-m", "pytest", "-q", "--collect-only", "-p",
                        "no:cacheprovider", f"tests/test_{name}.py").stdout
        assert f"test_{name}.py" in collected, collected
    pages = _in(project, py, "-m", "pytest", "-q", "-m", "slow", "-n", "0", "-p",
                "no:cacheprovider", "tests/test_docs.py", "-k",
                "README or commands or timing or tiny or length", timeout=1800)
    assert pages.returncode == 0, pages.stdout[-3000:] + pages.stderr[-2000:]
    assert "length.md" in _in(project, py, "-m", "pytest", "-q", "-m", "slow",
                              "--collect-only", "-p", "no:cacheprovider", "tests/test_docs.py",
                              "-k", "length").stdout
