"""One run's outputs: its settings, its run folder written whole, its table and CI reports."""

from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sdpa_cli.errors import RunError, SdpaError
from sdpa_cli.framework.context import RunContext
from sdpa_cli.framework.result import Result
from sdpa_cli.numerics.blocks import Tick
from sdpa_cli.report import ci, dvc, manifest, ownfiles, terminal, unchanged, writers
from sdpa_cli.report.figures import render
from sdpa_cli.report.runfolder import RunFolder, check_replaceable, preflight
from sdpa_cli.report.runfolder import check_batch as check_batch  # for the batch runner

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from sdpa_cli.report.outcomes import Outcome

    # Figure.kind → the function that draws it (Study.renderer)
    Renderers = Callable[[str], Callable[[Any], Any]]


@dataclass(frozen=True)
class Settings:
    """How to present and where to put a run; none of it changes a computed number."""

    out: Path | None = None  # exact run folder; default <root>/<name>
    root: Path = Path("outputs")
    fmt: str = "table"  # table: the human report on stdout; others: that document
    plots: bool = True
    svg: bool = False
    dpi: int | None = None  # PNG pixels per inch; None: the screen default
    check: bool = False  # exit 1 when a check fails
    quiet: bool = False
    workers: int = 1
    wide: bool = False  # every table column, whatever the terminal's width
    explain: bool = False  # the theory's exact forms beside the plain words
    scheduler: str | None = None  # --scheduler as given; None: SDPA_SCHEDULER or local threads
    # The live executor while a scheduler session is open (sdpa_cli.runner.executors.session).
    executor: Executor | None = field(default=None, compare=False, repr=False)
    # Block progress for a live progress bar (report.progress); None: nobody is watching.
    tick: Tick | None = field(default=None, compare=False, repr=False)
    # CI (issue 12): reports beside the run, and --no-write (compute and report only)
    junit_xml: Path | None = None
    annotations: str | None = None  # "github", "none"; None: github under GitHub Actions
    codequality: Path | None = None  # GitLab code-quality JSON
    write: bool = True


def context(settings: Settings) -> RunContext:
    """What a study may know of these settings: threads, executor, whether figures are drawn."""
    return RunContext(workers=settings.workers, figures=settings.plots,
                      executor=settings.executor, tick=settings.tick)


def target_for(name: str, settings: Settings) -> Path:
    """The run folder for `name`, refused (exit 2) if it is a folder sdpa did not make."""
    target = settings.out if settings.out is not None else settings.root / name
    check_replaceable(target, "--out" if settings.out is not None else "output folder")
    return target


def ready(target: Path, flag: str | None = None) -> None:
    """Probe that the run folder's parent is writable before the study runs: a path that
    can hold no files is bad input naming `flag` (exit 2), a full or read-only disk exit 1."""
    preflight(target, flag)


def _write(path: Path, text: str) -> Path:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise RunError(f"cannot write {path.name} for {_final(path)}: {e.strerror or e}; "
                       "the previous run folder, if any, is unchanged") from None
    return path


def _final(tmp_file: Path) -> Path:
    """The run folder a file in a temporary run folder is meant for."""
    folder = tmp_file.parent
    return folder.parent / folder.name[1:].split(".tmp-")[0]


def write_run(result: Result, settings: Settings, *, target: Path, argv: list[str],
              started: float, input_spec: Mapping[str, Any] | None = None,
              renderer: Renderers | None = None) -> Path:
    """Build the whole run folder beside `target`, then swap it in at once. `input_spec`
    (the validated spec the study ran) lets a later `sdpa run` keep the folder unchanged;
    `renderer` gives the drawing function of each figure kind (the study's declaration)."""
    folder = RunFolder(target)
    pictures = figure_files(result, settings)
    with folder as tmp:
        files = [
            _write(tmp / "results.json", writers.results_json(result)),
            _write(tmp / "table.csv", writers.table_csv(result)),
            _write(tmp / "table.md", writers.table_md(result, pictures)),
            _write(tmp / "spec.yaml", writers.spec_yaml(dict(result.spec))),
            _write(tmp / "params.yaml", dvc.params_yaml(result.spec)),  # for DVC
            _write(tmp / "metrics.json", dvc.metrics_json(result)),
        ]
        if settings.plots and result.figures:
            if renderer is None:
                raise RunError(f"{result.study}: no renderer was given for its figures")
            for figure in result.figures:
                try:
                    files.extend(render(figure, tmp, draw=renderer(figure.kind),
                                        svg=settings.svg, dpi=settings.dpi))
                except OSError as e:
                    raise RunError(f"cannot write figure {figure.name}.png for {target}: "
                                   f"{e.strerror or e}; the previous run folder, if any, is "
                                   "unchanged") from None
        doc = manifest.build(
            spec=dict(result.spec), argv=argv, started=started, ended=time.time(),
            status=result.status, workers=settings.workers,
            files=files, reuse=unchanged.reuse_fields(input_spec, settings.plots, settings.svg,
                                                      settings.dpi),
        )
        _write(tmp / "manifest.json", json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        folder.commit()
    return target


def finish_ci(outcomes: Sequence[Outcome], settings: Settings, *,
              started: float | None = None) -> None:
    """JUnit XML, annotations and step summary for these outcomes, as the settings ask."""
    ci.finish(outcomes, junit_xml=settings.junit_xml, annotate=settings.annotations,
              codequality=settings.codequality, started=started)


def figure_files(result: Result, settings: Settings) -> list[str]:
    """The PNG files a run with these settings writes, in order."""
    return [f"{f.name}.png" for f in result.figures] if settings.plots else []


def document(result: Result, fmt: str, settings: Settings | None = None) -> str | None:
    """What --format puts on stdout (None for the human report, terminal.show)."""
    if fmt == "json":
        return writers.results_json(result)
    if fmt == "csv":
        return writers.table_csv(result)
    if fmt == "markdown":
        return writers.table_md(result, figure_files(result, settings) if settings else [])
    return None


def write_stdout(text: str) -> None:
    """Put a document on stdout. A reader that left early (`sdpa … | head`) is not an error:
    the rest is discarded quietly and the exit code stays what the run earned."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as e:  # BrokenPipeError: the reader left; others (/dev/full): say so
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        if not isinstance(e, BrokenPipeError):
            raise RunError(f"cannot write the document to stdout: {e.strerror or e} (the run "
                           "folder, if any, is written)") from None


def emit(result: Result, settings: Settings, folder: Path | None,
         after: Sequence[str] = ()) -> None:
    """The run's result on stdout: the human report, or with --format exactly that document
    in its place. stderr carries what is not the result: with a document, the failed checks,
    why nothing was measured and where the files went (-q: the failed checks alone). `after`:
    what else the run changed (the batch report beside it), said after the files."""
    text = document(result, settings.fmt, settings)
    if text is None and not settings.quiet:
        terminal.show(result, folder, out=terminal.result_console(), check=settings.check,
                      wide=settings.wide, explain=settings.explain, after=after)
        return
    if text is not None:
        write_stdout(text)
    for c in result.checks:  # never silenced: a failure is said, whatever -q or --format
        if not c.passed:
            print(f"sdpa: {result.name}: FAIL {c.name}: {c.detail}", file=sys.stderr)
    if settings.quiet:
        return
    if result.skipped is not None:
        print(f"sdpa: {result.name}: skipped: nothing was measured: {result.skipped}",
              file=sys.stderr)
    if folder is not None:
        print(terminal.written(folder), file=sys.stderr)
    for line in after:
        print(line, file=sys.stderr)


def earlier_run(target: Path) -> str | None:
    """What a run about to replace `target` replaces, in a line (None when there is no
    earlier run there): the command that made it, when it ended, its seed and status, and
    how many figures go with it, read from its manifest before the folder is swapped."""
    try:
        doc = ownfiles.parse(target / "manifest.json")
    except (OSError, SdpaError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    argv = doc.get("argv")
    words = [manifest.printable_arg(str(a)) for a in argv[1:]] if isinstance(argv, list) else []
    made = " ".join(["sdpa", *words]) if words else "an earlier sdpa"
    if len(made) > 70:
        made = made[:69] + "…"
    ended = str(doc.get("ended") or "")[:16].replace("T", " ")
    seed = doc.get("seed")
    entropy = seed.get("entropy") if isinstance(seed, dict) else None
    outputs = doc.get("outputs")
    pictures = sum(1 for o in outputs if isinstance(o, dict)
                   and str(o.get("path", "")).endswith((".png", ".svg"))) \
        if isinstance(outputs, list) else 0
    facts = [f"{ended} UTC" if ended else "", f"seed {entropy}" if entropy is not None else "",
             str(doc.get("status") or ""),
             f"{pictures} figure{'s' if pictures != 1 else ''}" if pictures else ""]
    return (f"replaced the earlier run in {target}/: {made} ("
            + ", ".join(f for f in facts if f) + ")")
