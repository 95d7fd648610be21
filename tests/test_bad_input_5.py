"""Bad-input corpus, round five (issue 38): the Python API never loses a file and checks its
numbers as the command line does; paths after list flags; what sdpa prints and writes from
foreign strings. Each case failed before its fix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_bad_input_2 import _snapshot

import sdpa_cli as api
from sdpa_cli import registry

SWEEP = {"scores": [1, 0], "scales": [1]}
SWEEP_FLAGS = ("softmax-sweep", "--scores", "1", "0", "--scales", "1", "--no-plots", "-q")


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
    before = _snapshot(workdir)
    result = api.softmax_sweep(**SWEEP)
    with pytest.raises(api.SpecError) as e:
        result.save(name)
    assert _snapshot(workdir) == before, "save() changed or removed a file"
    cli = sdpa(*SWEEP_FLAGS, "--out", name)
    assert cli.code == 2
    assert _snapshot(workdir) == before
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


def test_a_file_that_takes_the_name_during_the_run_is_never_swapped_away(tmp_path: Path):
    from sdpa_cli.errors import RunError
    from sdpa_cli.report.runfolder import RunFolder

    target = tmp_path / "run"
    folder = RunFolder(target)
    with folder as tmp:
        (tmp / "results.json").write_text("{}", encoding="utf-8")
        target.write_text("precious\n", encoding="utf-8")  # someone else's, mid-run
        with pytest.raises(RunError, match="exists and is not a folder"):
            folder.commit()
    assert target.read_text(encoding="utf-8") == "precious\n"
    assert sorted(os.listdir(tmp_path)) == ["run"]


# --- paths after list flags (options.gather_lists) --------------------------------------------

LISTS = {"--text", "--dims"}
VALUES = frozenset({"--out", "--seed"})


@pytest.mark.parametrize("argv, parsed", [
    (["--text", "docs/a.md"], ["--text", "docs/a.md"]),
    (["--text", "/abs/a.md", "--no-plots"], ["--text", "/abs/a.md", "--no-plots"]),
    (["m", "--text", "docs/a.md", "/abs/b.md"], ["m", "--text", "docs/a.md,/abs/b.md"]),
    (["--text", "a.md", "org/model"], ["--text", "a.md", "org/model"]),
    (["--text", "docs/a.md", "org/model"], ["--text", "docs/a.md", "org/model"]),
    (["--out", "o/x", "--text", "a/b.md", "c/d.yaml"], ["--out", "o/x", "--text", "a/b.md",
                                                        "c/d.yaml"]),
    (["--dims", "3", "100", "exp/s.yaml"], ["--dims", "3,100", "exp/s.yaml"]),
    (["--dims", "-1", "2", "-q"], ["--dims", "-1,2", "-q"]),
])
def test_a_list_flag_takes_a_path_as_its_value(argv, parsed):
    from sdpa_cli.cli.options import gather_lists

    assert gather_lists(argv, LISTS, VALUES) == parsed


@pytest.mark.parametrize("order", ["model-first", "model-last"])
def test_inspect_reads_texts_named_by_folder_and_absolute_paths(sdpa, workdir: Path, order):
    pytest.importorskip("safetensors")
    pytest.importorskip("tokenizers")
    import inspect_fixtures as fx

    folder = fx.bert(workdir / "m")
    fx.write_tokenizer(folder, "bert")
    (workdir / "docs").mkdir()
    (workdir / "docs" / "t.txt").write_text(fx.text(400), encoding="utf-8")
    absolute = str(workdir / "docs" / "t.txt")
    texts = ["--text", "docs/t.txt"] if order == "model-last" else \
        ["--text", "docs/t.txt", absolute]
    # a bare word after a list is one more value: a MODEL after --text has a folder part
    argv = [*texts, "./m"] if order == "model-last" else ["m", *texts]
    got = sdpa("inspect", *argv, "--seq-len", "8", "--sequences", "2", "--no-plots",
               "--no-write", "--format", "json")
    assert got.code == 0, got.err
    assert got.json()["spec"]["text"] == [str(Path(t)) for t in texts[1:]]


# --- the API's numbers, checked as the command line checks them -------------------------------

BIG = 10**400  # 401 digits: the command line refuses it before it is parsed


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
def test_compare_raises_only_spec_errors(workdir: Path, runs: Path, kw, says):
    args = {"a": runs / "R", "b": runs / "R", **kw}
    with pytest.raises(api.SpecError) as e:
        api.compare(**args)
    assert says in e.value.lines()[0]


def test_compare_of_an_unreadable_results_file_is_a_spec_error(workdir: Path, runs: Path):
    import shutil

    other = shutil.copytree(runs / "R", workdir / "other")
    (other / "results.json").unlink()
    (other / "results.json").mkdir()  # reading it raises IsADirectoryError
    with pytest.raises(api.SpecError):
        api.compare(runs / "R", other)


# --- cost estimates past float64 ----------------------------------------------------------------

HUGE = (10**300, 10**308, int(1.7e308))  # each within float64, so the command line takes it


# inspect's inputs and their bounds are issue 35's ground (its loader)
@pytest.mark.parametrize("name", [n for n in registry.NAMES if n != "inspect"])
def test_every_cost_estimate_survives_whole_numbers_beyond_float_range(name):
    """One field or two at a time set to a whole number near float64's largest: every product
    an estimate forms is beyond float64, and the spec is refused in one line (it raised
    OverflowError: int too large to convert to float)."""
    import itertools

    from sdpa_cli.errors import InputError
    from sdpa_cli.framework.declaration import flag_shape
    from sdpa_cli.runner import loader

    study = registry.get(name)
    ints = [(f, flag_shape(info.annotation)) for f, info in study.spec.model_fields.items()
            if f in study.flag_fields() and "int" in repr(info.annotation)]
    base = dict(study.examples[0])
    for big in HUGE:
        for combo in [*itertools.combinations(ints, 1), *itertools.combinations(ints, 2)]:
            fields = {f: [big] if shape == "list" else big for f, shape in combo}
            with pytest.raises(InputError) as e:
                loader.load(None, study=name, overrides={**base, **fields, "seed": 1})
            assert len(e.value.lines()) >= 1 and all("\n" not in x for x in e.value.lines())


# --- foreign strings: never sent raw to a terminal, never raw HTML in Markdown ---------------

ESC = "\x1b]0;pwned\x07"  # sets the terminal's title
ERASE = "\x1b[1A\x1b[2K\x1b[32mall agree\x1b[0m"  # erases the line above and redraws it
HTML = "<!-- hidden -->"
TINY = ("variance", "--dims", "3", "--pairs", "10", "--seed", "1", "--no-plots", "-q")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder R and a batch folder B (spec `one`) that sdpa wrote."""
    from sdpa_cli.cli.entry import run

    root = tmp_path_factory.mktemp("runs")
    assert run([*TINY, "--out", str(root / "R")]) == 0
    (root / "specs").mkdir()
    (root / "specs" / "one.yaml").write_text("study: variance\ndims: [3]\npairs: 10\nseed: 1\n",
                                             encoding="utf-8")
    assert run(["run", str(root / "specs"), "--out", str(root / "B"), "--no-plots", "-q"]) == 0
    return root


def _raw_control(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 32 and c not in "\n") or 127 <= ord(c) < 160]


def _html_of(markdown: str) -> str:
    """The Markdown as GitHub renders it (CommonMark with raw HTML, tables)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


def _tampered(runs: Path, work: Path, change) -> None:
    import json
    import shutil

    shutil.copytree(runs / "R", work / "R")
    shutil.copytree(runs / "R", work / "R2")
    path = work / "R2" / "results.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    change(doc)
    path.write_text(json.dumps(doc), encoding="utf-8")


def _rows(key: str, value: object):
    def change(doc: dict) -> None:
        for row in doc["rows"]:
            row[key] = value
    return change


TAMPERED = [
    ("study", lambda d: d.update(study=ESC)),
    ("table-key", _rows(ERASE, 1.0)),
    ("row-text", lambda d: d["rows"][0].update(scaling=ERASE)),
    ("spec-value", lambda d: d["spec"].update(title=ESC)),
    ("spec-key", lambda d: d["spec"].update({ESC: 1})),
    ("table-name", lambda d: d.setdefault("tables", {}).update({ESC: [{"a": 1}]})),
]


@pytest.mark.parametrize("fmt", ["table", "markdown"])
@pytest.mark.parametrize("case, change", TAMPERED, ids=[c for c, _ in TAMPERED])
def test_compare_prints_no_escape_from_a_tampered_results_file(sdpa, workdir, runs, case,
                                                               change, fmt):
    _tampered(runs, workdir, change)
    got = sdpa("compare", "R", "R2", "--format", fmt)
    assert "Traceback" not in got.err
    assert _raw_control(got.err) == [] and _raw_control(got.out) == []
    assert "\\x1b" in got.out  # shown, escaped, in the result (the summary or the document)


def test_compare_names_folders_and_files_escaped(sdpa, workdir, runs):
    import shutil

    for side in ("B1", "B2"):
        shutil.copytree(runs / "R", workdir / side / ("x" + ESC))
    shutil.copytree(runs / "R", workdir / "B2" / "y")
    got = sdpa("compare", "B1", "B2")
    assert _raw_control(got.out) == [] and "x\\x1b]0;pwned\\x07" in got.out
    (workdir / "B2" / ("x" + ESC) / ("z" + ESC)).write_text("x", encoding="utf-8")
    got = sdpa("compare", "B1/x" + ESC, "B2/x" + ESC, "--exact")
    assert got.code == 1 and _raw_control(got.out) == []
    assert "only in B2/x\\x1b]0;pwned\\x07: z\\x1b]0;pwned\\x07" in got.out
    got = sdpa("compare", "B1/x" + ESC, "B2/x" + ESC, "--exact", "--format", "markdown")
    assert _raw_control(got.out) == [] and "z\\x1b]0;pwned\\x07" in got.out


def test_a_title_that_looks_like_rich_markup_is_printed_as_written(sdpa, workdir):
    (workdir / "s.yaml").write_text('study: variance\ndims: [3]\npairs: 10\nseed: 1\n'
                                    'title: "[/x] and [link=http://evil]click[/link]"\n',
                                    encoding="utf-8")
    got = sdpa("variance", "s.yaml", "--no-plots", "--no-write")
    assert got.code == 0 and "internal error" not in got.err
    assert "[/x] and [link=http://evil]click[/link]" in got.out


def test_the_console_escapes_what_it_is_given_and_keeps_its_own_styles():
    import io

    from rich.text import Text

    from sdpa_cli.report.terminal import SafeConsole

    out = io.StringIO()
    con = SafeConsole(file=out, force_terminal=True, color_system="standard", width=80)
    con.print(Text("title " + ESC, style="bold"))
    text = out.getvalue()
    assert "\\x1b]0;pwned" in text and "\x1b]" not in text  # (rich drops the BEL)
    assert text.startswith("\x1b[1m")  # rich's own style still reaches the terminal


MD_FIELDS = ["title", "source", "description"]


@pytest.mark.parametrize("field", MD_FIELDS)
def test_table_md_and_format_markdown_carry_no_html_from_the_spec(sdpa, workdir, field):
    import json

    (workdir / "s.yaml").write_text(f"study: variance\ndims: [3]\npairs: 10\nseed: 1\n"
                                    f"{field}: {json.dumps(HTML)}\n", encoding="utf-8")
    got = sdpa("variance", "s.yaml", "--no-plots", "-q", "--format", "markdown", "--out", "O")
    assert got.code == 0
    for page in (got.out, (workdir / "O" / "table.md").read_text(encoding="utf-8")):
        assert "&lt;!-- hidden --&gt;" in page
        assert "<!--" not in _html_of(page)


@pytest.mark.parametrize("part", ["claim", "note", "where"])
def test_a_claims_words_reach_markdown_as_text(sdpa, workdir, part):
    import yaml

    claim = {"where": "x", "document": "000_0e5125495e9ebe01.txt", "claim": "c", "note": "n",
             "tests": [{"quantity": "variance", "row": {"dim": 3, "scaling": "none"},
                        "op": ">", "value": 0}]}
    claim[part] = HTML
    spec = {"study": "variance", "dims": [3], "pairs": 10, "seed": 1, "claims": [claim]}
    (workdir / "s.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    got = sdpa("run", "s.yaml", "--out", "O", "--no-plots", "-q")
    assert got.code == 0, got.err
    # index.md is a summary: it names each claim (and its verdict); where and note are in
    # the run folder's table.md
    for page in ("O/index.md", "O/s/table.md") if part == "claim" else ("O/s/table.md",):
        text = (workdir / page).read_text(encoding="utf-8")
        assert "&lt;!-- hidden --&gt;" in text and "<!--" not in _html_of(text), page


@pytest.mark.parametrize("case, change", [
    ("title", lambda d: d.update(title=HTML)),
    ("check-detail", lambda d: d["checks"][0].update(detail=HTML, passed=False)),
    ("finding", lambda d: d.update(findings=[HTML])),
])
def test_index_md_rebuilt_from_a_tampered_run_folder_carries_no_html(sdpa, workdir, runs,
                                                                    case, change):
    import json
    import shutil

    _tampered(runs, workdir, change)
    shutil.copytree(runs / "B", workdir / "B")
    shutil.copytree(workdir / "R2", workdir / "B" / "foreign")
    # the batch report describes its members (sdpa-batch.json's experiments): a tampered
    # member is rebuilt into index.md by the next batch into the folder
    manifest = workdir / "B" / "sdpa-batch.json"
    doc = json.loads(manifest.read_text(encoding="utf-8"))
    doc["experiments"] = sorted([*doc.get("experiments", []), "foreign"])
    manifest.write_text(json.dumps(doc), encoding="utf-8")
    got = sdpa("run", str(runs / "specs"), "--out", "B", "--no-plots", "-q")
    assert got.code == 0, got.err
    index = (workdir / "B" / "index.md").read_text(encoding="utf-8")
    assert "&lt;!-- hidden --&gt;" in index and "<!--" not in _html_of(index)


@pytest.mark.parametrize("case, change", [
    ("study", lambda d: d.update(study=HTML)),
    ("table-key", _rows(HTML, 1.0)),
])
def test_compare_markdown_carries_no_html_from_a_tampered_results_file(sdpa, workdir, runs,
                                                                       case, change):
    _tampered(runs, workdir, change)
    got = sdpa("compare", "R", "R2", "--format", "markdown", "-q")
    assert "&lt;!-- hidden --&gt;" in got.out and "<!--" not in _html_of(got.out)


def test_the_step_summary_of_bad_input_keeps_its_code_span_closed(sdpa, workdir, monkeypatch):
    summary = workdir / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    (workdir / "s.yaml").write_text("study: variance\ndims: [3]\n'x` <!-- a -->': 1\n",
                                    encoding="utf-8")
    got = sdpa("run", "s.yaml", "--out", "O")
    assert got.code == 2
    assert "<!--" not in _html_of(summary.read_text(encoding="utf-8"))


def test_md_code_and_md_block_cannot_be_closed_from_inside():
    from sdpa_cli.report.writers import md_block, md_code

    assert _html_of(md_code("a ` <!-- x --> ``` b")).count("<code>") == 1
    block = md_block(["```", "<!-- x -->", "````"])
    assert "<!--" not in _html_of("\n".join(block)) and block[0] == "`````text"


# --- last round's leftovers ------------------------------------------------------------------


def _remove_deep(path: Path) -> None:
    """Remove a folder tree of any depth, one folder open at a time (shutil.rmtree, which
    pytest's own clean-up of old temporary folders uses, recurses once per level and fails
    on 2000 of them, for every later session)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0)
    if not path.is_dir():
        return
    cur, names = os.open(path, flags), []
    while True:
        sub = None
        with os.scandir(cur) as entries:
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    sub = e.name
                    break
                os.unlink(e.name, dir_fd=cur)
        if sub is not None:
            below = os.open(sub, flags, dir_fd=cur)
            os.close(cur)
            cur, names = below, [*names, sub]
            continue
        if not names:
            os.close(cur)
            break
        parent = os.open("..", flags, dir_fd=cur)
        os.close(cur)
        os.rmdir(names.pop(), dir_fd=parent)
        cur = parent
    path.rmdir()


@pytest.fixture
def deep(workdir: Path):
    """'a/a/…/a', as many folders as PATH_MAX leaves room for below the test's folder (about
    2000; Python's recursion limit is 1000), removed after the test."""
    levels = (4096 - len(os.fsencode(workdir)) - 80) // 2
    assert levels > 1500
    yield "/".join(["a"] * levels)
    _remove_deep(workdir / "a")


def test_a_deep_run_folder_is_checked_and_made_without_recursion(sdpa, workdir):
    """The quick form of the 2000-level case below: 400 levels under a recursion limit that
    leaves 150 frames (Path.mkdir(parents=True) recursed once per level)."""
    import inspect
    import sys

    target = "/".join(["a"] * 400)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + 150)
    try:
        got = sdpa(*TINY, "--out", target)
    finally:
        sys.setrecursionlimit(limit)
    try:
        assert got.code == 0, got.err
        assert (workdir / target / "results.json").is_file()
    finally:
        _remove_deep(workdir / "a")


@pytest.mark.slow
def test_out_2000_levels_deep_is_made_without_recursion(sdpa, workdir, deep):
    got = sdpa(*TINY, "--out", deep, "--junit-xml", deep + "-j/r.xml")
    assert got.code == 0, got.err
    assert (workdir / deep / "results.json").is_file() and (workdir / (deep + "-j/r.xml")).is_file()


@pytest.mark.slow
def test_a_batch_2000_levels_deep_is_made_without_recursion(sdpa, workdir, deep):
    spec = workdir / "s.yaml"
    spec.write_text("study: variance\ndims: [3]\npairs: 10\nseed: 1\n", encoding="utf-8")
    got = sdpa("run", "s.yaml", "--out", deep + "-b", "--no-plots", "-q")
    assert got.code == 0, got.err
    assert (workdir / (deep + "-b") / "index.md").is_file()


@pytest.mark.parametrize("text, title", [
    ('"\\U0001F600 ok"', "\U0001F600 ok"),
    ('"\\ud83d\\ude00 ok"', "\U0001F600 ok"),  # a pair written as JSON writes an emoji
])
def test_an_emoji_written_as_escapes_is_that_emoji(sdpa, workdir, text, title):
    (workdir / "s.yaml").write_text(f"study: variance\ndims: [3]\npairs: 10\nseed: 1\n"
                                    f"title: {text}\n", encoding="utf-8")
    got = sdpa("variance", "s.yaml", "--no-plots", "-q", "--out", "O")
    assert got.code == 0, got.err
    assert f'"title": "{title}"' in (workdir / "O" / "results.json").read_text(encoding="utf-8")


@pytest.mark.parametrize("line, where", [
    ('title: "\\ud800"', "s.yaml:4:8: title: text holds a lone surrogate (U+D800)"),
    ('source: "a\\udcff"', "s.yaml:4:9: source: text holds a lone surrogate (U+DCFF)"),
    ('title: "\\ude00\\ud83d"', "s.yaml:4:8: title: text holds a lone surrogate (U+DE00)"),
    ('"\\ud800": 1', "s.yaml:4:1: a key holds a lone surrogate (U+D800)"),
])
def test_a_lone_surrogate_in_a_spec_is_one_line_not_an_internal_error(sdpa, workdir, line,
                                                                     where):
    (workdir / "s.yaml").write_text(f"study: variance\ndims: [3]\npairs: 10\n{line}\n",
                                    encoding="utf-8")
    for argv in (["variance", "s.yaml", "--no-plots", "-q"], ["run", "s.yaml", "--no-plots"]):
        got = sdpa(*argv)
        assert got.code == 2 and got.err.startswith(where), got.err
    assert not (workdir / "outputs").exists()


def test_junit_xml_through_a_link_never_writes_into_another_run(sdpa, workdir, runs):
    import shutil

    shutil.copytree(runs / "R", workdir / "other")
    before = _snapshot(workdir / "other")
    (workdir / "to-results").symlink_to("other/results.json")
    (workdir / "to-folder").symlink_to("other")
    for report in ("to-results", "to-folder/new.xml", "other/deeper/new.xml"):
        got = sdpa(*TINY, "--out", "mine", "--junit-xml", report)
        assert got.code == 2 and got.err.startswith("--junit-xml: "), got.err
        assert "is an sdpa run folder; write the report outside it" in got.err
    assert _snapshot(workdir / "other") == before and not (workdir / "mine").exists()


@pytest.mark.parametrize("factors, says", [
    ("[1, 5e-324, 0.577]", "a factor of 4.94e-324 is below 1e-150"),
    ("[1, 1e150, 0.577]", "(factor)² × variance can reach 5.2e+301"),
    ("[1e150, 1, 1]", "(factor)² × variance can reach 5.2e+301"),
    ("[1, 1e100, 0.577]", "(factor)² × variance can reach 5.2e+201"),
])
def test_scaling_arithmetic_factors_that_overflow_or_vanish_are_refused(sdpa, workdir,
                                                                        factors, says):
    (workdir / "w.yaml").write_text(
        "study: worked-example\nparts:\n  - name: s\n    kind: scaling-arithmetic\n"
        f"    dims: [1, 2, 3]\n    variances: [16.33, 17.33, 52.33]\n    factors: {factors}\n",
        encoding="utf-8")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # it ran, with RuntimeWarning: overflow
        got = sdpa("worked-example", "w.yaml", "--no-plots", "-q")
    assert got.code == 2 and got.err.startswith("w.yaml:7:14: parts[0].factors: "), got.err
    assert says in got.err


def test_a_batch_never_writes_into_a_run_folder(sdpa, workdir, runs):
    import shutil

    shutil.copytree(runs / "R", workdir / "R")
    before = _snapshot(workdir / "R")
    (workdir / "s.yaml").write_text("study: variance\ndims: [3]\npairs: 10\nseed: 1\n",
                                    encoding="utf-8")
    for argv, says in [
        (["run", "s.yaml", "--out", "R", "--no-plots", "-q"], "--out: R is an sdpa run folder"),
        (["run", "s.yaml", "--out", "R/sub", "--no-plots", "-q"], "--out: R/sub lies inside"),
        ([*TINY, "--out", "R/x"], "--out: R/x lies inside the sdpa run folder"),
        (["variance", "--all", "--out", "R", "--no-plots", "-q"], "output folder: R/"),
    ]:
        got = sdpa(*argv)
        assert got.code == 2 and got.err.startswith(says), got.err
        assert "sdpa run folder" in got.err
    assert _snapshot(workdir / "R") == before
    assert sdpa(*TINY, "--out", "R").code == 0  # replacing it whole is still fine


def test_a_deep_path_is_checked_in_steps_proportional_to_its_depth(monkeypatch, tmp_path):
    """environment.path_problem looked up NAME_MAX by walking up from every component: 2000
    folders cost 2 million stat calls (70 s) before the run even started; now two per level."""
    from sdpa_cli.io import environment

    calls = 0
    real = os.stat

    def counted(path, *args, **kw):
        nonlocal calls
        calls += 1
        return real(path, *args, **kw)

    monkeypatch.setattr(os, "stat", counted)  # Path.is_dir and os.path.isdir both call it
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a" / "a").mkdir(parents=True)
    for depth in (100, 1500):
        calls = 0
        assert environment.path_problem(Path("/".join(["a"] * depth))) is None
        assert calls <= 2 * depth + 4, (depth, calls)


# --- a full stdout -----------------------------------------------------------------------------


def _to_full_stdout(*args: str) -> tuple[int, str]:
    import subprocess
    import sys
    import tempfile

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "sdpa_cli", *args], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=120,
                           cwd=tempfile.gettempdir())  # not the checkout: the sdpa installed
    return p.returncode, p.stderr


@pytest.mark.parametrize("args", [[], ["--version"]], ids=str)  # the rest: slow tier
def test_help_and_version_into_a_full_stdout_are_one_line(args):
    code, err = _to_full_stdout(*args)
    assert code == 1 and err == "sdpa: cannot write to stdout: No space left on device\n", err


@pytest.mark.slow
def test_every_command_and_topic_into_a_full_stdout_is_one_line(tmp_path):
    """Every command's --help, the tool commands' documents, every topic page: one line and
    exit 1 when stdout is full (help and --version raised an internal error)."""
    from sdpa_cli.io import topics

    commands = [*registry.NAMES, "run", "compare", "validate", "help"]
    cases = [["--help"], *([c, "--help"] for c in commands),
             *(["help", t] for t in topics.pages()),
             ["variance", "--list"], ["variance", "--dims", "3", "--pairs", "10", "--no-write",
                                      "--no-plots", "--format", "json"]]
    for args in cases:
        code, err = _to_full_stdout(*args)
        assert code == 1 and len(err.strip().splitlines()) == 1, (args, err)
        assert "cannot write" in err and "internal error" not in err, (args, err)


# --- numeric extremes that would make measurements exactly 0 -----------------------------------


@pytest.mark.parametrize("init_std", ["1e-160", "1e-300", "5e-324"])
def test_depth_refuses_a_weight_scale_float64_rounds_to_zero_as_gradients_does(sdpa, workdir,
                                                                              init_std):
    """depth's gradients were exactly 0 from init_std 1e-160, and 1e-300 with a normalising
    rule ended in `internal error: ValueError`."""
    for study in ("depth", "gradients"):
        got = sdpa(study, "--init-std", init_std, "--no-plots", "-q", "--no-write")
        assert got.code == 2, got.err
        assert got.err.startswith("--init-std: init_std: init_std ") and \
            "is below 1e-35" in got.err and "give init_std ≥ 1e-35" in got.err


def test_variance_below_float64s_smallest_is_null_never_a_false_zero(workdir):
    """At σ = 1e-300 the mean, min and max of q·k (about 1e-600) were reported as exactly 0;
    at σ = 1e-160 the histograms divided by bins 1e-320 wide (RuntimeWarning: overflow)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tiny = api.variance(dims=[3], pairs=500, std=1e-300, seed=1)
        api.variance(dims=[3, 100], pairs=500, std=1e-160, seed=1).save("run")
    row = tiny.rows[0]
    assert row["mean"] is None and row["min"] is None and row["max"] is None
    assert row["variance"] is None and "beyond float64" in row["note"]
    assert row["z"] == api.variance(dims=[3], pairs=500, std=1.0, seed=1).rows[0]["z"]


# --- refusals whole -----------------------------------------------------------------------------


def test_a_results_file_with_a_5000_digit_number_is_refused_in_a_whole_sentence(sdpa, workdir,
                                                                              runs):
    """The line quoted Python's message cut at 80 characters ("…value has 5000 di")."""
    _tampered(runs, workdir, lambda d: None)
    path = workdir / "R2" / "results.json"
    path.write_text(path.read_text(encoding="utf-8").replace('"pairs": 10', '"pairs": '
                                                             + "1" * 5000, 1), encoding="utf-8")
    got = sdpa("compare", "R", "R2")
    assert got.code == 2
    assert got.err == ("R2/results.json: results.json cannot be read as JSON (it holds a whole "
                       "number of more than 4300 digits); not sdpa's: remove or replace it\n")


def test_a_quoted_library_message_keeps_its_end():
    from sdpa_cli.errors import whole

    long = "first words " + "x " * 300 + "and what to do last"
    shown = whole(long)
    assert shown.startswith("first words") and "and what to do last (" in shown
    assert len(shown) < 300 and whole("short one") == "short one"


# --- cost estimates within the contract's factor -------------------------------------------------


def _attention_part(n: int, d: int) -> dict:
    emb = [[1.0 + (i * d + j) % 3 for j in range(d)] for i in range(n)]
    w = [[1.0 if i == j else 0.5 for j in range(d)] for i in range(d)]
    return {"name": "a", "kind": "attention", "tokens": [f"t{i}" for i in range(n)],
            "embeddings": emb, "w_q": w, "w_k": w, "w_v": w}


@pytest.mark.parametrize("n, d", [(21, 1), (18, 2), (16, 4), (8, 8), (3, 3)])
def test_a_worked_examples_estimate_counts_the_matrices_it_computes(n, d):
    """The estimate counted the numbers given: 64 tokens of width 1 wrote 16716 rows (5 MB)
    against 71 estimated, and 4096 tokens (within the 4096 entries a matrix may hold) would
    have written n² rows for each of its n × n steps."""
    from contract import COST_FACTOR

    from sdpa_cli.report import writers

    got = api.worked_example(parts=[_attention_part(n, d)])
    cost = registry.get("worked-example").cost(got.spec)
    rows = len(got.rows)
    written = len(writers.results_json(got._result)) + len(writers.table_csv(got._result))
    assert rows <= cost.rows * COST_FACTOR and cost.rows <= rows * COST_FACTOR
    assert written <= cost.output * COST_FACTOR


@pytest.mark.parametrize("n", [64, 128, 4096])
def test_a_worked_example_too_large_to_write_is_refused_before_it_runs(n):
    with pytest.raises(api.SpecError) as e:
        api.worked_example(parts=[_attention_part(n, 1)])
    assert e.value.lines()[0].startswith("parts: would make a table of ")
    assert "give fewer tokens" in e.value.lines()[0]


def test_the_markdown_listing_of_local_specs_carries_no_html(sdpa, workdir):
    folder = workdir / "experiments" / "variance"
    folder.mkdir(parents=True)
    (folder / "mine.yaml").write_text(f"study: variance\ndims: [3]\npairs: 10\n"
                                      f"description: '{HTML}'\n", encoding="utf-8")
    got = sdpa("variance", "--list", "--format", "markdown")
    assert got.code == 0 and "| mine | &lt;!-- hidden --&gt; |" in got.out
    assert "<!--" not in _html_of(got.out)


def test_to_frame_of_a_table_the_result_lacks_is_a_spec_error():
    pytest.importorskip("pandas")
    with pytest.raises(api.SpecError) as e:
        api.variance(dims=[3], pairs=10, seed=1).to_frame("nope")
    assert e.value.lines() == ["table: no table named 'nope'; this result has 'variance'"]


def test_compares_json_escapes_the_controls_json_leaves_raw(sdpa, workdir, runs):
    """json.dumps(ensure_ascii=False) writes C1 (0x9b opens an escape sequence on some
    terminals) and bidirectional overrides as they are."""
    import json

    _tampered(runs, workdir, lambda d: d.update(study="a\x9b31m\u202eb"))
    got = sdpa("compare", "R", "R2", "--format", "json", "-q")
    assert _raw_control(got.out) == [] and "\u202e" not in got.out
    assert "a\\u009b31m\\u202eb" in got.out
    assert json.loads(got.out)["runs"][0]["problems"] == ["different studies: variance and "
                                                          "a\x9b31m\u202eb"]
