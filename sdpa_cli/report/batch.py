"""A batch's index.md and self-contained report.html, and its summary on stderr / stdout."""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table as RichTable
from rich.text import Text

from sdpa_cli import __version__
from sdpa_cli.report import writers
from sdpa_cli.report.formatting import cell, number
from sdpa_cli.report.outcomes import Outcome
from sdpa_cli.report.runfolder import write_batch
from sdpa_cli.report.terminal import console
from sdpa_cli.studies.result import Result, Table


def _name(o: Outcome) -> str:
    return o.planned.target.name


def _counts(outcomes: Sequence[Outcome]) -> dict[str, int]:
    out: dict[str, int] = {}
    for o in outcomes:
        out[o.status] = out.get(o.status, 0) + 1
    return out


def _findings(result: Result | None) -> tuple[int, int]:
    """(mismatches, of which accepted) in a result's audit."""
    if result is None:
        return 0, 0
    bad = [a for a in result.audit if a.status == "mismatch"]
    return len(bad), sum(1 for a in bad if a.accepted)


def _headline(outcomes: Sequence[Outcome]) -> str:
    counts = _counts(outcomes)
    parts = [f"{n} {status}" for status, n in sorted(counts.items())]
    return f"{len(outcomes)} experiments: " + ", ".join(parts)


# --- index.md ----------------------------------------------------------------------------


def index_md(outcomes: Sequence[Outcome]) -> str:
    lines = ["# sdpa: every experiment", "", _headline(outcomes) + ".", "",
             "| experiment | study | document | status | checks | findings |",
             "|---|---|---|---|---|---|"]
    for o in outcomes:
        r = o.result
        checks = f"{sum(c.passed for c in r.checks)}/{len(r.checks)}" if r else "—"
        bad, ok = _findings(r)
        doc = o.planned.spec.document or "—"
        lines.append(f"| [{_name(o)}](#{_anchor(o)}) | {o.planned.spec.study} | {doc} | "
                     f"{o.status} | {checks} | {bad} ({ok} accepted) |")
    lines.append("")
    for o in outcomes:
        lines += [f'<a id="{_anchor(o)}"></a>', ""]
        if o.result is None:
            title = o.planned.spec.title or _name(o)
            lines += [f"## {title}", "", f"Spec: `{o.planned.file}`", "",
                      f"**{o.status}**" + (f": {o.error}" if o.error else ""), ""]
            continue
        figures = [f"{_name(o)}/{f}" for f in o.figures]
        lines += writers.result_markdown(o.result, level=2, figures=figures)
        lines += ["", f"Spec: `{o.planned.file}` · run folder: [{_name(o)}/]({_name(o)}/) · "
                      f"status: **{o.status}**", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _anchor(o: Outcome) -> str:
    return "x-" + _name(o).lower().replace(".", "-").replace("_", "-")


# --- report.html -------------------------------------------------------------------------

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto;
  max-width: 78rem; padding: 0 1rem; color: #1d2330; line-height: 1.45; }
h1 { margin-bottom: .2rem; } h2 { margin-top: 2.6rem; border-bottom: 2px solid #d8dce6;
  padding-bottom: .2rem; } h3 { margin-bottom: .3rem; }
.meta { color: #5b6475; margin: .1rem 0; }
table { border-collapse: collapse; margin: .5rem 0 1rem; font-size: .86rem; }
th, td { border: 1px solid #d8dce6; padding: .2rem .5rem; text-align: right; }
th { background: #f1f3f8; } td.text, th.text { text-align: left; }
tr.mismatch td { background: #fde8e8; } tr.accepted td { background: #fff6db; }
tr.fail td { background: #fde8e8; }
.status { display: inline-block; padding: 0 .5rem; border-radius: .6rem; font-size: .8rem;
  font-weight: 600; } .passed { background: #dcf5e3; color: #14632f; }
.failed, .error { background: #fde0e0; color: #8a1414; } .skipped { background: #eee; }
figure { margin: .8rem 0; } figure img { max-width: 100%; border: 1px solid #e3e6ee; }
figcaption { color: #5b6475; font-size: .85rem; }
pre { background: #f6f7fa; padding: .6rem .8rem; overflow-x: auto; font-size: .85rem; }
pre.warn { border-left: 4px solid #e0a800; } ul.theory li { margin: .15rem 0; }
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _html_table(table: Table) -> str:
    head = "".join(f'<th class="{"text" if c.fmt == "text" else "num"}">{_e(c.header)}</th>'
                   for c in table.columns)
    rows = []
    for row in table.rows:
        cells = "".join(
            f'<td class="{"text" if c.fmt == "text" else "num"}">{_e(cell(dict(row), c))}</td>'
            for c in table.columns)
        rows.append(f"<tr>{cells}</tr>")
    return (f"<h3>{_e(table.title)}</h3><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def _figure(path: Path, caption: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (f'<figure><img alt="{_e(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def _section(o: Outcome, root: Path, embed: bool) -> str:
    r = o.result
    spec = o.planned.spec
    out = [f'<section id="{_anchor(o)}">',
           f"<h2>{_e(r.title if r else spec.title or _name(o))} "
           f'<span class="status {o.status}">{_e(o.status)}</span></h2>']
    if spec.source:
        out.append(f'<p class="meta">Reproduces: {_e(spec.source)}</p>')
    out.append(f'<p class="meta">Spec: {_e(o.planned.file)} · study {_e(spec.study)} · '
               f"run folder {_e(_name(o))}/</p>")
    if r is None:
        out.append(f"<p><strong>{_e(o.status)}</strong>{': ' + _e(o.error) if o.error else ''}"
                   "</p></section>")
        return "\n".join(out)
    if r.description:
        out.append(f"<p>{_e(r.description)}</p>")
    if r.theory:
        out.append('<h3>Theory</h3><ul class="theory">'
                   + "".join(f"<li>{_e(t)}</li>" for t in r.theory) + "</ul>")
    for panel in r.panels:
        cls = ' class="warn"' if panel.style == "warn" else ""
        out.append(f"<h3>{_e(panel.title)}</h3><pre{cls}>{_e(chr(10).join(panel.lines))}</pre>")
    out.append(_html_table(r.table))
    out.extend(_html_table(t) for t in r.tables)
    if embed:
        for fig, name in zip(r.figures, o.figures, strict=False):
            path = root / _name(o) / name
            if path.is_file():
                out.append(_figure(path, fig.title))
    if r.checks:
        passed = sum(c.passed for c in r.checks)
        rows = "".join(
            f'<tr class="{"" if c.passed else "fail"}"><td class="text">{_e(c.name)}</td>'
            f'<td class="text">{"pass" if c.passed else "FAIL"}</td>'
            f'<td class="text">{_e(c.detail)}</td></tr>' for c in r.checks)
        out.append(f"<h3>Checks: {passed} of {len(r.checks)} passed</h3><table><thead><tr>"
                   '<th class="text">check</th><th class="text">result</th>'
                   f'<th class="text">detail</th></tr></thead><tbody>{rows}</tbody></table>')
    if r.audit:
        rows = []
        for a in r.audit:
            cls = "" if a.status == "match" else ("accepted" if a.accepted else "mismatch")
            status = a.status + (" (accepted)" if a.accepted else "")
            why = a.note or a.accepted or ""
            rows.append(f'<tr class="{cls}"><td class="text">{_e(a.source)}</td>'
                        f'<td class="text">{_e(a.quantity)}</td><td>{_e(a.printed)}</td>'
                        f"<td>{_e(number(a.computed))}</td><td>{_e(number(a.tolerance))}</td>"
                        f'<td class="text">{_e(status)}</td><td class="text">{_e(why)}</td></tr>')
        bad, ok = _findings(r)
        out.append(f"<h3>Audit of the document's numbers: {len(r.audit)} printed, {bad} "
                   f"mismatched ({ok} accepted as known findings)</h3><table><thead><tr>"
                   '<th class="text">where</th><th class="text">quantity</th><th>printed</th>'
                   '<th>computed</th><th>tolerance</th><th class="text">status</th>'
                   f'<th class="text">note</th></tr></thead><tbody>{"".join(rows)}</tbody>'
                   "</table>")
    if r.notes:
        out.append("<h3>Notes</h3><ul>" + "".join(f"<li>{_e(n)}</li>" for n in r.notes)
                   + "</ul>")
    out.append("</section>")
    return "\n".join(out)


def report_html(outcomes: Sequence[Outcome], root: Path, *, embed: bool = True) -> str:
    toc = []
    for o in outcomes:
        bad, ok = _findings(o.result)
        title = o.result.title if o.result else (o.planned.spec.title or _name(o))
        toc.append(f'<tr><td class="text"><a href="#{_anchor(o)}">{_e(_name(o))}</a></td>'
                   f'<td class="text">{_e(title)}</td>'
                   f'<td class="text">{_e(o.planned.spec.document or "—")}</td>'
                   f'<td class="text"><span class="status {o.status}">{_e(o.status)}</span></td>'
                   f"<td>{bad} ({ok} accepted)</td></tr>")
    body = "\n".join(_section(o, root, embed) for o in outcomes)
    return (
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>sdpa report</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        "<h1>sdpa: why attention divides QKᵀ by √d_k</h1>\n"
        f'<p class="meta">{_e(_headline(outcomes))} · sdpa {__version__}</p>\n'
        "<table><thead><tr><th class=\"text\">experiment</th><th class=\"text\">title</th>"
        "<th class=\"text\">document</th><th class=\"text\">status</th><th>findings</th>"
        f"</tr></thead><tbody>{''.join(toc)}</tbody></table>\n{body}\n</body>\n</html>\n"
    )


def write(outcomes: Sequence[Outcome], root: Path, *, embed: bool = True) -> None:
    # backslashreplace: a spec path that is not UTF-8 (a lone surrogate) is shown as \xNN
    write_batch(root, {"index.md": index_md(outcomes).encode("utf-8", "backslashreplace"),
                       "report.html": report_html(outcomes, root, embed=embed).encode(
                           "utf-8", "backslashreplace")})


def summary_json(outcomes: Sequence[Outcome], root: Path) -> str:
    doc = {
        "passed": all(o.status == "passed" for o in outcomes),
        "folder": str(root),
        "experiments": [
            {
                "name": _name(o),
                "study": o.planned.spec.study,
                "file": str(o.planned.file),
                "status": o.status,
                "error": o.error,
                "checks_failed": [c.name for c in o.result.checks if not c.passed]
                if o.result else [],
                "findings": _findings(o.result)[0],
                "folder": str(o.planned.target),
            }
            for o in outcomes
        ],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def show_summary(outcomes: Sequence[Outcome], root: Path, *, check: bool) -> None:
    con = console()
    table = RichTable(title=_headline(outcomes), title_justify="left", header_style="bold")
    for header in ("experiment", "study", "status", "checks", "findings", "seconds"):
        table.add_column(header, justify="right" if header in ("seconds",) else "left")
    for o in outcomes:
        r = o.result
        checks = f"{sum(c.passed for c in r.checks)}/{len(r.checks)}" if r else "—"
        bad, ok = _findings(r)
        style = {"passed": "green", "failed": "red", "error": "bold red"}.get(o.status, "dim")
        table.add_row(_name(o), o.planned.spec.study, Text(o.status, style=style), checks,
                      f"{bad} ({ok} accepted)", f"{o.seconds:.1f}")
    con.print(table)
    for o in outcomes:
        if o.status == "error":
            con.print(Text(f"error  {_name(o)}: {o.error}", style="bold red"))
        elif o.status == "failed" and o.result is not None:
            for c in o.result.checks:
                if not c.passed:
                    con.print(Text(f"failed {_name(o)}: {c.name}: {c.detail}", style="red"))
    failed = any(o.status == "failed" for o in outcomes)
    if failed and not check:
        con.print(Text("(failed checks do not change the exit code without --check)",
                       style="dim"))
    con.print(Text(f"wrote {root / 'index.md'} and {root / 'report.html'}", style="dim"))
