"""How numbers look in tables: one place, shared by the terminal, Markdown and HTML."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
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
