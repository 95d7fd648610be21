"""What the generated regions of the README and the topic pages (`sdpa help` lists them) call.

A page writes a measured number only inside a region a test reruns (tests/test_docs.py):

    <!-- output: sdpa variance --dims 3 100 --no-write -->      what a command prints,
    ```                                                          compared line by line
    ...
    ```
    <!-- gen: pm(row(run("experiments/depth/post-vs-pre.yaml"), "stacks", norm="post",
         dim=16, scaling="sqrt"), "ratio_mean", "ratio_se") -->0.00504 ± 0.00054<!-- /gen -->
    <!-- gen blas=0.3: ... -->...<!-- /gen -->    a number that moves with the BLAS build:
                                                   compared within 30 % (the page says so)
    <!-- machine: python tests/bench.py --quick -->   a timing: rerun, compared in shape
    ```                                                (every number is machine-dependent)
    ...
    ```

A `gen` region is one Python expression evaluated with the names below; `sdpa help` shows the
page without the comments. Runs are cached for the session, so a page that quotes one run ten
times runs it once."""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

# one BLAS thread, as conftest sets for pytest: `python tests/test_docs.py --write` too (the
# results are the same; threaded BLAS only costs far more CPU on small matrices)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import sdpa_cli as sdpa

ROOT = Path(__file__).resolve().parent.parent


def _hashable(x: Any) -> Any:
    return tuple(_hashable(v) for v in x) if isinstance(x, list | tuple) else x


# A batch folder of this commit's shipped specs (.ci/run's full `sdpa run`): a shipped spec
# named with no field changed is read from its run folder there instead of run a second time,
# when the folder's resolved spec is exactly the file's and the batch did not skip it.
BATCH = os.environ.get("SDPA_DOCS_BATCH")


def _from_batch(path: Path) -> Any:
    from sdpa_cli import registry
    from sdpa_cli.api import Result
    from sdpa_cli.framework.result import Result as StudyResult
    from sdpa_cli.runner import loader

    spec = loader.load(path, study=None)
    done = Path(str(BATCH)) / str(spec.name) / "results.json"
    if not done.is_file():
        return None
    doc = json.loads(done.read_text(encoding="utf-8"))
    # require_models only says whether a missing model skips the spec or fails it (.ci/run's
    # real-model step runs the inspect specs with it true, then reads them here)
    want = json.loads(json.dumps(spec.model_dump(mode="json")))
    kept = doc.get("spec")
    if isinstance(kept, dict) and "require_models" in want:
        kept = {**kept, "require_models": want["require_models"]}
    if doc.get("skipped") or kept != want:  # a run the batch skipped (no model), another spec
        return None
    return Result(registry.get(spec.study), spec, StudyResult.from_json(doc))


@functools.cache
def _run(target: str, fields: tuple[tuple[str, Any], ...]) -> Any:
    kw = {k: list(v) if isinstance(v, tuple) else v for k, v in fields}
    if target.endswith((".yaml", ".yml")):
        if BATCH and not kw and (kept := _from_batch(ROOT / target)) is not None:
            return kept
        return sdpa.run_spec(ROOT / target, **kw)
    return getattr(sdpa, target.replace("-", "_"))(**kw)


def run(target: str, **fields: Any) -> Any:
    """A study by name (`run("variance", dims=[3, 100])`) or a spec file relative to the
    repository (`run("experiments/depth/post-vs-pre.yaml", trials=200)`): an sdpa.Result."""
    return _run(target, tuple(sorted((k, _hashable(v)) for k, v in fields.items())))


def rows(result: Any, table: str | None = None, **where: Any) -> list[Mapping[str, Any]]:
    """The rows of a table (the main one by default) whose fields equal `where`."""
    from sdpa_cli.framework.audit import find_rows  # the audit's `row:` selector

    return list(find_rows(result.tables[table] if table else result.rows, where))


def row(result: Any, table: str | None = None, **where: Any) -> Mapping[str, Any]:
    """The one row matching `where` (an error if none or several: the page is wrong)."""
    found = rows(result, table, **where)
    if len(found) != 1:
        raise LookupError(f"{len(found)} rows match {where} in table {table!r}")
    return found[0]


def audited(result: Any, quantity: str, where: str) -> Any:
    """The audit entry of `quantity` whose place in the document ends with `where` (one, or
    an error: the page is wrong), for its cause, replay and spread."""
    found = [a for a in result.audit if a.quantity == quantity and a.source.endswith(where)]
    if len(found) != 1:
        raise LookupError(f"{len(found)} audit entries {quantity} at …{where}")
    return found[0]


def g(x: Any, digits: int = 3) -> str:
    """A number to `digits` significant digits (a whole number as such, a dash if missing)."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if x == 0:
        return "0"
    text = f"{x:.{digits}g}"
    if "e" in text:
        mantissa, exp = text.split("e")
        text = f"{mantissa}·10{_superscript(int(exp))}"
    return text.replace("-", "−")


def _superscript(n: int) -> str:
    return str(n).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))


def f(x: float, places: int = 2) -> str:
    """A number with `places` digits after the point."""
    return f"{x:.{places}f}".replace("-", "−")


def pct(x: float | None, places: int = 0) -> str:
    """A share (a fraction) in percent."""
    return "—" if x is None else f"{100 * x:.{places}f}%"


def pm(r: Mapping[str, Any], mean: str, se: str, digits: int = 3) -> str:
    """`mean ± se` from a row, each to `digits` significant digits."""
    return f"{g(r[mean], digits)} ± {g(r[se], 2)}"


def span(values: Iterable[Any], show: Callable[[Any], str] = g) -> str:
    """The range of some values, `lo–hi` (one value if they agree)."""
    vs = sorted(v for v in values if v is not None)
    lo, hi = show(vs[0]), show(vs[-1])
    return lo if lo == hi else f"{lo}–{hi}"


def table(source: Sequence[Mapping[str, Any]],
          columns: Mapping[str, str | Callable[[Mapping[str, Any]], Any]]) -> str:
    """A Markdown table: `columns` maps a header to a field name or to a function of the row;
    numbers go through g()."""
    def cell(r: Mapping[str, Any], how: str | Callable[[Mapping[str, Any]], Any]) -> str:
        v = r[how] if isinstance(how, str) else how(r)
        return v if isinstance(v, str) else g(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r, how) for how in columns.values()) + " |" for r in source]
    return "\n" + "\n".join(lines) + "\n"


def found(result: Any, *picks: str) -> str:
    """The run's `found:` sentences as a Markdown list: all of them, or those containing any
    of the strings in `picks`, in the run's order."""
    picked = [s for s in result.found if not picks or any(p in s for p in picks)]
    if not picked:
        raise LookupError(f"no found: line contains any of {picks}")
    return "\n" + "\n".join(f"- {s}" for s in picked) + "\n"


def check(result: Any, name: str) -> Any:
    """The check whose name contains `name` (exactly one)."""
    picked = [c for c in result.checks if name in c.name]
    if len(picked) != 1:
        raise LookupError(f"{len(picked)} checks match {name!r}")
    return picked[0]


def slope(r: Mapping[str, Any], *theory: str) -> str:
    """A fitted log-log slope row (`slope`, `slope_se`) as `−0.0601 ± 0.0050`: the se to two
    significant digits, the slope signed and to the same place; then, in brackets, those of
    the row's `theory` fields that are set, to the same place (`"REM=rem_slope"` puts the
    label REM before the value): `slope(r, "exact_slope", "REM=rem_slope")`."""
    se = r["slope_se"]
    if r["slope"] is None or se is None:
        return "—"
    places = max(0, 1 - math.floor(math.log10(se))) if se > 0 else 3

    def show(x: float) -> str:
        return "0" if x == 0 else f"{x:+.{places}f}".replace("-", "−")

    beside = [f"{label} {show(r[field])}".strip()
              for label, _, field in (t.rpartition("=") for t in theory)
              if r.get(field) is not None]
    return f"{show(r['slope'])} ± {se:.{places}f}" + (f" ({'; '.join(beside)})" if beside else "")


def slopes(result: Any, by: str, quantities: Sequence[str], *theory: str,
           values: Sequence[Any] | None = None, table: str = "slopes_vs_n",
           **fields: Any) -> list[dict[str, Any]]:
    """A slope table pivoted for table(): one line per value of the field `by` (those in
    `values`, or every one, in the run's order), holding `fields` (constant columns), `by`
    and, per quantity, slope() of its row with `theory` beside it."""
    keys = [k for k in dict.fromkeys(r[by] for r in result.tables[table])
            if values is None or k in values]
    return [{**fields, by: k, **{q: slope(row(result, table, **{by: k, "quantity": q}), *theory)
                                 for q in quantities}} for k in keys]


def grid(source: Sequence[Mapping[str, Any]], by: str, across: str, value: str = "slope",
         **fields: Any) -> list[dict[str, Any]]:
    """Slope rows pivoted for table(): one line per value of the field `by` (in order),
    holding `fields` and, per value of the field `across`, slope() of the row's `value` and
    `value`_se. For the gradients study's `slopes` (scaling × gradient), `value` is "slope"
    (the whole range) or "end_slope" (the last step): `grid(r.tables["slopes"], "scaling",
    "gradient")`."""
    lines: dict[Any, dict[str, Any]] = {}
    for r in source:
        line = lines.setdefault(r[by], {**fields, by: r[by]})
        line[r[across]] = slope({"slope": r[value], "slope_se": r[f"{value}_se"]})
    return list(lines.values())


def audit(*targets: Any, claims: bool = False) -> str:
    """The audit's summary as `sdpa run` prints it, over some runs: root errors first
    (`2 errors of its own, …; 56 of 105 match`), or with `claims=True` the claims' verdicts
    (`37 holds, 6 partly, 2 fails, 20 untested`). A target is a Result, a spec path, or a
    folder of specs (relative to the repository) standing for its specs, recursively, that
    state `claims:`; each spec runs through run(), so it is cached."""
    from sdpa_cli.framework.causes import claim_coverage, tally

    results = []
    for t in targets:
        path = ROOT / t if isinstance(t, str) else None
        if path is None:
            results.append(t)
        elif path.is_file():
            results.append(run(t))
        else:
            results += [run(str(p.relative_to(ROOT))) for p in sorted(path.rglob("*.y*ml"))
                        if "\nclaims:" in "\n" + p.read_text(encoding="utf-8")]
    entries = [a for r in results for a in r.audit]
    return claim_coverage(entries) if claims else tally(entries).headline(
        "its" if len(results) == 1 else "their")


def from_tests(module: str, name: str) -> Any:
    """A name defined by a test module in tests/ (`from_tests("test_depth_study", "ISSUE")`):
    published figures a slow test compares with, or its way of comparing, so that the page
    and the test use the same list and the same arithmetic."""
    import importlib

    return getattr(importlib.import_module(module), name)


def trained(result: Any, **where: Any) -> str:
    """One configuration of a train run (`where` selects its row): steps to the target,
    median [range over seeds] or `never (0/3)`, and the median final loss; when the study's
    1e-12 nudge moved its first seed's final loss by more than 1e-6 of itself (a chaotic run,
    `tables["robustness"]`), that move beside it: `never (0/3), loss 0.66 (±17%)`."""
    r = row(result, **where)
    med, lo, hi = (r[f"steps_to_target_{k}"] for k in ("median", "lo", "hi"))
    if r["reached"] == 0:
        steps = f"never (0/{r['seeds']})"
    else:
        upto = "never" if hi is None else g(hi)
        steps = f"{'—' if med is None else g(med)} [{g(lo)}–{upto}]"
    moved = row(result, "robustness", **where)["loss_change"]
    beside = f" (±{pct(moved)})" if moved is not None and moved > 1e-6 else ""
    return f"{steps}, loss {g(r['final_loss_median'], 2)}{beside}"


# every public function above, and a few builtins (a region is one expression, no imports);
# a helper added above is available to the pages with no other edit
def study_table() -> str:
    """The README's table of the registered studies: command, the registry's one line, and
    the study's `sdpa help` page (a new study is in it once the page is regenerated)."""
    from sdpa_cli import registry

    lines = ["", "| command | what it does | reference |", "|---|---|---|"]
    for name in registry.NAMES:
        study = registry.get(name)
        page = f"`sdpa help {study.topic}`" if study.topic else ""
        lines.append(f"| `sdpa {name}` | {study.summary} | {page} |")
    return "\n".join(lines) + "\n"


def study_commands() -> str:
    """The commands page's rows of the registered studies: the command with its argument and
    the registry's one line (a new study is in it once the page is regenerated)."""
    from sdpa_cli import registry

    lines = ["", "| command | what it does |", "|---|---|"]
    for name in registry.NAMES:
        study = registry.get(name)
        lines.append(f"| `sdpa {name} {study.target_metavar}` | {study.summary} |")
    return "\n".join(lines) + "\n"


NAMES: dict[str, Any] = {n: v for n, v in list(globals().items())
                         if callable(v) and not n.startswith("_")
                         and getattr(v, "__module__", "") == __name__}
NAMES |= {"sdpa": sdpa, "math": math, "len": len, "sum": sum, "min": min, "max": max,
          "sorted": sorted, "round": round, "abs": abs, "int": int, "str": str,
          "float": float, "zip": zip, "dict": dict, "list": list, "any": any, "all": all}
