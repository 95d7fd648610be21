"""sdpa from Python, given bad input: the API refuses what the flags refuse, with the same
line, raises only SpecError, and never loses a file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from attack import snapshot

import sdpa_cli as api
from sdpa_cli import registry

SWEEP = {"scores": [1, 0], "scales": [1]}
SWEEP_FLAGS = ("softmax-sweep", "--scores", "1", "0", "--scales", "1", "--no-plots", "-q")
BIG = 10**400  # 401 digits: the command line refuses it before it is parsed


def _file(work: Path) -> str:
    (work / "precious.txt").write_text("precious\n", encoding="utf-8")
    return "precious.txt"


def _link_to_file(work: Path) -> str:
    (work / "precious.txt").write_text("precious\n", encoding="utf-8")
    (work / "link").symlink_to("precious.txt")
    return "link"


def _loop(work: Path) -> str:
    (work / "a").symlink_to("b")
    (work / "b").symlink_to("a")
    return "a"


def _dangling(work: Path) -> str:
    (work / "dangling").symlink_to("nowhere")
    return "dangling"


def _users_folder(work: Path) -> str:
    (work / "mine").mkdir()
    (work / "mine" / "notes.txt").write_text("mine\n", encoding="utf-8")
    return "mine"


def _inside_a_file(work: Path) -> str:
    (work / "precious.txt").write_text("precious\n", encoding="utf-8")
    return "precious.txt/run"



# (id, setup → the folder named) for what --out refuses; the API must refuse the same, with
# the same line, and leave every byte where it was.
SAVE_REFUSED = [
    ("existing-file", _file),
    ("link-to-a-file", _link_to_file),
    ("symlink-loop", _loop),
    ("dangling-link", _dangling),
    ("a-users-folder", _users_folder),
    ("inside-a-file", _inside_a_file),
    ("the-current-folder", lambda work: "."),
    ("over-long-name", lambda work: "n" * 300),
    ("escape-in-name", lambda work: "run\x1b[2J"),
]



@pytest.mark.parametrize("case, setup", SAVE_REFUSED, ids=[c for c, _ in SAVE_REFUSED])
def test_save_refuses_what_out_refuses_with_its_line(sdpa, workdir: Path, case, setup):
    name = setup(workdir)
    before = snapshot(workdir)
    result = api.softmax_sweep(**SWEEP)
    with pytest.raises(api.SpecError) as e:
        result.save(name)
    assert snapshot(workdir) == before, "save() changed or removed a file"
    cli = sdpa(*SWEEP_FLAGS, "--out", name)
    assert cli.code == 2
    assert snapshot(workdir) == before
    line = cli.err.strip()
    assert line.startswith("--out: ") and "\n" not in line, line
    assert e.value.lines() == ["save: " + line.removeprefix("--out: ")]



@pytest.mark.parametrize("name, says", [
    ("run\x00x", "the control character 0x00"),
    ("run\ud800", "a lone surrogate (U+D800)"),
])
def test_save_refuses_names_the_command_line_cannot_even_pass(workdir: Path, name, says):
    with pytest.raises(api.SpecError) as e:
        api.softmax_sweep(**SWEEP).save(name)
    assert says in e.value.lines()[0] and e.value.lines()[0].startswith("save: ")
    assert os.listdir(workdir) == []



def test_save_of_a_number_is_a_spec_error(workdir: Path):
    with pytest.raises(api.SpecError, match="save: expected a path"):
        api.softmax_sweep(**SWEEP).save(5)  # type: ignore[arg-type]



def test_save_replaces_its_own_run_folder_and_nothing_else(workdir: Path):
    first = api.softmax_sweep(**SWEEP).save("run")
    again = api.softmax_sweep(scores=[2, 0], scales=[1]).save("run")
    assert first == again and (workdir / "run" / "results.json").is_file()
    assert '"scores": [\n      2' in (workdir / "run" / "results.json").read_text()



@pytest.mark.parametrize("kw, says", [
    ({"dpi": 5}, "dpi: must be a whole number from 30 to 1200, got 5"),
    ({"dpi": 2000}, "got 2000"), ({"dpi": 1.5}, "got 1.5"), ({"dpi": "x"}, "got 'x'"),
    ({"dpi": BIG}, "got a whole number of 401 digits"), ({"dpi": float("inf")}, "got inf"),
    ({"svg": "yes"}, "svg: must be True or False, got 'yes'"), ({"svg": 2}, "got 2"),
])
def test_save_checks_dpi_and_svg_as_the_flags_do(workdir: Path, kw, says):
    with pytest.raises(api.SpecError) as e:
        api.softmax_sweep(**SWEEP).save("run", **kw)
    assert says in e.value.lines()[0]
    assert os.listdir(workdir) == []



# --- the API's numbers, checked as the command line checks them -------------------------------


@pytest.mark.parametrize("name", registry.NAMES)
def test_every_study_refuses_a_whole_number_beyond_float_range_from_python(name):
    from sdpa_cli.framework.declaration import flag_shape

    study = registry.get(name)
    fn = getattr(api, name.replace("-", "_"))
    ints = [f for f, info in study.spec.model_fields.items()
            if f in study.flag_fields() and "int" in repr(info.annotation)]
    for field in [*ints, "seed"]:
        shape = flag_shape(study.spec.model_fields[field].annotation)
        with pytest.raises(api.SpecError) as e:
            fn(**{field: [BIG] if shape == "list" else BIG})
        where = f"{field}[0]" if shape == "list" else field
        assert e.value.lines() == [f"{where}: a whole number of 401 digits is beyond "
                                   "float64's range (about ±1.8e+308)"], field



@pytest.mark.parametrize("call, says", [
    (lambda: api.variance(dims=[3], pairs=10, workers=0), "workers: must be a whole number "
                                                          "from 1 to 64, got 0"),
    (lambda: api.variance(dims=[3], pairs=10, workers=65), "from 1 to 64, got 65"),
    (lambda: api.variance(dims=[3], pairs=10, workers=BIG), "got a whole number of 401 digits"),
    (lambda: api.variance(dims=[3], pairs=10, workers="2"), "from 1 to 64, got '2'"),
    (lambda: api.variance(dims=[3], pairs=10, workers=None), "from 1 to 64, got None"),
    (lambda: api.variance(dims=[3], pairs=10, workers=True), "from 1 to 64, got True"),
    (lambda: api.variance(dims=[3], pairs=10, workers=2.5), "from 1 to 64, got 2.5"),
    (lambda: api.run_spec(None), "path: expected a path (str or Path), got NoneType"),
    (lambda: api.run_spec("a\x00.yaml"), "path: the value holds the control character 0x00"),
    (lambda: api.variance(dims=[3], pairs=10, title="\x1b]0;pwned\x07"),
     "title: text holds the control character 0x1b"),
    (lambda: api.variance(dims=[3], pairs=10, title="a\ud800"), "title: text holds a lone "
                                                                "surrogate (U+D800)"),
    (lambda: api.variance(dims=[3], pairs=10, documented=[{"quantity": "x", "value": BIG}]),
     "documented[0].value: a whole number of 401 digits"),
])
def test_the_apis_run_settings_are_checked_as_the_flags_are(workdir, call, says):
    with pytest.raises(api.SpecError) as e:
        call()
    assert says in e.value.lines()[0]
    assert os.listdir(workdir) == []



def test_a_value_nested_past_any_spec_is_refused_without_recursion():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(api.SpecError, match="nests more than 32 levels"):
        api.variance(dims=deep)
    loop: list = []
    loop.append(loop)
    with pytest.raises(api.SpecError, match="holds more than 100000 values"):
        api.variance(dims=loop)



@pytest.mark.parametrize("kw, says", [
    ({"tolerance": float("nan")}, "tolerance: must be a finite number above 0, got nan"),
    ({"tolerance": float("inf")}, "got inf"), ({"tolerance": 0}, "got 0"),
    ({"tolerance": -1}, "got -1"), ({"tolerance": "x"}, "got 'x'"),
    ({"tolerance": None}, "got None"), ({"tolerance": BIG}, "401 digits"),
    ({"exact": "yes"}, "exact: must be True or False, got 'yes'"),
    ({"a": None}, "a: expected a path (str or Path), got NoneType"),
    ({"b": 5}, "b: expected a path (str or Path), got int"),
    ({"a": "run\x00"}, "a: the value holds the control character 0x00"),
    ({"a": "missing"}, "A: missing: no such folder"),
])
def test_compare_raises_only_spec_errors(workdir: Path, written: Path, kw, says):
    args = {"a": written / "R", "b": written / "R", **kw}
    with pytest.raises(api.SpecError) as e:
        api.compare(**args)
    assert says in e.value.lines()[0]



def test_compare_of_an_unreadable_results_file_is_a_spec_error(workdir: Path, written: Path):
    import shutil

    other = shutil.copytree(written / "R", workdir / "other")
    (other / "results.json").unlink()
    (other / "results.json").mkdir()  # reading it raises IsADirectoryError
    with pytest.raises(api.SpecError):
        api.compare(written / "R", other)



def test_to_frame_of_a_table_the_result_lacks_is_a_spec_error():
    pytest.importorskip("pandas")
    with pytest.raises(api.SpecError) as e:
        api.variance(dims=[3], pairs=10, seed=1).to_frame("nope")
    assert e.value.lines() == ["table: no table named 'nope'; this result has 'variance'"]
