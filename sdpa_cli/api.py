"""sdpa from Python: one function per registered study, run_spec and compare; never prints."""

from __future__ import annotations

import base64
import html
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from sdpa_cli import registry
from sdpa_cli.errors import InputError, Problem
from sdpa_cli.framework.context import RunContext
from sdpa_cli.framework.declaration import Study
from sdpa_cli.framework.result import AuditEntry, Check
from sdpa_cli.framework.result import Result as StudyResult
from sdpa_cli.report import Settings, write_run
from sdpa_cli.report import comparison as compare_mod
from sdpa_cli.report.figures import figure_of
from sdpa_cli.report.runfolder import check_replaceable, preflight
from sdpa_cli.runner import arguments, loader


class SpecError(InputError, ValueError):
    """A bad spec or keyword: the same one-line messages the command line prints (with
    file:line:col where there is a file), in `lines()`; nothing ran."""


class Row(Mapping[str, Any]):
    """One result row, read-only: `row["variance"]` or `row.variance`."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_data", dict(data))

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __getattr__(self, key: str) -> Any:
        try:
            return self._data[key]
        except KeyError:
            raise AttributeError(key) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Row({self._data!r})"


class Result:
    """What one run of a study found: rows, checks, the audit, the data-decided sentences,
    and the means to draw its figures or write the run folder the command line writes."""

    def __init__(self, study: Study, spec: Any, result: StudyResult) -> None:
        self.study = study.name
        self.spec = spec
        self._study, self._result = study, result

    @property
    def rows(self) -> tuple[Row, ...]:
        """The main table's rows, fields as in results.json."""
        return tuple(Row(r) for r in self._result.rows)

    @property
    def tables(self) -> dict[str, tuple[Row, ...]]:
        """Every table by name (the main one first)."""
        return {t.name: tuple(Row(r) for r in t.rows)
                for t in (self._result.table, *self._result.tables)}

    @property
    def checks(self) -> tuple[Check, ...]:
        return self._result.checks

    @property
    def audit(self) -> tuple[AuditEntry, ...]:
        return self._result.audit

    @property
    def found(self) -> tuple[str, ...]:
        """The sentences the data decided (the `found:` lines)."""
        return self._result.findings

    @property
    def passed(self) -> bool:
        return self._result.passed

    @property
    def seed(self) -> int | None:
        seed = self._result.spec.get("seed")
        return int(seed) if seed is not None else None

    def to_json(self) -> dict[str, Any]:
        """The results.json document (what `--format json` prints)."""
        return self._result.to_json()

    def to_frame(self, table: str | None = None) -> Any:
        """A pandas DataFrame of the main table (or the table named), when pandas is
        installed; pandas stays optional."""
        try:
            import pandas as pd  # optional: only this method needs it
        except ImportError:
            raise ImportError("to_frame needs pandas: pip install pandas") from None
        if table is not None and table not in self.tables:
            raise SpecError(Problem(f"no table named {table!r}; this result has "
                                    f"{', '.join(map(repr, self.tables))}", field="table"))
        rows = self.tables[table] if table else self.rows
        return pd.DataFrame([dict(r) for r in rows])

    def figures(self) -> Figures:
        """The run's figures as matplotlib Figure objects (drawn in sdpa's style), in a list
        that a notebook shows as the figures themselves, one below the other."""
        return Figures(figure_of(figure, self._study.renderer(figure.kind))
                       for figure in self._result.figures)

    def save(self, folder: str | Path, *, svg: bool = False, dpi: int | None = None) -> Path:
        """Write the run folder the command line writes (results.json, tables, figures,
        spec.yaml, manifest.json) to `folder`, built beside it and swapped in whole. What
        `--out` refuses is refused here with its line (SpecError): a file, a link to one, a
        dangling link or a loop, a folder sdpa did not write, ".", an over-long name."""
        try:
            target = arguments.path(folder, "save")
            settings = Settings(out=target, svg=arguments.switch(svg, "svg"),
                                dpi=None if dpi is None else arguments.whole(dpi, "dpi",
                                                                             arguments.DPI))
            check_replaceable(target, "save")  # the same check as --out: nothing of the
        except InputError as e:                 # user's is replaced or deleted
            raise SpecError(e.problems) from None
        try:
            preflight(target, "save")
        except InputError as e:
            raise SpecError(e.problems) from None
        return write_run(self._result, settings, target=target, started=time.time(),
                         argv=["python", "-c", f"sdpa_cli.api.{self._study.name}(...)"],
                         input_spec=self.spec.input_record(),
                         renderer=self._study.renderer)

    def _repr_html_(self) -> str:
        r = self._result
        head = "".join(f"<th>{html.escape(c.header)}</th>" for c in r.table.columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(_cell(row.get(c.key)))}</td>"
                             for c in r.table.columns) + "</tr>"
            for row in r.rows[:MAX_HTML_ROWS])
        more = (f"<p>… {len(r.rows) - MAX_HTML_ROWS} more rows (result.rows, "
                "result.to_frame())</p>" if len(r.rows) > MAX_HTML_ROWS else "")
        found = "".join(f"<li>{html.escape(s)}</li>" for s in r.findings)
        passed = sum(c.passed for c in r.checks)
        checks = "".join(f"<li>{'✓' if c.passed else '✗'} {html.escape(c.name)}: "
                         f"{html.escape(c.detail)}</li>" for c in r.checks)
        return (f"<div class='sdpa-result'><h4>{html.escape(r.title)} "
                f"<small>({html.escape(r.study)}, seed {self.seed})</small></h4>"
                f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"
                + (f"<p><b>found:</b></p><ul>{found}</ul>" if found else "")
                + f"<p><b>checks:</b> {passed}/{len(r.checks)} passed</p><ul>{checks}</ul>"
                "</div>")

    def __repr__(self) -> str:
        return (f"<sdpa {self.study} result: {len(self._result.rows)} rows, "
                f"{sum(c.passed for c in self.checks)}/{len(self.checks)} checks passed>")


MAX_HTML_ROWS = 40  # a notebook shows this many rows; the rest are in .rows and .to_frame()


class Figures(list[Any]):
    """A result's figures: a plain list of matplotlib Figures, which Jupyter displays inline
    (each figure's PNG, its title as the image's text) rather than as the list's repr."""

    def _repr_html_(self) -> str:
        out = []
        for fig in self:
            png = base64.b64encode(fig._repr_png_()).decode("ascii")
            title = fig.axes[0].get_title() if fig.axes else ""
            out.append(f'<img src="data:image/png;base64,{png}" alt="{html.escape(title)}" '
                       'style="max-width: 100%; display: block; margin: .5rem 0">')
        return "<div class='sdpa-figures'>" + "".join(out) + "</div>"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if value is None:
        return "—"
    return str(value)


def _run(name: str | None, path: Path | None, fields: Mapping[str, Any], workers: int
         ) -> Result:
    try:
        workers = arguments.whole(workers, "workers", arguments.WORKERS)
        spec = loader.load(path, study=name, overrides=dict(fields))
        registry.check_documented(spec, str(path) if path else None)
    except InputError as e:
        raise SpecError(e.problems) from None
    study = registry.get(spec.study)
    return Result(study, spec, study.run(spec, RunContext(workers=workers)))


def run_spec(path: str | Path, *, workers: int = 1, **fields: Any) -> Result:
    """Run the spec file at `path`; keyword arguments override its fields, as flags do."""
    try:
        spec_path = arguments.path(path, "path")
    except InputError as e:
        raise SpecError(e.problems) from None
    return _run(None, spec_path, fields, workers)


def compare(a: str | Path, b: str | Path, *, tolerance: float = 4.0,
            exact: bool = False) -> dict[str, Any]:
    """Compare two run folders (or two batch folders), as `sdpa compare` does: the document
    `--format json` prints, with `agree` (True when the runs agree). Whatever is wrong with
    the arguments or the folders raises SpecError with the line `sdpa compare` prints."""
    try:
        pa, pb = arguments.path(a, "a"), arguments.path(b, "b")
        if arguments.switch(exact, "exact"):
            doc = compare_mod.exact_doc(pa, pb)
        else:
            doc = compare_mod.compare(pa, pb, tolerance=arguments.positive(tolerance,
                                                                           "tolerance"))
    except InputError as e:
        raise SpecError(e.problems) from None
    except OSError as e:  # a folder unreadable or gone while it was read
        raise SpecError(Problem(f"cannot read {e.filename or a}: {e.strerror or e}")) from None
    return {**doc, "agree": compare_mod.exit_code(doc) == 0}


def _study_function(name: str) -> Any:
    study = registry.get(name)

    def run_study(*, workers: int = 1, **fields: Any) -> Result:
        return _run(name, None, fields, workers)

    fields = [f"    {n}: {info.description}" for n, info in study.spec.model_fields.items()
              if n in study.flag_fields()]
    run_study.__name__ = run_study.__qualname__ = name.replace("-", "_")
    run_study.__doc__ = "\n".join([
        study.description or study.summary, "",
        "Keyword arguments are the spec's fields (the command's flags), validated by the same "
        "model; a bad one raises SpecError. Also: workers=N (threads; never a digit).", "",
        *fields])
    return run_study


def __getattr__(name: str) -> Any:
    """sdpa_cli.api.variance(...), .softmax_sweep(...), …: one function per registered study."""
    study = name.replace("_", "-")
    if study in registry.NAMES:
        function = _study_function(study)
        setattr(sys.modules[__name__], name, function)
        return function
    raise AttributeError(f"module 'sdpa_cli.api' has no attribute {name!r}")


def __dir__() -> Sequence[str]:
    return sorted([*globals(), *(n.replace("-", "_") for n in registry.NAMES)])
