"""The recipe of sdpa_cli/docs/adding-a-study.md, followed word for word: a study package is
written from the page's code blocks, registered with one line, and run by every route."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

import sdpa_cli
import sdpa_cli.studies
from sdpa_cli import registry
from sdpa_cli.entry import run as sdpa_main
from sdpa_cli.framework.declaration import DeclarationError

PAGE = Path(sdpa_cli.__file__).parent / "docs" / "adding-a-study.md"


def _files() -> dict[str, str]:
    blocks = re.findall(r"```python\n# file: (\S+)\n(.*?)```", PAGE.read_text(), re.S)
    return dict(blocks)


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """The page's package in a temporary folder, registered as sdpa_cli.studies.tiny."""
    root = tmp_path / "pkgs"
    for name, text in _files().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    monkeypatch.setattr(sdpa_cli.studies, "__path__", [*sdpa_cli.studies.__path__, str(root)])
    # the one line the page asks for
    monkeypatch.setitem(sdpa_cli.studies.STUDIES, "tiny", "Draw normal numbers; check their mean.")
    _forget()
    yield root
    _forget()


def _forget() -> None:
    registry.get.cache_clear()
    for name in [m for m in sys.modules if m.startswith("sdpa_cli.studies.tiny")]:
        del sys.modules[name]


def test_the_page_gives_every_file_of_the_package():
    assert set(_files()) == {"tiny/__init__.py", "tiny/spec.py", "tiny/run.py", "tiny/figures.py"}


def test_the_study_runs_from_its_command_a_batch_and_the_report(tiny, tmp_path, monkeypatch,
                                                                  capsys):
    monkeypatch.chdir(tmp_path)
    assert sdpa_main(["tiny", "--draws", "500", "--seed", "3", "--out", "one", "-q"]) == 0
    doc = json.loads((tmp_path / "one" / "results.json").read_text())
    assert doc["study"] == "tiny" and doc["rows"][0]["draws"] == 500
    assert (tmp_path / "one" / "draws.png").is_file()
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "t.yaml").write_text("study: tiny\ndraws: 300\nseed: 5\n", encoding="utf-8")
    assert sdpa_main(["run", str(specs), "--out", "batch", "-q", "--check"]) == 0
    html = (tmp_path / "batch" / "report.html").read_text()
    assert "tiny" in html and (tmp_path / "batch" / "t" / "results.json").is_file()
    assert sdpa_main(["tiny", "--help"]) == 0
    assert "Numbers to draw (default 1000)." in capsys.readouterr().out


@pytest.mark.parametrize("mistake, field", [
    ('figures={"tiny.draws": "figures:draw_draw"}', "figures['tiny.draws']"),
    ('figures={"tiny.draws": "figure:draw_draws"}', "figures['tiny.draws']"),
    ('examples=({"drawz": 200},)', "examples[0]"),
    ('examples=({"draws": 5},)', "examples[0]"),
    ('examples=()', "examples"),
    ('flags={"draw": Flag("N")}', "flags.draw"),
    ('topic="no-such-page"', "topic"),
])
def test_a_mistake_in_the_declaration_is_an_error_at_registration(tiny, mistake, field):
    init = tiny / "tiny" / "__init__.py"
    text = init.read_text()
    key = mistake.split("=", 1)[0]
    if key in ("flags", "topic"):  # the page gives none: add one that names nothing real
        text = text.replace("import Study", "import Flag, Study")
        text = text.replace("    usage=", f"    {mistake},\n    usage=")
    else:
        text, n = re.subn(rf"    {key}=[^\n]*\n", f"    {mistake},\n", text)
        assert n == 1
    init.write_text(text)
    with pytest.raises(DeclarationError) as e:
        registry.get("tiny")
    assert e.value.study == "tiny" and e.value.field == field, str(e.value)


@pytest.mark.parametrize("edit, field", [
    (('study: Literal["tiny"] = "tiny"', 'study: Literal["tiny2"] = "tiny2"'), "spec.study"),
    (("    se_tolerance: SeTolerance = 4.0\n", ""), "spec.se_tolerance"),
    (('description="Numbers to draw (default 1000).")', ")"), "spec.draws"),
])
def test_a_spec_that_contradicts_its_declaration_is_an_error_at_registration(tiny, edit, field):
    spec = tiny / "tiny" / "spec.py"
    old, new = edit
    assert old in spec.read_text()
    spec.write_text(spec.read_text().replace(old, new))
    with pytest.raises(DeclarationError) as e:
        registry.get("tiny")
    assert e.value.field == field, str(e.value)
