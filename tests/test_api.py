"""sdpa from Python: every registered study through the API, digit for digit the command's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import example_spec, study_examples

import sdpa_cli as sdpa
from sdpa_cli import registry

CASES = study_examples()


def _fields(name: str, i: int) -> dict:
    spec = example_spec(name, i)  # the example as the loader resolves it (files, seed)
    given = dict(registry.get(name).examples[i])
    files = {k: v for k, v in spec.model_dump(mode="json").items()
             if k in ("model", "text") and name == "inspect"}
    return {**given, **files, "seed": spec.seed}


@pytest.mark.parametrize("name, i", CASES)
def test_every_study_through_the_api_gives_the_commands_rows(name, i, sdpa, workdir):
    fields = _fields(name, i)
    spec_file = workdir / "example.yaml"
    spec_file.write_text(yaml.safe_dump({"study": name, **fields}), encoding="utf-8")
    r = sdpa(name, str(spec_file), "--format", "json", "--no-write")
    assert r.code == 0, r.err
    cli = r.json()
    got = getattr(sdpa_api(), name.replace("-", "_"))(**fields)
    assert [dict(row) for row in got.rows] == cli["rows"]
    assert [c.passed for c in got.checks] == [c["passed"] for c in cli["checks"]]
    assert list(got.found) == cli.get("findings", list(got.found))
    from_file = sdpa_api().run_spec(spec_file)
    assert [dict(row) for row in from_file.rows] == cli["rows"]


def sdpa_api():
    return sdpa  # the package itself: `import sdpa_cli as sdpa`


def test_a_bad_keyword_is_a_spec_error_with_the_commands_line():
    with pytest.raises(sdpa.SpecError) as e:
        sdpa.variance(dims=[3, 0], seed=1)
    assert e.value.lines() == ["dims[1]: must be ≥ 1, got 0"]
    with pytest.raises(ValueError, match="did you mean 'pairs'"):
        sdpa.variance(pairz=10)


def test_a_bad_spec_file_names_its_file_line_and_column(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("study: variance\ndims: [3, -1]\n", encoding="utf-8")
    with pytest.raises(sdpa.SpecError) as e:
        sdpa.run_spec(bad)
    assert e.value.lines()[0].startswith(f"{bad}:2:")


@pytest.mark.slow  # ≥ 1 s; moved out of the quick tier (its 75 s budget)
def test_save_writes_the_run_folder_the_command_writes(tmp_path, sdpa, workdir):
    result = sdpa_api().variance(dims=[3, 16], pairs=500, seed=9)
    saved = result.save(tmp_path / "api")
    r = sdpa("variance", "--dims", "3", "16", "--pairs", "500", "--seed", "9", "--out",
             str(tmp_path / "cli"), "-q")
    assert r.code == 0
    for name in ("results.json", "table.csv", "table.md", "spec.yaml", "histograms.png",
                 "variance_vs_dim.png", "params.yaml", "metrics.json"):
        assert (saved / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name
    assert json.loads((saved / "manifest.json").read_text())["status"] == "passed"


def test_figures_are_matplotlib_figures_and_the_html_repr_holds_table_found_and_checks():
    from matplotlib.figure import Figure

    result = sdpa.variance(dims=[3, 100], pairs=400, seed=2)
    figures = result.figures()
    assert len(figures) == 2 and all(isinstance(f, Figure) for f in figures)
    # in a notebook the list itself shows the figures inline, each as its PNG
    shown = figures._repr_html_()
    assert shown.count('<img src="data:image/png;base64,iVBORw0KGgo') == 2
    assert f'alt="{figures[0].axes[0].get_title()}"' in shown
    page = result._repr_html_()
    assert "<table>" in page and "found:" in page and "checks:" in page
    assert f"{result.rows[0]['variance']:.6g}" in page


def test_to_frame_is_the_rows_when_pandas_is_there():
    pd = pytest.importorskip("pandas")
    frame = sdpa.variance(dims=[3, 100], pairs=300, seed=4).to_frame()
    assert isinstance(frame, pd.DataFrame) and list(frame["dim"]) == [3, 3, 100, 100]


@pytest.mark.slow  # ≥ 1 s; moved out of the quick tier (its 75 s budget)
def test_compare_returns_the_document_with_its_verdict(tmp_path):
    a = sdpa.variance(dims=[3], pairs=300, seed=1).save(tmp_path / "a")
    b = sdpa.variance(dims=[3], pairs=300, seed=1).save(tmp_path / "b")
    doc = sdpa.compare(a, b, exact=True)
    assert doc["agree"] is True


def test_every_study_has_its_function_with_its_fields_as_the_docstring():
    for name in registry.NAMES:
        fn = getattr(sdpa, name.replace("-", "_"))
        study = registry.get(name)
        for field in study.flag_fields():
            assert f"    {field}: " in fn.__doc__, (name, field)


def test_the_api_never_prints(capsys):
    sdpa.variance(dims=[3], pairs=200, seed=3)
    assert capsys.readouterr() == ("", "")


def test_the_api_is_not_imported_by_the_command_line_start():
    assert Path(sdpa.__file__).name == "__init__.py"
