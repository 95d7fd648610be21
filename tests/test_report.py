"""The batch report: documents' order, anchors, folded tables, audit summary, provenance, and an
index that always describes the run folders actually present."""

from __future__ import annotations

import json
import re
import subprocess
from html import escape as _e
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from conftest import write_spec

from sdpa_cli import report
from sdpa_cli.framework.documents import DOCUMENTS, place
from sdpa_cli.framework.result import AuditEntry, Check, Column, Figure, Panel, Result, Table
from sdpa_cli.report import batch as batch_report
from sdpa_cli.report import collect, writers
from sdpa_cli.report.formatting import audit_number, significant_digits

DOC0, DOC1, DOC4 = (d.file for d in (DOCUMENTS[0], DOCUMENTS[1], DOCUMENTS[4]))
# (name, source): names sort against the documents' order, so name order cannot pass.
PLACED = [
    ("a-late", f"{DOC4}, IV. Mathematical Justification for Scaling by 1/√d_k"),
    ("b-middle", f"{DOC1}, The Softmax Saturation Problem, Numerical Example"),
    ("c-early-second", f"{DOC0}, Step-by-Step Matrix Calculation Example"),
    ("d-early-first", f"{DOC0}, What is d_k? Understanding the Dimension"),
    ("e-nowhere", ""),
]


def _audit(i: int, status: str, accepted: str | None = None) -> AuditEntry:
    return AuditEntry(source=f"line {i}", quantity=f"q{i}", documented=1.0,
                      computed=1.0 if status == "match" else 1.23456789, status=status,
                      printed="1.0", tolerance=0.05, basis="last digit", accepted=accepted)


def _result(name: str, source: str, *, rows: int = 3, audit: tuple[AuditEntry, ...] = (),
            panels: tuple[Panel, ...] = ()) -> Result:
    columns = (Column("d", "d", "int"), Column("v", "variance"), Column("s", "scaling", "text"))
    table = Table("main", f"{name} table", columns,
                  tuple({"d": i + 1, "v": 0.5 * i, "s": "sqrt"} for i in range(rows)))
    return Result(study="variance", name=name, title=f"Title of {name}", source=source,
                  description=f"What {name} measures.",
                  spec={"study": "variance", "name": name, "seed": 7},
                  table=table, checks=(Check("c1", True, "ok"),), audit=audit,
                  theory=("Var(q·k) = d",), findings=("grows like d",), expect=("grows",),
                  notes=("a note",), panels=panels,
                  figures=(Figure("fig", "variance.vs_dim", "A figure", {"x": [1]},
                                  caption="Look at the slope."),))


def _write(root: Path, result: Result) -> None:
    settings = report.Settings(root=root, plots=False)
    report.write_run(result, settings, target=root / result.name, argv=["test"], started=0.0)


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.stack: list[str] = []
        self.in_details: list[str] = []  # h4 or summary texts seen inside <details>
        self.text = ""

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self.stack.append(tag)

    def handle_endtag(self, tag):
        while self.stack and self.stack.pop() != tag:
            pass

    def handle_data(self, data):
        self.text += data
        if "summary" in self.stack:
            self.in_details.append(data)


def _page(root: Path) -> _Page:
    page = _Page()
    page.feed((root / "report.html").read_text(encoding="utf-8"))
    return page


@pytest.fixture
def placed(tmp_path: Path) -> Path:
    root = tmp_path / "batch"
    for name, source in PLACED:
        _write(root, _result(name, source))
    batch_report.write((), root)
    return root


def test_sections_follow_the_documents_order(placed: Path):
    ids = [a["id"] for t, a in _page(placed).tags if t == "section"]
    expected = sorted(PLACED, key=lambda p: (*place(p[1]), p[0]))
    assert ids == [f"x-{n}" for n, _ in expected]
    assert ids[:2] == ["x-d-early-first", "x-c-early-second"]  # not name order
    assert ids[-1] == "x-e-nowhere"  # no document: last
    headings = [a["id"] for t, a in _page(placed).tags if t == "h2" and "id" in a]
    assert [h for h in headings if h.startswith("doc-")] == ["doc-0", "doc-1", "doc-4",
                                                              "doc-other"]
    text = (placed / "report.html").read_text(encoding="utf-8")
    for doc in (DOCUMENTS[0], DOCUMENTS[1], DOCUMENTS[4]):
        assert text.count(_e(doc.label)) >= 2  # contents and heading: as every table names it
    index = (placed / "index.md").read_text(encoding="utf-8")
    assert [index.index(f'<a id="x-{n}"></a>') for n, _ in expected] == sorted(
        index.index(f'<a id="x-{n}"></a>') for n, _ in expected)


def test_every_in_page_link_resolves_and_each_section_links_back(placed: Path):
    page = _page(placed)
    ids = {a["id"] for _, a in page.tags if "id" in a}
    every = [a["href"] for t, a in page.tags if t == "a" and "href" in a]
    links = [h for h in every if h.startswith("#")]
    assert links and all(h[1:] in ids for h in links)
    # the rest: a run folder's files beside the page, or a topic page shipped with sdpa
    for h in every:
        if h.startswith("file://"):
            assert Path(unquote(urlparse(h).path)).is_file(), h
        elif not h.startswith("#"):
            assert "://" not in h and (placed / unquote(h)).is_file(), h
    assert "top" in ids
    for name, _ in PLACED:
        assert f"#x-{name}" in links  # the contents name every experiment
    assert links.count("#top") == len(PLACED)  # one way back per section
    index = (placed / "index.md").read_text(encoding="utf-8")
    md_ids = set(re.findall(r'<a id="([^"]+)"></a>', index))
    md_links = re.findall(r"\]\(#([^)]+)\)", index)
    assert md_links and set(md_links) <= md_ids


def test_tables_over_forty_rows_are_collapsed_without_scripts(tmp_path: Path):
    root = tmp_path / "batch"
    _write(root, _result("long", "", rows=41, audit=tuple(_audit(i, "match") for i in range(45))))
    _write(root, _result("short", "", rows=40))
    batch_report.write((), root)
    page = _page(root)
    summaries = " ".join(page.in_details)
    assert "long table (41 rows" in summaries
    assert "(0 of 45 printed numbers differ)" in summaries
    assert "short table" not in summaries
    assert all(t != "script" for t, _ in page.tags)
    index = (root / "index.md").read_text(encoding="utf-8")  # a summary: tables stay in
    assert "long table" not in index and "](long/table.md)" in index  # the run folder


def test_audit_summary_counts_equal_the_audit_entries(tmp_path: Path):
    root = tmp_path / "batch"
    one = (_audit(1, "match"), _audit(2, "mismatch", accepted="the document rounds"),
           _audit(3, "mismatch"))
    two = (_audit(4, "match"), _audit(5, "match"), _audit(6, "mismatch", accepted="a typo"))
    _write(root, _result("one", f"{DOC0}, The Core Problem: Dot Product Nature", audit=one))
    _write(root, _result("two", f"{DOC1}, Numerical Example", audit=two))
    _write(root, _result("none", ""))
    batch_report.write((), root)
    text = (root / "report.html").read_text(encoding="utf-8")
    found = re.search(r"<strong>(\d+)</strong> printed numbers checked in (\d+) experiments: "
                      r"<strong>(\d+)</strong> match, <strong>(\d+)</strong> mismatch \((\d+) "
                      r"accepted", text)
    assert found is not None
    entries = [*one, *two]
    assert tuple(int(g) for g in found.groups()) == (
        len(entries), 2, sum(a.status == "match" for a in entries),
        sum(a.status == "mismatch" for a in entries),
        sum(bool(a.accepted) for a in entries if a.status == "mismatch"))
    summary = text[text.index('id="audit"'):text.index('id="provenance"')]
    assert summary.count("<tr class=") == 3  # the list: one row per mismatch
    # per document: checked, mismatch, accepted
    assert f"{_e(DOCUMENTS[0].label)}</td><td>3</td><td>2</td><td>1</td>" in summary
    assert f"{_e(DOCUMENTS[1].label)}</td><td>3</td><td>1</td><td>1</td>" in summary
    assert DOCUMENTS[0].label in summary and DOCUMENTS[1].label in summary
    assert "1.0 → 1.2346" in summary  # printed → computed
    assert "the document rounds" in summary and "not accepted" in summary
    assert text.index('id="audit"') < text.index('id="doc-0"')  # near the top


def test_provenance_names_versions_commit_and_seeds(placed: Path):
    text = (placed / "report.html").read_text(encoding="utf-8")
    prov = text[text.index('id="provenance"'):text.index('id="doc-0"')]
    manifest = json.loads((placed / "a-late" / "manifest.json").read_text(encoding="utf-8"))
    assert f"numpy {manifest['versions']['numpy']}" in prov
    assert f"sdpa {manifest['sdpa_version']}" in prov
    assert prov.count('<span class="seed">7</span>') == len(PLACED)  # every seed
    commit = collect.git_commit(Path(collect.__file__).resolve().parent)
    assert (commit or "unknown") in prov


def test_figure_captions_shown_and_never_the_title_again(placed: Path):
    (placed / "a-late" / "fig.png").write_bytes(b"\x89PNG\r\n\x1a\n")  # an image to embed
    batch_report.write((), placed)
    text = (placed / "report.html").read_text(encoding="utf-8")
    assert text.count("<figcaption>Look at the slope.</figcaption>") == 1
    assert "<figcaption>A figure" not in text


def test_git_commit_is_read_without_a_git_binary(tmp_path: Path):
    sha, other = "a" * 40, "b" * 40
    repo = tmp_path / "repo"
    (repo / ".git" / "refs" / "heads").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / ".git" / "packed-refs").write_text(f"# pack-refs\n{sha} refs/heads/main\n")
    (repo / "pkg").mkdir()
    assert collect.git_commit(repo / "pkg") == sha
    (repo / ".git" / "refs" / "heads" / "main").write_text(other + "\n")  # loose wins
    assert collect.git_commit(repo / "pkg") == other
    wt = tmp_path / "wt"
    gitdir = repo / ".git" / "worktrees" / "wt"
    gitdir.mkdir(parents=True)
    (gitdir / "HEAD").write_text(f"{sha}\n")  # a detached worktree
    (gitdir / "commondir").write_text("../..\n")
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {gitdir}\n")
    assert collect.git_commit(wt) == sha
    (tmp_path / "elsewhere").mkdir()
    assert collect.git_commit(tmp_path / "elsewhere") is None


def test_git_commit_matches_git_where_git_exists():
    here = Path(collect.__file__).resolve().parent
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                              text=True, timeout=10, check=False)
    except OSError:
        pytest.skip("no git binary")
    if done.returncode != 0:
        pytest.skip("not a git checkout")
    assert collect.git_commit(here) == done.stdout.strip()


@pytest.mark.parametrize(("printed", "digits"), [
    ("0.0450", 3), ("1,234", 4), ("2.5e-3", 2), ("22026.47", 7), ("-0.5", 1), ("7", 1),
    ("1.000000", 7), ("n/a", 0)])
def test_significant_digits_of_printed_numbers(printed: str, digits: int):
    assert significant_digits(printed) == digits


def test_computed_values_keep_at_least_the_printed_digits():
    # A loose tolerance alone would allow 5 digits; the document printed 8.
    shown = audit_number(0.123456789123, 1.0, "0.12345678")
    assert significant_digits(shown) >= 8
    assert audit_number(22026.4657948, 0.05, "22026.5") == "22026.466"


def test_results_json_renders_the_same_as_the_result(tmp_path: Path):
    panel = Panel("Step 1", ("a very long line " * 12, "short"), "warn")
    r = _result("round", f"{DOC0}, General Pattern", panels=(panel,),
                audit=(_audit(1, "mismatch", "known"),))
    _write(tmp_path, r)
    back = Result.from_json(json.loads((tmp_path / "round" / "results.json").read_text()))
    assert writers.result_markdown(back, level=2, figures=["fig.png"]) == \
        writers.result_markdown(r, level=2, figures=["fig.png"])
    assert back.panels == r.panels and back.figures[0].caption == r.figures[0].caption


def test_results_json_without_layout_still_renders(tmp_path: Path):
    r = _result("old", "")
    doc = r.to_json()
    del doc["layout"]  # written before results.json carried its layout
    back = Result.from_json(doc)
    assert [c.key for c in back.table.columns] == ["d", "v", "s"]
    assert back.rows == r.rows


# --- the index stays complete --------------------------------------------------------------

OK = "study: variance\ndims: [4]\npairs: 200\nseed: {seed}\n"


def _sections(root: Path) -> list[str]:
    return [a["id"] for t, a in _page(root).tags if t == "section"]


def test_one_spec_run_into_a_batch_folder_keeps_the_others(sdpa, workdir):
    specs = workdir / "specs"
    specs.mkdir()
    for i, name in enumerate(("a", "b", "c")):
        write_spec(specs, f"{name}.yaml", OK.format(seed=i + 1))
    assert sdpa("run", str(specs), "--out", "R", "--no-plots", "-q").code == 0
    write_spec(specs, "b.yaml", OK.format(seed=99))
    assert sdpa("run", str(specs / "b.yaml"), "--out", "R", "--no-plots", "-q").code == 0
    root = workdir / "R"
    assert _sections(root) == ["x-a", "x-b", "x-c"]
    index = (root / "index.md").read_text(encoding="utf-8")
    assert "3 experiments: 3 passed" in index
    assert all(f'<a id="x-{n}"></a>' in index for n in "abc")
    html = (root / "report.html").read_text(encoding="utf-8")
    assert "seed 99" in html and "seed 1" in html  # the update, and the others kept


def test_study_command_into_a_batch_folder_rebuilds_its_report(sdpa, workdir):
    specs = workdir / "specs"
    specs.mkdir()
    write_spec(specs, "a.yaml", OK.format(seed=1))
    write_spec(specs, "b.yaml", OK.format(seed=2))
    assert sdpa("run", str(specs), "--out", "R", "--no-plots", "-q").code == 0
    r = sdpa("variance", "--dims", "4", "7", "--pairs", "200", "--seed", "5", "--no-plots",
             "--out", "R/a", "-q")
    assert r.code == 0
    html = (workdir / "R" / "report.html").read_text(encoding="utf-8")
    assert _sections(workdir / "R") == ["x-a", "x-b"]
    assert "seed 5" in html and "seed 1" not in html  # describes the folder as it is now
    index = (workdir / "R" / "index.md").read_text(encoding="utf-8")
    assert "at d = 7)" in index  # the new run's found: line (its table is R/a/table.md)


def test_study_command_never_writes_an_index_where_none_was(sdpa, workdir):
    (workdir / "plain").mkdir()
    (workdir / "plain" / "index.md").write_text("# my notes\n")  # not sdpa's
    (workdir / "plain" / "report.html").write_text("<p>mine</p>\n")
    r = sdpa("variance", "--dims", "4", "--pairs", "200", "--no-plots", "--out", "plain/v", "-q")
    assert r.code == 0
    assert (workdir / "plain" / "index.md").read_text() == "# my notes\n"
    assert (workdir / "plain" / "report.html").read_text() == "<p>mine</p>\n"
    assert sdpa("variance", "--dims", "4", "--pairs", "200", "--no-plots", "-q").code == 0
    assert not (workdir / "outputs" / "index.md").exists()


def test_a_failed_run_keeps_the_earlier_folder_described_and_says_so(tmp_path: Path):
    from sdpa_cli.report.outcomes import Outcome, Planned
    from sdpa_cli.studies.variance.spec import VarianceSpec

    root = tmp_path / "batch"
    _write(root, _result("kept", f"{DOC0}, General Pattern"))
    spec = VarianceSpec(study="variance", dims=[4], title="Never ran", source="")
    failed = Outcome(Planned(Path("kept.yaml"), spec, root / "kept"), "error",
                     error="disk full")
    missing = Outcome(Planned(Path("gone.yaml"), spec, root / "gone"), "skipped")
    items = batch_report.write([failed, missing], root)
    assert [(e.name, e.status) for e in items] == [("kept", "error"), ("gone", "skipped")]
    html = (root / "report.html").read_text(encoding="utf-8")
    kept = html[html.index('id="x-kept"'):html.index('id="x-gone"')]
    assert "failed</strong>: disk full; the run folder still holds the earlier run" in kept
    assert "Title of kept" in kept and "kept table" in kept  # the earlier run, shown
    assert "was skipped" in html[html.index('id="x-gone"'):]


def test_an_unreadable_run_folder_is_listed_not_fatal(tmp_path: Path):
    root = tmp_path / "batch"
    _write(root, _result("good", ""))
    _write(root, _result("broken", ""))
    (root / "broken" / "results.json").write_text("{not json", encoding="utf-8")
    items = batch_report.write((), root)
    assert {e.name: e.status for e in items} == {"good": "passed", "broken": "unreadable"}
    assert "results.json is not valid JSON" in (root / "index.md").read_text()


def test_the_report_reads_the_same_whichever_command_rebuilt_it(sdpa, workdir):
    specs = workdir / "specs"
    specs.mkdir()
    write_spec(specs, "a.yaml", OK.format(seed=1))
    write_spec(specs, "b.yaml", OK.format(seed=2))
    assert sdpa("run", str(specs), "--out", "R", "--no-plots", "-q").code == 0
    root = workdir / "R"
    before = {f: (root / f).read_bytes() for f in ("index.md", "report.html")}
    assert batch_report.refresh(root / "a")  # what a study command does after writing R/a
    assert {f: (root / f).read_bytes() for f in before} == before


def test_each_study_links_to_its_help_page_and_the_report_does_not_carry_them(placed: Path):
    from sdpa_cli import registry
    from sdpa_cli.io import topics

    page = _page(placed)
    links = {a["href"] for t, a in page.tags if t == "a" and "href" in a}
    studies = {json.loads((d / "results.json").read_text())["study"]
               for d in placed.iterdir() if (d / "results.json").is_file()}
    wanted = {registry.get(s).topic for s in studies} | {"outputs"}
    pages = topics.pages()
    # the reference list links each page's shipped file, and no other page
    shipped = {h for h in links if h.startswith("file://")}
    assert shipped == {pages[t].resolve().as_uri() for t in wanted}
    assert "#reference" in links  # each section's study points at that list
    text = (placed / "report.html").read_text(encoding="utf-8")
    for t in wanted:  # linked by name and title, not carried whole
        assert f"sdpa help {t}</a>: {_e(topics.title(pages[t]))}" in text
        longest = max(pages[t].read_text(encoding="utf-8").splitlines(), key=len)
        assert _e(longest.strip()) not in text


def _number(source: str, status: str = "match") -> AuditEntry:
    return AuditEntry(source=source, quantity="q", documented=1.0,
                      computed=1.0 if status == "match" else 2.0, status=status,
                      printed="1.0", tolerance=0.05, basis="last digit",
                      accepted="known" if status == "mismatch" else None)


def _claim(source: str, claim: str, status: str) -> AuditEntry:
    return AuditEntry(source=source, quantity=claim, documented=float("nan"), computed=1.0,
                      status=status, printed="", tolerance=0.0, basis="claim", kind="claim",
                      measurement="x = 1 > 0: yes", spec_name="a-late")


def test_every_document_has_one_title_and_one_row_with_its_claims(tmp_path: Path):
    """The per-document table lists all five documents (004, whose numbers no run prints,
    with its claims), each under the same name as its section heading; a number a spec
    quotes from another work is counted under that work, not under the spec's document."""
    root = tmp_path / "batch"
    audit = (_number(f"{DOC0}, Step 2", "mismatch"), _number(f"{DOC0}, Step 3"),
             _number("Nakanishi 2025 (arXiv:2501.19399), Figure 1"),
             _claim(f"{DOC4}, IV", "the gain knob makes attention uniform", "fails"),
             _claim(f"{DOC4}, IV", "÷√d_k keeps the variance at 1", "holds"))
    _write(root, _result("a-late", f"{DOC0}, Step-by-Step Matrix Calculation Example",
                         audit=audit))
    _write(root, _result("b-middle", f"{DOC4}, IV. Mathematical Justification for Scaling"))
    batch_report.write((), root)
    index = (root / "index.md").read_text(encoding="utf-8")
    rows = [line for line in index.splitlines() if line.startswith("| ")
            and line.count("|") == 6 and "printed numbers checked" not in line]
    labels = [d.label for d in DOCUMENTS]
    assert [r.split(" | ")[0][2:] for r in rows] == [*labels, "Nakanishi 2025 (arXiv:2501.19399)"]
    assert rows[0].endswith("| 2 | 1 | 1 | — |")
    assert rows[4].endswith("| 0 | 0 | 0 | 1 holds, 1 fails |")
    headings = [line[3:] for line in index.splitlines() if line.startswith("## ")][1:]
    assert set(headings) <= set(labels)  # a section is headed as the table names it
    html = (root / "report.html").read_text(encoding="utf-8")
    for doc in DOCUMENTS:
        if doc.title != doc.label:
            assert _e(doc.title) not in html  # never a second, longer title


def test_every_work_the_shipped_specs_cite_is_named_one_way():
    """"Nakanishi 2025" and "Nakanishi 2025 (arXiv:2501.19399)" were two documents of the
    report: no name a spec cites is the start of another one."""
    from conftest import EXPERIMENTS

    from sdpa_cli.runner import loader

    names = set()
    for path in sorted(EXPERIMENTS.rglob("*.yaml")):
        spec = loader.load(path)
        names |= {d.cites.partition(", ")[0] for d in spec.documented if d.cites}
        names |= {c.document for c in spec.claims if c.document}
    assert [(a, b) for a in names for b in names if a != b and b.startswith(a)] == []


def test_the_report_and_index_open_on_the_answer_then_the_audit(tmp_path: Path):
    """report.html and index.md open on "why √d_k?": each run whose spec says which part of
    the answer it gives, in that order, with its found: lines and key figure; a run that
    measured nothing says so and names the one command that gets its model; then the audit."""
    import dataclasses

    root = tmp_path / "batch"
    parts = [("b-soft", 2, "Softmax", 1, ("none: the largest weight rises 0.69 → 0.98.",
                                          "not quoted")),
             ("a-var", 1, "The variance of q·k", 2, ("raw q·k: grows like d (3.46 → 1057).",
                                                     "q·k/√d: stays flat (1.15 → 1.06)."))]
    for name, step, topic, count, found in parts:
        r = _result(name, f"{DOC1}, The Softmax Saturation Problem", audit=(_audit(1, "match"),))
        spec = {**r.spec, "answer": {"step": step, "topic": topic, "found": count}}
        _write(root, dataclasses.replace(r, spec=spec, findings=found))
        (root / name / "fig.png").write_bytes(b"\x89PNG\r\n\x1a\n")  # its key figure
    skipped = dataclasses.replace(
        _result("c-model", f"{DOC1}, Large Embedding Dimensions"),
        spec={"study": "inspect", "name": "c-model",
              "answer": {"step": 3, "topic": "A real model", "found": 1}},
        skipped="model 'x/y' is not on this machine (looked in x/y; sdpa never downloads); "
                "get it with: python -m sdpa_cli.fetch smollm2", findings=(), checks=())
    _write(root, skipped)
    batch_report.write((), root)
    html = (root / "report.html").read_text(encoding="utf-8")
    assert html.index('id="answer"') < html.index('id="findings"') < html.index('id="contents"')
    answer = html[html.index('id="answer"'):html.index('id="findings"')]
    assert answer.index("1. The variance of q·k.") < answer.index("2. Softmax.") \
        < answer.index("3. A real model.")
    assert "q·k/√d: stays flat (1.15 → 1.06)." in answer and "not quoted" not in answer
    assert '<img src="a-var/fig.png"' in answer and '<img src="b-soft/fig.png"' in answer
    assert "not measured on this machine: model &#x27;x/y&#x27; is not on this machine" in answer
    assert "<code>python -m sdpa_cli.fetch smollm2</code>" in answer
    head = (root / "index.md").read_text(encoding="utf-8").splitlines()[:20]
    at = head.index("## The answer, measured")
    assert head[at + 4].startswith("1. **The variance of q·k.** raw q·k: grows like d")
    assert head[at + 4].endswith("([a-var](#x-a-var), [figure](a-var/fig.png))")
    assert head[at + 6].startswith("3. **A real model.** not measured on this machine")
    assert "## The documents audited" in "\n".join(head)


def test_claim_rows_say_their_measurement_in_words_first_and_fold_the_machine_detail(
        tmp_path: Path):
    root = tmp_path / "batch"
    claim = AuditEntry(
        source=f"{DOC1}, Softmax Behavior", quantity="softmax saturates as d_k grows",
        documented=float("nan"), computed=0.98, status="holds", printed="", tolerance=0.0,
        basis="claim", kind="claim", spec_name="a-var",
        measurement="v (s sqrt, d 4096) = 0.98 ± 0.000423 > 0.9: yes; v (s sqrt, d 4096) = "
                    "0.98 ± 0.000423 > v (s sqrt, d 16) = 0.686: yes")
    _write(root, _result("a-var", f"{DOC1}, Softmax Behavior", audit=(claim,)))
    batch_report.write((), root)
    html = (root / "report.html").read_text(encoding="utf-8")
    row = html[html.index("softmax saturates as d_k grows"):]
    row = row[:row.index("</tr>")]
    words = ("variance at scaling = sqrt, d = 4096 is 0.98, above 0.9 ✓; variance at scaling = "
             "sqrt, d = 4096 is 0.98, above its 0.686 at scaling = sqrt, d = 16 ✓")
    assert row.index(words) < row.index('<details class="machine"><summary>as measured')
    assert "0.000423" not in row[:row.index("<details")]  # the machine detail is folded
