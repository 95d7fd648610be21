"""The findings summary that opens report.html: the answer before the table of contents.

For each experiment its verdict and what it found, the documents' root errors (each with the
values that inherit it) and the coverage of their claims, every line linking to its section.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Sequence
from typing import Any

from sdpa_cli.framework.causes import claim_coverage, tally
from sdpa_cli.framework.claims import Verdict, verdicts
from sdpa_cli.framework.documents import label
from sdpa_cli.framework.result import AuditEntry
from sdpa_cli.report.collect import Entry, by_document
from sdpa_cli.report.formatting import claim_html, headers_of
from sdpa_cli.report.outcomes import STATUSES
from sdpa_cli.report.provenance import root_lines

# Claims shown in the summary, worst first: what a reader must not miss.
_CLAIM_ORDER = {"fails": 0, "partly": 1, "holds": 2, "untested": 3}


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _link(e: Entry) -> str:
    return f'<a href="#{e.anchor}">{_e(e.name)}</a>'


def _where(a: AuditEntry) -> str:
    head, _, rest = a.source.partition(", ")
    return rest if rest and "." in head else a.source


def _document(a: AuditEntry) -> str:
    return label(a.source.partition(", ")[0])


def _verdicts(items: Sequence[Entry]) -> str:
    rows = []
    for _, heading, group in by_document(items):
        for e in group:
            r = e.result
            checks = (f"{sum(c.passed for c in r.checks)}/{len(r.checks)} checks"
                      if r is not None and r.checks else "")
            found = list(r.findings) if r is not None else []
            shown = "<br>".join(_e(f) for f in found) or '<span class="meta">—</span>'
            rows.append(f'<tr><td class="text">{_link(e)}<br><span class="meta">'
                        f"{_e(heading)}</span></td>"
                        f'<td class="text"><span class="status {e.status}">{_e(e.status)}'
                        f"</span> {_e(checks)}</td><td class=\"text\">{shown}</td></tr>")
    counts = Counter(e.status for e in items)
    tally_ = ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts.get(s))
    # folded: a row per experiment is long; each section below shows its own found: lines
    return (f'<details><summary>What each experiment found ({len(items)} experiments: '
            f'{_e(tally_)}; click to open)</summary><table><thead><tr><th class="text">'
            'experiment</th><th class="text">verdict</th><th class="text">found</th></tr>'
            f"</thead><tbody>{''.join(rows)}</tbody></table></details>")


def _roots(items: Sequence[Entry]) -> str:
    rows = []
    for r in root_lines(items):
        a, e = r.first, r.entry
        flip = (f"<strong>material</strong>: changes {_e(a.material)}" if a.material
                else "")
        rows.append(f'<tr class="{"accepted" if a.accepted else "mismatch"}">'
                    f'<td class="text">{_e(_document(a))}</td>'
                    f'<td class="text">{_link(e)}</td>'
                    f'<td class="text">{_e(_where(a))}</td>'
                    f"<td>{_e(r.printed)} → {_e(r.computed)}</td>"
                    f'<td class="text">{_e(a.cause)}</td><td>{r.heirs}</td>'
                    f'<td class="text">{flip}</td></tr>')
    if not rows:
        return "<p>No root errors: every printed number checked matches.</p>"
    return ('<h3>Root errors of the documents</h3><table><thead><tr><th class="text">'
            'document</th><th class="text">experiment</th><th class="text">where</th>'
            '<th>printed → computed</th><th class="text">cause</th><th>inherited by</th>'
            '<th class="text">conclusion it flips</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


def _claims(items: Sequence[Entry]) -> str:
    """Each claim once: the deciding verdict, what it rests on, and every run behind it."""
    runs = {e.name: e for e in items if e.result is not None}
    found = verdicts([a for e in items if e.result is not None for a in e.result.audit
                      if a.kind == "claim"])
    if not found:
        return ""
    found.sort(key=lambda v: (_CLAIM_ORDER.get(v.status, 9), v.document))
    tint = {"fails": "mismatch", "partly": "accepted"}

    def row(v: Verdict) -> str:
        first = v.entries[0]
        word = v.status + (" (fragile)" if v.fragile else "")
        run = runs.get(first.spec_name or "")
        headers = headers_of((run.result.table, *run.result.tables)) \
            if run is not None and run.result is not None else {}
        links = ", ".join(_link(runs[n]) if n in runs else _e(n) for n in v.specs)
        return (f'<tr class="{tint.get(v.status, "")}">'
                f'<td class="text"><span class="status claim-{v.status}">{_e(word)}</span>'
                f'</td><td class="text">{_e(label(v.document))}</td>'
                f'<td class="text">{_e(v.claim)}</td>'
                f'<td class="text">{claim_html(first, headers, v.why)}</td>'
                f'<td class="text">{links}</td></tr>')

    def table(rows: list[Verdict]) -> str:
        return ('<table><thead><tr><th class="text">verdict</th><th class="text">document'
                '</th><th class="text">claim (in sdpa\'s words)</th><th class="text">'
                'measurement or reason</th><th class="text">experiments</th></tr></thead>'
                f"<tbody>{''.join(row(v) for v in rows)}</tbody></table>")

    # what fails or holds only partly is open; what holds or is untested is one click away
    open_ = [v for v in found if v.status in ("fails", "partly")]
    rest = [v for v in found if v.status not in ("fails", "partly")]
    out = "<h3>The documents' claims (each once)</h3>" + (table(open_) if open_ else "")
    if rest:
        out += (f"<details><summary>{len(rest)} more: the claims that hold and those no "
                f"study here can test</summary>{table(rest)}</details>")
    return out


def findings_summary(items: Sequence[Entry]) -> str:
    """The section that opens the report: headline counts, the claims that fail or hold only
    partly (the rest folded), the documents' root errors, then (folded) every experiment's
    verdict."""
    audit = [a for e in items if e.result is not None for a in e.result.audit]
    head = f"documents: {tally(audit).headline('their')}"
    claims = [a for a in audit if a.kind == "claim"]
    counts = (f"claims: {claim_coverage(audit)}" if claims else
              "claims: none judged in these experiments")
    return ('<div id="findings" class="findings"><h2>The documents audited</h2>'
            f'<p class="summary"><strong>{_e(head)}</strong><br>'
            f"<strong>{_e(counts)}</strong><br>"
            'Errors are counted per printed line; the values that inherit them, per number. '
            'A claim holds, partly holds or fails on the measurement beside it; untested '
            "ones say why.</p>"
            f"{_claims(items)}{_roots(items)}{_verdicts(items)}</div>")
