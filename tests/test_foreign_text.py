"""Foreign strings (a spec's text, a tampered results.json, a folder's name): never sent raw
to a terminal, never raw HTML in Markdown, never a code span or block closed from inside."""

from __future__ import annotations

import pytest
from attack import tampered

ESC = "\x1b]0;pwned\x07"  # sets the terminal's title
ERASE = "\x1b[1A\x1b[2K\x1b[32mall agree\x1b[0m"  # erases the line above and redraws it
HTML = "<!-- hidden -->"


def _raw_control(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 32 and c not in "\n") or 127 <= ord(c) < 160]



def _html_of(markdown: str) -> str:
    """The Markdown as GitHub renders it (CommonMark with raw HTML, tables)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)



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



def test_echoed_text_escapes_bidirectional_controls():
    from sdpa_cli.errors import one_line

    assert one_line("a\u202eb\u2066c\x1bd") == "a\\u202eb\\u2066c\\x1bd"
    assert one_line("÷√d ‖J‖_F") == "÷√d ‖J‖_F"  # ordinary non-ASCII text is left alone



@pytest.mark.parametrize("fmt", ["table", "markdown"])
@pytest.mark.parametrize("case, change", TAMPERED, ids=[c for c, _ in TAMPERED])
def test_compare_prints_no_escape_from_a_tampered_results_file(sdpa, workdir, written, case,
                                                               change, fmt):
    tampered(written, workdir, change)
    got = sdpa("compare", "R", "R2", "--format", fmt)
    assert "Traceback" not in got.err
    assert _raw_control(got.err) == [] and _raw_control(got.out) == []
    assert "\\x1b" in got.out  # shown, escaped, in the result (the summary or the document)



def test_compare_names_folders_and_files_escaped(sdpa, workdir, written):
    import shutil

    for side in ("B1", "B2"):
        shutil.copytree(written / "R", workdir / side / ("x" + ESC))
    shutil.copytree(written / "R", workdir / "B2" / "y")
    got = sdpa("compare", "B1", "B2")
    assert _raw_control(got.out) == [] and "x\\x1b]0;pwned\\x07" in got.out
    (workdir / "B2" / ("x" + ESC) / ("z" + ESC)).write_text("x", encoding="utf-8")
    got = sdpa("compare", "B1/x" + ESC, "B2/x" + ESC, "--exact")
    assert got.code == 1 and _raw_control(got.out) == []
    assert "only in B2/x\\x1b]0;pwned\\x07: z\\x1b]0;pwned\\x07" in got.out
    got = sdpa("compare", "B1/x" + ESC, "B2/x" + ESC, "--exact", "--format", "markdown")
    assert _raw_control(got.out) == [] and "z\\x1b]0;pwned\\x07" in got.out



def test_compares_json_escapes_the_controls_json_leaves_raw(sdpa, workdir, written):
    """json.dumps(ensure_ascii=False) writes C1 (0x9b opens an escape sequence on some
    terminals) and bidirectional overrides as they are."""
    import json

    tampered(written, workdir, lambda d: d.update(study="a\x9b31m\u202eb"))
    got = sdpa("compare", "R", "R2", "--format", "json", "-q")
    assert _raw_control(got.out) == [] and "\u202e" not in got.out
    assert "a\\u009b31m\\u202eb" in got.out
    assert json.loads(got.out)["runs"][0]["problems"] == ["different studies: variance and "
                                                          "a\x9b31m\u202eb"]



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
def test_index_md_rebuilt_from_a_tampered_run_folder_carries_no_html(sdpa, workdir, written,
                                                                    case, change):
    import json
    import shutil

    tampered(written, workdir, change)
    shutil.copytree(written / "B", workdir / "B")
    shutil.copytree(workdir / "R2", workdir / "B" / "foreign")
    # the batch report describes its members (sdpa-batch.json's experiments): a tampered
    # member is rebuilt into index.md by the next batch into the folder
    manifest = workdir / "B" / "sdpa-batch.json"
    doc = json.loads(manifest.read_text(encoding="utf-8"))
    doc["experiments"] = sorted([*doc.get("experiments", []), "foreign"])
    manifest.write_text(json.dumps(doc), encoding="utf-8")
    got = sdpa("run", str(written / "specs"), "--out", "B", "--no-plots", "-q")
    assert got.code == 0, got.err
    index = (workdir / "B" / "index.md").read_text(encoding="utf-8")
    assert "&lt;!-- hidden --&gt;" in index and "<!--" not in _html_of(index)



@pytest.mark.parametrize("case, change", [
    ("study", lambda d: d.update(study=HTML)),
    ("table-key", _rows(HTML, 1.0)),
])
def test_compare_markdown_carries_no_html_from_a_tampered_results_file(sdpa, workdir, written,
                                                                       case, change):
    tampered(written, workdir, change)
    got = sdpa("compare", "R", "R2", "--format", "markdown", "-q")
    assert "&lt;!-- hidden --&gt;" in got.out and "<!--" not in _html_of(got.out)



def test_the_markdown_listing_of_local_specs_carries_no_html(sdpa, workdir):
    folder = workdir / "experiments" / "variance"
    folder.mkdir(parents=True)
    (folder / "mine.yaml").write_text(f"study: variance\ndims: [3]\npairs: 10\n"
                                      f"description: '{HTML}'\n", encoding="utf-8")
    got = sdpa("variance", "--list", "--format", "markdown")
    assert got.code == 0 and "| mine | &lt;!-- hidden --&gt; |" in got.out
    assert "<!--" not in _html_of(got.out)



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

