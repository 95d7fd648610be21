"""`sdpa compare A B`: two run folders (or two batch folders) side by side, judged in standard
errors where a quantity is Monte Carlo and by exact equality where it is deterministic."""

from __future__ import annotations

import filecmp
import json
import math
import sys
import textwrap
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.text import Text

from sdpa_cli import __version__
from sdpa_cli.errors import (
    EXIT_CHECK_FAILED,
    EXIT_OK,
    InputError,
    Problem,
    json_safe,
    one_line,
)
from sdpa_cli.framework.result import clean
from sdpa_cli.io.environment import check_path
from sdpa_cli.report import ownfiles, write_stdout
from sdpa_cli.report.compare_text import markdown, summary_lines, verdict_line
from sdpa_cli.report.terminal import result_console

SCHEMA_VERSION = 1
FIGURES = (".png", ".svg")
SKIP_EXACT = {"manifest.json", "sdpa-batch.json"}  # manifests: times, argv, file hashes
# A standard error named otherwise than `<x>_se`: the variance study's `se` is Var's.
SE_ALIASES = {"se": "variance"}


@dataclass
class Quantity:
    table: str
    row: int
    field: str
    a: Any
    b: Any
    kind: str  # "monte-carlo" (judged in se), "exact", "unjudged" (random, no se)
    agree: bool
    se_a: float | None = None
    se_b: float | None = None
    z: float | None = None  # (a − b) / √(se_a² + se_b²)


@dataclass
class RunComparison:
    name: str
    parameters: list[dict[str, Any]] = field(default_factory=list)
    quantities: list[Quantity] = field(default_factory=list)
    figures: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def agree(self) -> bool:
        """Figures are listed, not judged: two seeds draw different pictures of the same
        law (byte identity is --exact's business)."""
        return not self.problems and all(q.agree for q in self.quantities)


# --- reading folders ---------------------------------------------------------------------------


def is_run_folder(path: Path) -> bool:
    return (path / "results.json").is_file()


def _results(a: Path, b: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both results.json, each parsed (a file that is no JSON at all is reported first,
    whichever side it is on) and then checked against the result schema."""
    try:
        for folder in (a, b):
            ownfiles.parse(folder / "results.json")
        return ownfiles.read(a / "results.json", "result"), \
            ownfiles.read(b / "results.json", "result")
    except FileNotFoundError as e:
        raise InputError(Problem("no results.json", file=str(Path(e.filename).parent))) \
            from None


def _visible(name: str) -> bool:
    return not name.startswith(".")


def _pairs(a: Path, b: Path) -> tuple[list[tuple[str, Path, Path]], list[str]]:
    """(name, run folder in A, run folder in B) for every run both hold; what only one has."""
    for p, flag in ((a, "A"), (b, "B")):
        check_path(p, flag, sibling=False)
        if not p.is_dir():
            raise InputError(Problem(f"{p}: no such folder", flag=flag))
    if is_run_folder(a) and is_run_folder(b):
        return [(a.name if a.name == b.name else f"{a.name} ↔ {b.name}", a, b)], []
    if is_run_folder(a) or is_run_folder(b):
        raise InputError(Problem("compare two run folders or two batch folders, not one of "
                                 "each", flag="A B"))
    # A killed run's `.NAME.tmp-PID-HEX` is half-written, never a run (nor hidden folders).
    runs_a = {p.name for p in a.iterdir() if _visible(p.name) and p.is_dir() and is_run_folder(p)}
    runs_b = {p.name for p in b.iterdir() if _visible(p.name) and p.is_dir() and is_run_folder(p)}
    if not runs_a and not runs_b:
        raise InputError(Problem(f"neither {a} nor {b} holds a run folder (results.json)",
                                 flag="A B"))
    only = [f"only in {a}: {n}" for n in sorted(runs_a - runs_b)]
    only += [f"only in {b}: {n}" for n in sorted(runs_b - runs_a)]
    return [(n, a / n, b / n) for n in sorted(runs_a & runs_b)], only


# --- comparing ---------------------------------------------------------------------------------


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def _parameters(sa: dict[str, Any], sb: dict[str, Any]) -> list[dict[str, Any]]:
    fa, fb = _flat(sa), _flat(sb)
    return [{"key": k, "a": fa.get(k), "b": fb.get(k)} for k in sorted(set(fa) | set(fb))
            if fa.get(k) != fb.get(k)]


def _se_fields(row: dict[str, Any]) -> dict[str, str]:
    """quantity → its standard-error field, from the names `<x>` and `<x>_se`."""
    out = {k[:-3]: k for k in row if k.endswith("_se") and k[:-3] in row}
    out.update({x: se for se, x in SE_ALIASES.items() if se in row and x in row})
    return out


def _number(x: Any) -> bool:
    """A number float64 holds (a whole number of 400 digits is compared exactly, never
    turned into a float, which would raise OverflowError)."""
    return isinstance(x, int | float) and not isinstance(x, bool) and \
        (isinstance(x, float) or abs(x) <= 1.7976931348623157e308)


def _label(value: Any) -> bool:
    """A value that can name a row: a word or a whole number (never a measured float)."""
    return isinstance(value, str | int)


def _row_keys(ra: list[dict[str, Any]], rb: list[dict[str, Any]]) -> list[str] | None:
    """The columns that name each row (d and scaling, say): the shortest run of leading
    label columns that names every row once in A and once in B. A column holding one value
    per table (pairs: 20000 in A, 5000 in B) names no row and is passed over. None when the
    rows cannot be named so (then they are paired by position)."""
    if not ra or not rb:
        return None
    columns = [k for k in ra[0] if all(k in r and _label(r[k]) for r in (*ra, *rb))]
    keys: list[str] = []
    for c in columns:
        if len({r[c] for r in ra}) == 1 and len({r[c] for r in rb}) == 1:
            continue
        keys.append(c)
        if all(len({tuple(r[k] for k in keys) for r in rows}) == len(rows)
               for rows in (ra, rb)):
            return keys
    return None


def _align(table: str, ra: list[dict[str, Any]], rb: list[dict[str, Any]]
           ) -> tuple[list[tuple[int, dict[str, Any], dict[str, Any]]], list[str]]:
    """Pairs of rows to compare, (row in A, A's row, B's row), and the rows only one side has.

    Rows are paired by the columns that name them (_row_keys), so a run with d = 3, 64, 100
    is compared with one of d = 3, 100 on d = 3 and d = 100, not on d = 64 against d = 100.
    When the names do not pair at least as many rows as positions would (a label column that
    is itself measured, say), rows are paired by position as before."""
    problems = []
    if len(ra) != len(rb):
        problems.append(f"table {table}: {len(ra)} rows in A, {len(rb)} in B")
    keys = _row_keys(ra, rb)
    if keys is not None:
        index_b = {tuple(r[k] for k in keys): j for j, r in enumerate(rb)}
        named = [tuple(r[k] for k in keys) for r in ra]
        matched = [(i, ra[i], rb[index_b[n]]) for i, n in enumerate(named) if n in index_b]
        if len(matched) >= min(len(ra), len(rb)) and (len(ra) != len(rb) or any(
                i != index_b[n] for i, n in enumerate(named) if n in index_b)):
            def name(n: tuple[Any, ...]) -> str:
                return ", ".join(f"{k}={v}" for k, v in zip(keys, n, strict=True))

            in_a = set(named)
            problems += [f"table {table}: row {name(n)} only in A" for n in named
                         if n not in index_b]
            problems += [f"table {table}: row {name(n)} only in B" for n in index_b
                         if n not in in_a]
            return matched, problems
    return [(i, a, b) for i, (a, b) in enumerate(zip(ra, rb, strict=False))], problems


def _compare_rows(table: str, ra: list[dict[str, Any]], rb: list[dict[str, Any]],
                  tolerance: float) -> tuple[list[Quantity], list[str]]:
    pairs, problems = _align(table, ra, rb)
    out: list[Quantity] = []
    for i, a, b in pairs:
        ses = _se_fields(a) | _se_fields(b)
        monte_carlo = bool(ses)
        se_names = set(ses.values())
        for key in [*a, *(k for k in b if k not in a)]:
            if key in se_names:
                continue  # shown beside its quantity
            va, vb = a.get(key), b.get(key)
            if key in ses and _number(va) and _number(vb):
                sa, sb = a.get(ses[key]), b.get(ses[key])
                spread = math.hypot(sa or 0.0, sb or 0.0) if _number(sa) or _number(sb) \
                    else 0.0
                if spread > 0:
                    z = (float(va) - float(vb)) / spread  # type: ignore[arg-type]
                    out.append(Quantity(table, i, key, va, vb, "monte-carlo",
                                        abs(z) <= tolerance, sa, sb, z))
                else:  # no standard error on either side (null, or 0): equal or not at all
                    out.append(Quantity(table, i, key, va, vb, "exact", va == vb, sa, sb))
                continue
            # Exact: every value of a deterministic row; in a Monte Carlo row the identity
            # columns (integers, words) and the closed forms (theory_*). Other random
            # numbers without a standard error are shown, not judged.
            exact = not monte_carlo or va == vb or not _number(va) or not _number(vb) or \
                (isinstance(va, int) and isinstance(vb, int)) or key.startswith("theory_")
            if exact:
                out.append(Quantity(table, i, key, va, vb, "exact", va == vb))
            else:
                out.append(Quantity(table, i, key, va, vb, "unjudged", True))
    return out, problems


def _figures(a: Path, b: Path) -> list[dict[str, Any]]:
    names = sorted({p.name for d in (a, b) for p in d.iterdir()
                    if p.is_file() and p.suffix in FIGURES})
    out = []
    for n in names:
        pa, pb = a / n, b / n
        same = pa.is_file() and pb.is_file() and _same_bytes(pa, pb)
        out.append({"file": n, "same": same, "in_a": pa.is_file(), "in_b": pb.is_file()})
    return out


def _same_bytes(a: Path, b: Path) -> bool:
    """Byte for byte, a chunk at a time: a huge (or sparse) file costs time, never memory."""
    return filecmp.cmp(a, b, shallow=False)


def compare_runs(name: str, a: Path, b: Path, tolerance: float) -> RunComparison:
    da, db = _results(a, b)
    rc = RunComparison(name, parameters=_parameters(da.get("spec") or {}, db.get("spec") or {}))
    if da.get("study") != db.get("study"):
        rc.problems.append(f"different studies: {da.get('study')} and {db.get('study')}")
        return rc
    tables = [("rows", da.get("rows") or [], db.get("rows") or [])]
    ta, tb = da.get("tables") or {}, db.get("tables") or {}
    tables += [(t, ta.get(t) or [], tb.get(t) or []) for t in sorted(set(ta) | set(tb))]
    for table, ra, rb in tables:
        quantities, problems = _compare_rows(table, ra, rb, tolerance)
        rc.quantities.extend(quantities)
        rc.problems.extend(problems)
    rc.figures = _figures(a, b)
    return rc


def exact(a: Path, b: Path) -> list[str]:
    """Byte-for-byte: every file but the manifests (the determinism guarantee)."""
    def files(root: Path) -> set[Path]:
        return {p.relative_to(root) for p in root.rglob("*")
                if p.is_file() and p.name not in SKIP_EXACT
                and not any(ownfiles.is_leftover(part) for part in p.relative_to(root).parts)}

    fa, fb = files(a), files(b)
    problems = [f"only in {a}: {p}" for p in sorted(fa - fb)]
    problems += [f"only in {b}: {p}" for p in sorted(fb - fa)]
    problems += [f"differs: {p}" for p in sorted(fa & fb)
                 if not _same_bytes(a / p, b / p)]
    if not fa:
        problems.append(f"no files in {a}")
    return problems


def exact_doc(a: Path, b: Path) -> dict[str, Any]:
    for p, flag in ((a, "A"), (b, "B")):
        check_path(p, flag, sibling=False)
        if not p.is_dir():
            raise InputError(Problem(f"{p}: no such folder", flag=flag))
    problems = exact(a, b)
    return {"schema_version": SCHEMA_VERSION, "sdpa_version": __version__, "a": str(a),
            "b": str(b), "mode": "exact", "agree": not problems, "problems": problems,
            "runs": []}


def compare(a: Path, b: Path, *, tolerance: float = 4.0) -> dict[str, Any]:
    """The compare document (JSON-ready)."""
    pairs, only = _pairs(a, b)
    runs = [compare_runs(n, pa, pb, tolerance) for n, pa, pb in pairs]
    return {
        "schema_version": SCHEMA_VERSION,
        "sdpa_version": __version__,
        "a": str(a), "b": str(b), "mode": "statistical", "tolerance": tolerance,
        "agree": not only and all(r.agree for r in runs),
        "problems": only,
        "runs": [{"name": r.name, "agree": r.agree, **asdict(r)} for r in runs],
    }


def exit_code(doc: dict[str, Any]) -> int:
    return EXIT_OK if doc["agree"] else EXIT_CHECK_FAILED


# --- rendering: compare_text ------------------------------------------------------------------


def as_json(doc: dict[str, Any]) -> str:

    return json_safe(json.dumps(clean(doc), indent=2, ensure_ascii=False)) + "\n"


def run(a: Path, b: Path, *, tolerance: float, fmt: str, exact_mode: bool,
        quiet: bool) -> int:
    """`sdpa compare`: the summary on stdout, or the json/markdown document in its place."""

    doc = exact_doc(a, b) if exact_mode else compare(a, b, tolerance=tolerance)
    if fmt == "json":
        write_stdout(as_json(doc))
    elif fmt == "markdown":
        write_stdout(markdown(doc))
    if not quiet and fmt == "table":
        con = result_console()  # the comparison is the command's result: stdout
        for line in summary_lines(doc):  # names and fields from the files: one line each
            indent = " " * (len(line) - len(line.lstrip(" ")) + 2)
            con.print(Text("\n".join(textwrap.wrap(
                one_line(line), con.width, subsequent_indent=indent, break_on_hyphens=False,
                break_long_words=False)) or line, overflow="fold"))
    elif not quiet:  # the document on stdout; its verdict, for the person watching, here
        print(one_line(verdict_line(doc)), file=sys.stderr)
    return exit_code(doc)
