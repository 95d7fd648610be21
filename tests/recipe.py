"""The recipe of sdpa_cli/docs/adding-a-study.md as files: read from the page's code blocks, and
written into a project folder or registered in this process (for tests that plant faults in it).
tests/data/length-study.md is a realistic study written from the recipe, in the same format."""

from __future__ import annotations

import importlib
import re
import shlex
import sys
from pathlib import Path

import contract
import pytest

import sdpa_cli
import sdpa_cli.studies
from sdpa_cli import registry
from sdpa_cli.framework import schema

PAGE = Path(sdpa_cli.__file__).parent / "docs" / "adding-a-study.md"
LENGTH = Path(__file__).parent / "data" / "length-study.md"
PACKAGE = "sdpa_cli/studies/"  # where a study's own files go
BLOCK = re.compile(r"```\w+\n(?:# file: |<!-- file: )(\S+?)(?: -->)?\n(.*?)```", re.S)
LINE = re.compile(r"```python\n# add to: (\S+)\n(.*?)```", re.S)
# the recipe's generate step: the shell block of its section "Generate what derives from it"
GENERATE = re.compile(r"^## \d+\. Generate what derives from it\n.*?```sh\n(.*?)```", re.S | re.M)


def files(page: Path = PAGE) -> dict[str, str]:
    """Every file the page gives whole: project-relative path → text."""
    return dict(BLOCK.findall(page.read_text(encoding="utf-8")))


def registry_line(page: Path = PAGE) -> tuple[str, str]:
    """(the file, the line) the page adds to the registry."""
    found = LINE.findall(page.read_text(encoding="utf-8"))
    assert len(found) == 1, found
    return found[0]


def generate_commands() -> list[list[str]]:
    """The commands of the recipe's generate step, as argv lists."""
    found = GENERATE.findall(PAGE.read_text(encoding="utf-8"))
    assert len(found) == 1, found
    return [shlex.split(line) for line in found[0].splitlines() if line.strip()]


def write_into(project: Path, page: Path = PAGE) -> None:
    """The page's files and its registry line written into a copy of the project (its schema
    and the pages' generated regions are written there by the recipe's generate step)."""
    for path, text in files(page).items():
        (project / path).parent.mkdir(parents=True, exist_ok=True)
        (project / path).write_text(text, encoding="utf-8")
    target, line = registry_line(page)
    registry_file = project / target
    text = registry_file.read_text(encoding="utf-8")
    assert text.endswith("}\n"), "the registry ends with the STUDIES dictionary"
    registry_file.write_text(text[:-2] + line + "}\n", encoding="utf-8")


def install(root: Path, monkeypatch: pytest.MonkeyPatch, name: str = "tiny",
            page: Path = PAGE) -> Path:
    """The page's package written under `root` and registered in this process as
    sdpa_cli.studies.<name> (its folder first on the studies' path, so it shadows a real one),
    with its schema written; returns the package's folder. Tests edit its files to plant
    faults: forget() makes the next registry.get read them again."""
    for path, text in files(page).items():
        if path.startswith(PACKAGE):
            target = root / path.removeprefix(PACKAGE)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    # Tests edit these files to plant faults and import them again within the same second:
    # a cached .pyc (keyed by the source's mtime in seconds and its size) would hide an edit
    # of the same length, so the planted package is never compiled to disk.
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    if str(root) not in sdpa_cli.studies.__path__:
        monkeypatch.setattr(sdpa_cli.studies, "__path__",
                            [str(root), *sdpa_cli.studies.__path__])
    _, line = registry_line(page)
    summary = re.search(r'"[^"]+": "([^"]+)"', line)
    assert summary is not None
    monkeypatch.setitem(sdpa_cli.studies.STUDIES, name, summary.group(1))
    forget(name)
    study = registry.get(name)
    schema.shipped(study).write_text(schema.text(study), encoding="utf-8")
    forget(name)
    return root / name


def forget(name: str = "tiny") -> None:
    """Drop every loaded trace of a planted study: its modules, its checked declaration and
    the contract's runs of it."""
    registry.get.cache_clear()
    for key in [k for k in contract._CACHE if k[0] == name]:
        del contract._CACHE[key]
    package = registry.package_of(name)
    for module in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[module]
    importlib.invalidate_caches()  # the path finders see files written since
