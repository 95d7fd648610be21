"""How a comparison reads: the terminal summary (one screen at most) and the Markdown
document."""

from __future__ import annotations

from typing import Any

from sdpa_cli.report.writers import md_text


def _v(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.6g}"
    return "—" if x is None else str(x)


def _judged(q: dict[str, Any]) -> str:
    if q["kind"] == "monte-carlo":
        return f"{q['z']:+.2f} se" + ("" if q["agree"] else " ✗")
    if q["kind"] == "exact":
        return "equal" if q["agree"] else "differs ✗"
    return "random, no se"


def markdown(doc: dict[str, Any]) -> str:
    """The comparison in Markdown; every name and value from the folders through md_text
    (a tampered results.json holds what its writer liked: HTML, escape sequences)."""
    t = md_text
    verdict = "agree" if doc["agree"] else "DIFFER"
    if doc["mode"] == "exact":
        return "\n".join([f"# sdpa compare --exact: {t(doc['a'])} vs {t(doc['b'])}: {verdict}",
                          "", *(f"- {t(p)}" for p in doc["problems"])]) + "\n"
    lines = [f"# sdpa compare: {t(doc['a'])} vs {t(doc['b'])}: {verdict}", "",
             f"Monte Carlo quantities agree within ±{doc['tolerance']:g} standard errors; "
             "deterministic ones must be equal.", ""]
    lines += [f"- {t(p)}" for p in doc["problems"]]
    for r in doc["runs"]:
        lines += ["", f"## {t(r['name'])}: {'agree' if r['agree'] else 'DIFFER'}", ""]
        lines += [f"- {t(p)}" for p in r["problems"]]
        if r["parameters"]:
            lines += ["| parameter | A | B |", "|---|---|---|"]
            lines += [f"| {t(p['key'])} | {t(_v(p['a']))} | {t(_v(p['b']))} |"
                      for p in r["parameters"]]
            lines.append("")
        lines += ["| table | row | quantity | A | B | judged |", "|---|---:|---|---:|---:|---|"]
        lines += [f"| {t(q['table'])} | {q['row']} | {t(q['field'])} | {t(_v(q['a']))} | "
                  f"{t(_v(q['b']))} | {_judged(q)} |" for q in r["quantities"]]
        if r["figures"]:
            lines += ["", "| figure | bytes |", "|---|---|"]
            lines += [f"| {t(f['file'])} | {'same' if f['same'] else 'differ'} |"
                      for f in r["figures"]]
    return "\n".join(lines) + "\n"


def summary_lines(doc: dict[str, Any]) -> list[str]:
    """The terminal report: per run a verdict, then only what disagrees."""
    out = list(doc["problems"])
    if doc["mode"] == "exact":
        return [*out, f"byte for byte (manifests aside): "
                      f"{'identical' if doc['agree'] else 'they differ'}"]
    for r in doc["runs"]:
        qs = r["quantities"]
        mc = [q for q in qs if q["kind"] == "monte-carlo"]
        worst = max((abs(q["z"]) for q in mc), default=0.0)
        head = (f"{'agree ' if r['agree'] else 'DIFFER'} {r['name']}: {len(qs)} quantities "
                f"({len(mc)} Monte Carlo, largest |Δ| = {worst:.2f} se)")
        out.append(head)
        if r["parameters"]:
            out.append("    " + parameters_line(r["parameters"]))
        out += [f"    {p}" for p in r["problems"]]
        bad = [q for q in qs if not q["agree"]]
        out += [f"    {q['table']}[{q['row']}].{q['field']}: {_v(q['a'])} vs {_v(q['b'])} "
                f"({_judged(q)})" for q in bad[:SHOWN_QUANTITIES]]
        if len(bad) > SHOWN_QUANTITIES:
            out.append(f"    … and {len(bad) - SHOWN_QUANTITIES} more that differ "
                       "(--format json or markdown lists every quantity)")
        out += _figure_lines(r["figures"])
    out.append(verdict_line(doc))
    return out


# The terminal summary stays within a screen: this many parameters and differing quantities
# per run are named; the rest are counted (the json and markdown documents list them all).
SHOWN_PARAMETERS = 4
SHOWN_QUANTITIES = 8
# The spec's bookkeeping, named after the study's own fields when parameters differ.
_BOOKKEEPING = ("name", "title", "source", "description", "seed", "documented", "claims",
                "beyond")


def _short(x: Any) -> str:
    """A parameter's value in a few characters: a list or mapping by its size, a long text
    by its start (the document formats show it whole)."""
    if isinstance(x, list):
        text = _v(x)
        return text if len(text) <= 24 else f"[{len(x)} item{'s' if len(x) != 1 else ''}]"
    if isinstance(x, dict):
        return f"{{{len(x)} key{'s' if len(x) != 1 else ''}}}"
    text = _v(x)
    return "''" if text == "" else text if len(text) <= 24 else text[:20] + "…"


def parameters_line(params: list[dict[str, Any]]) -> str:
    """`parameters differ (7): bins 50 → 40; claims [] → [3 items]; … and 3 more`: the
    study's own fields first, the spec's bookkeeping (name, title, documented, …) after."""
    ordered = sorted(params, key=lambda p: str(p["key"]).split(".")[0] in _BOOKKEEPING)
    shown = "; ".join(f"{p['key']} {_short(p['a'])} → {_short(p['b'])}"
                      for p in ordered[:SHOWN_PARAMETERS])
    hidden = [str(p["key"]) for p in ordered[SHOWN_PARAMETERS:]]
    more = (f"; and {len(hidden)} more ({', '.join(hidden[:4])}"
            + (", …" if len(hidden) > 4 else "") + ")") if hidden else ""
    return f"parameters differ ({len(params)}): {shown}{more}"


def verdict_line(doc: dict[str, Any]) -> str:
    """Both facts the exit code rests on: how the compared runs came out, and the runs found
    on one side only (issue 34: all agreeing runs beside a missing one read "they differ")."""
    runs = doc["runs"]
    differ = sum(not r["agree"] for r in runs)
    only = len(doc["problems"])
    text = (f"{len(runs)} run(s) compared: " + ("all agree" if not differ else
            f"{differ} differ, {len(runs) - differ} agree")
            + f" (tolerance ±{doc['tolerance']:g} se)")
    if only:
        text += (f"; {only} run folder(s) on one side only: the folders do not hold the same "
                 "runs (exit 1)")
    elif differ:
        text += " (exit 1)"
    return text


def _figure_lines(figures: list[dict[str, Any]]) -> list[str]:
    """A figure that is in one folder only is said to be so, not to differ; a side with no
    figure at all was run with --no-plots (or lost them), said once for all."""
    if not figures:
        return []
    for side, other, key in (("A", "B", "in_a"), ("B", "A", "in_b")):
        if not any(f[key] for f in figures):
            return [f"    no figures in {side} (run with --no-plots?); {other} has "
                    f"{len(figures)}: not compared"]
    return [f"    figure {f['file']} " + ("differs" if f["in_a"] and f["in_b"] else
                                          "only in A" if f["in_a"] else "only in B")
            for f in figures if not f["same"]]
