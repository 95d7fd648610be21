"""How numbers look in tables: one place, shared by the terminal, Markdown and HTML."""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from sdpa_cli.framework.common import percent
from sdpa_cli.framework.result import AuditEntry, Column

MISSING = "—"


def number(x: Any, fmt: str = "g") -> str:
    """A cell: 5 significant digits, whole numbers as such, missing values as a dash."""
    if x is None:
        return MISSING
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if x == -math.inf:
            return "-inf"  # a masked score
        if not math.isfinite(x):
            return MISSING
        if fmt == "int" and x.is_integer():
            return str(int(x))
        if fmt == "e":
            return f"{x:.4e}"
        if fmt == "pct":  # a share, stored as a fraction, shown in percent
            return percent(x)
        if fmt.startswith("f") and fmt[1:].isdigit():
            return f"{x:.{fmt[1:]}f}"
        if x == 0:
            return "0"
        return f"{x:.5g}"
    if isinstance(x, list | tuple):
        return "[" + ", ".join(number(v, fmt) for v in x) + "]"
    return str(x)


def audit_number(x: float | None, tolerance: float, printed: str = "") -> str:
    """A computed value beside a printed one: two digits finer than the tolerance (at least
    5 significant), so 22026.466 does not show as 22026 next to a printed 22026.5, and never
    fewer significant digits than the printed number has."""
    if x is None or not math.isfinite(x):
        return MISSING
    digits = max(5, significant_digits(printed))
    if tolerance > 0 and x != 0:
        digits = max(digits, math.ceil(math.log10(abs(x) / tolerance)) + 2)
    return f"{x:.{min(digits, 17)}g}"


def significant_digits(printed: str) -> int:
    """Significant digits of a number as a document printed it ("0.0450" → 3, "1,234" → 4,
    "2.5e-3" → 2); 0 when it holds no number."""
    mantissa = re.split(r"[eE×]", printed.replace(",", "").replace("_", ""), maxsplit=1)[0]
    found = re.search(r"\d+(?:\.\d*)?|\.\d+", mantissa)
    if found is None:
        return 0
    digits = found.group().replace(".", "").lstrip("0")
    return len(digits) if digits else 1


def cell(row: dict[str, Any], column: Column) -> str:
    value = row.get(column.key)
    if column.fmt == "text":
        return MISSING if value is None else str(value)
    return number(value, column.fmt)


def csv_value(x: Any) -> str:
    """Full precision for machines: repr of floats, JSON for lists, empty for missing."""
    if x is None:
        return ""
    if isinstance(x, float):
        return repr(x) if math.isfinite(x) else ""
    if isinstance(x, list | tuple | dict):
        return json.dumps(x, ensure_ascii=False, separators=(",", ":"))
    return str(x)


def number_status(a: AuditEntry) -> str:
    """A printed number's status as every view words it: match, or the mismatch and its
    cause (own, carried from …, rounding, inconsistent with …), accepted or not."""
    if a.status == "match":
        return "match" + (" (accepted: stale)" if a.accepted else "")
    text = "mismatch" + (f": {a.cause}" if a.cause else "")
    if a.from_ and a.cause in ("carried", "inconsistent"):
        text += f" {'from' if a.cause == 'carried' else 'with'} {a.from_}"
    return text + (" (accepted)" if a.accepted else "")


def verdict_word(a: AuditEntry) -> str:
    """A claim's verdict as every view shows it: holds, partly, fails or untested, with
    "(fragile)" when a fair threshold inside its stated range would flip it."""
    return a.status + (" (fragile)" if a.fragile else "")


def claim_evidence(a: AuditEntry) -> str:
    """What a claim's verdict rests on, in one line: the measurement (or why untested), its
    premise and how its thresholds move it."""
    parts = [(a.measurement or "") if a.status != "untested" else f"untested: {a.reason}"]
    if a.note:  # what the verdict rests on: the bar's reading, the setting
        parts.append(a.note)
    if a.premise:
        parts.append(f"premise {a.premise}")
    if a.robustness:
        parts.append(a.robustness)
    return " — ".join(p for p in parts if p)


# A skipped run's reason ends in the way to get what was missing: "…; get it with: COMMAND".
GET = "; get it with: "
FETCH = "python -m sdpa_cli.fetch "  # the package's fetcher (sdpa_cli.fetch.command)


def skip_reason(text: str) -> tuple[str, str]:
    """A skip's reason, and the command that gets what was missing ("" if it names none)."""
    why, _, how = text.partition(GET)
    return why, how.strip()


def get_commands(hows: Sequence[str]) -> list[str]:
    """The commands that get what skipped runs missed, each once: the package's fetcher
    once for every model it fetches (`python -m sdpa_cli.fetch gemma3 smollm2`)."""
    names: list[str] = []
    others: list[str] = []
    for how in hows:
        if how.startswith(FETCH):
            names += how[len(FETCH):].split()
        elif how and how not in others:
            others.append(how)
    return ([FETCH + " ".join(sorted(set(names)))] if names else []) + others


# A claim's test as the audit writes it: "mean_max_prob (scaling none, dim 4096) = 0.98 ±
# 0.000423 > 0.9: yes" (framework.claims); the report says it in words first.
_TEST = re.compile(r"^(?P<lhs>.+?) = (?P<x>\S+)(?: ± \S+)? (?P<op>[<>≈]) (?P<rhs>.+?): "
                   r"(?P<ans>yes|no)(?P<noise> \(within noise\))?$")
_LABEL = re.compile(r"^(?:(?P<part>[\w-]+)/)?(?P<q>[^\s(]+)(?: \((?P<at>[^)]*)\))?$")
_BAR = re.compile(r"^(?:(?P<times>\S+) × )?(?P<label>.+?) = (?P<value>\S+)$")
_OPS = {"<": "below", ">": "above", "≈": "about"}
BEYOND = " [beyond the claim's setting: "


def _short_number(text: str) -> str:
    try:
        return f"{float(text):.3g}"
    except ValueError:
        return text


def _label_parts(label: str, headers: Mapping[str, str]) -> tuple[str, str]:
    """`mean_max_prob (scaling none, dim 4096)` → (`mean max weight`, `none, d = 4096`), the
    names as the run's own tables head their columns."""
    m = _LABEL.match(label.strip())
    if m is None:
        return label, ""
    q = m["q"]
    base = re.split(r"[\[.]", q, maxsplit=1)[0]
    name = headers.get(base, base.replace("_", " ")) + q[len(base):]
    at = []
    for part in (m["at"] or "").split(", "):
        key, _, value = part.partition(" ")
        if part:
            at.append(value if key == "scaling" else f"{headers.get(key, key)} = {value}")
    return name, ", ".join(at)


def _bar_words(rhs: str, name: str, headers: Mapping[str, str]) -> str:
    """The bar a test compares with: a number, or another measurement ("its 0.686 at none,
    d = 16" when it is the same quantity elsewhere)."""
    bar = _BAR.match(rhs)
    if bar is None:
        return _short_number(rhs)
    times = f"{_short_number(bar['times'])} × " if bar["times"] else ""
    other, at = _label_parts(bar["label"], headers)
    value = _short_number(bar["value"])
    if other == name:
        return f"{times}its {value}" + (f" at {at}" if at else "")
    return f"{times}{other}" + (f" at {at}" if at else "") + f" ({value})"


def measurement_words(text: str, headers: Mapping[str, str]) -> str:
    """A claim's measurement in words: each test as "what (where) is x, below/above/about
    the bar ✓/✗", names from the run's column headers, numbers to 3 digits, no standard
    error (the measurement itself, folded beside it, has them). A measurement that is not
    in the tests' form is a study's own sentence, already in words: it is returned whole."""
    body, sep, beyond = text.partition(BEYOND)
    out = []
    for test in body.split("; "):
        m = _TEST.match(test)
        if m is None:
            return text
        name, at = _label_parts(m["lhs"], headers)
        out.append(f"{name}" + (f" at {at}" if at else "") + f" is {_short_number(m['x'])}, "
                   f"{_OPS[m['op']]} {_bar_words(m['rhs'], name, headers)} "
                   f"{'✓' if m['ans'] == 'yes' else '✗'}"
                   + (" (within noise)" if m["noise"] else ""))
    return "; ".join(out) + (f" (beyond the claim's setting: {beyond.rstrip(']')})"
                             if sep else "")


def claim_html(a: AuditEntry, headers: Mapping[str, str], why: str = "") -> str:
    """A claim's evidence for a report row: its measurement in words first (and the note
    that reads it), the machine detail (the measurement as tested, premise, robustness)
    folded under it. HTML, escaped."""
    if a.status == "untested":
        words = f"untested: {a.reason}"
    else:
        words = measurement_words(a.measurement or "", headers)
    shown = [words, *([a.note] if a.note else []), *([why] if why else [])]
    detail = claim_evidence(a)
    folded = (f'<details class="machine"><summary>as measured</summary>'
              f"{html.escape(detail)}</details>" if detail and detail != words else "")
    return " — ".join(html.escape(x) for x in shown if x) + folded


def headers_of(tables: Sequence[Any]) -> dict[str, str]:
    """Each column's key → its header, over a result's tables (the names claims use)."""
    return {c.key: c.header for t in tables for c in t.columns}
