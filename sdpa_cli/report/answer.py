"""The answer a batch report opens on: "why √d_k?" in a few measured sentences, each with its
key figure, from the runs whose spec says which part of the answer they give (`answer:`)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote

from sdpa_cli.report import writers
from sdpa_cli.report.collect import Entry
from sdpa_cli.report.formatting import skip_reason

QUESTION = "Why does attention divide QKᵀ by √d_k?"


@dataclass(frozen=True)
class Step:
    """One sentence of the answer: its topic, what the run found (its data-decided found:
    lines) or why it measured nothing, its run and its key figure (a PNG beside the page)."""

    step: int
    topic: str
    entry: Entry
    lines: tuple[str, ...]
    figure: str | None  # "<run>/<name>.png", when the run folder holds it
    missing: str = ""  # a run that measured nothing: the way to get what it missed


def steps(items: Sequence[Entry]) -> list[Step]:
    """The answer's steps, in their order: each run whose spec has `answer:`."""
    out = []
    for e in items:
        r = e.result
        answer = r.spec.get("answer") if r is not None else None
        if r is None or not isinstance(answer, dict):
            continue
        wanted = answer.get("figure")
        names = [f for f in e.figures if wanted is None or f == f"{wanted}.png"]
        figure = f"{e.name}/{names[0]}" if names else None
        if r.skipped is not None:
            why, how = skip_reason(r.skipped)
            lines: tuple[str, ...] = (f"not measured on this machine: {why.split(' (')[0]}",)
            out.append(Step(int(answer["step"]), str(answer["topic"]), e, lines, None, how))
            continue
        count = int(answer.get("found") or 1)
        lines = tuple(r.findings[:count]) or ("(this run found nothing to say)",)
        out.append(Step(int(answer["step"]), str(answer["topic"]), e, lines, figure))
    return sorted(out, key=lambda s: s.step)


def _e(x: object) -> str:
    return html.escape(str(x), quote=True)


CSS = """
.answer { margin: .6rem 0 1.2rem; }
.answer .step { display: grid; grid-template-columns: 1fr 15rem; gap: 1rem;
  align-items: center; border-top: 1px solid #e3e6ee; padding: .35rem 0; }
.answer .step p { margin: 0; } .answer .step img { width: 15rem; height: 6.6rem;
  object-fit: contain; border: 1px solid #e3e6ee; background: #fff; }
.answer .run { color: #5b6475; font-size: .85rem; }
"""


def answer_html(items: Sequence[Entry]) -> str:
    """The section report.html opens on ("" when no run of the batch gives a part)."""
    found = steps(items)
    if not found:
        return ""
    rows = []
    for s in found:
        text = " ".join(_e(line) for line in s.lines)
        get = (f' Get it with: <code>{_e(s.missing)}</code>.' if s.missing else "")
        picture = (f'<a href="{quote(s.figure)}"><img src="{quote(s.figure)}" '
                   f'alt="{_e(s.topic)}: key figure"></a>' if s.figure else "<span></span>")
        rows.append(f'<div class="step"><p><strong>{s.step}. {_e(s.topic)}.</strong> {text}'
                    f'{get} <span class="run">(<a href="#{s.entry.anchor}">{_e(s.entry.name)}'
                    f"</a>)</span></p>{picture}</div>")
    return ('<div id="answer" class="answer"><h2>The answer, measured</h2>'
            f'<p class="meta">{_e(QUESTION)} Each line is what one experiment of this batch '
            "found, in its own data-decided words, beside its key figure; the audit of the "
            "documents' numbers and claims follows.</p>" + "".join(rows) + "</div>")


def answer_md(items: Sequence[Entry]) -> list[str]:
    """The same for index.md: a numbered list, each line linking its run and its figure."""
    found = steps(items)
    if not found:
        return []
    md = writers.md_text
    out = ["## The answer, measured", "",
           f"{QUESTION} Each line is what one experiment of this batch found, with its key "
           "figure; the audit of the documents follows.", ""]
    for s in found:
        links = [f"[{md(s.entry.name)}](#{s.entry.anchor})"]
        if s.figure:
            links.append(f"[figure]({quote(s.figure)})")
        get = f" Get it with: {writers.md_code(s.missing)}." if s.missing else ""
        out.append(f"{s.step}. **{md(s.topic)}.** {' '.join(md(x) for x in s.lines)}{get} "
                   f"({', '.join(links)})")
    return [*out, ""]
