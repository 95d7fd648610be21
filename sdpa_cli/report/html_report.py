"""report.html: a batch folder's experiments on one page, as the documents go. The page opens
with the answer to "why √d_k?", measured, then the audit; each experiment's detail is folded,
and its figures are the PNG files of its run folder beside the page (so the page stays light:
a link, not a copy)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sdpa_cli import registry
from sdpa_cli.framework.causes import claim_coverage, tally
from sdpa_cli.framework.documents import cite, label
from sdpa_cli.framework.result import Result, Table
from sdpa_cli.io import topics
from sdpa_cli.report import provenance
from sdpa_cli.report.answer import CSS as ANSWER_CSS
from sdpa_cli.report.answer import answer_html, steps
from sdpa_cli.report.collect import Entry, by_document
from sdpa_cli.report.findings_html import findings_summary
from sdpa_cli.report.formatting import (
    audit_number,
    cell,
    claim_html,
    headers_of,
    number,
    number_status,
    verdict_word,
)

FOLD = 40  # tables of more rows are collapsed in <details> (opened by a click, no script)
GENERATOR = "sdpa batch report"

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto;
  max-width: 78rem; padding: 0 1rem; color: #1d2330; line-height: 1.45; }
h1 { margin-bottom: .2rem; } h2 { margin-top: 2.6rem; border-bottom: 2px solid #d8dce6;
  padding-bottom: .2rem; } h3 { margin: 2rem 0 .3rem; } h4 { margin: 1rem 0 .3rem; }
.meta { color: #5b6475; margin: .1rem 0; }
table { border-collapse: collapse; margin: .5rem 0 1rem; font-size: .86rem; }
th, td { border: 1px solid #d8dce6; padding: .2rem .5rem; text-align: right;
  vertical-align: top; }
th { background: #f1f3f8; } td.text, th.text { text-align: left; }
tr.mismatch td { background: #fde8e8; } tr.accepted td { background: #fff6db; }
tr.fail td { background: #fde8e8; }
.status { display: inline-block; padding: 0 .5rem; border-radius: .6rem; font-size: .8rem;
  font-weight: 600; } .passed { background: #dcf5e3; color: #14632f; }
.failed, .error, .unreadable { background: #fde0e0; color: #8a1414; }
.skipped { background: #eee; }
figure { margin: .8rem 0; break-inside: avoid; }
figure img { max-width: 100%; height: auto; border: 1px solid #e3e6ee; }
details.detail { margin: .4rem 0 .8rem; border-left: 3px solid #d8dce6; padding-left: .8rem; }
details.detail > summary { font-weight: 400; color: #3d4556; }
details.machine { margin: .2rem 0 0; font-size: .8rem; color: #5b6475; }
details.machine > summary { font-weight: 400; }
ul.found { margin: .3rem 0; }
figcaption { color: #3d4556; font-size: .9rem; max-width: 60rem; }
pre { background: #f6f7fa; padding: .6rem .8rem; font-size: .85rem; white-space: pre-wrap;
  overflow-wrap: anywhere; }
pre.warn { border-left: 4px solid #e0a800; } ul.theory li { margin: .15rem 0; }
details { margin: .5rem 0 1rem; } summary { cursor: pointer; font-weight: 600; }
nav ol { margin: .2rem 0; } nav li { margin: .1rem 0; } nav .doc { margin-top: .5rem; }
.top { font-size: .85rem; margin: .5rem 0 0; } .seed { font-family: monospace, monospace; }
.summary { background: #f6f7fa; border: 1px solid #d8dce6; padding: .4rem 1rem; }
.claim-holds { background: #dcf5e3; color: #14632f; } .claim-fails { background: #fde0e0;
  color: #8a1414; } .claim-partly { background: #fff1c2; color: #6b4e00; }
.claim-untested { background: #eee; color: #444; }
@media print {
  body { max-width: none; margin: 0; font-size: 10pt; }
  .top { display: none; }
  h2.doc { break-before: page; }
  h3, h4 { break-after: avoid; } h4 { margin: .6rem 0 .2rem; }
  table { font-size: 8pt; max-width: 100%; } tr { break-inside: avoid; }
  th, td { padding: .1rem .35rem; } td.text { overflow-wrap: break-word; }
  pre { font-size: 7.5pt; line-height: 1.25; padding: .3rem .5rem; }
  figure img { max-height: 11cm; max-width: 100%; width: auto; }
  a { color: inherit; text-decoration: none; }
}
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _fold(title: str, rows: int, inner: str, heading: str = "h4") -> str:
    """A titled table, collapsed in <details> when it has more than FOLD rows."""
    if rows > FOLD:
        return (f"<details><summary>{_e(title)} ({rows} rows; click to open)</summary>"
                f"{inner}</details>")
    return f"<{heading}>{_e(title)}</{heading}>{inner}"


# A table of more rows stays in its run folder (table.md, table.csv, results.json): the
# report links it instead of carrying it (a real model's per-head table is 540 rows, 350 KB).
LINK_ROWS = 200


def _table(table: Table, folder: str = "") -> str:
    if len(table.rows) > LINK_ROWS and folder:
        link = f'<a href="{quote(folder)}/table.md">{_e(folder)}/table.md</a>'
        return (f"<h4>{_e(table.title)}</h4><p class=\"meta\">{len(table.rows)} rows: in "
                f"{link} (and table.csv, results.json beside it).</p>")
    head = "".join(f'<th class="{"text" if c.fmt == "text" else "num"}">{_e(c.header)}</th>'
                   for c in table.columns)
    rows = []
    for row in table.rows:
        cells = "".join(
            f'<td class="{"text" if c.fmt == "text" else "num"}">{_e(cell(dict(row), c))}</td>'
            for c in table.columns)
        rows.append(f"<tr>{cells}</tr>")
    inner = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    return _fold(table.title, len(table.rows), inner)


def _figure(rel: str, title: str, caption: str) -> str:
    """A figure of a run folder: the PNG beside the page, shown smaller, its full size a
    click away."""
    url = quote(rel)
    text = f"<figcaption>{_e(caption)}</figcaption>" if caption else ""
    return (f'<figure><a href="{url}"><img alt="{_e(title)}" src="{url}" loading="lazy">'
            f"</a>{text}</figure>")


def _checks(r: Result) -> str:
    passed = sum(c.passed for c in r.checks)
    rows = "".join(
        f'<tr class="{"" if c.passed else "fail"}"><td class="text">{_e(c.name)}</td>'
        f'<td class="text">{"pass" if c.passed else "FAIL"}</td>'
        f'<td class="text">{_e(c.detail)}</td></tr>' for c in r.checks)
    inner = ('<table><thead><tr><th class="text">check</th><th class="text">result</th>'
             f'<th class="text">detail</th></tr></thead><tbody>{rows}</tbody></table>')
    return _fold(f"Checks: {passed} of {len(r.checks)} passed", len(r.checks), inner)


def _audit(r: Result) -> str:
    rows = []
    numbers = [a for a in r.audit if a.kind == "number"]
    for a in numbers:
        cls = "" if a.status == "match" else ("accepted" if a.accepted else "mismatch")
        status = number_status(a)
        why = a.note or a.accepted or ""
        rows.append(f'<tr class="{cls}"><td class="text">{_e(cite(a.source))}</td>'
                    f'<td class="text">{_e(a.quantity)}</td><td>{_e(a.printed)}</td>'
                    f"<td>{_e(audit_number(a.computed, a.tolerance, a.printed))}</td>"
                    f"<td>{_e(number(a.tolerance))}</td>"
                    f'<td class="text">{_e(status)}</td><td class="text">{_e(why)}</td></tr>')
    bad = [a for a in numbers if a.status == "mismatch"]
    if not numbers:
        return ""
    inner = ('<table><thead><tr><th class="text">where</th><th class="text">quantity</th>'
             '<th>printed</th><th>computed</th><th>tolerance</th><th class="text">status</th>'
             f'<th class="text">note</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')
    title = (f"Audit of the document's numbers: {tally(numbers).headline()} "
             f"({len(bad)} of {len(numbers)} printed numbers differ)")
    return _fold(title, len(numbers), inner)


def _claim_rows(r: Result) -> str:
    claims = [a for a in r.audit if a.kind == "claim"]
    if not claims:
        return ""
    headers = headers_of((r.table, *r.tables))
    rows = "".join(
        f'<tr><td class="text"><span class="status claim-{a.status}">{_e(verdict_word(a))}'
        f'</span></td><td class="text">{_e(cite(a.source))}</td><td class="text">'
        f'{_e(a.quantity)}</td><td class="text">{claim_html(a, headers)}</td></tr>'
        for a in claims)
    inner = ('<table><thead><tr><th class="text">verdict</th><th class="text">where</th>'
             '<th class="text">claim</th><th class="text">measurement or reason</th></tr>'
             f"</thead><tbody>{rows}</tbody></table>")
    return _fold(f"Claims judged here: {claim_coverage(claims)}", len(claims), inner)


def _section(e: Entry) -> str:
    r = e.result
    out = [f'<section id="{e.anchor}">',
           f'<h3>{_e(e.title or e.name)} <span class="status {e.status}">{_e(e.status)}</span>'
           "</h3>"]
    if e.source:
        out.append(f'<p class="meta">Reproduces: {_e(cite(e.source))}</p>')
    # The resolved spec in the folder, not the file it came from: the report reads the same
    # whichever command last rebuilt it.
    where = [f"run folder {_e(e.name)}/ (resolved spec: spec.yaml)" if r else
             f"spec {_e(e.spec_file or '—')}"]
    if r is not None:
        topic = _topic(r.study)
        where.append(f'study {_e(r.study)}' + (f' (<a href="#reference">sdpa help {topic}</a>)'
                                               if topic else ""))
        seed = r.spec.get("seed")
        if seed is not None:
            where.append(f"seed {_e(seed)}")
    out.append(f'<p class="meta">{" · ".join(where)}</p>')
    if r is not None and r.skipped is not None:  # ran, and measured nothing
        out.append(f"<p><strong>Skipped: nothing was measured</strong>: {_e(r.skipped)}</p>")
    elif e.error or e.status in ("error", "skipped"):
        what = f"This batch's run {'was skipped' if e.status == 'skipped' else 'failed'}"
        detail = f": {_e(e.error)}" if e.error else ""
        earlier = "; the run folder still holds the earlier run shown below." if r else "."
        out.append(f"<p><strong>{what}</strong>{detail}{earlier}</p>")
    if r is None:
        out.append('<p class="top"><a href="#top">↑ back to top</a></p></section>')
        return "\n".join(out)
    if r.findings:  # the answer stays in view; everything behind it is one click away
        out.append('<ul class="found">'
                   + "".join(f"<li>{_e(t)}</li>" for t in r.findings) + "</ul>")
    out.append(f'<details class="detail"><summary>{_e(_contents_of(e, r))}</summary>')
    if r.description:
        out.append(f"<p>{_e(r.description)}</p>")
    if r.expect:
        out.append("<h4>What to expect</h4><ul>"
                   + "".join(f"<li>{_e(t)}</li>" for t in r.expect) + "</ul>")
    if r.theory:
        out.append('<h4>Theory</h4><ul class="theory">'
                   + "".join(f"<li>{_e(t)}</li>" for t in r.theory) + "</ul>")
    for panel in r.panels:
        cls = ' class="warn"' if panel.style == "warn" else ""
        out.append(f"<h4>{_e(panel.title)}</h4><pre{cls}>{_e(chr(10).join(panel.lines))}</pre>")
    out.extend(_table(t, e.name) for t in (r.table, *r.tables))
    figures = {f"{f.name}.png": f for f in r.figures}
    for name in e.figures:
        fig = figures.get(name)
        out.append(_figure(f"{e.name}/{name}", fig.title if fig else name,
                           fig.caption if fig else ""))
    if r.checks:
        out.append(_checks(r))
    if r.audit:
        out.append(_audit(r))
        out.append(_claim_rows(r))
    if r.notes:
        out.append("<h4>Notes</h4><ul>" + "".join(f"<li>{_e(n)}</li>" for n in r.notes)
                   + "</ul>")
    out.append(f'<p class="meta">The same in Markdown: <a href="{quote(e.name)}/table.md">'
               f"{_e(e.name)}/table.md</a></p></details>")
    out.append('<p class="top"><a href="#top">↑ back to top</a></p></section>')
    return "\n".join(out)


def _contents_of(e: Entry, r: Result) -> str:
    """The fold's one line: what opening it shows."""
    parts = [f"{len(r.checks)} check{'s' if len(r.checks) != 1 else ''}"] if r.checks else []
    tables = 1 + len(r.tables)
    parts.append(f"{tables} table{'s' if tables != 1 else ''}")
    if e.figures:
        parts.append(f"{len(e.figures)} figure{'s' if len(e.figures) != 1 else ''}")
    if any(a.kind == "number" for a in r.audit):
        parts.append("the audit of its printed numbers")
    if any(a.kind == "claim" for a in r.audit):
        parts.append("its claims")
    if r.theory or r.expect:
        parts.insert(0, "theory")
    return "Detail: " + ", ".join(parts) + (", notes" if r.notes else "")


def _topic(study: str) -> str:
    """The study's `sdpa help` page, or "" for a study this sdpa does not know (or whose
    declaration is broken: the report of the others goes on)."""
    declared = registry.declared(study)
    return declared.topic if declared is not None else ""


def _reference(items: Sequence[Entry]) -> str:
    """The topic pages of the batch's studies (and of the run folder's files), linked: the
    files that `sdpa help TOPIC` prints, as shipped with this sdpa."""
    used = sorted({t for e in items if e.result and (t := _topic(e.result.study))} | {"outputs"})
    pages = topics.pages()
    links = [f'<li><a href="{pages[name].resolve().as_uri()}">sdpa help {name}</a>: '
             f"{_e(topics.title(pages[name]))}</li>" for name in used if name in pages]
    return ('<h2 id="reference">Reference pages</h2><p class="meta">The pages of '
            "<code>sdpa help</code> for the studies in this report (the model, its fields and "
            "what was measured): type <code>sdpa help TOPIC</code> in a terminal, or open the "
            "page shipped with this sdpa.</p><ul>" + "".join(links) + "</ul>")


def _contents(items: Sequence[Entry]) -> str:
    out = ['<nav id="contents"><h2>Contents</h2><ol>',
           *(['<li><a href="#answer">The answer, measured</a></li>'] if steps(items) else []),
           '<li><a href="#findings">The documents audited</a></li>',
           '<li><a href="#audit">Audit of the documents\' printed numbers</a></li>',
           '<li><a href="#provenance">Provenance</a></li>',
           '<li><a href="#reference">Reference pages</a></li>']
    for key, heading, group in by_document(items):
        out.append(f'<li class="doc"><a href="#{key}">{_e(heading)}</a><ol>')
        for e in group:
            roots, heirs = provenance.root_errors(e.result)
            extra = (f" · {roots} root error{'s' if roots != 1 else ''}"
                     + (f" (+{heirs} inherited)" if heirs else "") if roots else "")
            out.append(f'<li><a href="#{e.anchor}">{_e(e.title or e.name)}</a> '
                       f'<span class="status {e.status}">{_e(e.status)}</span>{_e(extra)}</li>')
        out.append("</ol></li>")
    out.append("</ol></nav>")
    return "\n".join(out)


def _audit_summary(items: Sequence[Entry]) -> str:
    s = provenance.audit_summary(items)
    head = (f'<h2 id="audit">Audit of the documents\' printed numbers</h2>'
            f'<p class="summary"><strong>{s.checked}</strong> printed numbers checked in '
            f"{s.experiments} experiments: <strong>{s.matched}</strong> match, "
            f"<strong>{len(s.mismatches)}</strong> mismatch ({s.accepted} accepted as known "
            f"findings of the documents, {len(s.mismatches) - s.accepted} not accepted).</p>")
    counts = "".join(f'<tr><td class="text">{_e(d.document)}</td><td>{d.checked}</td>'
                     f"<td>{d.mismatched}</td><td>{d.accepted}</td><td class=\"text\">"
                     f"{_e(provenance.claims_text(d.claims))}</td></tr>" for d in s.per_document)
    head += ('<table><thead><tr><th class="text">document</th><th>printed numbers checked'
             '</th><th>mismatch</th><th>accepted</th><th class="text">claims judged</th></tr>'
             f"</thead><tbody>{counts}</tbody></table>")
    if not s.mismatches:
        return head
    rows = "".join(
        f'<tr class="{"accepted" if a.accepted else "mismatch"}">'
        f'<td class="text">{_e(doc)}</td><td class="text"><a href="#{e.anchor}">{_e(e.name)}'
        f'</a></td><td class="text">{_e(cite(a.source))}: {_e(a.quantity)}</td>'
        f"<td>{_e(a.printed)} → {_e(audit_number(a.computed, a.tolerance, a.printed))}</td>"
        f'<td class="text">{_e(a.note or a.accepted or "not accepted")}</td></tr>'
        for e, doc, a in s.mismatches)
    inner = ('<table><thead><tr><th class="text">document</th><th class="text">experiment</th>'
             '<th class="text">where</th><th>printed → computed</th><th class="text">why</th>'
             f"</tr></thead><tbody>{rows}</tbody></table>")
    return head + _fold(f"The {len(s.mismatches)} mismatches", len(s.mismatches), inner)


def _provenance(items: Sequence[Entry]) -> str:
    p = provenance.collect(items)
    libs = " · ".join(f"{k} {v}" for k, v in p.versions.items()) or "not recorded"
    lines = [f"<li>written by sdpa {_e(p.sdpa)}; source commit "
             f"{_e(p.commit or 'unknown (not a git checkout)')}</li>",
             f"<li>run folders written by sdpa {_e(', '.join(p.run_sdpa) or 'unknown')}</li>",
             f"<li>libraries: {_e(libs)}</li>"]
    if p.mixed:
        lines.append(f"<li>run folders made with other library versions: {_e(p.mixed)}</li>")
    seeds = ", ".join(f'<a href="#{e.anchor}">{_e(e.name)}</a> <span class="seed">{_e(seed)}'
                      "</span>" for e, seed in p.seeds)
    if seeds:
        lines.append(f"<li>seeds (rerun any experiment with these to get the same numbers): "
                     f"{seeds}</li>")
    return '<h2 id="provenance">Provenance</h2><ul>' + "".join(lines) + "</ul>"


def report_html(items: Sequence[Entry], root: Path) -> str:
    groups = []
    for key, heading, group in by_document(items):
        files = sorted({label(e.source.split(",")[0]) for e in group if e.source})
        groups.append(f'<h2 class="doc" id="{key}">{_e(heading)}</h2>'
                      + (f'<p class="meta">{_e(", ".join(files))}</p>' if files else "")
                      + "\n".join(_section(e) for e in group))
    return (
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<meta name=\"generator\" content=\"{GENERATOR}\">\n"
        f"<title>sdpa report</title>\n<style>{_CSS}{ANSWER_CSS}</style>\n</head>\n<body>\n"
        "<h1 id=\"top\">sdpa: why attention divides QKᵀ by √d_k</h1>\n"
        f'<p class="meta">{_e(provenance.headline(items))}, in the order of the documents '
        "they reproduce.</p>\n"
        f"{answer_html(items)}\n{findings_summary(items)}\n"
        f"{_contents(items)}\n{_audit_summary(items)}\n{_provenance(items)}\n"
        + "\n".join(groups) + f"\n{_reference(items)}\n</body>\n</html>\n"
    )
