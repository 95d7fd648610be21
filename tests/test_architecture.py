"""The package's shape, read from its source: layers, import cycles and late imports."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import sdpa_cli

ROOT = Path(sdpa_cli.__file__).parent

# The only imports of sdpa's own modules inside a function, each for a reason said beside it.
LATE = {
    ("sdpa_cli.cli.entry", "sdpa_cli.report.ci"),  # a bad spec's CI report: off the start-up path
    ("sdpa_cli.report.figures", "sdpa_cli.framework.figure_style"),  # loads matplotlib
}
# Modules imported by name at run time (importlib), each for a reason said beside it.
BY_NAME = {
    "sdpa_cli/cli/group.py": 1,  # a command's module, only when that command runs
    "sdpa_cli/registry.py": 1,  # a study package, by its registry name
    # a figure module (matplotlib), only to draw; a study's run module, for the run and
    # documented_problem its declaration leaves to convention
    "sdpa_cli/framework/declaration.py": 2,
    "sdpa_cli/__init__.py": 1,  # the Python API, only when a program uses it
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()

# The package's root: the program's entry for `python -m`, the Python API, and what every
# layer shares (errors; process: the Ctrl-C and stdio guards, installed first; registry: the
# one door to the study packages, for the runner, the report, the CLI and the API); and
# fetch, the one program that downloads (`python -m sdpa_cli.fetch MODEL`, standard library
# and pip only: no layer imports it).
ROOT_MODULES = {"__init__", "__main__", "api", "errors", "fetch", "process", "registry"}


def test_nothing_imports_the_fetcher() -> None:
    """sdpa never downloads: the fetcher is a program of its own, run by name."""
    assert [name for name, imports in graph().items()
            for m, _ in imports if m == "sdpa_cli.fetch"] == []

# Numerics that one study uses, kept in that study's package (architecture.md says which
# stayed shared and why); the numerics rules below hold for them too.
STUDY_NUMERICS = (
    "sdpa_cli.studies.variance.engine",
    "sdpa_cli.studies.gradients.grad_trials",
    "sdpa_cli.studies.jacobian.refine",
    "sdpa_cli.studies.train.recall",
    "sdpa_cli.studies.train.recall_depth",
    "sdpa_cli.studies.worked_example.attention",
    "sdpa_cli.studies.inspect.models",
    "sdpa_cli.studies.saturation.additive",
    "sdpa_cli.studies.saturation.keys",
    "sdpa_cli.studies.saturation.rule_theory",
    "sdpa_cli.studies.saturation.score_rows",
    "sdpa_cli.studies.saturation.slopes",
)
# What numerics never import: files, terminals, the command line, plots, specs.
NOT_NUMERICS = {"os", "sys", "io", "pathlib", "shutil", "tempfile", "json", "csv", "pickle",
                "subprocess", "logging", "click", "rich", "matplotlib", "yaml", "pydantic"}


def _is_study_numerics(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in STUDY_NUMERICS)


def _libraries(path: Path) -> set[str]:
    """The top-level names of every library a module imports (sdpa's own aside)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out - {"sdpa_cli"}


def _imports(name: str, path: Path) -> list[tuple[str, bool]]:
    """(imported sdpa module, inside a function?) for every import statement of a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    late = {id(sub) for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            for sub in ast.walk(node) if isinstance(sub, ast.Import | ast.ImportFrom)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.startswith("sdpa_cli"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.append((sub if sub in MODULES else node.module, id(node) in late))
        elif isinstance(node, ast.Import):
            found += [(a.name, id(node) in late) for a in node.names
                      if a.name.startswith("sdpa_cli")]
    return [(m, is_late) for m, is_late in found if m != name]


@functools.cache
def graph() -> dict[str, list[tuple[str, bool]]]:
    """Every module's imports, read on first use, not while pytest collects (about 2 s for
    each process that collects: each worker of each tier)."""
    return {name: _imports(name, path) for name, path in MODULES.items()}


def test_imports_inside_functions_are_the_listed_few():
    late = {(name, m) for name, edges in graph().items() for m, is_late in edges if is_late}
    assert late == LATE


def test_modules_imported_by_name_are_the_listed_few():
    counted = {str(p.relative_to(ROOT.parent)): p.read_text().count("import_module(")
               for p in MODULES.values()}
    assert {k: v for k, v in counted.items() if v} == BY_NAME


def test_no_import_cycle_lazy_imports_included():
    edges = {name: {m for m, _ in imports if m in MODULES} for name, imports in graph().items()}
    # a package imports its own submodules freely (re-exports); a cycle through anything
    # else is a real one
    seen: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        seen[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if nxt.startswith(node + "."):
                continue
            if seen.get(nxt) == 1:
                cycle = [*stack[stack.index(nxt):], nxt]
                raise AssertionError("import cycle: " + " → ".join(cycle))
            if nxt not in seen:
                visit(nxt)
        stack.pop()
        seen[node] = 2

    for name in sorted(edges):
        if name not in seen:
            visit(name)


def _reaches(src_prefix: str, forbidden: tuple[str, ...]) -> list[str]:
    return [f"{name} imports {m}" for name, imports in graph().items()
            if name == src_prefix or name.startswith(src_prefix + ".")
            for m, _ in imports if m.startswith(forbidden)]


def test_numerics_imports_nothing_above_it():
    assert _reaches("sdpa_cli.numerics", ("sdpa_cli.",)) == [
        x for x in _reaches("sdpa_cli.numerics", ("sdpa_cli.",))
        if x.split(" imports ")[1].startswith("sdpa_cli.numerics")]


def test_a_studys_own_numerics_keep_the_numerics_rule():
    """Numerics that one study uses live in its package (architecture.md lists them); they
    import nothing of sdpa but numerics, shared or the study's own."""
    assert [m for m in STUDY_NUMERICS if m not in MODULES] == []
    problems = [f"{name} imports {m}" for name, imports in graph().items()
                if _is_study_numerics(name) for m, _ in imports
                if not m.startswith("sdpa_cli.numerics") and not _is_study_numerics(m)]
    assert problems == []


def test_numerics_touch_no_files_terminals_or_plots():
    """Pure NumPy: no file, terminal, command-line, plotting or spec library, anywhere in the
    shared numerics or in a study's own."""
    found = [f"{name} imports {lib}" for name, path in MODULES.items()
             if name.startswith("sdpa_cli.numerics") or _is_study_numerics(name)
             for lib in _libraries(path) if lib in NOT_NUMERICS]
    assert found == []


def test_io_imports_nothing_above_it():
    """io/ is under everything that reads or writes: it knows errors and itself, and the
    studies' folder (topics finds a study's page in it: the registry's names, no study)."""
    allowed = ("sdpa_cli.errors", "sdpa_cli.io.")
    assert [x for x in _reaches("sdpa_cli.io", ("sdpa_cli.",))
            if not x.split(" imports ")[1].startswith(allowed)
            and x != "sdpa_cli.io.topics imports sdpa_cli.studies"] == []


def test_framework_and_specs_know_no_study_and_no_runner():
    above = ("sdpa_cli.studies", "sdpa_cli.registry", "sdpa_cli.runner", "sdpa_cli.cli",
             "sdpa_cli.report", "sdpa_cli.api")
    assert _reaches("sdpa_cli.framework", above) == []
    assert _reaches("sdpa_cli.spec", above) == []


def test_studies_know_no_runner_and_no_report():
    above = ("sdpa_cli.registry", "sdpa_cli.runner", "sdpa_cli.cli", "sdpa_cli.report",
             "sdpa_cli.api")
    assert _reaches("sdpa_cli.studies", above) == []


def test_report_knows_no_runner_and_no_command_line():
    """The report renders what the runner hands it; it reads a study's declaration through
    the registry (eta's rates, report.html's topic links), never the runner."""
    assert _reaches("sdpa_cli.report", ("sdpa_cli.runner", "sdpa_cli.cli", "sdpa_cli.api")) == []


def test_runner_and_api_know_no_command_line():
    """The runner and the Python API know no click: the command line is a client of both."""
    assert _reaches("sdpa_cli.runner", ("sdpa_cli.cli", "sdpa_cli.api")) == []
    assert _reaches("sdpa_cli.api", ("sdpa_cli.cli",)) == []


def test_the_root_holds_only_what_every_layer_shares():
    """The rooms show the layers: a new module goes into one (architecture.md's map)."""
    assert {p.stem for p in ROOT.glob("*.py")} == ROOT_MODULES


def test_a_study_package_imports_no_other_study():
    problems = []
    for name, imports in graph().items():
        parts = name.split(".")
        if parts[:2] != ["sdpa_cli", "studies"] or len(parts) < 3:
            continue
        own = parts[2]
        for m, _ in imports:
            other = m.split(".")
            # the shared score-source package serves softmax-sweep and jacobian
            if other[:2] == ["sdpa_cli", "studies"] and len(other) > 2 and \
                    other[2] not in (own, "saturation"):
                problems.append(f"{name} imports {m}")
    assert problems == []


def test_slow_marks_are_where_the_tests_are() -> None:
    """A test's tier is read beside it: no hook re-marks tests by name from elsewhere."""
    for path in sorted(Path(__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text())
        calls = [n for n in ast.walk(tree)
                 if isinstance(n, ast.Attribute) and n.attr == "add_marker"]
        assert calls == [], path.name


def test_no_test_module_is_named_by_round() -> None:
    """Tests live in modules named by the surface they test: a new case joins its subject's
    module, never a numbered sequel (test_x_2.py)."""
    import re

    rounds = [p.name for p in Path(__file__).parent.glob("test_*.py")
              if re.search(r"_\d+\.py$", p.name)]
    assert rounds == []
